//! The executor: runs planned cases in parallel lanes and a serial lane, with per-case
//! timeouts, flake attempts, failure dumps, namespace teardown and cancellation.
//!
//! The main type is [`Runner`], built by [`RunnerBuilder`] (nextest's `TestRunnerBuilder`
//! shape: the CLI fills it conditionally). It reports through a sink of [`Event`]s and writes
//! no file itself, except the failure dumps a case's framework produces.
//!
//! Order follows ginkgo: parallel cases first (up to `parallel` at once), then `[Serial]` and
//! `[Disruptive]` cases one at a time with nothing else running. Within the parallel lane the
//! longest expected case starts first ([`super::schedule`]).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use super::events::{Attempt, CaseOutcome, CaseRecord, Event, PlannedCase, RunStats};
use super::schedule::{self, Durations};
use super::signal::Shutdown;
use crate::catalog::Case;
use crate::framework::{self, CaseError, Framework, RunContext};

/// How long each deferred clean-up of a case may take (a delete and, at most, its retries).
const DEFERRED_CLEANUP_WITHIN: Duration = Duration::from_secs(60);

/// Errors building a runner from user input (exit 2).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BuildError {
    /// `--parallel 0`.
    #[error("--parallel must be at least 1")]
    ZeroParallel,
    /// `--flake-attempts 0`.
    #[error("--flake-attempts must be at least 1")]
    ZeroFlakeAttempts,
}

/// Builds a [`Runner`].
#[derive(Debug, Clone)]
pub struct RunnerBuilder {
    parallel: usize,
    test_timeout: Option<Duration>,
    suite_timeout: Option<Duration>,
    flake_attempts: u32,
    delete_namespace: bool,
    delete_namespace_on_failure: bool,
    dump_logs_on_failure: bool,
    durations: Option<Arc<Durations>>,
}

impl Default for RunnerBuilder {
    /// Upstream e2e defaults: 1 lane, one attempt, namespaces deleted (also on failure), logs
    /// dumped on failure.
    fn default() -> Self {
        RunnerBuilder {
            parallel: 1,
            test_timeout: None,
            suite_timeout: None,
            flake_attempts: 1,
            delete_namespace: true,
            delete_namespace_on_failure: true,
            dump_logs_on_failure: true,
            durations: None,
        }
    }
}

impl RunnerBuilder {
    /// `--parallel N`.
    pub fn set_parallel(&mut self, n: usize) -> &mut Self {
        self.parallel = n;
        self
    }
    /// `--test-timeout`: overrides every case's tag-derived timeout.
    pub fn set_test_timeout(&mut self, t: Option<Duration>) -> &mut Self {
        self.test_timeout = t;
        self
    }
    /// `--timeout`: the whole run's budget; when it runs out the run stops as on an interrupt.
    pub fn set_suite_timeout(&mut self, t: Option<Duration>) -> &mut Self {
        self.suite_timeout = t;
        self
    }
    /// `--flake-attempts N`.
    pub fn set_flake_attempts(&mut self, n: u32) -> &mut Self {
        self.flake_attempts = n;
        self
    }
    /// `--delete-namespace`.
    pub fn set_delete_namespace(&mut self, b: bool) -> &mut Self {
        self.delete_namespace = b;
        self
    }
    /// `--delete-namespace-on-failure`.
    pub fn set_delete_namespace_on_failure(&mut self, b: bool) -> &mut Self {
        self.delete_namespace_on_failure = b;
        self
    }
    /// `--dump-logs-on-failure`.
    pub fn set_dump_logs_on_failure(&mut self, b: bool) -> &mut Self {
        self.dump_logs_on_failure = b;
        self
    }

    /// `--durations-from`: measured times that order the parallel lane (estimates otherwise).
    pub fn set_durations(&mut self, d: Option<Durations>) -> &mut Self {
        self.durations = d.map(Arc::new);
        self
    }

    /// Validates and builds.
    ///
    /// # Errors
    /// [`BuildError`] for zero lanes or zero attempts.
    pub fn build(&self) -> Result<Runner, BuildError> {
        if self.parallel == 0 {
            return Err(BuildError::ZeroParallel);
        }
        if self.flake_attempts == 0 {
            return Err(BuildError::ZeroFlakeAttempts);
        }
        Ok(Runner { cfg: self.clone() })
    }
}

/// A case as the executor receives it: the case, and the plan's decision.
#[derive(Clone)]
pub struct Scheduled {
    /// The case.
    pub case: Case,
    /// `Some(reason)` when the plan skips it.
    pub skip: Option<String>,
}

