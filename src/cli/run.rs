//! `crossconf run`: validate every input, connect, plan, preflight, execute, clean up, report.
//!
//! Everything a user can get wrong is checked before the cluster is touched and before any
//! report file exists, so a bad flag leaves nothing half-written. Once cases start, reports are
//! rewritten after every case, so a killed run loses nothing already finished.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::CliError;
use super::args::RunArgs;
use super::commands::{catalog, connect, image_catalog, provider, selection};
use crate::framework::{CaseSettings, RunContext};
use crate::os::Os;
use crate::report::junit::{JunitReport, RunnerReport};
use crate::report::progress::Progress;
use crate::report::prow::ProwReport;
use crate::run::{Event, RunnerBuilder, Scheduled, Shutdown, SignalHandlerKind, StepRecord};
use crate::select::{self, PlanContext};

/// Where results go: `--report-dir`, else `$ARTIFACTS` (as prow sets it), else `./_artifacts`.
pub(super) fn report_dir(flag: Option<&PathBuf>) -> PathBuf {
    flag.cloned()
        .or_else(|| {
            std::env::var_os("ARTIFACTS")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| PathBuf::from("_artifacts"))
}

/// A run id: time-ordered and unique enough to label a run's objects.
fn new_run_id() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let suffix: String = uuid::Uuid::new_v4().simple().to_string().chars().take(6).collect();
    format!("{secs}-{suffix}")
}

/// The case times that order the parallel lane: `--durations-from`, else the report
/// directory's previous JUnit file (read before this run rewrites it). A file that cannot be
/// used costs one warning line and the run goes on with estimates: ordering is an
/// optimisation, never a reason to refuse a run.
fn durations(a: &RunArgs) -> Option<crate::run::Durations> {
    let (path, explicit) = match &a.durations_from {
        Some(p) => (p.clone(), true),
        None => (
            report_dir(a.report_dir.as_ref()).join(format!("junit_{}01.xml", a.report_prefix)),
            false,
        ),
    };
    if !explicit && !path.exists() {
        return None;
    }
    match crate::run::Durations::load(&path) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!(
                "warning: {}; ordering cases by estimates from their timeouts",
                crate::run::render_chain(&e)
            );
            None
        }
    }
}

pub(super) async fn run(a: RunArgs) -> Result<(), CliError> {
    // 1. Inputs, all validated before anything else happens.
    let (selection, target, suite) = selection(&a.selection, a.shard.as_deref(), a.rerun_failed.as_ref())?;
    let provider = provider(&a.selection, &a.cluster)?;
    let mut builder = RunnerBuilder::default();
    builder
        .set_parallel(
            a.parallel
                .or(suite.as_ref().and_then(|s| s.parallel))
                // The embedded simulator's cases wait on timers, not CPU: a first run on it
                // should not take an hour. Real clusters keep upstream's default of 1.
                .unwrap_or(if a.cluster.sim { 8 } else { 1 }),
        )
        .set_flake_attempts(
            a.flake_attempts
                .or(suite.as_ref().and_then(|s| s.flake_attempts))
                .unwrap_or(1),
        )
        .set_test_timeout(a.test_timeout.or(suite.as_ref().and_then(|s| s.test_timeout)))
        .set_suite_timeout(a.timeout.or(suite.as_ref().and_then(|s| s.timeout)))
        .set_delete_namespace(a.delete_namespace)
        .set_delete_namespace_on_failure(a.delete_namespace_on_failure)
        .set_dump_logs_on_failure(a.dump_logs_on_failure);
    builder.set_durations(durations(&a));
    let runner = builder.build().map_err(|e| CliError::usage(&e))?;
    let images = Arc::new(image_catalog(a.kube_test_repo_list.as_ref())?);
    let catalog = catalog();

    let mut plan_ctx = PlanContext::new(target);
    plan_ctx.provider = provider;
    if a.dry_run {
        let plan = select::plan(&catalog, &selection, &plan_ctx);
        print!("{}", plan.to_text_listing());
        println!(
            "dry run: would run {} of {} cases on {target} nodes",
            plan.run_count(),
            catalog.len()
        );
        return Ok(());
    }

    // 2. The cluster.
    let (cluster, sim) = connect(&a.cluster).await?;
    let outcome = run_connected(a, runner, selection, plan_ctx, catalog, images, &cluster, sim.as_ref()).await;
    if let Some(sim) = sim {
        sim.shutdown().await;
    }
    outcome
}

