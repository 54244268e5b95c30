//! Starting the control plane: [`ControlConfig`] says what runs, [`start`] runs it, and
//! [`ControlPlane`] is the handle to the running tasks.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::clock::{Clock, SystemClock};
use super::error::Result;
use super::events::Recorder;
use super::informer::Informers;

/// One loop of the control plane, by the name kube-controller-manager gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// kube-scheduler.
    Scheduler,
    /// Deletes the contents of terminating namespaces, then finalizes them.
    Namespace,
    /// Keeps a `default` ServiceAccount (and the `kube-root-ca.crt` ConfigMap) in every namespace.
    ServiceAccount,
    /// Endpoints and EndpointSlices for Services with selectors.
    Endpoints,
    /// ReplicaSets and ReplicationControllers.
    ReplicaSet,
    /// Deployments.
    Deployment,
    /// DaemonSets.
    DaemonSet,
    /// StatefulSets.
    StatefulSet,
    /// Jobs.
    Job,
    /// CronJobs.
    CronJob,
    /// The garbage collector (ownerReferences, foreground and orphan deletion).
    GarbageCollector,
    /// ResourceQuota usage.
    ResourceQuota,
    /// The node lifecycle controller: node health from heartbeats and Leases, the not-ready and
    /// unreachable taints, and pods on a failing node marked not ready.
    NodeLifecycle,
    /// PodDisruptionBudget status.
    Disruption,
    /// Fills the rules of ClusterRoles that have an `aggregationRule`.
    ClusterRoleAggregation,
    /// Fills legacy ServiceAccount token Secrets and deletes those of deleted accounts.
    ServiceAccountToken,
    /// Mirrors user-managed Endpoints of selectorless Services into EndpointSlices.
    EndpointSliceMirroring,
    /// Deletes pods from nodes with NoExecute taints they do not tolerate (or tolerate for a
    /// limited time).
    TaintEviction,
}

impl Component {
    /// Every component, in start order.
    pub const ALL: [Component; 18] = [
        Component::Scheduler,
        Component::Namespace,
        Component::ServiceAccount,
        Component::Endpoints,
        Component::ReplicaSet,
        Component::Deployment,
        Component::DaemonSet,
        Component::StatefulSet,
        Component::Job,
        Component::CronJob,
        Component::GarbageCollector,
        Component::ResourceQuota,
        Component::NodeLifecycle,
        Component::Disruption,
        Component::ClusterRoleAggregation,
        Component::ServiceAccountToken,
        Component::EndpointSliceMirroring,
        Component::TaintEviction,
    ];

    /// The name the `controller-stopped=NAME` fault switch uses for this loop.
    pub fn fault_name(self) -> &'static str {
        match self {
            Component::Scheduler => "scheduler",
            Component::Namespace => "namespace",
            Component::ServiceAccount => "serviceaccount",
            Component::Endpoints => "endpoints",
            Component::ReplicaSet => "replicaset",
            Component::Deployment => "deployment",
            Component::DaemonSet => "daemonset",
            Component::StatefulSet => "statefulset",
            Component::Job => "job",
            Component::CronJob => "cronjob",
            Component::GarbageCollector => "garbagecollector",
            Component::ResourceQuota => "resourcequota",
            Component::NodeLifecycle => "nodelifecycle",
            Component::Disruption => "disruption",
            Component::ClusterRoleAggregation => "clusterrole-aggregation",
            Component::ServiceAccountToken => "serviceaccount-token",
            Component::EndpointSliceMirroring => "endpointslice-mirroring",
            Component::TaintEviction => "taint-eviction",
        }
    }

    /// The component name events carry in `source.component` (upstream's).
    pub fn event_source(self) -> &'static str {
        match self {
            Component::Scheduler => "default-scheduler",
            Component::Namespace => "namespace-controller",
            Component::ServiceAccount => "service-account-controller",
            Component::Endpoints => "endpoint-controller",
            Component::ReplicaSet => "replicaset-controller",
            Component::Deployment => "deployment-controller",
            Component::DaemonSet => "daemonset-controller",
            Component::StatefulSet => "statefulset-controller",
            Component::Job => "job-controller",
            Component::CronJob => "cronjob-controller",
            Component::GarbageCollector => "garbage-collector-controller",
            Component::ResourceQuota => "resource-quota-controller",
            // Upstream's recorder for the node lifecycle controller says `node-controller`.
            Component::NodeLifecycle => "node-controller",
            Component::Disruption => "controllermanager",
            Component::ClusterRoleAggregation => "clusterrole-aggregation-controller",
            Component::ServiceAccountToken => "serviceaccount-token-controller",
            Component::EndpointSliceMirroring => "endpointslice-mirroring-controller",
            Component::TaintEviction => "taint-eviction-controller",
        }
    }
}

