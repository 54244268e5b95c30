//! What every case of one run shares: the client, the run id, the target OS, the pools and the
//! image catalogue.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use kube::Client;

use super::CaseError;
use crate::cluster::Pools;
use crate::os::Os;

/// Settings a few cases read (from the CLI or the suite).
#[derive(Debug, Clone, Default)]
pub struct CaseSettings {
    /// `--external-endpoint HOST:PORT`: a TCP/UDP endpoint outside the cluster network for the
    /// egress cases. The simulator provides one on loopback; on a real cluster the egress cases
    /// skip with a reason unless it is given.
    pub external_endpoint: Option<String>,
    /// A name that resolves (through the node's resolver) to the external endpoint.
    pub external_name: Option<String>,
    /// `--density-pods N` for the density case (upstream: 10).
    pub density_pods: Option<usize>,
    /// Where kubectl is and how it reaches the cluster, for the `[sig-cli]` cases.
    pub kubectl: super::KubectlSettings,
}

/// The shared context of one run.
pub struct RunContext {
    /// The API client.
    pub client: Client,
    /// The value of the `crossconf.io/run-id` label on everything this run creates.
    pub run_id: String,
    /// `--node-os-distro`.
    pub target_os: Os,
    /// Node pools read at run start.
    pub pools: Pools,
    /// The image catalogue, overrides applied.
    pub images: Arc<dyn ImageResolver>,
    /// The report directory; failure artifacts go to `<report-dir>/cases/<slug>/`.
    pub artifacts_dir: PathBuf,
    /// Case settings.
    pub settings: CaseSettings,
    /// When the run started (step log timestamps are relative to it).
    pub started: Instant,
}

impl RunContext {
    /// Resolves a logical image for `os`, using the build of the pool's Windows nodes.
    ///
    /// # Errors
    /// When the catalogue has no such image or no variant for the OS/build.
    pub fn image(&self, logical: &str, os: Os) -> Result<String, CaseError> {
        let builds = if os == Os::Windows {
            self.pools.windows_builds()
        } else {
            Vec::new()
        };
        let build = builds.first().map(String::as_str);
        self.images
            .resolve_reference(logical, os, build)
            .map_err(|e| CaseError::Failed(format!("image {logical:?} for {os}: {e}")))
    }
}

/// Resolves logical image names to references; the image catalogue implements it, tests may
/// substitute a fixed table.
pub trait ImageResolver: Send + Sync {
    /// The reference of `logical` for `os` (and Windows `build`), or why there is none.
    ///
    /// # Errors
    /// A one-line reason (unknown image, no variant for the OS or build).
    fn resolve_reference(&self, logical: &str, os: Os, build: Option<&str>) -> Result<String, String>;
}

/// The image catalogue lives in the shared model crate; the framework reads it through this trait.
impl ImageResolver for crate::images::ImageCatalog {
    fn resolve_reference(&self, logical: &str, os: Os, build: Option<&str>) -> Result<String, String> {
        self.resolve(logical, os, build)
            .map(|r| r.reference)
            .map_err(|e| e.to_string())
    }
}