#[expect(
    clippy::too_many_arguments,
    reason = "one call site; the pieces are validated separately above"
)]
async fn run_connected(
    a: RunArgs,
    runner: crate::run::Runner,
    selection: select::Selection,
    mut ctx: PlanContext,
    catalog: crate::catalog::Catalog,
    images: Arc<crate::images::ImageCatalog>,
    cluster: &crate::cluster::Cluster,
    sim: Option<&super::sim::EmbeddedSim>,
) -> Result<(), CliError> {
    let pools = cluster.pools().clone();
    let target = ctx.target_os;
    ctx.missing_pools = Os::ALL.into_iter().filter(|os| !pools.has_pool(*os)).collect();
    let plan = select::plan(&catalog, &selection, &ctx);

    // 3. Reports: the directory must be writable before any case runs.
    let dir = report_dir(a.report_dir.as_ref());
    std::fs::create_dir_all(&dir)
        .map_err(|e| CliError::Usage(format!("cannot create report directory {}: {e}", dir.display())))?;
    let run_id = new_run_id();
    let mut metadata: BTreeMap<String, String> = pools.metadata();
    metadata.insert("kubernetes-version".into(), cluster.version().to_string());
    metadata.insert("node-os-distro".into(), target.to_string());
    metadata.insert("run-id".into(), run_id.clone());
    metadata.insert("crossconf-version".into(), env!("CARGO_PKG_VERSION").into());
    if sim.is_some() {
        metadata.insert("cluster".into(), "crossconf simulated cluster".into());
    }
    crate::report::prow::write_started(&dir, SystemTime::now(), &metadata).map_err(|e| CliError::usage(&e))?;
    let mut junit = JunitReport::new(&dir, &a.report_prefix);
    let mut runner_report = RunnerReport::new(&dir);
    let mut prow = ProwReport::new(&dir, metadata.clone());
    let mut progress = Progress::for_terminal(a.no_progress, std::io::stderr().is_terminal(), is_ci::uncached());
    let mut summary = crate::report::Summary::new();
    let mut report_errors: Vec<String> = Vec::new();
    let mut sink = |event: Event| {
        summary.handle(&event);
        for r in [
            junit.handle(&event).map_err(|e| crate::run::render_chain(&e)),
            runner_report.handle(&event).map_err(|e| crate::run::render_chain(&e)),
            prow.handle(&event).map_err(|e| crate::run::render_chain(&e)),
            progress.handle(&event).map_err(|e| crate::run::render_chain(&e)),
        ] {
            if let Err(e) = r
                && !report_errors.contains(&e)
            {
                eprintln!("error: writing results: {e}");
                report_errors.push(e);
            }
        }
    };

    let settings = CaseSettings {
        external_endpoint: a
            .external_endpoint
            .clone()
            .or_else(|| sim.map(|s| s.external_endpoint())),
        external_name: a.external_name.clone().or_else(|| sim.map(|s| s.external_name())),
        density_pods: a.density_pods,
        kubectl: kubectl_settings(&a, sim, &run_id)?,
    };
    let run_ctx = Arc::new(RunContext {
        client: cluster.client().clone(),
        run_id: run_id.clone(),
        target_os: target,
        pools: pools.clone(),
        images: images.clone(),
        artifacts_dir: dir.clone(),
        settings,
        started: Instant::now(),
    });
    let scheduled: Vec<Scheduled> = plan
        .entries
        .iter()
        .filter(|e| e.runs() || e.skip_reason().is_some_and(|r| !r.is_filter()))
        .map(|e| Scheduled {
            case: catalog.cases()[e.case_index].clone(),
            skip: e.skip_reason().map(ToString::to_string),
        })
        .collect();

    let shutdown = Shutdown::new();
    shutdown
        .install(SignalHandlerKind::Standard)
        .map_err(|e| CliError::Usage(format!("cannot install signal handlers: {e}")))?;

    // 4. Preflight: every Windows node's build against every image the plan needs.
    let preflight = crate::run::preflight::check_images(&images, &pools, &scheduled, target);
    let failed_preflight = preflight.failure.is_some();
    sink(Event::StepFinished(preflight));
    if failed_preflight {
        let record = StepRecord {
            name: "cases".into(),
            failure: Some("not run: preflight failed".into()),
            duration: std::time::Duration::ZERO,
            output: String::new(),
        };
        sink(Event::StepFinished(record));
        finish(&dir, &metadata, false)?;
        return Err(CliError::CasesFailed);
    }
    if a.prepull_images {
        let step = crate::run::prepull::prepull(&run_ctx, &images, &scheduled, &shutdown).await;
        let failed = step.failure.is_some();
        sink(Event::StepFinished(step));
        if failed {
            finish(&dir, &metadata, false)?;
            return Err(CliError::CasesFailed);
        }
    }

    // 5. The cases.
    let stats = runner
        .execute(run_ctx.clone(), scheduled, shutdown.clone(), &mut sink)
        .await;

    // 6. Cleanup: everything labelled with this run's id, unless a second signal said not to.
    if shutdown.skip_cleanup() {
        sink(Event::StepFinished(StepRecord {
            name: "cleanup".into(),
            failure: Some("skipped: second interrupt".into()),
            duration: std::time::Duration::ZERO,
            output: String::new(),
        }));
    } else {
        let t0 = Instant::now();
        let selector = format!("{}={run_id}", crate::framework::RUN_ID_LABEL);
        let result =
            crate::run::cleanup::delete_labelled(cluster.client(), &selector, std::time::Duration::from_secs(300))
                .await;
        sink(Event::StepFinished(StepRecord {
            name: "cleanup".into(),
            failure: result.as_ref().err().map(|e| crate::run::render_chain(e)),
            duration: t0.elapsed(),
            output: result.map(|r| r.to_string()).unwrap_or_default(),
        }));
    }
    print!("{}", summary.render());
    // The kubectl work directory holds the simulator's credentials; nothing in it is a result.
    if !run_ctx.settings.kubectl.work_dir.as_os_str().is_empty() {
        let _ = std::fs::remove_dir_all(&run_ctx.settings.kubectl.work_dir);
    }

    let passed = crate::report::prow::run_passed(&stats) && !shutdown.is_stopped();
    finish(&dir, &metadata, passed)?;
    if !report_errors.is_empty() {
        return Err(CliError::Usage(format!(
            "results incomplete: {}",
            report_errors.join("; ")
        )));
    }
    if shutdown.is_stopped() {
        Err(CliError::Interrupted)
    } else if passed {
        Ok(())
    } else {
        Err(CliError::CasesFailed)
    }
}

