//! The JUnit files TestGrid reads: `junit_<prefix>01.xml` for cases and `junit_runner.xml` for
//! runner steps.
//!
//! The main type is [`JunitReport`], a fold over [`Event`]s (nextest's
//! `reporter/aggregator/junit.rs` plays the same role) that rewrites its file atomically after
//! every finished case, so a run killed with SIGKILL leaves every case finished before the kill.
//!
//! # Content
//!
//! One `<testsuite name="crossconf">`; one `<testcase>` per case of the plan in
//! [`Event::RunStarted`], named by its full name, in plan order. Passed cases are empty;
//! failures are `<failure type="failed">` with the first line as `message` and the whole
//! message as the body; interrupts are `<error type="interrupted">` (as upstream); skips are
//! `<skipped message="reason">`. Flake attempts become `<flakyFailure>` (passed on a retry) or
//! `<rerunFailure>` (failed every time) plus an `attempts` property; a case's own properties
//! and its output (`<system-out>`) follow.
//!
//! # Escaping
//!
//! Case output is arbitrary bytes from pods. quick-junit escapes markup (so `]]>` and `<` are
//! safe) and its `XmlString` strips ANSI escapes and the C0 control characters XML 1.0 forbids;
//! [`xml_text`] additionally replaces the non-characters U+FFFE and U+FFFF, which XML 1.0 also
//! forbids, so the file always parses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestRerun, TestSuite, XmlString};

use super::Error;
use super::artifacts::write_atomic;
use crate::run::{Attempt, CaseOutcome, CaseRecord, Event, PlannedCase, StepRecord};

/// The `<testsuite>` name: short and stable, since TestGrid rows are `<suite>.<case>`.
pub const SUITE_NAME: &str = "crossconf";

/// The `<testsuite>` name of `junit_runner.xml`.
pub const RUNNER_SUITE_NAME: &str = "crossconf-runner";

/// Text safe for XML 1.0 once quick-junit has stripped ANSI escapes and C0 controls: the
/// non-characters U+FFFE and U+FFFF become U+FFFD.
pub fn xml_text(text: &str) -> XmlString {
    XmlString::new(text.replace(['\u{FFFE}', '\u{FFFF}'], "\u{FFFD}"))
}

/// The first non-empty line, for `message` attributes (the body keeps the whole text).
fn first_line(text: &str) -> &str {
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("")
}

/// A skip message TestGrid will show: it drops empty messages and bare "skipped".
fn visible_skip_message(reason: &str) -> &str {
    let trimmed = reason.trim();
    if trimmed.is_empty() || trimmed.eq_ignore_ascii_case("skipped") {
        "skipped without a stated reason (a crossconf bug: every skip should say why)"
    } else {
        trimmed
    }
}

fn skipped(reason: &str) -> TestCaseStatus {
    let mut status = TestCaseStatus::skipped();
    status.set_message(xml_text(visible_skip_message(reason)));
    status
}

fn failure(kind: NonSuccessKind, ty: &str, message: &str) -> TestCaseStatus {
    let mut status = TestCaseStatus::non_success(kind);
    status
        .set_type(ty)
        .set_message(xml_text(first_line(message)))
        .set_description(xml_text(message));
    status
}

fn rerun(attempt: &Attempt) -> TestRerun {
    let message = attempt.failure.as_deref().unwrap_or("");
    let mut rerun = TestRerun::new(NonSuccessKind::Failure);
    rerun
        .set_type("failed")
        .set_time(attempt.duration)
        .set_message(xml_text(first_line(message)))
        .set_description(xml_text(message));
    rerun
}

/// The `<testcase>` for a finished case.
pub fn test_case(record: &CaseRecord) -> TestCase {
    let failed_attempts: Vec<&Attempt> = record.attempts.iter().filter(|a| a.failure.is_some()).collect();
    let status = match &record.outcome {
        CaseOutcome::Passed => {
            let mut status = TestCaseStatus::success();
            status.add_reruns(failed_attempts.iter().map(|a| rerun(a)));
            status
        }
        CaseOutcome::Failed { message } => {
            let mut status = failure(NonSuccessKind::Failure, "failed", message);
            // The last failed attempt is the case's own failure; earlier ones are reruns.
            let earlier = failed_attempts.len().saturating_sub(1);
            status.add_reruns(failed_attempts[..earlier].iter().map(|a| rerun(a)));
            status
        }
        CaseOutcome::Interrupted { message } => failure(NonSuccessKind::Error, "interrupted", message),
        CaseOutcome::Skipped { reason } => skipped(reason),
    };
    let mut case = TestCase::new(xml_text(&record.name), status);
    case.set_classname(SUITE_NAME).set_time(record.duration);
    if record.attempts.len() > 1 {
        case.add_property(Property::new("attempts", record.attempts.len().to_string()));
    }
    case.add_properties(
        record
            .properties
            .iter()
            .map(|(k, v)| Property::new(xml_text(k), xml_text(v))),
    );
    if !record.output.is_empty() {
        case.set_system_out(xml_text(&record.output));
    }
    case
}

