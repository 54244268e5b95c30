//! What a case body uses: its namespace, OS-aware pod builders, waits built on watches, exec,
//! logs, proxies, the netexec client and failure dumps.
//!
//! The main type is [`Framework`], one per case attempt. It owns the case's namespace, its
//! deadline and its step log; the executor creates it, runs the body, dumps artifacts on
//! failure and tears the namespace down. A body therefore reads like the upstream `It` block it
//! mirrors: intent only, no plumbing.

mod context;
mod defer;
pub mod dump;
mod exec;
pub mod health;
pub mod kubectl;
mod namespace;
pub mod netexec;
pub mod pods;
mod proxy;
mod rest;
pub mod services;
pub mod stats;
pub mod update;
pub mod wait;
pub mod watch_events;
pub mod webhook;
pub mod workloads;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::cluster::{NodeInfo, Pools};
use crate::os::Os;

pub use context::{CaseSettings, ImageResolver, RunContext};
pub use defer::{delete_ignoring_absent, delete_with};
pub use dump::dump_namespace;
pub use exec::ExecOutput;
pub use kubectl::{KubectlOutput, KubectlSettings};
pub use namespace::{CASE_LABEL, RUN_ID_LABEL, delete_namespace, label_slug, namespace_labels};
pub use netexec::{DialResponse, Protocol};
pub use pods::{ContainerBuilder, PodBuilder, pod_ip, pod_node};

/// How long before the case deadline waits give up, so their own message wins the race
/// against the executor's timeout (one watch round trip, the node note, bounded to 2 s, and the
/// failure dump fit in it).
const WAIT_MARGIN: Duration = Duration::from_secs(4);
/// The result of a case body.
pub type CaseResult = Result<(), CaseError>;

/// Why a case body did not pass.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseError {
    /// An assertion failed: what was expected, what was seen, and where.
    Failed(String),
    /// The case skipped itself at run time (no GMSA domain, a pool missing…).
    Skipped(String),
}

impl CaseError {
    /// A failure with `message`.
    pub fn failed(message: impl Into<String>) -> CaseError {
        CaseError::Failed(message.into())
    }

    /// Adds context in front of a failure message (`context: message`); skips pass through.
    #[must_use]
    pub fn context(self, context: impl fmt::Display) -> CaseError {
        match self {
            CaseError::Failed(m) => CaseError::Failed(format!("{context}: {m}")),
            skip => skip,
        }
    }
}

impl fmt::Display for CaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaseError::Failed(m) => write!(f, "{m}"),
            CaseError::Skipped(r) => write!(f, "skipped: {r}"),
        }
    }
}

impl From<kube::Error> for CaseError {
    /// An API error inside a case body is a case failure, reported with the server's words.
    fn from(e: kube::Error) -> CaseError {
        CaseError::Failed(format!("API request failed: {}", render_kube_error(&e)))
    }
}

/// Renders a kube error with its source chain once (the chain is not repeated elsewhere).
pub fn render_kube_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} ({} {})", status.message, status.code, status.reason),
        other => {
            let mut out = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(s) = source {
                let text = s.to_string();
                if !out.contains(&text) {
                    out.push_str(": ");
                    out.push_str(&text);
                }
                source = s.source();
            }
            out
        }
    }
}

/// Fails the case with a formatted message unless `cond` holds.
///
/// The message should say what was expected, what was seen, and on which node or pod.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err($crate::framework::CaseError::Failed(format!($($arg)+)));
        }
    };
}

/// Fails the case with a formatted message.
#[macro_export]
macro_rules! fail {
    ($($arg:tt)+) => {
        return Err($crate::framework::CaseError::Failed(format!($($arg)+)))
    };
}

/// The context of one case attempt.
pub struct Framework {
    run: Arc<RunContext>,
    case_name: String,
    namespace: String,
    deadline: Instant,
    log: Arc<Mutex<String>>,
    properties: Arc<Mutex<Vec<(String, String)>>>,
    deferred: defer::DeferredCleanups,
}

/// Upstream `framework.PodStartTimeout`: how long a single pod may take to start.
pub const POD_START_TIMEOUT: Duration = Duration::from_secs(5 * 60);

impl Framework {
    /// Creates the case's namespace and waits for its default ServiceAccount, as upstream's
    /// `BeforeEach` does (pods are refused until the account exists).
    ///
    /// # Errors
    /// A [`CaseError::Failed`] naming the step that failed.
    pub async fn setup(run: Arc<RunContext>, case_name: &str, timeout: Duration) -> Result<Framework, CaseError> {
        let deadline = Instant::now() + timeout;
        let namespace = namespace::create(&run, case_name).await?;
        let f = Framework {
            run,
            case_name: case_name.to_string(),
            namespace,
            deadline,
            log: Arc::default(),
            properties: Arc::default(),
            deferred: defer::DeferredCleanups::default(),
        };
        f.wait_default_service_account().await?;
        Ok(f)
    }

