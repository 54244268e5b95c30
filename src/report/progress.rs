//! Progress while a run is under way: indicatif bars on a terminal outside CI, plain lines
//! everywhere else.
//!
//! The main type is [`Progress`]. Whether bars are drawn is decided once, by the pure
//! [`bar_enabled`] from values the CLI reads at the edge (nextest's `list_bar_enabled` does the
//! same), so every combination is tested without a terminal.
//!
//! The plain form prints `Will run N of M cases`, then one line per finished case — result,
//! `[done/total]`, duration, name — and never an escape code, so `CI=true crossconf run | cat`
//! and prow logs stay readable. The bar form draws an overall bar and one spinner per in-flight
//! case, and prints the same per-case lines above the bars.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use quick_junit::XmlString;

use super::Error;
use crate::run::{CaseOutcome, CaseRecord, Event, StepRecord};

/// Whether to draw bars: only when not disabled, on a terminal, and outside CI (a CI log
/// would record every redraw).
pub fn bar_enabled(no_progress: bool, is_terminal: bool, is_ci: bool) -> bool {
    !no_progress && is_terminal && !is_ci
}

/// Text for a plain line: ANSI escapes and control characters from case names or pod output
/// removed (quick-junit's `XmlString` strips escapes and C0 controls), line breaks folded into
/// spaces, and DEL and C1 controls (including the one-byte CSI, U+009B) dropped.
pub fn plain(text: &str) -> String {
    XmlString::new(text)
        .as_str()
        .chars()
        .map(|c| if matches!(c, '\n' | '\r' | '\t') { ' ' } else { c })
        .filter(|c| !c.is_control())
        .collect()
}

/// `850ms`, `12.3s`, `2m05s`, `1h02m`.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 3600 {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    } else if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// The first non-empty line of a message, made plain.
fn first_line(text: &str) -> String {
    plain(text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or(""))
}

/// The per-case line: `PASS  [ 3/40]  12.3s  <name>` (plus the reason or first failure line).
fn case_line(record: &CaseRecord, done: usize, total: usize) -> String {
    let failed_attempts = record.attempts.iter().filter(|a| a.failure.is_some()).count();
    let (result, detail) = match &record.outcome {
        CaseOutcome::Passed if failed_attempts > 0 => (
            "FLAKY",
            format!(
                "passed on attempt {} of {}",
                record.attempts.len(),
                record.attempts.len()
            ),
        ),
        CaseOutcome::Passed => ("PASS", String::new()),
        CaseOutcome::Failed { message } => ("FAIL", first_line(message)),
        CaseOutcome::Skipped { reason } => ("SKIP", first_line(reason)),
        CaseOutcome::Interrupted { message } => ("INTR", first_line(message)),
    };
    let width = total.to_string().len();
    let mut line = format!(
        "{result:<5} [{done:>width$}/{total}] {:>7}  {}",
        format_duration(record.duration),
        plain(&record.name)
    );
    if !detail.is_empty() {
        line.push_str(" -- ");
        line.push_str(&detail);
    }
    line
}

fn step_line(step: &StepRecord) -> String {
    match &step.failure {
        None => format!("step {}: ok ({})", plain(&step.name), format_duration(step.duration)),
        Some(why) => format!(
            "step {}: FAILED ({}) -- {}",
            plain(&step.name),
            format_duration(step.duration),
            first_line(why)
        ),
    }
}

/// Counts shared by both forms.
#[derive(Debug, Default)]
struct Counts {
    total: usize,
    done: usize,
}

impl Counts {
    /// The line for an event, if it warrants one.
    fn line(&mut self, event: &Event) -> Option<String> {
        match event {
            Event::RunStarted { plan, .. } => {
                self.total = plan.iter().filter(|p| p.skip_reason.is_none()).count();
                Some(format!("Will run {} of {} cases", self.total, plan.len()))
            }
            Event::StepFinished(step) => Some(step_line(step)),
            Event::Scheduled(summary) => Some(summary.render()),
            Event::CaseStarted { .. } => None,
            Event::AttemptFailed { name, attempt } => Some(format!(
                "RETRY {} -- attempt {} failed: {}",
                plain(name),
                attempt.number,
                first_line(attempt.failure.as_deref().unwrap_or(""))
            )),
            Event::CaseFinished(record) => {
                if !matches!(record.outcome, CaseOutcome::Skipped { .. }) || !record.attempts.is_empty() {
                    self.done += 1;
                }
                Some(case_line(record, self.done, self.total))
            }
            Event::Interrupted { signal } => Some(format!(
                "Interrupted by {}: no new cases start; cancelling in-flight cases",
                plain(signal)
            )),
            Event::RunFinished { .. } => None,
        }
    }
}

enum Form {
    Lines(Box<dyn Write + Send>),
    Bars {
        multi: MultiProgress,
        overall: ProgressBar,
        in_flight: HashMap<String, ProgressBar>,
    },
}