/// The skipped `<testcase>` of a case that never finished.
fn placeholder(name: &str, reason: &str) -> TestCase {
    let mut case = TestCase::new(xml_text(name), skipped(reason));
    case.set_classname(SUITE_NAME).set_time(Duration::ZERO);
    case
}

/// Folds run events into `junit_<prefix>01.xml`, rewriting it atomically as cases finish.
#[derive(Debug)]
pub struct JunitReport {
    path: PathBuf,
    run_id: Option<String>,
    started: Option<SystemTime>,
    elapsed: Option<Duration>,
    plan: Vec<PlannedCase>,
    /// Finished cases by name; the latest record wins, so each name appears once.
    cases: BTreeMap<String, TestCase>,
    /// Names finished but absent from the plan, in arrival order.
    unplanned: Vec<String>,
    /// What stopped the run early (a signal name, or the suite timeout), once it happened.
    interrupted: Option<String>,
    finished: bool,
}

impl JunitReport {
    /// A report written to `<report_dir>/junit_<prefix>01.xml` (`junit_01.xml` with an empty
    /// prefix, as upstream's runner names it).
    pub fn new(report_dir: &Path, prefix: &str) -> JunitReport {
        JunitReport {
            path: report_dir.join(format!("junit_{prefix}01.xml")),
            run_id: None,
            started: None,
            elapsed: None,
            plan: Vec::new(),
            cases: BTreeMap::new(),
            unplanned: Vec::new(),
            interrupted: None,
            finished: false,
        }
    }

    /// Where the file is written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Consumes one event; rewrites the file when the set of reported cases changed
    /// (`RunStarted`, `CaseFinished`, `RunFinished`).
    ///
    /// # Errors
    ///
    /// [`Error::Write`] or [`Error::Serialize`]; the previous file is left intact.
    pub fn handle(&mut self, event: &Event) -> Result<(), Error> {
        match event {
            Event::RunStarted { run_id, plan, started } => {
                self.run_id = Some(run_id.clone());
                self.started = Some(*started);
                self.plan = plan.clone();
                // Plan-time skips are final already: record them now so even a run killed
                // before its first case finishes shows why they were skipped.
                for planned in plan {
                    if let Some(reason) = &planned.skip_reason {
                        self.cases
                            .insert(planned.name.clone(), placeholder(&planned.name, reason));
                    }
                }
            }
            Event::CaseFinished(record) => {
                let known = self.plan.iter().any(|p| p.name == record.name) || self.unplanned.contains(&record.name);
                if !known {
                    self.unplanned.push(record.name.clone());
                }
                self.cases.insert(record.name.clone(), test_case(record));
            }
            Event::Interrupted { signal } => {
                self.interrupted = Some(signal.clone());
                return Ok(());
            }
            Event::RunFinished { finished, .. } => {
                self.finished = true;
                self.elapsed = self.started.and_then(|s| finished.duration_since(s).ok());
            }
            Event::StepFinished(_) | Event::Scheduled(_) | Event::CaseStarted { .. } | Event::AttemptFailed { .. } => {
                return Ok(());
            }
        }
        self.write()
    }

    /// The report as it stands. After `RunFinished`, planned cases that never finished are
    /// included as skipped ("NotRun: …"), so every planned case appears exactly once.
    pub fn report(&self) -> Report {
        let mut suite = TestSuite::new(SUITE_NAME);
        if let Some(run_id) = &self.run_id {
            suite.add_property(Property::new("run_id", xml_text(run_id)));
        }
        if let Some(elapsed) = self.elapsed {
            suite.set_time(elapsed);
        }
        let not_run = match &self.interrupted {
            Some(cause) => {
                format!("NotRun: the run was stopped ({cause}) before this case started")
            }
            None => "NotRun: the run ended before this case started".to_string(),
        };
        let names = self.plan.iter().map(|p| &p.name).chain(self.unplanned.iter());
        for name in names {
            match self.cases.get(name) {
                Some(case) => {
                    suite.add_test_case(case.clone());
                }
                None if self.finished => {
                    suite.add_test_case(placeholder(name, &not_run));
                }
                None => {}
            }
        }
        let mut report = Report::new(SUITE_NAME);
        report.add_test_suite(suite);
        report
    }