/// What the control plane runs and how.
#[derive(Debug, Clone)]
pub struct ControlConfig {
    /// Which loops run; default all. Tests leave one out to observe the world without it.
    pub components: BTreeSet<Component>,
    /// How often every loop re-examines everything even without a change (default 10 s, so a
    /// missed event costs at most that; upstream resyncs are longer but it has fewer misses).
    pub resync: Duration,
    /// The `schedulerName` pods must carry to be bound by this scheduler.
    pub scheduler_name: String,
    /// The clock for CronJob schedules, Job deadlines and timestamps written to objects.
    pub clock: Arc<dyn Clock>,
    /// The PEM of the cluster CA, published as `kube-root-ca.crt` in every namespace (upstream's
    /// root-ca-cert-publisher); `None` publishes nothing.
    pub root_ca_pem: Option<String>,
    /// The key legacy ServiceAccount token Secrets are signed with
    /// (`--service-account-private-key-file`: the API server's signing key).
    pub service_account_key: Arc<crate::api::auth::signing::SigningKey>,
    /// The cluster's fault switches (see [`crate::faults`]); loops consult them to
    /// misbehave on purpose.
    pub faults: Arc<crate::faults::Faults>,
    /// How often the node lifecycle controller checks node health (kube-controller-manager's
    /// `--node-monitor-period`, default 5 s).
    pub node_monitor_period: Duration,
    /// How long a node may go without renewing its Lease or posting status before the node
    /// lifecycle controller marks it Unknown (`--node-monitor-grace-period`, default
    /// [`DEFAULT_NODE_MONITOR_GRACE_PERIOD`]). Tests shorten it to see a lost node quickly.
    pub node_monitor_grace_period: Duration,
    /// The grace period for a node that has never posted a Ready condition
    /// (`--node-startup-grace-period`, default 60 s).
    pub node_startup_grace_period: Duration,
}

/// kube-controller-manager's default `--node-monitor-grace-period` in 1.33: 50 s (raised from
/// 40 s in 1.32 by kubernetes/kubernetes#126287, so it exceeds the kubelet's HTTP/2 health
/// check of 30 s + 15 s).
pub const DEFAULT_NODE_MONITOR_GRACE_PERIOD: Duration = Duration::from_secs(50);

impl Default for ControlConfig {
    fn default() -> Self {
        Self {
            components: Component::ALL.into_iter().collect(),
            resync: Duration::from_secs(10),
            scheduler_name: "default-scheduler".into(),
            clock: Arc::new(SystemClock),
            root_ca_pem: None,
            service_account_key: Arc::new(
                crate::api::auth::signing::SigningKey::generate()
                    .expect("the operating system's random number generator yields a signing key"),
            ),
            faults: Arc::default(),
            node_monitor_period: Duration::from_secs(5),
            node_monitor_grace_period: DEFAULT_NODE_MONITOR_GRACE_PERIOD,
            node_startup_grace_period: Duration::from_secs(60),
        }
    }
}

impl ControlConfig {
    /// Runs only `components`.
    #[must_use]
    pub fn only(mut self, components: &[Component]) -> Self {
        self.components = components.iter().copied().collect();
        self
    }

