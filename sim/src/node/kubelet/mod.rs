//! The kubelet: registers the Node, heartbeats (status and Lease), and runs the pods bound to
//! it through the emulated runtime, reporting status and events as a real kubelet does.
//!
//! The main types are [`NodeConfig`] (what [`start_node`] needs) and [`NodeHandle`]. Each pod
//! gets a worker task: sandbox (with the Windows hostNetwork rule), pod IP from the node's
//! range, volumes, init containers in order, then one supervisor per container (image pull
//! with pull policy, creation checks, start, probes, hooks, restarts with CrashLoopBackOff),
//! and graceful termination when the pod is deleted.
//!
//! Split by concept: `node_status` (the Node object, its status heartbeat and Lease),
//! `events`, `pod_worker` (the pod watch and each pod's sync: sandbox, IP, volumes, init then
//! app containers, active deadline), `volumes` (periodic volume resync), `restart` (one
//! container's supervisor with CrashLoopBackOff), `image_pull`, `container` (creating and
//! starting one container run), `hooks`, `probes`, `termination` (graceful stop), `status`
//! (pod status computation and writing), `exec` (exec and logs for the kubelet server) and
//! `node_health` (the `node-flap` and `node-lost` switches as the kubelet lives them).
//! This file keeps the configuration, the shared runtime state and [`start_node`].

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod, Service, Taint};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::addr::AddressBlock;
use crate::node::dns::PodDns;
use crate::node::fs::PodVolumes;
use crate::node::net::SimNet;
use crate::node::profile::LatencyProfile;
use crate::node::programs::{Ctx, Usage};
use crate::node::registry::Image;
use crate::node::runtime::{self, CState, LogBuffer};
use crossconf_model::os::Os;

mod admission;
mod container;
mod ephemeral;
mod events;
mod eviction;
mod exec;
pub(crate) mod gmsa;
mod hooks;
pub(crate) mod host_process;
pub mod hyperv;
mod image_pull;
mod job_launch;
pub(crate) mod metrics;
mod node_health;
mod node_status;
mod pod_worker;
pub(crate) mod power;
mod probes;
mod restart;
mod restart_rules;
mod status;
mod subpath;
mod termination;
mod volumes;

pub use exec::ExecError;
pub(crate) use exec::log_text;
use node_status::{heartbeat, lease_loop};
use pod_worker::pod_watch;

/// Errors starting a node.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// The Node object could not be registered.
    #[error("register node {node}")]
    Register {
        /// The node.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The node's root directory could not be created.
    #[error("create node directory {path}")]
    RootDir {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The kubelet server could not start.
    #[error("start kubelet server")]
    Server(#[source] crate::node::server::ServerError),
}

/// Node capacity (what `status.capacity` shows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capacity {
    /// CPU in millicores.
    pub cpu_millis: u64,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage_bytes: u64,
    /// Maximum pods.
    pub pods: u32,
}

impl Default for Capacity {
    fn default() -> Self {
        Capacity {
            cpu_millis: 4000,
            memory_bytes: 16 << 30,
            ephemeral_storage_bytes: 100 << 30,
            pods: 110,
        }
    }
}

/// Reserved resources and the hard eviction threshold, as `/configz` reports them; allocatable
/// is capacity minus all three (the kubelet's node allocatable formula).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reserved {
    /// kubeReserved CPU (millicores).
    pub kube_cpu_millis: u64,
    /// kubeReserved memory (bytes).
    pub kube_memory_bytes: u64,
    /// systemReserved CPU (millicores).
    pub system_cpu_millis: u64,
    /// systemReserved memory (bytes).
    pub system_memory_bytes: u64,
    /// evictionHard memory.available (bytes).
    pub eviction_memory_bytes: u64,
}

impl Default for Reserved {
    fn default() -> Self {
        Reserved {
            kube_cpu_millis: 100,
            kube_memory_bytes: 500 << 20,
            system_cpu_millis: 100,
            system_memory_bytes: 500 << 20,
            eviction_memory_bytes: 100 << 20,
        }
    }
}