/// The progress reporter: plain lines or bars, fed every [`Event`].
pub struct Progress {
    counts: Counts,
    form: Form,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let form = match &self.form {
            Form::Lines(_) => "lines",
            Form::Bars { .. } => "bars",
        };
        f.debug_struct("Progress")
            .field("form", &form)
            .field("counts", &self.counts)
            .finish()
    }
}

const OVERALL_TEMPLATE: &str = "{elapsed_precise} [{bar:40}] {pos}/{len} cases {msg}";
const SPINNER_TEMPLATE: &str = "  {spinner} {elapsed:>4} {msg}";

impl Progress {
    /// Plain lines written to `out` (stdout in the CLI).
    pub fn lines(out: Box<dyn Write + Send>) -> Progress {
        Progress {
            counts: Counts::default(),
            form: Form::Lines(out),
        }
    }

    /// Bars drawn to `target` (`ProgressDrawTarget::stderr()` in the CLI).
    pub fn bars(target: ProgressDrawTarget) -> Progress {
        let multi = MultiProgress::with_draw_target(target);
        let overall = multi.add(
            ProgressBar::new(0).with_style(
                ProgressStyle::with_template(OVERALL_TEMPLATE)
                    .expect("the overall bar template is a valid constant")
                    .progress_chars("=> "),
            ),
        );
        Progress {
            counts: Counts::default(),
            form: Form::Bars {
                multi,
                overall,
                in_flight: HashMap::new(),
            },
        }
    }

    /// Bars on stderr when [`bar_enabled`], else plain lines on stdout.
    pub fn for_terminal(no_progress: bool, is_terminal: bool, is_ci: bool) -> Progress {
        if bar_enabled(no_progress, is_terminal, is_ci) {
            Progress::bars(ProgressDrawTarget::stderr())
        } else {
            Progress::lines(Box::new(std::io::stdout()))
        }
    }

    /// The bars' `MultiProgress`, so log output (tracing-indicatif) can print above the bars.
    pub fn multi_progress(&self) -> Option<&MultiProgress> {
        match &self.form {
            Form::Lines(_) => None,
            Form::Bars { multi, .. } => Some(multi),
        }
    }

    /// Consumes one event.
    ///
    /// # Errors
    ///
    /// [`Error::Print`] when the output cannot be written (a closed pipe).
    pub fn handle(&mut self, event: &Event) -> Result<(), Error> {
        let line = self.counts.line(event);
        match &mut self.form {
            Form::Lines(out) => {
                if let Some(line) = line {
                    writeln!(out, "{line}").map_err(|source| Error::Print { source })?;
                    out.flush().map_err(|source| Error::Print { source })?;
                }
            }
            Form::Bars {
                multi,
                overall,
                in_flight,
            } => {
                match event {
                    Event::RunStarted { .. } => {
                        overall.set_length(self.counts.total as u64);
                        overall.enable_steady_tick(Duration::from_millis(200));
                    }
                    Event::CaseStarted { name } => {
                        let spinner = multi.add(
                            ProgressBar::new_spinner().with_style(
                                ProgressStyle::with_template(SPINNER_TEMPLATE)
                                    .expect("the spinner template is a valid constant"),
                            ),
                        );
                        spinner.set_message(plain(name));
                        spinner.enable_steady_tick(Duration::from_millis(120));
                        in_flight.insert(name.clone(), spinner);
                    }
                    Event::CaseFinished(record) => {
                        if let Some(spinner) = in_flight.remove(&record.name) {
                            spinner.finish_and_clear();
                            multi.remove(&spinner);
                        }
                        overall.set_position(self.counts.done as u64);
                    }
                    Event::Interrupted { .. } => overall.set_message("(interrupted)"),
                    Event::RunFinished { .. } => {
                        for (_, spinner) in in_flight.drain() {
                            spinner.finish_and_clear();
                        }
                        overall.finish_and_clear();
                    }
                    Event::StepFinished(_) | Event::Scheduled(_) | Event::AttemptFailed { .. } => {}
                }
                if let Some(line) = line {
                    multi.println(line).map_err(|source| Error::Print { source })?;
                }
            }
        }
        Ok(())
    }

