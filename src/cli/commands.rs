//! The subcommands other than `run`: list, sim, cleanup, doctor, images, dashboard.

use std::path::PathBuf;

use super::args::{CleanupArgs, ClusterArgs, Command, DashboardArgs, DoctorArgs, ImagesArgs, ListArgs, OutputFormat};
use super::sim::EmbeddedSim;
use super::{CliError, run};
use crate::catalog::Catalog;
use crate::cluster::{Cluster, ClusterSpec};
use crate::images::{ImageCatalog, RepoList};
use crate::os::Os;
use crate::select::{self, PlanContext, Provider, SelectionSpec, Suite};

/// Runs one subcommand.
pub(super) async fn dispatch(command: Command) -> Result<(), CliError> {
    match command {
        Command::List(a) => list(a).await,
        Command::Run(a) => run::run(*a).await,
        Command::Sim(a) => super::sim::serve(&a.options, a.kubeconfig_out.as_deref()).await,
        Command::Cleanup(a) => cleanup(a).await,
        Command::Doctor(a) => doctor(a).await,
        Command::Images(a) => images(a),
        Command::Dashboard(a) => dashboard(a),
    }
}

/// The catalogue of every case; duplicate names are a bug caught by a unit test.
pub(super) fn catalog() -> Catalog {
    Catalog::new(crate::cases::all()).expect("case names are unique (tested in cases::tests)")
}

/// A connected cluster, starting the embedded simulator first for `--sim`.
pub(super) async fn connect(c: &ClusterArgs) -> Result<(Cluster, Option<EmbeddedSim>), CliError> {
    let (spec, sim) = if c.sim {
        let sim = EmbeddedSim::start(&c.sim_options).await?;
        (ClusterSpec::Config(Box::new(sim.kube_config())), Some(sim))
    } else if let Some(path) = &c.kubeconfig {
        (
            ClusterSpec::Kubeconfig {
                path: path.clone(),
                context: c.context.clone(),
            },
            None,
        )
    } else {
        (
            ClusterSpec::Default {
                context: c.context.clone(),
            },
            None,
        )
    };
    match Cluster::connect(spec).await {
        Ok(cluster) => Ok((cluster, sim)),
        Err(e) => {
            if let Some(sim) = sim {
                sim.shutdown().await;
            }
            Err(CliError::usage(&e))
        }
    }
}

/// `--provider`, defaulting as e2e.test does (`skeleton`), or to `sim` on the simulated cluster,
/// which no other provider describes.
pub(super) fn provider(
    s: &super::args::SelectionArgs,
    cluster: &super::args::ClusterArgs,
) -> Result<Provider, CliError> {
    let default = if cluster.sim { Provider::SIM } else { Provider::SKELETON };
    let provider = match &s.provider {
        None => default,
        Some(name) => name.parse::<Provider>().map_err(|e| CliError::usage(&e))?,
    };
    if cluster.sim && provider != Provider::SIM {
        return Err(CliError::Usage(format!(
            "--provider {provider} contradicts --sim: the simulated cluster is provider sim"
        )));
    }
    Ok(provider)
}

/// The selection flags (plus suite) compiled, with the target OS they imply.
pub(super) fn selection(
    s: &super::args::SelectionArgs,
    shard: Option<&str>,
    rerun: Option<&PathBuf>,
) -> Result<(select::Selection, Os, Option<Suite>), CliError> {
    let suite = s
        .suite
        .as_ref()
        .map(|p| Suite::load(p))
        .transpose()
        .map_err(|e| CliError::usage(&e))?;
    let target = s
        .node_os_distro
        .map(Os::from)
        .or(suite.as_ref().and_then(|s| s.node_os_distro))
        .unwrap_or(Os::Windows);
    let shard = shard
        .map(|text| text.parse::<select::Shard>())
        .transpose()
        .map_err(|e| CliError::usage(&e))?;
    let rerun = rerun
        .map(|p| select::RerunSet::load(p))
        .transpose()
        .map_err(|e| CliError::usage(&e))?;
    let spec = SelectionSpec {
        focus: s.focus.clone(),
        skip: s.skip.clone(),
        label_filter: s.label_filter.clone(),
        suite: suite.clone(),
        shard,
        rerun,
    };
    let compiled = spec.compile().map_err(|e| CliError::usage(&e))?;
    Ok((compiled, target, suite))
}