    /// The shared run context.
    pub fn run(&self) -> &RunContext {
        &self.run
    }

    /// The client.
    pub fn client(&self) -> Client {
        self.run.client.clone()
    }

    /// The case's namespace.
    pub fn ns(&self) -> &str {
        &self.namespace
    }

    /// The case's full name.
    pub fn case_name(&self) -> &str {
        &self.case_name
    }

    /// The target OS (`--node-os-distro`).
    pub fn target_os(&self) -> Os {
        self.run.target_os
    }

    /// Case settings (external endpoint, density pod count…).
    pub fn settings(&self) -> &CaseSettings {
        &self.run.settings
    }

    /// When the case's time runs out.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Time left for waiting: the case deadline less a short margin, so a wait bounded by it
    /// ends (and says what it waited for) before the executor's timeout cuts the case off with
    /// a bare "timed out".
    pub fn remaining(&self) -> Duration {
        self.deadline
            .saturating_duration_since(Instant::now())
            .saturating_sub(WAIT_MARGIN)
    }

    /// An API handle scoped to the case namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.run.client.clone(), &self.namespace)
    }

    /// An API handle for cluster-scoped resources (nodes, priority classes…).
    pub fn api_all<K>(&self) -> Api<K>
    where
        K: Resource + Clone + DeserializeOwned + fmt::Debug,
        <K as Resource>::DynamicType: Default,
    {
        Api::all(self.run.client.clone())
    }

    /// Records a step in the case's log (the JUnit `system-out`), like ginkgo's `By`.
    pub fn step(&self, what: impl fmt::Display) {
        let elapsed = self.run.started.elapsed();
        let line = format!("[{:>7.1}s] STEP: {what}\n", elapsed.as_secs_f64());
        tracing::debug!(case = %self.case_name, "{}", line.trim_end());
        self.log.lock().expect("log lock").push_str(&line);
    }

    /// Records a figure as a JUnit property (TestGrid shows numeric ones as metrics).
    pub fn property(&self, name: impl Into<String>, value: impl fmt::Display) {
        self.properties
            .lock()
            .expect("properties lock")
            .push((name.into(), value.to_string()));
    }

    /// The step log so far.
    pub fn log_text(&self) -> String {
        self.log.lock().expect("log lock").clone()
    }

    /// The recorded properties.
    pub fn properties(&self) -> Vec<(String, String)> {
        self.properties.lock().expect("properties lock").clone()
    }

    /// Skips the case with `reason`.
    pub fn skip(&self, reason: impl Into<String>) -> CaseError {
        CaseError::Skipped(reason.into())
    }

    /// Skips the case with `reason` unless `cond` holds.
    ///
    /// # Errors
    /// [`CaseError::Skipped`] when `cond` is false.
    pub fn skip_unless(&self, cond: bool, reason: impl Into<String>) -> CaseResult {
        if cond {
            Ok(())
        } else {
            Err(CaseError::Skipped(reason.into()))
        }
    }

    /// The node pools as read at run start.
    pub fn pools(&self) -> &Pools {
        &self.run.pools
    }

    /// Ready, schedulable nodes of `os`, read fresh from the API (upstream
    /// `GetReadySchedulableNodes`).
    ///
    /// # Errors
    /// When listing nodes fails.
    pub async fn schedulable_nodes(&self, os: Os) -> Result<Vec<NodeInfo>, CaseError> {
        let pools = Pools::read(&self.run.client).await?;
        Ok(pools.schedulable(os).into_iter().cloned().collect())
    }

    /// Fails unless at least `n` schedulable nodes of `os` exist; returns them.
    ///
    /// A case that found nothing to check must fail, not pass: zero nodes is a failure here.
    ///
    /// # Errors
    /// A failure naming how many nodes were found.
    pub async fn require_nodes(&self, os: Os, n: usize) -> Result<Vec<NodeInfo>, CaseError> {
        let nodes = self.schedulable_nodes(os).await?;
        if nodes.len() < n {
            return Err(CaseError::Failed(format!(
                "expected at least {n} schedulable {os} node(s), found {}: [{}]",
                nodes.len(),
                nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        Ok(nodes)
    }

    /// Resolves a logical image name for `os` (and the pool's Windows build).
    ///
    /// # Errors
    /// When the catalogue has no such image or no variant for the OS.
    pub fn image(&self, logical: &str, os: Os) -> Result<String, CaseError> {
        self.run.image(logical, os)
    }

    async fn wait_default_service_account(&self) -> CaseResult {
        use k8s_openapi::api::core::v1::ServiceAccount;
        let api: Api<ServiceAccount> = self.api();
        self.wait_for_within(
            &api,
            "default",
            |sa: Option<&ServiceAccount>| sa.is_some(),
            "the namespace's default ServiceAccount to exist",
            Duration::from_secs(60),
        )
        .await
        .map(|_| ())
    }
}
