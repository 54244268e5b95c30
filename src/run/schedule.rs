//! Duration-aware ordering: which case starts first, and how long the run should take.
//!
//! A run's wall time is at least its critical-path bound: the serial lane (whose cases run
//! alone, one after another) plus the larger of the longest parallel case and the parallel
//! work divided by the lanes. Starting cases in catalogue order wastes that: a two-minute
//! CronJob case that starts last keeps seven lanes idle while it finishes. Starting the
//! longest-expected case first (LPT list scheduling) keeps the tail short, within 4/3 of the
//! optimum in theory and much closer in practice.
//!
//! Expected durations come from a previous run's JUnit file ([`Durations`], `--durations-from`,
//! by default the report directory's last report) and, for cases it does not time, from an
//! estimate: a tenth of the case's timeout ([`estimate`]). The timeout is what the case's tags
//! (`[Slow]`, `[Serial]`) or its author (`with_timeout`) say it may need, so the estimate ranks
//! cases the way those statements do, even on a cluster nobody has timed yet.
//!
//! Serial cases run alone after the parallel part, as ginkgo runs them: their order cannot
//! change the wall (each runs with the whole cluster to itself and the bound counts all of
//! them), so they keep catalogue order, which keeps a serial run's report readable.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::Path;
use std::time::Duration;

use crate::catalog::Case;
use crate::select::junit_testcases;

/// The share of a case's timeout taken as its expected duration when nothing measured it.
pub const ESTIMATE_DIVISOR: u32 = 10;

/// A durations file that cannot be used. The run goes on with estimates and one warning.
#[derive(Debug, thiserror::Error)]
pub enum DurationsError {
    /// The file cannot be read.
    #[error("cannot read durations file {path}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not well-formed JUnit XML.
    #[error("durations file {path} is not JUnit XML: {message}")]
    Malformed {
        /// The file.
        path: String,
        /// Where and what.
        message: String,
    },
    /// Well-formed, but no testcase that ran has a time.
    #[error("durations file {path} times no case that ran")]
    Empty {
        /// The file.
        path: String,
    },
}

/// Measured case durations, by full case name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Durations {
    source: String,
    times: HashMap<String, Duration>,
}

impl Durations {
    /// Reads a JUnit file (ours or upstream ginkgo's).
    ///
    /// # Errors
    /// [`DurationsError`] when it cannot be read, is malformed, or times nothing.
    pub fn load(path: &Path) -> Result<Durations, DurationsError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| DurationsError::Read {
            path: source.clone(),
            source: e,
        })?;
        Durations::parse(&source, &text)
    }

    /// Parses JUnit XML text; `source` names it in messages.
    ///
    /// Skipped rows are left out (a skip takes no time, and the case may run this time); a
    /// name timed twice (several report files concatenated) keeps the longer time.
    ///
    /// # Errors
    /// [`DurationsError::Malformed`] or [`DurationsError::Empty`].
    pub fn parse(source: &str, text: &str) -> Result<Durations, DurationsError> {
        let rows = junit_testcases(text).map_err(|message| DurationsError::Malformed {
            path: source.to_string(),
            message,
        })?;
        let times = rows
            .into_iter()
            .filter(|r| !r.skipped)
            .filter_map(|r| r.time.map(|t| (r.name, t)));
        let durations = Durations::from_times(source, times);
        if durations.is_empty() {
            return Err(DurationsError::Empty {
                path: source.to_string(),
            });
        }
        Ok(durations)
    }

    /// Durations from `(name, time)` pairs (a harness's own record); a repeated name keeps the
    /// longer time.
    pub fn from_times(source: &str, times: impl IntoIterator<Item = (String, Duration)>) -> Durations {
        let mut map: HashMap<String, Duration> = HashMap::new();
        for (name, time) in times {
            let slot = map.entry(name).or_default();
            *slot = (*slot).max(time);
        }
        Durations {
            source: source.to_string(),
            times: map,
        }
    }

    /// The measured time of `name`.
    pub fn get(&self, name: &str) -> Option<Duration> {
        self.times.get(name).copied()
    }

    /// Where the times came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// How many cases are timed.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Whether no case is timed.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }
}

/// The expected duration of a case when nothing measured it: a tenth of its timeout.
pub fn estimate(case: &Case) -> Duration {
    case.timeout / ESTIMATE_DIVISOR
}

/// A case's expected duration, and whether it was measured (else estimated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    /// How long the case should take.
    pub duration: Duration,
    /// Measured in a previous run (else [`estimate`]d).
    pub measured: bool,
}