/// Everything one kubelet needs.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Node name.
    pub name: String,
    /// Node OS.
    pub os: Os,
    /// Windows build (`10.0.20348`); required for Windows nodes.
    pub windows_build: Option<String>,
    /// The containerd version the node runs (`1.7.27`), reported as
    /// `nodeInfo.containerRuntimeVersion`; on Windows it also decides how HostProcess
    /// containers are launched (see [`host_process::Flavour`]).
    pub runtime_version: String,
    /// The runtime handlers the node's containerd is configured with (RuntimeClass
    /// `handler`s it can run; see [`hyperv`]).
    pub runtime_handlers: Vec<String>,
    /// The node's index in the address plan (`addr.node(i)`, `addr.pod(i, n)`).
    pub index: usize,
    /// The cluster's address block.
    pub block: AddressBlock,
    /// Taints registered with the node.
    pub taints: Vec<Taint>,
    /// Latency profile.
    pub profile: LatencyProfile,
    /// Directory for this node's pods and volumes (a per-cluster temp dir).
    pub root_dir: PathBuf,
    /// Capacity.
    pub capacity: Capacity,
    /// Reserved resources and eviction threshold.
    pub reserved: Reserved,
    /// Graceful node shutdown (`shutdownGracePeriod`, `shutdownGracePeriodCriticalPods` and
    /// the OS's shutdown manager gate).
    pub shutdown: power::ShutdownConfig,
    /// Labels the node registers with besides the well-known ones (an operator's node pool
    /// label such as `agentpool=windowsgmsa`).
    pub labels: Vec<(String, String)>,
}

impl NodeConfig {
    /// A node with default capacity and reservations.
    pub fn new(name: &str, os: Os, index: usize, block: AddressBlock, root_dir: PathBuf) -> Self {
        NodeConfig {
            name: name.into(),
            os,
            windows_build: (os == Os::Windows).then(|| "10.0.20348".to_string()),
            runtime_version: DEFAULT_CONTAINERD.into(),
            runtime_handlers: hyperv::handlers(os, false),
            index,
            block,
            taints: vec![],
            profile: LatencyProfile::fast(),
            root_dir,
            capacity: Capacity::default(),
            reserved: Reserved::default(),
            // The Windows kubelets are configured for graceful node shutdown (their manager
            // runs only with its gate on); the Linux ones are not.
            shutdown: if os == Os::Windows {
                power::ShutdownConfig {
                    grace: Duration::from_secs(10),
                    critical: Duration::from_secs(5),
                    gate: false,
                }
            } else {
                power::ShutdownConfig::default()
            },
            labels: Vec::new(),
        }
    }

    /// Allocatable CPU (millicores).
    pub fn allocatable_cpu_millis(&self) -> u64 {
        self.capacity
            .cpu_millis
            .saturating_sub(self.reserved.kube_cpu_millis + self.reserved.system_cpu_millis)
    }

    /// Allocatable memory (bytes).
    pub fn allocatable_memory_bytes(&self) -> u64 {
        self.capacity.memory_bytes.saturating_sub(
            self.reserved.kube_memory_bytes + self.reserved.system_memory_bytes + self.reserved.eviction_memory_bytes,
        )
    }
}

/// The kubelet version nodes report.
pub const KUBELET_VERSION: &str = "v1.33.0";
/// The containerd version nodes run unless configured otherwise.
pub const DEFAULT_CONTAINERD: &str = "1.7.27";

/// A running kubelet.
#[derive(Clone)]
pub struct NodeHandle {
    kubelet: Arc<Kubelet>,
    server_addr: SocketAddr,
}

impl std::fmt::Debug for NodeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHandle")
            .field("name", &self.kubelet.cfg.name)
            .finish_non_exhaustive()
    }
}

impl NodeHandle {
    /// The node name.
    pub fn name(&self) -> &str {
        &self.kubelet.cfg.name
    }
    /// The node's InternalIP.
    pub fn ip(&self) -> Ipv4Addr {
        self.kubelet.cfg.block.node(self.kubelet.cfg.index)
    }
    /// Where the kubelet HTTPS server listens.
    pub fn kubelet_addr(&self) -> SocketAddr {
        self.server_addr
    }
    /// Stops the kubelet (its pods' programs stop too).
    pub fn stop(&self) {
        self.kubelet.cancel.cancel();
    }
}