/// Where kubectl is and how it reaches the cluster under test: the user's kubeconfig and
/// context as given, or for `--sim` the simulator's kubeconfig written to a private work
/// directory (not the report directory, whose files are published).
fn kubectl_settings(
    a: &RunArgs,
    sim: Option<&super::sim::EmbeddedSim>,
    run_id: &str,
) -> Result<crate::framework::KubectlSettings, CliError> {
    let work_dir = std::env::temp_dir().join(format!("crossconf-kubectl-{run_id}"));
    std::fs::create_dir_all(&work_dir)
        .map_err(|e| CliError::Usage(format!("cannot create {}: {e}", work_dir.display())))?;
    let kubeconfig = match sim {
        Some(sim) => {
            let path = work_dir.join("kubeconfig");
            crate::report::artifacts::write_atomic(&path, sim.kubeconfig_yaml().as_bytes())
                .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", path.display())))?;
            Some(path)
        }
        None => a.cluster.kubeconfig.clone(),
    };
    Ok(crate::framework::KubectlSettings {
        binary: crate::framework::kubectl::find_kubectl(a.kubectl_path.as_deref()),
        kubeconfig,
        context: a.cluster.context.clone(),
        work_dir,
    })
}

fn finish(dir: &std::path::Path, metadata: &BTreeMap<String, String>, passed: bool) -> Result<(), CliError> {
    crate::report::prow::write_finished(dir, SystemTime::now(), passed, metadata).map_err(|e| CliError::usage(&e))
}
