//! The closing summary printed after a run: totals, failed cases with the first line of their
//! message, flaky cases, and where the reports are.
//!
//! The main type is [`Summary`], a fold over [`Event`]s like the other reporters.

use std::time::{Duration, SystemTime};

use super::progress::{format_duration, plain};
use crate::run::{CaseOutcome, Event, RunStats, ScheduleSummary};

/// What the summary needs from a run.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    started: Option<SystemTime>,
    elapsed: Option<Duration>,
    stats: Option<RunStats>,
    failed: Vec<(String, String)>,
    interrupted: Vec<(String, String)>,
    flaky: Vec<(String, usize)>,
    signal: Option<String>,
    schedule: Option<ScheduleSummary>,
}

fn first_line(text: &str) -> String {
    plain(text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or(""))
}

impl Summary {
    /// An empty summary.
    pub fn new() -> Summary {
        Summary::default()
    }

    /// Consumes one event.
    pub fn handle(&mut self, event: &Event) {
        match event {
            Event::RunStarted { started, .. } => self.started = Some(*started),
            Event::CaseFinished(record) => match &record.outcome {
                CaseOutcome::Failed { message } => {
                    self.failed.push((record.name.clone(), first_line(message)));
                }
                CaseOutcome::Interrupted { message } => {
                    self.interrupted.push((record.name.clone(), first_line(message)));
                }
                CaseOutcome::Passed if record.attempts.iter().any(|a| a.failure.is_some()) => {
                    self.flaky.push((record.name.clone(), record.attempts.len()));
                }
                CaseOutcome::Passed | CaseOutcome::Skipped { .. } => {}
            },
            Event::Interrupted { signal } => self.signal = Some(signal.clone()),
            Event::Scheduled(summary) => self.schedule = Some(summary.clone()),
            Event::RunFinished { stats, finished } => {
                self.stats = Some(stats.clone());
                self.elapsed = self.started.and_then(|s| finished.duration_since(s).ok());
            }
            Event::StepFinished(_) | Event::CaseStarted { .. } | Event::AttemptFailed { .. } => {}
        }
    }

    /// The wall against what no order of this run's cases could beat, and against what the
    /// schedule expected: how much of the wall the ordering, rather than the cases, cost.
    fn wall_line(&self, stats: &RunStats) -> Option<String> {
        let wall = self.elapsed?;
        if stats.critical_path.is_zero() {
            return None;
        }
        let ratio = wall.as_secs_f64() / stats.critical_path.as_secs_f64();
        let expected = self
            .schedule
            .as_ref()
            .map(|s| format!("; the schedule expected {}", format_duration(s.expected_wall)))
            .unwrap_or_default();
        Some(format!(
            "Wall {}: {ratio:.2} x the critical-path bound of this run's case times ({}){expected}\n",
            format_duration(wall),
            format_duration(stats.critical_path),
        ))
    }

    /// The summary text (plain, no escape codes), ending in a newline.
    pub fn render(&self) -> String {
        let stats = self.stats.clone().unwrap_or_default();
        let mut out = String::new();
        let elapsed = self
            .elapsed
            .map(|d| format!(" in {}", format_duration(d)))
            .unwrap_or_default();
        out.push_str(&format!(
            "Ran {} cases{elapsed}: {} passed ({} flaky), {} failed, {} skipped, {} interrupted\n",
            stats.passed + stats.failed + stats.interrupted,
            stats.passed,
            stats.flaky,
            stats.failed,
            stats.skipped,
            stats.interrupted,
        ));
        if let Some(line) = self.wall_line(&stats) {
            out.push_str(&line);
        }
        if let Some(signal) = &self.signal {
            out.push_str(&format!("Interrupted by {}\n", plain(signal)));
        }
        let mut section = |title: &str, rows: Vec<String>| {
            if !rows.is_empty() {
                out.push_str(&format!("\n{title} ({}):\n", rows.len()));
                for row in rows {
                    out.push_str(&format!("  {row}\n"));
                }
            }
        };
        section(
            "Failed",
            self.failed
                .iter()
                .map(|(n, m)| format!("{}\n      {m}", plain(n)))
                .collect(),
        );
        section(
            "Interrupted",
            self.interrupted
                .iter()
                .map(|(n, m)| format!("{}\n      {m}", plain(n)))
                .collect(),
        );
        section(
            "Flaky (passed on a retry)",
            self.flaky
                .iter()
                .map(|(n, attempts)| format!("{} ({attempts} attempts)", plain(n)))
                .collect(),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{Attempt, CaseRecord};

    fn finished(name: &str, outcome: CaseOutcome, failures: usize) -> Event {
        Event::CaseFinished(CaseRecord {
            name: name.into(),
            outcome,
            attempts: (0..=failures)
                .map(|i| Attempt {
                    number: i as u32 + 1,
                    failure: (i < failures).then(|| "x".to_string()),
                    duration: Duration::from_secs(1),
                })
                .collect(),
            duration: Duration::from_secs(2),
            properties: vec![],
            output: String::new(),
        })
    }

    #[test]
    fn renders_totals_failures_and_flakes() {
        let t0 = SystemTime::UNIX_EPOCH;
        let mut summary = Summary::new();
        for e in [
            Event::RunStarted {
                run_id: "r".into(),
                plan: vec![],
                started: t0,
            },
            finished("[sig-node] ok", CaseOutcome::Passed, 0),
            finished("[sig-node] flaky", CaseOutcome::Passed, 1),
            finished(
                "[sig-network] broken",
                CaseOutcome::Failed {
                    message: "\n2 out of 4 connections failed\nfrom pod p on node w1".into(),
                },
                1,
            ),
            Event::Interrupted {
                signal: "SIGTERM".into(),
            },
            finished(
                "[sig-node] cut",
                CaseOutcome::Interrupted {
                    message: "cancelled while waiting for pod q".into(),
                },
                0,
            ),
            Event::RunFinished {
                stats: RunStats {
                    passed: 2,
                    flaky: 1,
                    failed: 1,
                    skipped: 7,
                    interrupted: 1,
                    critical_path: Duration::from_secs(600),
                },
                finished: t0 + Duration::from_secs(754),
            },
        ] {
            summary.handle(&e);
        }
        insta::assert_snapshot!(summary.render(), @r"
        Ran 4 cases in 12m34s: 2 passed (1 flaky), 1 failed, 7 skipped, 1 interrupted
        Wall 12m34s: 1.26 x the critical-path bound of this run's case times (10m00s)
        Interrupted by SIGTERM

        Failed (1):
          [sig-network] broken
              2 out of 4 connections failed

        Interrupted (1):
          [sig-node] cut
              cancelled while waiting for pod q

        Flaky (passed on a retry) (1):
          [sig-node] flaky (2 attempts)
        ");
    }

    #[test]
    fn empty_run() {
        assert_eq!(
            Summary::new().render(),
            "Ran 0 cases: 0 passed (0 flaky), 0 failed, 0 skipped, 0 interrupted\n"
        );
    }
}