/// One container of a pod, as the runtime tracks it.
#[derive(Debug)]
pub(crate) struct Ctr {
    pub name: String,
    pub image: String,
    pub state: CState,
    pub last: Option<CState>,
    pub restart_count: u32,
    pub ready: bool,
    pub started: bool,
    pub image_id: Option<String>,
    pub container_id: Option<String>,
    pub logs: Arc<LogBuffer>,
    pub prev_logs: Option<Arc<LogBuffer>>,
    pub usage: Arc<Usage>,
    pub cpu_ns: Arc<AtomicU64>,
    pub cpu_rate: Arc<AtomicU64>,
    pub exec: Option<Ctx>,
    /// The running process's standard input (`stdin: true`), which attach writes to.
    pub stdin: Option<crate::node::programs::StdinWriter>,
    pub stdin_once: bool,
    pub tty: bool,
    pub run_stop: Option<CancellationToken>,
    pub run_kill: Option<CancellationToken>,
    pub cpu_limit_millis: Option<u64>,
    pub memory_limit: Option<u64>,
    pub base_memory: u64,
}

impl Ctr {
    /// A container not started yet. Its first Waiting reason is the kubelet's default
    /// (`convertToAPIContainerStatuses`): `PodInitializing` in a pod with init containers (for
    /// the init and the app containers alike), `ContainerCreating` otherwise.
    pub(super) fn new(c: &Container, pod_has_init: bool) -> Self {
        let res = c.resources.clone().unwrap_or_default();
        let lim = |k: &str| {
            res.limits
                .as_ref()
                .and_then(|m| m.get(k))
                .and_then(|q| runtime::parse_quantity(&q.0))
        };
        Ctr {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: CState::waiting(
                if pod_has_init {
                    "PodInitializing"
                } else {
                    "ContainerCreating"
                },
                None,
            ),
            last: None,
            restart_count: 0,
            ready: false,
            started: false,
            image_id: None,
            container_id: None,
            logs: Arc::new(LogBuffer::default()),
            prev_logs: None,
            usage: Arc::new(Usage::default()),
            cpu_ns: Arc::new(AtomicU64::new(0)),
            cpu_rate: Arc::new(AtomicU64::new(0)),
            exec: None,
            stdin: None,
            stdin_once: c.stdin_once == Some(true),
            tty: c.tty == Some(true),
            run_stop: None,
            run_kill: None,
            cpu_limit_millis: lim("cpu").map(|c| (c * 1000.0).round() as u64),
            memory_limit: lim("memory").map(|m| m as u64),
            base_memory: 0,
        }
    }
}

/// A pod condition as last reported: status, transition time, reason, message.
pub(crate) type CondState = (bool, jiff::Timestamp, Option<String>, Option<String>);

#[derive(Debug, Default)]
pub(crate) struct PodState {
    pub ip: Option<Ipv4Addr>,
    pub ip_index: Option<usize>,
    pub start_time: Option<jiff::Timestamp>,
    pub sandbox_ready: bool,
    /// The sandbox the runtime created (its handler and isolation), once it is.
    pub sandbox: Option<hyperv::Sandbox>,
    pub init: Vec<Ctr>,
    pub main: Vec<Ctr>,
    /// Ephemeral containers, in the order they were added to the spec.
    pub ephemeral: Vec<Ctr>,
    pub init_done: bool,
    pub failed: Option<(String, String)>,
    pub conditions: BTreeMap<&'static str, CondState>,
    pub dns: Option<Result<PodDns, String>>,
    pub volumes: Option<PodVolumes>,
}

impl PodState {
    /// The container at `idx` of the list `role` names.
    pub fn ctr(&self, role: Role, idx: usize) -> &Ctr {
        match role {
            Role::Init => &self.init[idx],
            Role::App => &self.main[idx],
            Role::Ephemeral => &self.ephemeral[idx],
        }
    }
}