/// What `durations` says of `case`, else the estimate.
pub fn expected(case: &Case, durations: Option<&Durations>) -> Expected {
    match durations.and_then(|d| d.get(case.name)) {
        Some(duration) => Expected {
            duration,
            measured: true,
        },
        None => Expected {
            duration: estimate(case),
            measured: false,
        },
    }
}

/// Sorts `items` longest-first by `key`; equal keys keep their order (the catalogue's).
pub fn longest_first<T>(items: &mut [T], key: impl Fn(&T) -> Duration) {
    items.sort_by_key(|item| Reverse(key(item)));
}

/// The wall time of starting `durations`, in order, on `lanes` lanes, each case on the first
/// lane to come free (what the executor does).
pub fn list_schedule_wall(durations: impl IntoIterator<Item = Duration>, lanes: usize) -> Duration {
    let mut free_at: BinaryHeap<Reverse<Duration>> = (0..lanes.max(1)).map(|_| Reverse(Duration::ZERO)).collect();
    let mut wall = Duration::ZERO;
    for d in durations {
        let Reverse(start) = free_at.pop().unwrap_or(Reverse(Duration::ZERO));
        let end = start + d;
        wall = wall.max(end);
        free_at.push(Reverse(end));
    }
    wall
}

/// No schedule can finish sooner: the serial lane, plus the larger of the longest parallel
/// case and the parallel work spread evenly over the lanes.
pub fn critical_path_bound(parallel: &[Duration], serial: &[Duration], lanes: usize) -> Duration {
    let longest = parallel.iter().copied().max().unwrap_or_default();
    let work: Duration = parallel.iter().sum();
    let spread = work / u32::try_from(lanes.max(1)).unwrap_or(u32::MAX);
    serial.iter().sum::<Duration>() + longest.max(spread)
}

/// What the schedule expects of a run, printed at its start and compared with the real wall at
/// its end.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSummary {
    /// Parallel lanes.
    pub lanes: usize,
    /// Cases in the parallel lane.
    pub parallel: usize,
    /// Cases in the serial lane.
    pub serial: usize,
    /// Cases whose duration was measured.
    pub measured: usize,
    /// Cases whose duration was estimated.
    pub estimated: usize,
    /// The durations file used, if any.
    pub source: Option<String>,
    /// The wall the ordered plan should take with the expected durations.
    pub expected_wall: Duration,
    /// The critical-path bound of the expected durations.
    pub bound: Duration,
}

impl ScheduleSummary {
    /// One line for the progress output.
    pub fn render(&self) -> String {
        let source = match &self.source {
            Some(s) if self.measured > 0 => format!("{} measured in {s}, {} estimated", self.measured, self.estimated),
            _ => format!("all {} estimated from timeouts", self.estimated),
        };
        format!(
            "Schedule: {} parallel cases on {} lane{}, longest first, then {} serial; expected wall {} \
             (critical-path bound {}); durations: {source}",
            self.parallel,
            self.lanes,
            if self.lanes == 1 { "" } else { "s" },
            self.serial,
            crate::report::progress::format_duration(self.expected_wall),
            crate::report::progress::format_duration(self.bound),
        )
    }
}

/// The cases of a run in the order they start.
#[derive(Clone)]
pub struct Schedule {
    /// The parallel lane, longest expected first.
    pub parallel: Vec<Case>,
    /// The serial lane, in catalogue order.
    pub serial: Vec<Case>,
    /// What the order should achieve.
    pub summary: ScheduleSummary,
}

