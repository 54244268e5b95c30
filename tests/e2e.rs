//! Every catalogue case as a libtest trial, run against the embedded simulated cluster (or the
//! cluster named by `CROSSCONF_KUBECONFIG`).
//!
//! `cargo test --test e2e -- --list` lists every case by its full name. Cases the OS rules skip
//! are reported as ignored with their reason. Every case runs once per target OS, both on the one
//! simulated cluster (its Windows and Linux pools), each trial marked `[windows]` or `[linux]`;
//! `CROSSCONF_NODE_OS_DISTRO=windows|linux` narrows the run to one. Libtest's own filters apply
//! to the full names, so `cargo test --test e2e -- 'Granular'` runs the granular checks only.
//!
//! Trials start longest-expected-first, as `crossconf run` orders its parallel lane (times from
//! the last run, see `support/timing.rs`; estimates otherwise), and the slowest ten are printed
//! at the end.
//!
//! `tests/fixtures/known_failures.tsv` lists, per target OS, the cases that do not pass on the
//! simulator yet, each with the reason; they are reported as ignored with that reason (so a
//! dashboard shows them) instead of spending their timeout. The list is a to-do list: it only
//! shrinks, and `known_failures_name_registered_cases` keeps it honest.

mod support;

use std::sync::Arc;

use crossconf::catalog::Catalog;
use crossconf::os::Os;
use crossconf::run::schedule;
use crossconf::select::{self, PlanContext, Provider, Selection, SkipReason};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use support::timing::{self, TrialTimes};
use support::{Attempt, Target, attempt_case, known_failures, target_oses};

/// The `[Feature:X]` infrastructure the simulator provides, so its cases run here although a
/// plain selection leaves feature cases out (a real cluster's job names them with
/// `--label-filter`): HostProcess containers (the simulated Windows runtime is containerd 1.7)
/// and container stop signals (the tests' simulators turn the ContainerStopSignals gate on:
/// `support::SIM_FEATURE_GATES`). `OffByDefault` marks alpha-gated cases: each one registered
/// so far runs here, its gate on in `SIM_FEATURE_GATES` or without effect on what it checks
/// (PodAndContainerStatsFromCRI: the simulated kubelet's stats come from its runtime). The
/// `[FeatureGate:ContainerRestartRules]` cases carry no `[Feature:...]` tag, so they run in a
/// plain selection; `SIM_FEATURE_GATES` turns their gate on, else they would skip naming it.
/// Hyper-V isolation: the tests' simulators run with `--hyperv` (`SimConfig::with_hyperv`).
const SIM_FEATURES: &[&str] = &[
    "WindowsHostProcessContainers",
    "ContainerStopSignals",
    "OffByDefault",
    "WindowsHyperVContainers",
];