/// The image catalogue with the registry override file applied (flag, else
/// `KUBE_TEST_REPO_LIST`).
pub(super) fn image_catalog(flag: Option<&PathBuf>) -> Result<ImageCatalog, CliError> {
    let path = flag.cloned().or_else(|| {
        std::env::var_os("KUBE_TEST_REPO_LIST")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let catalog = ImageCatalog::load_default();
    match path {
        Some(p) => {
            let list = RepoList::from_file(&p).map_err(|e| CliError::usage(&e))?;
            Ok(catalog.with_overrides(&list))
        }
        None => Ok(catalog),
    }
}

async fn list(a: ListArgs) -> Result<(), CliError> {
    let (selection, target, _) = selection(&a.selection, None, None)?;
    let provider = provider(&a.selection, &a.cluster)?;
    let catalog = catalog();
    let mut ctx = PlanContext::new(target);
    ctx.provider = provider;
    // The cluster is only consulted when named: listing must work with no cluster at all.
    let explicit = a.cluster.sim || a.cluster.kubeconfig.is_some() || a.cluster.context.is_some();
    let mut sim = None;
    if explicit {
        let (cluster, s) = connect(&a.cluster).await?;
        sim = s;
        ctx.missing_pools = Os::ALL
            .into_iter()
            .filter(|os| !cluster.pools().has_pool(*os))
            .collect();
    }
    let plan = select::plan(&catalog, &selection, &ctx);
    match a.output {
        OutputFormat::Json => println!("{}", plan.to_json_listing(&catalog)),
        OutputFormat::Text => print!("{}", plan.to_text_listing()),
    }
    if let Some(sim) = sim {
        sim.shutdown().await;
    }
    Ok(())
}

async fn cleanup(a: CleanupArgs) -> Result<(), CliError> {
    let (cluster, sim) = connect(&a.cluster).await?;
    let selector = match &a.run_id {
        Some(id) => format!("{}={id}", crate::framework::RUN_ID_LABEL),
        None => crate::framework::RUN_ID_LABEL.to_string(),
    };
    let result =
        crate::run::cleanup::delete_labelled(cluster.client(), &selector, std::time::Duration::from_secs(300)).await;
    if let Some(sim) = sim {
        sim.shutdown().await;
    }
    let report = result.map_err(|e| CliError::usage(&e))?;
    println!("{report}");
    Ok(())
}

async fn doctor(a: DoctorArgs) -> Result<(), CliError> {
    let images = image_catalog(a.kube_test_repo_list.as_ref())?;
    let (cluster, sim) = connect(&a.cluster).await?;
    let checks = crate::run::doctor::run_checks(&cluster, &images, &catalog()).await;
    if let Some(sim) = sim {
        sim.shutdown().await;
    }
    match a.output {
        OutputFormat::Json => println!("{}", crate::run::doctor::render_json(&checks)),
        OutputFormat::Text => print!("{}", crate::run::doctor::render_table(&checks)),
    }
    if crate::run::doctor::worst_failed(&checks) {
        Err(CliError::ChecksFailed)
    } else {
        Ok(())
    }
}

fn images(a: ImagesArgs) -> Result<(), CliError> {
    let catalog = image_catalog(a.kube_test_repo_list.as_ref())?;
    let builds = ImageCatalog::known_windows_builds();
    match a.output {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&crate::images::render_json(&catalog, &builds)).unwrap_or_default()
        ),
        OutputFormat::Text => print!("{}", crate::images::render_table(&catalog, &builds)),
    }
    Ok(())
}

fn dashboard(a: DashboardArgs) -> Result<(), CliError> {
    let runs = a
        .results
        .iter()
        .map(|d| crate::dashboard::load_run(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::usage(&e))?;
    let html = crate::dashboard::render(&runs);
    crate::report::artifacts::write_atomic(&a.out, html.as_bytes()).map_err(|e| CliError::usage(&e))?;
    eprintln!("dashboard with {} run(s) written to {}", runs.len(), a.out.display());
    Ok(())
}