/// Runs a plan.
#[derive(Debug, Clone)]
pub struct Runner {
    cfg: RunnerBuilder,
}

enum AttemptResult {
    Passed,
    Failed(String),
    Skipped(String),
    Interrupted(String),
}

struct Finished {
    record: CaseRecord,
    attempts_failed: Vec<Attempt>,
}

impl Runner {
    /// Runs every scheduled case and emits events to `sink` in order; returns the totals.
    pub async fn execute(
        &self,
        ctx: Arc<RunContext>,
        scheduled: Vec<Scheduled>,
        shutdown: Shutdown,
        mut sink: impl FnMut(Event),
    ) -> RunStats {
        let mut stats = RunStats::default();
        sink(Event::RunStarted {
            run_id: ctx.run_id.clone(),
            plan: scheduled
                .iter()
                .map(|s| PlannedCase {
                    name: s.case.name.to_string(),
                    skip_reason: s.skip.clone(),
                })
                .collect(),
            started: SystemTime::now(),
        });
        let mut to_run = Vec::new();
        for s in scheduled {
            match s.skip {
                Some(reason) => {
                    stats.skipped += 1;
                    sink(Event::CaseFinished(skipped_record(s.case.name, reason)));
                }
                None => to_run.push(s.case),
            }
        }
        let order = schedule::schedule(to_run, self.cfg.parallel, self.cfg.durations.as_deref());
        sink(Event::Scheduled(order.summary.clone()));
        let (parallel, serial) = (order.parallel, order.serial);
        let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];