fn main() {
    let mut args = Arguments::from_args();
    crossconf::install_crypto_provider();
    let targets = target_oses();
    let catalog = Catalog::new(crossconf::cases::all()).expect("case names are unique");

    if args.list {
        let trials = targets
            .iter()
            .flat_map(|os| {
                catalog
                    .cases()
                    .iter()
                    .map(move |c| Trial::test(c.name, || Ok(())).with_kind(os.to_string()))
            })
            .collect();
        libtest_mimic::run(&args, trials).exit();
    }

    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio runtime"),
    );
    let target = runtime.block_on(Target::start(None)).expect("the cluster to test");
    // Serial cases need a cluster to themselves (`crossconf run` runs them one at a time after
    // the parallel lane): here they run one at a time, holding `serial_lock`, on a second
    // simulated cluster of their own, beside the parallel trials instead of after them. (Against
    // `CROSSCONF_KUBECONFIG` both are the one real cluster.)
    let serial_target = runtime
        .block_on(Target::start(None))
        .expect("the cluster for serial cases");
    let serial_lock = Arc::new(tokio::sync::Mutex::new(()));
    let known = known_failures();
    for (os, name) in known.keys() {
        assert!(
            catalog.by_name(name).is_some() && (os == "windows" || os == "linux"),
            "tests/fixtures/known_failures.tsv names an unknown case or OS: {os} {name}"
        );
    }
    let previous = timing::previous("e2e");
    let times = TrialTimes::default();
    let copies = copies();
    let mut trials = Vec::new();
    let mut runnable = 0;
    for os in targets {
        let ctx = target.context(os, &format!("e2e-{os}-{}", std::process::id()));
        let serial_ctx = serial_target.context(os, &format!("e2e-serial-{os}-{}", std::process::id()));
        let mut plan_ctx = PlanContext::new(os);
        if target.sim.is_some() {
            plan_ctx.provider = Provider::SIM;
        }
        plan_ctx.missing_pools = Os::ALL.into_iter().filter(|p| !ctx.pools.has_pool(*p)).collect();
        let plan = select::plan(&catalog, &Selection::everything(), &plan_ctx);
        let runs = plan.entries.iter().flat_map(|entry| {
            let serial = catalog.cases()[entry.case_index].is_serial();
            // Copies stand in for a larger catalogue; a serial case needs the cluster to itself.
            let n = if serial || entry.skip_reason().is_some() {
                1
            } else {
                copies
            };
            (1..=n).map(move |copy| (entry, copy))
        });
        for (entry, copy) in runs {
            let case = catalog.cases()[entry.case_index].clone();
            let skip = match entry.skip_reason() {
                Some(SkipReason::FeatureNotFocused(x))
                    if target.sim.is_some() && SIM_FEATURES.contains(&x.as_str()) =>
                {
                    None
                }
                other => other.map(ToString::to_string),
            }
            .or_else(|| {
                known
                    .get(&(os.to_string(), case.name.to_string()))
                    .map(|r| format!("known failure on the simulator: {r}"))
            });
            let serial = case.is_serial();
            let ctx = if serial { serial_ctx.clone() } else { ctx.clone() };
            let serial_lock = serial.then(|| serial_lock.clone());
            let runtime = runtime.clone();
            let key = format!("[{os}] {}", case.name);
            let trial_name = if copy == 1 {
                case.name.to_string()
            } else {
                format!("{} (copy {copy})", case.name)
            };
            let expected = match (&skip, previous.as_ref().and_then(|p| p.get(&key))) {
                (Some(_), _) => std::time::Duration::ZERO,
                (None, Some(measured)) => measured,
                (None, None) => schedule::estimate(&case),
            };
            runnable += usize::from(skip.is_none());
            let times = times.clone();
            let trial = Trial::ignorable_test(trial_name, move || {
                if let Some(reason) = skip {
                    return Ok(Completion::ignored_with(reason));
                }
                let t0 = std::time::Instant::now();
                let result = runtime.block_on(async move {
                    let _alone = match &serial_lock {
                        Some(lock) => Some(lock.lock().await),
                        None => None,
                    };
                    // Two attempts, as the upstream Windows jobs run with --flake-attempts=2: a
                    // case that passes on its second attempt passes, and says so.
                    let mut failures = Vec::new();
                    for attempt in 1..=2 {
                        match attempt_case(&ctx, &case, case.timeout).await {
                            Attempt::Passed => {
                                if !failures.is_empty() {
                                    println!(
                                        "flaky: {} passed on attempt {attempt}; earlier: {}",
                                        case.name,
                                        failures.join(" | ")
                                    );
                                }
                                return Ok(Completion::Completed);
                            }
                            Attempt::Skipped(r) => return Ok(Completion::ignored_with(r)),
                            Attempt::Failed(m) => failures.push(format!("attempt {attempt}: {m}")),
                        }
                    }
                    Err(Failed::from(failures.join("\n\n")))
                });
                if copy == 1 {
                    times.record(key, t0.elapsed());
                }
                result
            })
            .with_kind(os.to_string());
            trials.push((expected, serial, trial));
        }
    }
    // Longest first, so the long waits overlap the short cases instead of ending the run; the
    // serial trials spread evenly through that order, so that they rarely wait for each other's
    // lock (a waiting trial holds a lane).
    schedule::longest_first(&mut trials, |(d, _, _)| *d);
    let (serial_trials, mut trials): (Vec<_>, Vec<_>) = trials.into_iter().partition(|(_, serial, _)| *serial);
    let gap = trials.len() / (serial_trials.len() + 1);
    for (i, t) in serial_trials.into_iter().enumerate() {
        trials.insert(((i + 1) * gap + i).min(trials.len()), t);
    }
    // Cases wait on pods and timers, not on the CPU (the process uses about 5 % of two cores,
    // see the line `finish` prints): lanes grow with the catalogue, one per 36 trials that run and at
    // least 8, so three times the cases take about the same wall rather than three times it.
    if args.test_threads.is_none() {
        args.test_threads = Some(timing::lanes_for(runnable, 36, 8));
    }
    let conclusion = libtest_mimic::run(&args, trials.into_iter().map(|(_, _, t)| t).collect());
    runtime.block_on(target.shutdown());
    runtime.block_on(serial_target.shutdown());
    times.finish("e2e");
    conclusion.exit();
}

/// `CROSSCONF_E2E_COPIES=N` runs every parallel case N times at once (trials named
/// `... (copy K)`), to show how the harness and the simulator carry a catalogue N times the
/// size; 1 when unset.
fn copies() -> usize {
    match std::env::var("CROSSCONF_E2E_COPIES") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|n| *n >= 1)
            .unwrap_or_else(|| panic!("CROSSCONF_E2E_COPIES must be a number from 1, not {v:?}")),
        Err(_) => 1,
    }
}