/// Splits `cases` into the lanes and orders the parallel one longest-expected-first.
pub fn schedule(cases: Vec<Case>, lanes: usize, durations: Option<&Durations>) -> Schedule {
    let mut parallel: Vec<(Case, Expected)> = Vec::new();
    let mut serial: Vec<(Case, Expected)> = Vec::new();
    for case in cases {
        let e = expected(&case, durations);
        if case.is_serial() {
            serial.push((case, e));
        } else {
            parallel.push((case, e));
        }
    }
    longest_first(&mut parallel, |(_, e)| e.duration);
    let all = || parallel.iter().chain(&serial).map(|(_, e)| e);
    let measured = all().filter(|e| e.measured).count();
    let p: Vec<Duration> = parallel.iter().map(|(_, e)| e.duration).collect();
    let s: Vec<Duration> = serial.iter().map(|(_, e)| e.duration).collect();
    let summary = ScheduleSummary {
        lanes,
        parallel: p.len(),
        serial: s.len(),
        measured,
        estimated: p.len() + s.len() - measured,
        source: durations.map(|d| d.source().to_string()),
        expected_wall: list_schedule_wall(p.iter().copied(), lanes) + s.iter().sum::<Duration>(),
        bound: critical_path_bound(&p, &s, lanes),
    };
    Schedule {
        parallel: parallel.into_iter().map(|(c, _)| c).collect(),
        serial: serial.into_iter().map(|(c, _)| c).collect(),
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Kind, test_helpers::fixture};

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    const JUNIT: &str = r#"<?xml version="1.0"?>
<testsuites><testsuite name="crossconf" tests="4">
  <testcase name="[sig-apps] short" time="2.5"/>
  <testcase name="[sig-apps] long" time="120"><failure message="x"/></testcase>
  <testcase name="[sig-apps] middle" time="30.0"/>
  <testcase name="[sig-apps] skipped [LinuxOnly]" time="0"><skipped message="LinuxOnly"/></testcase>
</testsuite></testsuites>"#;

    fn names(cases: &[Case]) -> Vec<&str> {
        cases.iter().map(|c| c.name).collect()
    }

    #[test]
    fn orders_longest_first_from_a_junit_file() {
        let d = Durations::parse("junit_01.xml", JUNIT).unwrap();
        assert_eq!(d.len(), 3, "the skipped row is not a duration");
        let cases = vec![
            fixture("[sig-apps] short", Kind::Adapted),
            fixture("[sig-apps] new case", Kind::Adapted),
            fixture("[sig-apps] middle", Kind::Adapted),
            fixture("[sig-apps] serial one [Serial]", Kind::Adapted),
            fixture("[sig-apps] long", Kind::Adapted),
        ];
        let s = schedule(cases, 2, Some(&d));
        // "new case" is unmeasured: a tenth of the 5-minute default timeout, 30 s, ties with
        // "middle" and keeps its catalogue place before it.
        assert_eq!(
            names(&s.parallel),
            [
                "[sig-apps] long",
                "[sig-apps] new case",
                "[sig-apps] middle",
                "[sig-apps] short"
            ]
        );
        assert_eq!(names(&s.serial), ["[sig-apps] serial one [Serial]"]);
        assert_eq!((s.summary.measured, s.summary.estimated), (3, 2));
        // Lanes: long(120) | new(30) then middle(30) then short(2.5): wall 120; the serial case
        // is estimated at 90 s (a tenth of 15 minutes).
        assert_eq!(s.summary.expected_wall, secs(210));
        assert_eq!(s.summary.bound, secs(210));
    }

    #[test]
    fn without_durations_the_timeouts_rank_the_cases() {
        let cases = vec![
            fixture("[sig-apps] plain", Kind::Adapted),
            fixture("[sig-apps] slow [Slow]", Kind::Adapted),
            fixture("[sig-apps] cron", Kind::Adapted).with_timeout(secs(600)),
        ];
        let s = schedule(cases, 8, None);
        assert_eq!(
            names(&s.parallel),
            ["[sig-apps] slow [Slow]", "[sig-apps] cron", "[sig-apps] plain"]
        );
        assert_eq!(s.summary.measured, 0);
        assert!(
            s.summary.render().contains("all 3 estimated from timeouts"),
            "{}",
            s.summary.render()
        );
    }

    #[test]
    fn list_scheduling_and_the_bound() {
        let d = [secs(10), secs(10), secs(10), secs(4)];
        assert_eq!(list_schedule_wall(d, 2), secs(20));
        assert_eq!(list_schedule_wall(d, 1), secs(34));
        // Catalogue order can lose to longest-first: 2, 2, 3 on two lanes ends at 5, 3, 2, 2 at 4.
        assert_eq!(list_schedule_wall([secs(2), secs(2), secs(3)], 2), secs(5));
        assert_eq!(list_schedule_wall([secs(3), secs(2), secs(2)], 2), secs(4));
        assert_eq!(critical_path_bound(&d, &[secs(5)], 2), secs(22));
        assert_eq!(critical_path_bound(&[secs(100), secs(1)], &[], 8), secs(100));
        assert_eq!(list_schedule_wall([], 8), Duration::ZERO);
    }

    #[test]
    fn unusable_files_are_errors_naming_the_file() {
        let e = Durations::parse("d.xml", "not xml").unwrap_err().to_string();
        assert!(
            e.starts_with("durations file d.xml is not JUnit XML: line 1 column 1"),
            "{e}"
        );
        let e = Durations::parse(
            "d.xml",
            "<testsuites><testcase name='a'><skipped/></testcase></testsuites>",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "durations file d.xml times no case that ran");
        let e = Durations::load(Path::new("/nonexistent/junit.xml"))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "cannot read durations file /nonexistent/junit.xml");
    }

    #[test]
    fn a_name_timed_twice_keeps_the_longer_time() {
        let d = Durations::from_times("x", [("a".to_string(), secs(1)), ("a".to_string(), secs(3))]);
        assert_eq!(d.get("a"), Some(secs(3)));
    }
}
