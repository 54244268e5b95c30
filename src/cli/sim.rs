//! The one place the harness reaches the simulated cluster: `--sim` and `crossconf sim`.
//!
//! The main type in this module is [`EmbeddedSim`], a simulated cluster this process started.
//! Everything else of the harness (cases, framework, runner) meets the simulator only through
//! the Kubernetes API, as it meets a real cluster; `tests/crate_boundary.rs` keeps it so.
//!
//! With the default `sim` feature off (a lean runner image for real clusters), the flags still
//! parse, and asking for the simulator is a usage error naming the missing feature, so a job
//! script that passes `--sim` to such a build fails with one clear line rather than a clap error.

use std::path::Path;

use super::CliError;
use super::args::SimOptions;

#[cfg(feature = "sim")]
mod imp {
    use super::{CliError, SimOptions};
    use crossconf_sim::{SimCluster, SimConfig};

    /// A simulated cluster started by this process for `--sim`.
    pub struct EmbeddedSim(SimCluster);

    /// The simulator configuration from its flags.
    fn config(o: &SimOptions) -> Result<SimConfig, CliError> {
        SimConfig::from_options(
            o.windows_nodes,
            o.linux_nodes,
            &o.windows_build,
            o.windows_taint.as_deref(),
            &o.profile,
            o.time_scale,
            o.faults.as_deref(),
        )
        .and_then(|c| match &o.feature_gates {
            Some(spec) => c.with_feature_gates(spec),
            None => Ok(c),
        })
        .and_then(|c| match &o.windows_containerd {
            Some(spec) => c.with_windows_containerd(spec),
            None => Ok(c),
        })
        .and_then(|c| c.with_gmsa_domain(o.gmsa_domain))
        .and_then(|c| c.with_hyperv(o.hyperv))
        .map_err(|e| CliError::usage(&e))
    }

    impl EmbeddedSim {
        /// Starts the simulator and waits until its API server answers and its nodes are Ready.
        pub async fn start(o: &SimOptions) -> Result<EmbeddedSim, CliError> {
            let sim = SimCluster::start(config(o)?).await.map_err(|e| CliError::usage(&e))?;
            Ok(EmbeddedSim(sim))
        }

        /// The client configuration of its admin user.
        pub fn kube_config(&self) -> kube::Config {
            self.0.kube_config()
        }

        /// Its kubeconfig file, for other clients.
        pub fn kubeconfig_yaml(&self) -> String {
            self.0.kubeconfig_yaml()
        }

        /// The API server's URL.
        pub fn server_url(&self) -> &str {
            self.0.server_url()
        }

        /// The emulated host outside the cluster network (for the egress cases).
        pub fn external_endpoint(&self) -> String {
            self.0.external_endpoint()
        }

        /// A name the nodes' resolver maps to that host.
        pub fn external_name(&self) -> String {
            self.0.external_name()
        }

        /// Stops every node, controller and the API server.
        pub async fn shutdown(self) {
            self.0.shutdown().await;
        }
    }
}

#[cfg(not(feature = "sim"))]
mod imp {
    use super::{CliError, SimOptions};

    const MISSING: &str =
        "this crossconf was built without the simulated cluster (cargo feature `sim`); use --kubeconfig";

    /// Uninhabited: without the feature no simulated cluster can exist.
    pub enum EmbeddedSim {}

    impl EmbeddedSim {
        /// Always a usage error naming the missing feature.
        pub async fn start(_: &SimOptions) -> Result<EmbeddedSim, CliError> {
            Err(CliError::Usage(MISSING.into()))
        }
        pub fn kube_config(&self) -> kube::Config {
            match *self {}
        }
        pub fn kubeconfig_yaml(&self) -> String {
            match *self {}
        }
        pub fn server_url(&self) -> &str {
            match *self {}
        }
        pub fn external_endpoint(&self) -> String {
            match *self {}
        }
        pub fn external_name(&self) -> String {
            match *self {}
        }
        pub async fn shutdown(self) {
            match self {}
        }
    }
}

pub use imp::EmbeddedSim;

/// `crossconf sim`: starts the simulated cluster in the foreground, writes its kubeconfig once
/// the API server answers (so scripts can wait for the file), and stops it on SIGINT/SIGTERM.
pub(super) async fn serve(options: &SimOptions, kubeconfig_out: Option<&Path>) -> Result<(), CliError> {
    let sim = EmbeddedSim::start(options).await?;
    if let Some(path) = kubeconfig_out {
        crate::report::artifacts::write_atomic(path, sim.kubeconfig_yaml().as_bytes())
            .map_err(|e| CliError::usage(&e))?;
        eprintln!("kubeconfig written to {}", path.display());
    }
    eprintln!(
        "simulated cluster ready: API server {} ({} Windows + {} Linux nodes); Ctrl-C to stop",
        sim.server_url(),
        options.windows_nodes,
        options.linux_nodes
    );
    wait_for_signal().await;
    eprintln!("stopping the simulated cluster");
    sim.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