        // The suite timeout behaves like an interrupt that nobody typed.
        if let Some(limit) = self.cfg.suite_timeout {
            let sd = shutdown.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep(limit) => { sd.trigger(&format!("suite timeout of {limit:?}")); }
                    _ = sd.stopped().cancelled() => {}
                }
            });
        }

        let mut announced = false;
        let lanes: [(Vec<Case>, usize); 2] = [(parallel, self.cfg.parallel), (serial, 1)];
        for (lane, (cases, width)) in lanes.into_iter().enumerate() {
            let mut queue = cases.into_iter();
            let mut in_flight = FuturesUnordered::new();
            loop {
                while in_flight.len() < width && !shutdown.is_stopped() {
                    let Some(case) = queue.next() else { break };
                    sink(Event::CaseStarted {
                        name: case.name.to_string(),
                    });
                    in_flight.push(self.run_case(ctx.clone(), case, shutdown.clone()));
                }
                if in_flight.is_empty() {
                    break;
                }
                tokio::select! {
                    done = in_flight.next() => {
                        let Some(done) = done else { break };
                        for a in &done.attempts_failed {
                            sink(Event::AttemptFailed { name: done.record.name.clone(), attempt: a.clone() });
                        }
                        count(&mut stats, &done.record);
                        times[lane].push(done.record.duration);
                        sink(Event::CaseFinished(done.record));
                    }
                    _ = shutdown.stopped().cancelled(), if !announced => {
                        announced = true;
                        sink(Event::Interrupted { signal: shutdown.signal_name().unwrap_or_else(|| "interrupt".into()) });
                    }
                }
            }
            if shutdown.is_stopped() {
                for case in queue {
                    let reason = format!(
                        "not started: the run was interrupted ({})",
                        shutdown.signal_name().unwrap_or_else(|| "interrupt".into())
                    );
                    stats.skipped += 1;
                    sink(Event::CaseFinished(skipped_record(case.name, reason)));
                }
            }
        }
        stats.critical_path = schedule::critical_path_bound(&times[0], &times[1], self.cfg.parallel);
        if shutdown.is_stopped() && !announced {
            sink(Event::Interrupted {
                signal: shutdown.signal_name().unwrap_or_else(|| "interrupt".into()),
            });
        }
        sink(Event::RunFinished {
            stats: stats.clone(),
            finished: SystemTime::now(),
        });
        stats
    }

    async fn run_case(&self, ctx: Arc<RunContext>, case: Case, shutdown: Shutdown) -> Finished {
        let started = Instant::now();
        let mut attempts = Vec::new();
        let mut attempts_failed = Vec::new();
        let mut output = String::new();
        let mut properties = Vec::new();
        let timeout = self.cfg.test_timeout.unwrap_or(case.timeout);
        let max = self.cfg.flake_attempts;
        let mut outcome = CaseOutcome::Failed {
            message: "no attempt ran".into(),
        };
        for number in 1..=max {
            let t0 = Instant::now();
            let (result, log, props) = self.attempt(&ctx, &case, timeout, &shutdown).await;
            let duration = t0.elapsed();
            if max > 1 {
                output.push_str(&format!("--- attempt {number} of {max} ---\n"));
            }
            output.push_str(&log);
            properties = props;
            match result {
                AttemptResult::Passed => {
                    attempts.push(Attempt {
                        number,
                        failure: None,
                        duration,
                    });
                    outcome = CaseOutcome::Passed;
                    break;
                }
                AttemptResult::Skipped(reason) => {
                    outcome = CaseOutcome::Skipped { reason };
                    break;
                }
                AttemptResult::Interrupted(message) => {
                    attempts.push(Attempt {
                        number,
                        failure: Some(message.clone()),
                        duration,
                    });
                    outcome = CaseOutcome::Interrupted { message };
                    break;
                }
                AttemptResult::Failed(message) => {
                    let attempt = Attempt {
                        number,
                        failure: Some(message.clone()),
                        duration,
                    };
                    attempts.push(attempt.clone());
                    outcome = CaseOutcome::Failed { message };
                    if number < max && !shutdown.is_stopped() {
                        attempts_failed.push(attempt);
                    } else {
                        break;
                    }
                }
            }
        }
        Finished {
            record: CaseRecord {
                name: case.name.to_string(),
                outcome,
                attempts,
                duration: started.elapsed(),
                properties,
                output,
            },
            attempts_failed,
        }
    }

    async fn attempt(
        &self,
        ctx: &Arc<RunContext>,
        case: &Case,
        timeout: Duration,
        shutdown: &Shutdown,
    ) -> (AttemptResult, String, Vec<(String, String)>) {
        let attempt_started = std::time::Instant::now();
        let setup = tokio::select! {
            r = tokio::time::timeout(timeout, Framework::setup(ctx.clone(), case.name, timeout)) => r,
            _ = shutdown.stopped().cancelled() => {
                return (AttemptResult::Interrupted("interrupted while creating the case namespace".into()), String::new(), Vec::new());
            }
        };
        let f = match setup {
            Ok(Ok(f)) => f,
            Ok(Err(CaseError::Skipped(r))) => return (AttemptResult::Skipped(r), String::new(), Vec::new()),
            Ok(Err(CaseError::Failed(m))) => {
                return (
                    AttemptResult::Failed(framework::health::with_transient_note(
                        format!("setup failed: {m}"),
                        attempt_started,
                    )),
                    String::new(),
                    Vec::new(),
                );
            }
            Err(_) => {
                return (
                    AttemptResult::Failed(format!("setup did not finish within the case timeout of {timeout:?}")),
                    String::new(),
                    Vec::new(),
                );
            }
        };
        f.step(format!("running in namespace {}", f.ns()));
        let body = (case.body)(&f);
        let result = tokio::select! {
            r = tokio::time::timeout(f.remaining(), body) => match r {
                Ok(Ok(())) => AttemptResult::Passed,
                Ok(Err(CaseError::Skipped(reason))) => AttemptResult::Skipped(reason),
                Ok(Err(CaseError::Failed(m))) => AttemptResult::Failed(m),
                Err(_) => AttemptResult::Failed(format!("timed out after {timeout:?} (the case timeout)")),
            },
            _ = shutdown.stopped().cancelled() => AttemptResult::Interrupted(format!(
                "interrupted by {} while running in namespace {}",
                shutdown.signal_name().unwrap_or_else(|| "interrupt".into()),
                f.ns()
            )),
        };
        let result = match result {
            AttemptResult::Failed(m) if !m.contains("; meanwhile: ") => {
                AttemptResult::Failed(framework::health::with_transient_note(m, attempt_started))
            }
            other => other,
        };
        let result = match result {
            AttemptResult::Failed(m)
                if !m.contains("; pods on nodes in trouble")
                    && !m.contains(" is Ready=")
                    && !m.contains(" is silent: ") =>
            {
                let note = framework::health::unready_nodes_note(&ctx.client, f.ns()).await;
                AttemptResult::Failed(m + &note)
            }
            other => other,
        };
        let failed = matches!(result, AttemptResult::Failed(_) | AttemptResult::Interrupted(_));
        if failed && self.cfg.dump_logs_on_failure && !shutdown.skip_cleanup() {
            let dir = crate::report::case_dir(&ctx.artifacts_dir, case.name);
            match tokio::time::timeout(
                Duration::from_secs(60),
                framework::dump_namespace(&ctx.client, f.ns(), &dir),
            )
            .await
            {
                Ok(Ok(())) => f.step(format!("failure artifacts written to {}", dir.display())),
                Ok(Err(e)) => f.step(format!("failure dump incomplete: {}", render_chain(&e))),
                Err(_) => f.step("failure dump did not finish within 60s"),
            }
        }
        // Deferred clean-ups run after the dump (which wants the state the body left) and before
        // the namespace goes; after a timeout too, which is what they are for. A passing body
        // whose clean-up fails fails, as under ginkgo.
        let result = if shutdown.skip_cleanup() {
            result
        } else {
            match (result, f.run_deferred_cleanups(DEFERRED_CLEANUP_WITHIN).await) {
                (AttemptResult::Passed, Err(e)) => AttemptResult::Failed(e.to_string()),
                (r, Err(e)) => {
                    f.step(e);
                    r
                }
                (r, Ok(())) => r,
            }
        };
        let delete = self.cfg.delete_namespace && (!failed || self.cfg.delete_namespace_on_failure);
        if delete && !shutdown.skip_cleanup() {
            if let Err(e) = framework::delete_namespace(&ctx.client, f.ns()).await {
                f.step(format!(
                    "deleting namespace {} failed: {}",
                    f.ns(),
                    framework::render_kube_error(&e)
                ));
            }
        } else {
            f.step(format!("namespace {} kept", f.ns()));
        }
        (result, f.log_text(), f.properties())
    }
}