    /// Uses `clock` instead of the machine's.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

/// What every loop gets: the client, the shared caches, the clock and the configuration.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub(crate) client: kube::Client,
    pub(crate) informers: Informers,
    pub(crate) cfg: Arc<ControlConfig>,
    pub(crate) cancel: CancellationToken,
}

impl Ctx {
    /// The current simulated time.
    pub(crate) fn now(&self) -> jiff::Timestamp {
        self.cfg.clock.now()
    }

    /// An event recorder for `component`.
    pub(crate) fn recorder(&self, component: Component) -> Recorder {
        Recorder::new(self.client.clone(), component.event_source(), self.cfg.clock.clone())
    }
}

/// The running scheduler and controllers.
#[derive(Debug)]
pub struct ControlPlane {
    tasks: Vec<(Component, JoinHandle<()>)>,
}

impl ControlPlane {
    /// The components that were started.
    pub fn components(&self) -> Vec<Component> {
        self.tasks.iter().map(|(c, _)| *c).collect()
    }

    /// Waits until every loop has stopped (after the cancellation token fired).
    pub async fn stopped(self) {
        for (component, task) in self.tasks {
            if let Err(e) = task.await {
                tracing::error!(?component, error = %e, "control loop panicked");
            }
        }
    }
}

/// Starts the scheduler and every configured controller as tasks; they stop when `cancel` fires.
///
/// The loops talk to the API only through `client`, so the same control plane can drive a real
/// API server. Each waits for its caches' first list before its first pass.
///
/// # Errors
///
/// None today: failures inside a loop are logged and retried on the next pass, as upstream's
/// controllers do. The `Result` keeps room for start-up checks.
pub async fn start(client: kube::Client, cfg: ControlConfig, cancel: CancellationToken) -> Result<ControlPlane> {
    let informers = Informers::new(client.clone(), cancel.clone());
    let ctx = Ctx {
        client,
        informers,
        cfg: Arc::new(cfg),
        cancel,
    };
    let mut tasks = Vec::new();
    for component in ctx.cfg.components.iter().copied() {
        let c = ctx.clone();
        let task = match component {
            Component::Scheduler => spawn(component, super::scheduler::run(c)),
            Component::Namespace => spawn(component, super::namespace::run(c)),
            Component::ServiceAccount => spawn(component, super::serviceaccount::run(c)),
            Component::Endpoints => spawn(component, super::endpoints::run(c)),
            Component::ReplicaSet => spawn(component, super::replicaset::run(c)),
            Component::Deployment => spawn(component, super::deployment::run(c)),
            Component::DaemonSet => spawn(component, super::daemonset::run(c)),
            Component::StatefulSet => spawn(component, super::statefulset::run(c)),
            Component::Job => spawn(component, super::job::run(c)),
            Component::CronJob => spawn(component, super::cronjob::run(c)),
            Component::GarbageCollector => spawn(component, super::gc::run(c)),
            Component::ResourceQuota => spawn(component, super::quota::run(c)),
            Component::NodeLifecycle => spawn(component, super::nodelifecycle::run(c)),
            Component::Disruption => spawn(component, super::disruption::run(c)),
            Component::ClusterRoleAggregation => spawn(component, super::clusterroleaggregation::run(c)),
            Component::ServiceAccountToken => spawn(component, super::tokens::run(c)),
            Component::EndpointSliceMirroring => spawn(component, super::mirroring::run(c)),
            Component::TaintEviction => spawn(component, super::tainteviction::run(c)),
        };
        tasks.push((component, task));
    }
    tracing::info!(components = tasks.len(), "control plane started");
    Ok(ControlPlane { tasks })
}

fn spawn(component: Component, fut: impl Future<Output = Result<()>> + Send + 'static) -> JoinHandle<()> {
    tokio::spawn(async move {
        match fut.await {
            Ok(()) => tracing::debug!(?component, "control loop stopped"),
            Err(e) => tracing::error!(?component, error = %super::error::chain(&e), "control loop failed"),
        }
    })
}