    /// The XML text of [`JunitReport::report`].
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`].
    pub fn to_xml(&self) -> Result<String, Error> {
        self.report().to_string().map_err(|source| Error::Serialize { source })
    }

    fn write(&self) -> Result<(), Error> {
        write_atomic(&self.path, self.to_xml()?.as_bytes())
    }
}

/// `junit_runner.xml`: one row per runner step (preflight, prepull, cleanup), so
/// infrastructure failures show on TestGrid instead of vanishing into a log.
#[derive(Debug)]
pub struct RunnerReport {
    path: PathBuf,
    steps: Vec<TestCase>,
}

impl RunnerReport {
    /// A report written to `<report_dir>/junit_runner.xml`.
    pub fn new(report_dir: &Path) -> RunnerReport {
        RunnerReport {
            path: report_dir.join("junit_runner.xml"),
            steps: Vec::new(),
        }
    }

    /// Where the file is written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records a `StepFinished` and rewrites the file; other events are ignored.
    ///
    /// # Errors
    ///
    /// [`Error::Write`] or [`Error::Serialize`].
    pub fn handle(&mut self, event: &Event) -> Result<(), Error> {
        let Event::StepFinished(step) = event else {
            return Ok(());
        };
        self.steps.push(step_case(step));
        let mut suite = TestSuite::new(RUNNER_SUITE_NAME);
        suite.add_test_cases(self.steps.iter().cloned());
        let mut report = Report::new(RUNNER_SUITE_NAME);
        report.add_test_suite(suite);
        let xml = report.to_string().map_err(|source| Error::Serialize { source })?;
        write_atomic(&self.path, xml.as_bytes())
    }
}

fn step_case(step: &StepRecord) -> TestCase {
    let status = match &step.failure {
        None => TestCaseStatus::success(),
        Some(message) => failure(NonSuccessKind::Failure, "failed", message),
    };
    let mut case = TestCase::new(xml_text(&step.name), status);
    case.set_classname(RUNNER_SUITE_NAME).set_time(step.duration);
    if !step.output.is_empty() {
        case.set_system_out(xml_text(&step.output));
    }
    case
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, outcome: CaseOutcome, attempts: Vec<Attempt>) -> CaseRecord {
        CaseRecord {
            name: name.into(),
            outcome,
            attempts,
            duration: Duration::from_millis(1500),
            properties: vec![("p50_seconds".into(), "12".into())],
            output: "step 1\n".into(),
        }
    }

    fn attempt(number: u32, failure: Option<&str>) -> Attempt {
        Attempt {
            number,
            failure: failure.map(str::to_string),
            duration: Duration::from_millis(500),
        }
    }

    fn planned(name: &str, skip: Option<&str>) -> PlannedCase {
        PlannedCase {
            name: name.into(),
            skip_reason: skip.map(str::to_string),
        }
    }

    #[test]
    fn renders_every_outcome() {
        let mut junit = JunitReport::new(Path::new("/unused"), "");
        junit.plan = vec![
            planned("pass", None),
            planned("flaky", None),
            planned("fail", None),
            planned("interrupted", None),
            planned("linux [LinuxOnly]", Some("LinuxOnly: why")),
            planned("never ran", None),
        ];
        junit.cases.insert(
            "linux [LinuxOnly]".into(),
            placeholder("linux [LinuxOnly]", "LinuxOnly: why"),
        );
        for r in [
            record("pass", CaseOutcome::Passed, vec![attempt(1, None)]),
            record(
                "flaky",
                CaseOutcome::Passed,
                vec![attempt(1, Some("timed out\nwaiting")), attempt(2, None)],
            ),
            record(
                "fail",
                CaseOutcome::Failed {
                    message: "expected 3 pods\nsaw 2 on node w1".into(),
                },
                vec![attempt(1, Some("first")), attempt(2, Some("expected 3 pods"))],
            ),
            record(
                "interrupted",
                CaseOutcome::Interrupted {
                    message: "cancelled while waiting for pod p".into(),
                },
                vec![attempt(1, Some("cancelled"))],
            ),
        ] {
            junit.cases.insert(r.name.clone(), test_case(&r));
        }
        junit.finished = true;
        junit.interrupted = Some("SIGINT".into());
        insta::assert_snapshot!(junit.to_xml().unwrap());
    }

    #[test]
    fn empty_skip_reasons_stay_visible() {
        assert_eq!(visible_skip_message(" skipped "), visible_skip_message(""));
        assert_ne!(visible_skip_message(""), "skipped");
        assert_eq!(visible_skip_message("LinuxOnly: x"), "LinuxOnly: x");
    }

    #[test]
    fn non_characters_are_replaced() {
        assert_eq!(xml_text("a\u{FFFF}b\u{FFFE}\u{0}").as_str(), "a\u{FFFD}b\u{FFFD}");
    }

    #[test]
    fn runner_report_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut runner = RunnerReport::new(dir.path());
        for (name, failure) in [
            ("preflight", None),
            ("prepull images", Some("pull of agnhost timed out")),
        ] {
            runner
                .handle(&Event::StepFinished(StepRecord {
                    name: name.into(),
                    failure: failure.map(str::to_string),
                    duration: Duration::from_secs(2),
                    output: "agnhost: 300s\n".into(),
                }))
                .unwrap();
        }
        let xml = std::fs::read_to_string(runner.path()).unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let rows: Vec<(&str, bool)> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testcase"))
            .map(|n| {
                (
                    n.attribute("name").unwrap(),
                    n.children().any(|c| c.has_tag_name("failure")),
                )
            })
            .collect();
        assert_eq!(rows, vec![("preflight", false), ("prepull images", true)]);
        assert!(dir.path().join("junit_runner.xml").exists());
    }
}