    /// Cases currently drawn as spinners (always 0 for plain lines).
    pub fn in_flight(&self) -> usize {
        match &self.form {
            Form::Lines(_) => 0,
            Form::Bars { in_flight, .. } => in_flight.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{Attempt, PlannedCase, RunStats};
    use std::sync::{Arc, Mutex};
    use std::time::SystemTime;
    use test_case::test_case;

    #[test_case(false, true, false, true; "terminal outside ci")]
    #[test_case(false, true, true, false; "terminal in ci")]
    #[test_case(false, false, false, false; "pipe outside ci")]
    #[test_case(false, false, true, false; "pipe in ci")]
    #[test_case(true, true, false, false; "disabled on terminal")]
    #[test_case(true, true, true, false; "disabled in ci")]
    #[test_case(true, false, false, false; "disabled on pipe")]
    #[test_case(true, false, true, false; "disabled everywhere")]
    fn bars_only_on_a_terminal_outside_ci(no_progress: bool, tty: bool, ci: bool, expected: bool) {
        assert_eq!(bar_enabled(no_progress, tty, ci), expected);
    }

    #[test_case(Duration::from_millis(850), "850ms"; "millis")]
    #[test_case(Duration::from_millis(12_345), "12.3s"; "seconds")]
    #[test_case(Duration::from_secs(125), "2m05s"; "minutes")]
    #[test_case(Duration::from_secs(3720), "1h02m"; "hours")]
    fn durations(d: Duration, expected: &str) {
        assert_eq!(format_duration(d), expected);
    }

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn record(name: &str, outcome: CaseOutcome, attempts: usize) -> CaseRecord {
        CaseRecord {
            name: name.into(),
            outcome,
            attempts: (1..=attempts)
                .map(|n| Attempt {
                    number: n as u32,
                    failure: (n < attempts).then(|| "timed out".to_string()),
                    duration: Duration::from_secs(1),
                })
                .collect(),
            duration: Duration::from_millis(2500),
            properties: vec![],
            output: String::new(),
        }
    }

    fn events() -> Vec<Event> {
        let planned = |name: &str, skip: Option<&str>| PlannedCase {
            name: name.into(),
            skip_reason: skip.map(str::to_string),
        };
        vec![
            Event::RunStarted {
                run_id: "r".into(),
                plan: vec![
                    planned("[sig-node] a", None),
                    planned("[sig-node] b \x1b[31mred\x1b[0m", None),
                    planned("[sig-node] c", None),
                    planned("[sig-network] d [LinuxOnly]", Some("LinuxOnly: why")),
                ],
                started: SystemTime::UNIX_EPOCH,
            },
            Event::StepFinished(StepRecord {
                name: "prepull images".into(),
                failure: None,
                duration: Duration::from_secs(61),
                output: String::new(),
            }),
            Event::CaseStarted {
                name: "[sig-node] a".into(),
            },
            Event::CaseStarted {
                name: "[sig-node] b \x1b[31mred\x1b[0m".into(),
            },
            Event::CaseFinished(record(
                "[sig-network] d [LinuxOnly]",
                CaseOutcome::Skipped {
                    reason: "LinuxOnly: why".into(),
                },
                0,
            )),
            Event::CaseFinished(record("[sig-node] a", CaseOutcome::Passed, 1)),
            Event::AttemptFailed {
                name: "[sig-node] b \x1b[31mred\x1b[0m".into(),
                attempt: Attempt {
                    number: 1,
                    failure: Some("\x1b[1mexpected 2\x1b[0m\nsaw 1".into()),
                    duration: Duration::from_secs(1),
                },
            },
            Event::CaseFinished(record("[sig-node] b \x1b[31mred\x1b[0m", CaseOutcome::Passed, 2)),
            Event::CaseStarted {
                name: "[sig-node] c".into(),
            },
            Event::Interrupted {
                signal: "SIGINT".into(),
            },
            Event::CaseFinished(record(
                "[sig-node] c",
                CaseOutcome::Interrupted {
                    message: "cancelled\u{9b}2J while waiting".into(),
                },
                1,
            )),
            Event::RunFinished {
                stats: RunStats::default(),
                finished: SystemTime::UNIX_EPOCH,
            },
        ]
    }

    #[test]
    fn plain_lines_have_no_escape_codes() {
        let out = Shared::default();
        let mut progress = Progress::lines(Box::new(out.clone()));
        for e in events() {
            progress.handle(&e).unwrap();
        }
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
        insta::assert_snapshot!(text, @r"
        Will run 3 of 4 cases
        step prepull images: ok (1m01s)
        SKIP  [0/3]    2.5s  [sig-network] d [LinuxOnly] -- LinuxOnly: why
        PASS  [1/3]    2.5s  [sig-node] a
        RETRY [sig-node] b red -- attempt 1 failed: expected 2
        FLAKY [2/3]    2.5s  [sig-node] b red -- passed on attempt 2 of 2
        Interrupted by SIGINT: no new cases start; cancelling in-flight cases
        INTR  [3/3]    2.5s  [sig-node] c -- cancelled2J while waiting
        ");
    }

    #[test]
    fn bars_track_in_flight_cases() {
        let mut progress = Progress::bars(ProgressDrawTarget::hidden());
        let events = events();
        for e in &events[..4] {
            progress.handle(e).unwrap();
        }
        assert_eq!(progress.in_flight(), 2);
        for e in &events[4..8] {
            progress.handle(e).unwrap();
        }
        assert_eq!(progress.in_flight(), 0);
        progress.handle(&events[8]).unwrap();
        assert_eq!(progress.in_flight(), 1);
        for e in &events[9..] {
            progress.handle(e).unwrap();
        }
        assert_eq!(progress.in_flight(), 0);
        assert!(progress.multi_progress().is_some());
    }

    #[test]
    fn for_terminal_picks_the_form() {
        assert!(Progress::for_terminal(true, true, false).multi_progress().is_none());
    }
}