fn skipped_record(name: &str, reason: String) -> CaseRecord {
    CaseRecord {
        name: name.to_string(),
        outcome: CaseOutcome::Skipped { reason },
        attempts: Vec::new(),
        duration: Duration::ZERO,
        properties: Vec::new(),
        output: String::new(),
    }
}

fn count(stats: &mut RunStats, r: &CaseRecord) {
    match &r.outcome {
        CaseOutcome::Passed => {
            stats.passed += 1;
            if r.attempts.len() > 1 {
                stats.flaky += 1;
            }
        }
        CaseOutcome::Failed { .. } => stats.failed += 1,
        CaseOutcome::Skipped { .. } => stats.skipped += 1,
        CaseOutcome::Interrupted { .. } => stats.interrupted += 1,
    }
}

/// Renders an error and its sources once, on one line: `a: b: c`.
///
/// Some sources (YAML parsers) append a multi-line source snippet after their first line; the
/// snippet is dropped so a user error stays one line. A source whose text the previous level
/// already contains is not repeated.
pub fn render_chain(e: &dyn std::error::Error) -> String {
    fn first_line(text: &str) -> &str {
        text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("")
    }
    let mut out = first_line(&e.to_string()).to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        let line = first_line(&text);
        if !line.is_empty() && !out.contains(line) {
            out.push_str(": ");
            out.push_str(line);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_render_on_one_line_without_repeats() {
        #[derive(Debug, thiserror::Error)]
        #[error("reading suite x.yaml")]
        struct Outer(#[source] std::io::Error);
        let inner = std::io::Error::other("line 1 column 7: unclosed bracket\n --> <input>:1:7\n  |");
        assert_eq!(
            render_chain(&Outer(inner)),
            "reading suite x.yaml: line 1 column 7: unclosed bracket"
        );
    }

    #[test]
    fn builder_rejects_zero_lanes_and_attempts() {
        assert_eq!(
            RunnerBuilder::default().set_parallel(0).build().unwrap_err(),
            BuildError::ZeroParallel
        );
        assert_eq!(
            RunnerBuilder::default().set_flake_attempts(0).build().unwrap_err(),
            BuildError::ZeroFlakeAttempts
        );
        assert!(RunnerBuilder::default().set_parallel(4).build().is_ok());
    }

    #[test]
    fn flaky_pass_counts_as_passed_and_flaky() {
        let mut stats = RunStats::default();
        let mut r = skipped_record("x", "r".into());
        r.outcome = CaseOutcome::Passed;
        r.attempts = vec![
            Attempt {
                number: 1,
                failure: Some("boom".into()),
                duration: Duration::ZERO,
            },
            Attempt {
                number: 2,
                failure: None,
                duration: Duration::ZERO,
            },
        ];
        count(&mut stats, &r);
        assert_eq!((stats.passed, stats.flaky), (1, 1));
    }
}