/// One pod on this node.
pub(crate) struct PodRt {
    pub uid: String,
    pub name: String,
    pub namespace: String,
    pub pod: Mutex<Pod>,
    pub state: Mutex<PodState>,
    /// The containers' `restartPolicyRules`, read from the raw pod before any container starts
    /// (the typed pod has no such field); unset until then.
    pub rules: std::sync::OnceLock<restart_rules::PodRules>,
    dirty: Notify,
    deleting: CancellationToken,
    /// Cancelled when the pod's containers must not be (re)started any more: the pod is being
    /// deleted (a child of `deleting`), the kubelet failed it (activeDeadlineSeconds) or the
    /// node stopped.
    halted: CancellationToken,
    gone: CancellationToken,
}

impl PodRt {
    fn touch(&self) {
        self.dirty.notify_one();
    }
    fn pod(&self) -> Pod {
        self.pod.lock().expect("pod lock").clone()
    }
    /// Takes `p` as the pod's API copy unless the copy held is newer (a watch event may arrive
    /// after the answer to the kubelet's own later status write); marks the pod dirty when the
    /// conditions others own changed, since the Ready condition follows readiness gates.
    fn observe(&self, p: Pod) {
        let rv = |p: &Pod| {
            p.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        let mut held = self.pod.lock().expect("pod lock");
        if matches!((rv(&held), rv(&p)), (Some(old), Some(new)) if new < old) {
            return;
        }
        let changed = status::foreign_conditions(&held) != status::foreign_conditions(&p);
        *held = p;
        drop(held);
        if changed {
            self.touch();
        }
    }
    fn label(&self) -> String {
        format!("{}_{}({})", self.name, self.namespace, self.uid)
    }
}

/// The kubelet's shared state.
pub(crate) struct Kubelet {
    pub cfg: NodeConfig,
    pub client: Client,
    pub net: SimNet,
    /// The machine's power: boot ID, scheduled shutdowns, reboots.
    pub power: Arc<power::Power>,
    pub pods: Mutex<HashMap<String, Arc<PodRt>>>,
    /// Which pod addresses are taken, and where the last allocation stopped.
    ip_pool: Mutex<(Vec<bool>, usize)>,
    images: Mutex<HashMap<String, Arc<Image>>>,
    pub services: Store<Service>,
    pub started: Instant,
    pub cancel: CancellationToken,
    /// Recorded events by (namespace, object uid, field path, reason, message): name and count,
    /// so repeats bump `count` as the kubelet's event correlator does.
    events: Mutex<HashMap<String, (String, i32)>>,
    /// The node's health under the `node-flap` and `node-lost` switches.
    pub(crate) health: node_health::NodeHealth,
    /// Images whose first pull already failed under `pull-fail-once`.
    pull_failed_once: Mutex<std::collections::HashSet<String>>,
    /// The `/metrics` counters.
    pub(crate) metrics: metrics::Metrics,
    /// The eviction manager's memory of threshold passes (MemoryPressure).
    pub(crate) eviction: eviction::EvictionState,
}

/// Starts a kubelet: registers the Node, starts heartbeats, the kubelet HTTPS server on
/// `nodeIP:10250`, and the pod sync loop.
pub async fn start_node(
    client: Client,
    cfg: NodeConfig,
    net: SimNet,
    cancel: CancellationToken,
) -> Result<NodeHandle, KubeletError> {
    std::fs::create_dir_all(&cfg.root_dir).map_err(|source| KubeletError::RootDir {
        path: cfg.root_dir.clone(),
        source,
    })?;
    net.dialer().register_node(cfg.index, &cfg.name);
    net.dialer().set_live(cfg.block.node(cfg.index), true);
    let (services, writer) = reflector::store();
    let svc_stream = reflector::reflector(
        writer,
        watcher(Api::<Service>::all(client.clone()), watcher::Config::default()),
    )
    // Without a backoff the watcher retries at once, thousands of times a second while the API
    // server is down (`api-down`).
    .default_backoff()
    .applied_objects()
    .boxed();
    let kl = Arc::new(Kubelet {
        power: Arc::new(power::Power::default()),
        pods: Mutex::new(HashMap::new()),
        ip_pool: Mutex::new((vec![false; 253], 0)),
        images: Mutex::new(HashMap::new()),
        services,
        started: Instant::now(),
        events: Mutex::new(HashMap::new()),
        health: node_health::NodeHealth::new(),
        pull_failed_once: Mutex::new(std::collections::HashSet::new()),
        metrics: metrics::Metrics::default(),
        eviction: eviction::EvictionState::default(),
        cancel: cancel.child_token(),
        client,
        net,
        cfg,
    });
    {
        let c = kl.cancel.clone();
        tokio::spawn(async move {
            let mut s = svc_stream;
            loop {
                tokio::select! {
                    _ = c.cancelled() => return,
                    n = s.next() => if n.is_none() { return },
                }
            }
        });
    }
    kl.register().await?;
    let server_addr = crate::node::server::start(kl.clone())
        .await
        .map_err(KubeletError::Server)?;
    tokio::spawn(heartbeat(kl.clone()));
    tokio::spawn(lease_loop(kl.clone()));
    tokio::spawn(pod_watch(kl.clone()));
    tokio::spawn(power::power_loop(kl.clone()));
    tokio::spawn(eviction::eviction_loop(kl.clone()));
    tokio::spawn(crate::node::stats::sampler(kl.clone()));
    info!(node = %kl.cfg.name, ip = %kl.cfg.block.node(kl.cfg.index), "kubelet started");
    Ok(NodeHandle {
        kubelet: kl,
        server_addr,
    })
}

impl Kubelet {
    pub(crate) fn node_ip(&self) -> Ipv4Addr {
        self.cfg.block.node(self.cfg.index)
    }

