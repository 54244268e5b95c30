//! The events the executor emits and reporters consume.
//!
//! This enum is the interface between [`crate::run`] and [`crate::report`] (nextest's
//! `TestEventKind` plays the same role): the executor never writes a file, reporters never
//! decide anything.

use std::time::{Duration, SystemTime};

use super::schedule::ScheduleSummary;

/// What happened to one planned case in the end.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseOutcome {
    /// Passed, possibly after failed attempts (then it is flaky).
    Passed,
    /// Failed on every attempt; the message of the last one.
    Failed {
        /// What was expected, what was seen, and where.
        message: String,
    },
    /// Skipped, before or during the run, with the reason a person can act on.
    Skipped {
        /// Why the case did not run.
        reason: String,
    },
    /// Cancelled by an interrupt while running.
    Interrupted {
        /// What the case was doing when it was cancelled.
        message: String,
    },
}

impl CaseOutcome {
    /// Whether the outcome makes the run fail (exit code 1).
    pub fn is_failure(&self) -> bool {
        matches!(self, CaseOutcome::Failed { .. } | CaseOutcome::Interrupted { .. })
    }
}

/// One attempt of a case (flake attempts produce several).
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// 1-based attempt number.
    pub number: u32,
    /// `None` when the attempt passed, else the failure message.
    pub failure: Option<String>,
    /// How long the attempt took.
    pub duration: Duration,
}

/// A case's final record.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseRecord {
    /// The case's full name.
    pub name: String,
    /// The outcome.
    pub outcome: CaseOutcome,
    /// Every attempt, in order (empty for skips).
    pub attempts: Vec<Attempt>,
    /// Wall time over all attempts.
    pub duration: Duration,
    /// Numeric or textual figures a case reports (density percentiles…), JUnit properties.
    pub properties: Vec<(String, String)>,
    /// Output the case logged (its steps), for the JUnit `system-out`.
    pub output: String,
}

/// Outcome of a runner step (preflight, prepull, cleanup), shown as rows in `junit_runner.xml`.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    /// Step name, e.g. `preflight` or `prepull images`.
    pub name: String,
    /// `None` when the step succeeded, else why it failed.
    pub failure: Option<String>,
    /// How long it took.
    pub duration: Duration,
    /// What the step printed (per-image timings…).
    pub output: String,
}

/// A planned case as the run starts: its name and whether it will run.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCase {
    /// Full name.
    pub name: String,
    /// `None` when it will run, else the skip reason.
    pub skip_reason: Option<String>,
}

/// Totals at the end of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunStats {
    /// Cases that passed (flaky ones included).
    pub passed: usize,
    /// Cases that passed only on a retry.
    pub flaky: usize,
    /// Cases that failed.
    pub failed: usize,
    /// Cases skipped, by plan or at run time.
    pub skipped: usize,
    /// Cases interrupted or never started because of an interrupt.
    pub interrupted: usize,
    /// The critical-path bound of this run's own case times (the serial lane plus the larger
    /// of the longest parallel case and the parallel work over the lanes): what no order of
    /// these cases could beat, to compare the wall with.
    pub critical_path: Duration,
}

/// The events of one run, in the order the executor emits them.
#[derive(Debug, Clone)]
pub enum Event {
    /// The run begins; every planned case is listed.
    RunStarted {
        /// The run id (the `crossconf.io/run-id` label value).
        run_id: String,
        /// The plan, in order.
        plan: Vec<PlannedCase>,
        /// When the run started.
        started: SystemTime,
    },
    /// The order is fixed: what the schedule expects, before the first case starts.
    Scheduled(ScheduleSummary),
    /// A runner step finished.
    StepFinished(StepRecord),
    /// A case began its first attempt.
    CaseStarted {
        /// Full name.
        name: String,
    },
    /// An attempt failed and another will follow.
    AttemptFailed {
        /// Full name.
        name: String,
        /// The failed attempt.
        attempt: Attempt,
    },
    /// A case reached its final outcome (including skips).
    CaseFinished(CaseRecord),
    /// The first interrupt arrived: no more cases start.
    Interrupted {
        /// Which signal, for the log line.
        signal: String,
    },
    /// The run ended.
    RunFinished {
        /// Totals.
        stats: RunStats,
        /// When it ended.
        finished: SystemTime,
    },
}