    fn alloc_ip(&self) -> Option<(usize, Ipv4Addr)> {
        // Next-fit, as host-local IPAM does: continue after the last address handed out, so a
        // released address is not reused at once while the old pod's sockets may still linger.
        let mut guard = self.ip_pool.lock().expect("ip lock");
        let (pool, cursor) = &mut *guard;
        let len = pool.len();
        let n = (1..=len).map(|k| (*cursor + k) % len).find(|&i| !pool[i])?;
        pool[n] = true;
        *cursor = n;
        drop(guard);
        let ip = self.cfg.block.pod(self.cfg.index, n)?;
        self.net.dialer().set_live(ip, true);
        Some((n, ip))
    }

    fn release_ip(&self, n: usize) {
        if let Some(ip) = self.cfg.block.pod(self.cfg.index, n) {
            self.net.dialer().set_live(ip, false);
        }
        self.ip_pool.lock().expect("ip lock").0[n] = false;
    }

    /// Finds a pod by namespace and name.
    pub(crate) fn find_pod(&self, ns: &str, name: &str) -> Option<Arc<PodRt>> {
        self.pods
            .lock()
            .expect("pods lock")
            .values()
            .find(|p| p.namespace == ns && p.name == name)
            .cloned()
    }
}

async fn sleep_or(d: Duration, tok: &CancellationToken) -> bool {
    tokio::select! {
        _ = tok.cancelled() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

fn with_ctr<R>(rt: &PodRt, role: Role, idx: usize, f: impl FnOnce(&mut Ctr) -> R) -> R {
    let mut st = rt.state.lock().expect("state lock");
    let c = match role {
        Role::Init => &mut st.init[idx],
        Role::App => &mut st.main[idx],
        Role::Ephemeral => &mut st.ephemeral[idx],
    };
    f(c)
}

/// Which of the pod spec's three container lists a container comes from: the kubelet starts,
/// restarts, probes and reports each differently (ephemeral containers, added through the
/// `ephemeralcontainers` subresource to a running pod, are never restarted or probed and do
/// not count toward the pod's phase or readiness).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Init,
    App,
    Ephemeral,
}

impl Role {
    /// The pod spec field holding the container (an event's `fieldPath`).
    pub fn spec_field(self) -> &'static str {
        match self {
            Role::Init => "initContainers",
            Role::App => "containers",
            Role::Ephemeral => "ephemeralContainers",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocatable_is_capacity_minus_reserved_and_eviction() {
        let cfg = NodeConfig::new("n", Os::Windows, 0, AddressBlock(206), PathBuf::from("/tmp/x"));
        assert_eq!(cfg.allocatable_cpu_millis(), 3800);
        assert_eq!(cfg.allocatable_memory_bytes(), (16 << 30) - (1100 << 20));
    }
}
