//! The kubelet: registers the Node, heartbeats (status and Lease), and runs the pods bound to
//! it through the emulated runtime, reporting status and events as a real kubelet does.
//!
//! The main types are [`NodeConfig`] (what [`start_node`] needs) and [`NodeHandle`]. Each pod
//! gets a worker task: sandbox (with the Windows hostNetwork rule), pod IP from the node's
//! range, volumes, init containers in order, then one supervisor per container (image pull
//! with pull policy, creation checks, start, probes, hooks, restarts with CrashLoopBackOff),
//! and graceful termination when the pod is deleted.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Event, EventSource, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec,
    NodeStatus, NodeSystemInfo, ObjectReference, Pod, PodCondition, PodIP, Probe, Secret, Service, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::addr::{AddressBlock, KUBELET_PORT};
use crate::node::dns::PodDns;
use crate::node::fs::{FsView, Mount, PodVolumes};
use crate::node::net::{SimNet, Source};
use crate::node::profile::LatencyProfile;
use crate::node::programs::{self, Ctx, Output, PodInfo, Stream, Usage};
use crate::node::registry::{self, Image};
use crate::node::runtime::{self, CState, LogBuffer, PodFields};
use crate::node::{error_chain, http};
use crossconf_model::os::{self, Os};

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
}

impl NodeConfig {
    /// A node with default capacity and reservations.
    pub fn new(name: &str, os: Os, index: usize, block: AddressBlock, root_dir: PathBuf) -> Self {
        NodeConfig {
            name: name.into(),
            os,
            windows_build: (os == Os::Windows).then(|| "10.0.20348".to_string()),
            index,
            block,
            taints: vec![],
            profile: LatencyProfile::fast(),
            root_dir,
            capacity: Capacity::default(),
            reserved: Reserved::default(),
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
/// The container runtime version nodes report.
pub const RUNTIME_VERSION: &str = "containerd://1.7.27";

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
    pub run_stop: Option<CancellationToken>,
    pub run_kill: Option<CancellationToken>,
    pub cpu_limit_millis: Option<u64>,
    pub memory_limit: Option<u64>,
    pub base_memory: u64,
}

impl Ctr {
    fn new(c: &Container, init: bool) -> Self {
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
            state: CState::waiting(if init { "PodInitializing" } else { "ContainerCreating" }, None),
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
    pub init: Vec<Ctr>,
    pub main: Vec<Ctr>,
    pub init_done: bool,
    pub failed: Option<(String, String)>,
    pub conditions: BTreeMap<&'static str, CondState>,
    pub dns: Option<Result<PodDns, String>>,
    pub volumes: Option<PodVolumes>,
}

/// One pod on this node.
pub(crate) struct PodRt {
    pub uid: String,
    pub name: String,
    pub namespace: String,
    pub pod: Mutex<Pod>,
    pub state: Mutex<PodState>,
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
    fn label(&self) -> String {
        format!("{}_{}({})", self.name, self.namespace, self.uid)
    }
}

/// The kubelet's shared state.
pub(crate) struct Kubelet {
    pub cfg: NodeConfig,
    pub client: Client,
    pub net: SimNet,
    pub boot_id: String,
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
    .applied_objects()
    .boxed();
    let kl = Arc::new(Kubelet {
        boot_id: uuid::Uuid::new_v4().to_string(),
        pods: Mutex::new(HashMap::new()),
        ip_pool: Mutex::new((vec![false; 253], 0)),
        images: Mutex::new(HashMap::new()),
        services,
        started: Instant::now(),
        events: Mutex::new(HashMap::new()),
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
    tokio::spawn(crate::node::stats::sampler(kl.clone()));
    info!(node = %kl.cfg.name, ip = %kl.cfg.block.node(kl.cfg.index), "kubelet started");
    Ok(NodeHandle {
        kubelet: kl,
        server_addr,
    })
}

fn q(s: impl Into<String>) -> Quantity {
    Quantity(s.into())
}

impl Kubelet {
    pub(crate) fn node_ip(&self) -> Ipv4Addr {
        self.cfg.block.node(self.cfg.index)
    }

    fn node_object(&self) -> Node {
        let c = &self.cfg;
        let mut labels = BTreeMap::from([
            (os::OS_LABEL.to_string(), c.os.as_str().to_string()),
            (os::ARCH_LABEL.to_string(), "amd64".to_string()),
            (os::HOSTNAME_LABEL.to_string(), c.name.clone()),
            ("beta.kubernetes.io/os".to_string(), c.os.as_str().to_string()),
            ("beta.kubernetes.io/arch".to_string(), "amd64".to_string()),
        ]);
        if let Some(b) = &c.windows_build {
            labels.insert(os::WINDOWS_BUILD_LABEL.to_string(), b.clone());
        }
        Node {
            metadata: ObjectMeta {
                name: Some(c.name.clone()),
                labels: Some(labels),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                pod_cidr: Some(c.block.pod_cidr(c.index)),
                pod_cidrs: Some(vec![c.block.pod_cidr(c.index)]),
                taints: (!c.taints.is_empty()).then(|| c.taints.clone()),
                ..Default::default()
            }),
            status: Some(self.node_status()),
        }
    }

    fn node_status(&self) -> NodeStatus {
        let c = &self.cfg;
        let now = Time(jiff::Timestamp::now());
        let since =
            Time(jiff::Timestamp::now() - jiff::SignedDuration::from_secs(self.started.elapsed().as_secs() as i64));
        let cond = |t: &str, s: &str, reason: &str, msg: &str| NodeCondition {
            type_: t.into(),
            status: s.into(),
            reason: Some(reason.into()),
            message: Some(msg.into()),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: Some(since.clone()),
        };
        let capacity = BTreeMap::from([
            ("cpu".to_string(), q(format!("{}", c.capacity.cpu_millis / 1000))),
            ("memory".to_string(), q(format!("{}Ki", c.capacity.memory_bytes / 1024))),
            (
                "ephemeral-storage".to_string(),
                q(format!("{}Ki", c.capacity.ephemeral_storage_bytes / 1024)),
            ),
            ("pods".to_string(), q(c.capacity.pods.to_string())),
        ]);
        let allocatable = BTreeMap::from([
            ("cpu".to_string(), q(format!("{}m", c.allocatable_cpu_millis()))),
            (
                "memory".to_string(),
                // `allocatable-misreported`: a kubelet that leaves reservations and eviction
                // thresholds out of allocatable memory.
                q(format!(
                    "{}Ki",
                    if self.net.faults().is_on("allocatable-misreported") {
                        c.capacity.memory_bytes
                    } else {
                        c.allocatable_memory_bytes()
                    } / 1024
                )),
            ),
            (
                "ephemeral-storage".to_string(),
                q(format!("{}Ki", c.capacity.ephemeral_storage_bytes * 9 / 10 / 1024)),
            ),
            ("pods".to_string(), q(c.capacity.pods.to_string())),
        ]);
        let (os_image, kernel) = match c.os {
            Os::Windows => {
                let b = c.windows_build.clone().unwrap_or_default();
                (os::windows_os_image(&b), format!("{b}.2849"))
            }
            Os::Linux => (
                "Debian GNU/Linux 12 (bookworm)".to_string(),
                "6.1.0-28-cloud-amd64".to_string(),
            ),
        };
        let images: Vec<_> = self
            .images
            .lock()
            .expect("images lock")
            .values()
            .map(|i| k8s_openapi::api::core::v1::ContainerImage {
                names: Some(vec![i.image_id(), i.reference.full()]),
                size_bytes: Some(i.size_bytes as i64),
            })
            .collect();
        NodeStatus {
            capacity: Some(capacity),
            allocatable: Some(allocatable),
            conditions: Some(vec![
                cond(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                cond(
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                ),
                cond(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                ),
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ]),
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: self.node_ip().to_string(),
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: c.name.clone(),
                },
            ]),
            daemon_endpoints: Some(NodeDaemonEndpoints {
                kubelet_endpoint: Some(k8s_openapi::api::core::v1::DaemonEndpoint {
                    port: i32::from(KUBELET_PORT),
                }),
            }),
            node_info: Some(NodeSystemInfo {
                architecture: "amd64".into(),
                // The `boot-id-missing` fault: a kubelet that cannot read the machine's boot ID.
                boot_id: if self.net.faults().is_on("boot-id-missing") {
                    String::new()
                } else {
                    self.boot_id.clone()
                },
                container_runtime_version: RUNTIME_VERSION.into(),
                kernel_version: kernel,
                kube_proxy_version: KUBELET_VERSION.into(),
                kubelet_version: KUBELET_VERSION.into(),
                machine_id: format!("{:032x}", self.cfg.index as u128 + 0x5151),
                operating_system: c.os.as_str().into(),
                os_image,
                system_uuid: uuid::Uuid::new_v4().to_string(),
                swap: None,
            }),
            images: Some(images),
            ..Default::default()
        }
    }

    async fn register(&self) -> Result<(), KubeletError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let node = self.node_object();
        let err = |source| KubeletError::Register {
            node: self.cfg.name.clone(),
            source,
        };
        match api.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let patch = serde_json::json!({"metadata": {"labels": node.metadata.labels}, "spec": node.spec});
                api.patch(&self.cfg.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(err)?;
            }
            Err(e) => return Err(err(e)),
        }
        // Status is a subresource: write it explicitly (servers may drop it on create).
        let patch = serde_json::json!({ "status": node.status });
        api.patch_status(&self.cfg.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(err)?;
        self.node_event("Normal", "Starting", "Starting kubelet.");
        self.node_event(
            "Normal",
            "NodeReady",
            &format!("Node {} status is now: NodeReady", self.cfg.name),
        );
        Ok(())
    }

    fn node_event(&self, type_: &str, reason: &str, message: &str) {
        let obj = ObjectReference {
            kind: Some("Node".into()),
            name: Some(self.cfg.name.clone()),
            uid: Some(self.cfg.name.clone()),
            api_version: Some("v1".into()),
            ..Default::default()
        };
        self.emit("default", obj, type_, reason, message);
    }

    fn emit(&self, ns: &str, obj: ObjectReference, type_: &str, reason: &str, message: &str) {
        let now = jiff::Timestamp::now();
        let base = obj.name.clone().unwrap_or_default();
        let key = format!(
            "{ns}\0{}\0{}\0{reason}\0{message}",
            obj.uid.clone().unwrap_or_default(),
            obj.field_path.clone().unwrap_or_default()
        );
        let api: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let (name, repeat) = {
            let mut seen = self.events.lock().expect("events lock");
            match seen.get_mut(&key) {
                Some((name, count)) => {
                    *count += 1;
                    (name.clone(), Some(*count))
                }
                None => {
                    // Upstream names events `<object>.<hex nanoseconds>`, so a listing in name
                    // order (what `kubectl describe` shows) is in time order; strictly increasing
                    // here so two events in one nanosecond cannot collide.
                    static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                    let nanos = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64);
                    let stamp = LAST
                        .fetch_update(
                            std::sync::atomic::Ordering::SeqCst,
                            std::sync::atomic::Ordering::SeqCst,
                            |last| Some(nanos.max(last + 1)),
                        )
                        .map_or(nanos, |last| nanos.max(last + 1));
                    let name = format!("{base}.{stamp:x}");
                    seen.insert(key, (name.clone(), 1));
                    (name, None)
                }
            }
        };
        if let Some(count) = repeat {
            let patch = serde_json::json!({"count": count, "lastTimestamp": Time(now)});
            tokio::spawn(async move {
                if let Err(e) = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    debug!(error = %e, %name, "event count not updated");
                }
            });
            return;
        }
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            involved_object: obj,
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some(type_.into()),
            source: Some(EventSource {
                component: Some("kubelet".into()),
                host: Some(self.cfg.name.clone()),
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            reporting_component: Some("kubelet".into()),
            reporting_instance: Some(self.cfg.name.clone()),
            ..Default::default()
        };
        let reason = reason.to_string();
        tokio::spawn(async move {
            if let Err(e) = api.create(&PostParams::default(), &ev).await {
                debug!(error = %e, %reason, "event not recorded");
            }
        });
    }

    fn pod_event(&self, rt: &PodRt, container: Option<(&str, bool)>, type_: &str, reason: &str, message: &str) {
        let obj = ObjectReference {
            kind: Some("Pod".into()),
            name: Some(rt.name.clone()),
            namespace: Some(rt.namespace.clone()),
            uid: Some(rt.uid.clone()),
            api_version: Some("v1".into()),
            field_path: container
                .map(|(c, init)| format!("spec.{}{{{c}}}", if init { "initContainers" } else { "containers" })),
            ..Default::default()
        };
        self.emit(&rt.namespace, obj, type_, reason, message);
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

async fn heartbeat(kl: Arc<Kubelet>) {
    let api: Api<Node> = Api::all(kl.client.clone());
    loop {
        tokio::select! {
            _ = kl.cancel.cancelled() => return,
            _ = tokio::time::sleep(kl.cfg.profile.node_status()) => {}
        }
        let patch = serde_json::json!({ "status": kl.node_status() });
        if let Err(e) = api
            .patch_status(&kl.cfg.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            warn!(node = %kl.cfg.name, error = %e, "node status update failed");
        }
    }
}

async fn lease_loop(kl: Arc<Kubelet>) {
    let api: Api<Lease> = Api::namespaced(kl.client.clone(), "kube-node-lease");
    let node_uid = Api::<Node>::all(kl.client.clone())
        .get(&kl.cfg.name)
        .await
        .ok()
        .and_then(|n| n.metadata.uid);
    loop {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(kl.cfg.name.clone()),
                namespace: Some("kube-node-lease".into()),
                owner_references: node_uid.clone().map(|uid| {
                    vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "Node".into(),
                        name: kl.cfg.name.clone(),
                        uid,
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(kl.cfg.name.clone()),
                lease_duration_seconds: Some(40),
                renew_time: Some(MicroTime(jiff::Timestamp::now())),
                ..Default::default()
            }),
        };
        let r = match api.get_opt(&kl.cfg.name).await {
            Ok(Some(_)) => {
                let patch = serde_json::json!({"spec": {"holderIdentity": kl.cfg.name, "leaseDurationSeconds": 40, "renewTime": lease.spec.as_ref().and_then(|s| s.renew_time.clone())}});
                api.patch(&kl.cfg.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
            Ok(None) => api.create(&PostParams::default(), &lease).await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            debug!(node = %kl.cfg.name, error = %e, "lease renewal failed");
        }
        tokio::select! {
            _ = kl.cancel.cancelled() => return,
            _ = tokio::time::sleep(kl.cfg.profile.lease_renew()) => {}
        }
    }
}

async fn pod_watch(kl: Arc<Kubelet>) {
    let api: Api<Pod> = Api::all(kl.client.clone());
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", kl.cfg.name));
    let mut stream = watcher(api, cfg).default_backoff().boxed();
    loop {
        let ev = tokio::select! {
            _ = kl.cancel.cancelled() => break,
            ev = stream.next() => match ev { Some(e) => e, None => break },
        };
        match ev {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => on_pod(&kl, p),
            Ok(watcher::Event::Delete(p)) => {
                let uid = p.metadata.uid.clone().unwrap_or_default();
                if let Some(rt) = kl.pods.lock().expect("pods lock").remove(&uid) {
                    rt.deleting.cancel();
                    rt.gone.cancel();
                }
            }
            Ok(_) => {}
            Err(e) => warn!(node = %kl.cfg.name, error = %e, "pod watch error"),
        }
    }
    // The kubelet stops: stop every pod's programs.
    for rt in kl.pods.lock().expect("pods lock").values() {
        rt.gone.cancel();
    }
}

fn on_pod(kl: &Arc<Kubelet>, p: Pod) {
    if p.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(kl.cfg.name.as_str()) {
        return;
    }
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let deleting = p.metadata.deletion_timestamp.is_some();
    let mut pods = kl.pods.lock().expect("pods lock");
    // A kubelet with the `termination-stuck` fault never acts on a pod's deletion: its
    // containers keep running and the pod stays Terminating (a hung kubelet or runtime).
    let deleting = deleting && !kl.net.faults().is_on("termination-stuck");
    if let Some(rt) = pods.get(&uid) {
        *rt.pod.lock().expect("pod lock") = p;
        if deleting {
            rt.deleting.cancel();
        }
        return;
    }
    let spec = p.spec.clone().unwrap_or_default();
    let deleting_token = CancellationToken::new();
    let rt = Arc::new(PodRt {
        uid: uid.clone(),
        name: p.metadata.name.clone().unwrap_or_default(),
        namespace: p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
        state: Mutex::new(PodState {
            init: spec
                .init_containers
                .iter()
                .flatten()
                .map(|c| Ctr::new(c, true))
                .collect(),
            main: spec.containers.iter().map(|c| Ctr::new(c, false)).collect(),
            ..Default::default()
        }),
        pod: Mutex::new(p),
        dirty: Notify::new(),
        halted: deleting_token.child_token(),
        deleting: deleting_token,
        gone: CancellationToken::new(),
    });
    if deleting {
        rt.deleting.cancel();
    }
    pods.insert(uid, rt.clone());
    tokio::spawn(pod_worker(kl.clone(), rt));
}

async fn sleep_or(d: Duration, tok: &CancellationToken) -> bool {
    tokio::select! {
        _ = tok.cancelled() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

async fn pod_worker(kl: Arc<Kubelet>, rt: Arc<PodRt>) {
    let writer = tokio::spawn(status_writer(kl.clone(), rt.clone()));
    rt.touch();
    let runner = {
        let (kl, rt) = (kl.clone(), rt.clone());
        tokio::spawn(async move { run_pod(&kl, &rt).await })
    };
    let runner_abort = runner.abort_handle();
    // The pod runs until it is terminal or deleted; then everything stops and the pod goes.
    // A pod past its activeDeadlineSeconds is failed and its containers are stopped, but the
    // pod object stays (Failed, DeadlineExceeded) until it is deleted.
    tokio::select! {
        _ = rt.deleting.cancelled() => {}
        _ = kl.cancel.cancelled() => {}
        _ = active_deadline(&kl, &rt) => {
            terminate(&kl, &rt).await;
            rt.touch();
            tokio::select! {
                _ = rt.deleting.cancelled() => {}
                _ = kl.cancel.cancelled() => {}
            }
        }
        _ = runner => tokio::select! {
            _ = rt.deleting.cancelled() => {}
            _ = kl.cancel.cancelled() => {}
        },
    }
    // The node is going away (the simulated cluster stops): no container may start again, and
    // `terminate` kills at once, so no pod program outlives its cluster holding its sockets.
    if kl.cancel.is_cancelled() {
        rt.halted.cancel();
    }
    terminate(&kl, &rt).await;
    runner_abort.abort();
    rt.touch();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let ip_index = rt.state.lock().expect("state lock").ip_index.take();
    if let Some(n) = ip_index {
        kl.release_ip(n);
    }
    if !rt.gone.is_cancelled() && !kl.cancel.is_cancelled() {
        let api: Api<Pod> = Api::namespaced(kl.client.clone(), &rt.namespace);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(rt.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        if let Err(e) = api.delete(&rt.name, &dp).await {
            debug!(pod = %rt.name, error = %e, "final pod delete failed");
        }
    }
    rt.gone.cancel();
    writer.abort();
    kl.pods.lock().expect("pods lock").remove(&rt.uid);
    kl.events
        .lock()
        .expect("events lock")
        .retain(|k, _| !k.contains(&rt.uid));
    let dir = kl.cfg.root_dir.join("pods").join(&rt.uid);
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        debug!(dir = %dir.display(), error = %e, "pod directory not removed");
    }
}

/// Returns once the pod has been active on the node longer than its `activeDeadlineSeconds`
/// (read afresh from every pod update, since the field may be set or lowered on a running
/// pod), after marking it Failed with reason DeadlineExceeded and halting its containers, as
/// the kubelet's active-deadline handler does. Never returns under the `deadline-ignored` fault.
async fn active_deadline(kl: &Kubelet, rt: &PodRt) {
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if kl.net.faults().is_on("deadline-ignored") {
            continue;
        }
        let Some(limit) = rt
            .pod()
            .spec
            .as_ref()
            .and_then(|s| s.active_deadline_seconds)
            .and_then(|s| u64::try_from(s).ok())
        else {
            continue;
        };
        let Some(start) = rt.state.lock().expect("state lock").start_time else {
            continue;
        };
        let active = jiff::Timestamp::now().duration_since(start);
        if active.as_secs_f64() < limit as f64 {
            continue;
        }
        let msg = "Pod was active on the node longer than the specified deadline";
        {
            let mut st = rt.state.lock().expect("state lock");
            if st.failed.is_none() {
                st.failed = Some(("DeadlineExceeded".into(), msg.into()));
            }
        }
        kl.pod_event(rt, None, "Normal", "DeadlineExceeded", msg);
        rt.halted.cancel();
        rt.touch();
        return;
    }
}

/// Why a sandbox cannot be created on this node, if it cannot.
fn sandbox_error(os: Os, pod: &Pod, host_network_allowed: bool) -> Option<String> {
    let spec = pod.spec.clone().unwrap_or_default();
    let host_process = spec
        .security_context
        .as_ref()
        .and_then(|s| s.windows_options.as_ref())
        .and_then(|w| w.host_process)
        .unwrap_or(false);
    // Windows: hostNetwork needs a HostProcess pod (source: "Windows containers in Kubernetes",
    // networking limitations; HostProcess pods may use it since 1.26, today's behaviour).
    if spec.host_network.unwrap_or(false) && !os.supports_host_network() && !host_process && !host_network_allowed {
        return Some("hostNetwork is not supported for non-HostProcess pods on Windows nodes".into());
    }
    if host_process {
        return Some("HostProcess containers are not supported by the simulated Windows runtime".into());
    }
    None
}

async fn run_pod(kl: &Arc<Kubelet>, rt: &Arc<PodRt>) {
    let pod = rt.pod();
    // Sandbox.
    let sandbox_id = format!("{:064x}", rand::random::<u128>());
    let mut n = 0;
    loop {
        if rt.halted.is_cancelled() {
            return;
        }
        let pod = rt.pod();
        let err = sandbox_error(kl.cfg.os, &pod, kl.net.faults().is_on("host-network-allowed")).or_else(|| {
            match PodDns::for_pod(&pod, kl.cfg.os, kl.cfg.block) {
                Err(e @ crate::node::dns::DnsConfigError::Unsupported { .. }) => Some(e.to_string()),
                _ => None,
            }
        });
        let Some(msg) = err else { break };
        kl.pod_event(
            rt,
            None,
            "Warning",
            "FailedCreatePodSandBox",
            &format!("Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox \"{sandbox_id}\": {msg}"),
        );
        rt.touch();
        if !sleep_or(kl.cfg.profile.backoff(n).max(Duration::from_millis(200)), &rt.halted).await {
            return;
        }
        n += 1;
    }
    // A hostNetwork pod shares its node's network namespace: its IP is the node's, and its
    // programs listen on the node's address (a port already taken there fails to bind, as on a
    // real node). Other pods take an address from the node's pod range.
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
    let (ip_index, ip) = if host_network {
        (None, kl.node_ip())
    } else {
        let Some((n, ip)) = kl.alloc_ip() else {
            kl.pod_event(
                rt,
                None,
                "Warning",
                "FailedCreatePodSandBox",
                "Failed to create pod sandbox: the node's pod address range is exhausted",
            );
            return;
        };
        (Some(n), ip)
    };
    {
        let mut st = rt.state.lock().expect("state lock");
        st.ip = Some(ip);
        st.ip_index = ip_index;
        st.start_time = Some(jiff::Timestamp::now());
        st.sandbox_ready = true;
        st.dns = Some(PodDns::for_pod(&pod, kl.cfg.os, kl.cfg.block).map_err(|e| e.to_string()));
    }
    rt.touch();
    // Volumes.
    let pod_dir = kl.cfg.root_dir.join("pods").join(&rt.uid);
    let host_root = kl.cfg.root_dir.join("host");
    let mut n = 0;
    loop {
        let fields = pod_fields(kl, &rt.pod(), ip);
        let pod = rt.pod();
        let setup = PodVolumes::setup(
            &kl.client,
            &pod,
            kl.cfg.os,
            &pod_dir,
            &host_root,
            &fields,
            kl.net.faults(),
        );
        match setup.await {
            Ok(v) => {
                rt.state.lock().expect("state lock").volumes = Some(v);
                tokio::spawn(volume_resync(kl.clone(), rt.clone(), pod_dir.clone(), ip));
                break;
            }
            Err(e) => {
                kl.pod_event(rt, None, "Warning", "FailedMount", &e.to_string());
                if !sleep_or(kl.cfg.profile.backoff(n).max(Duration::from_millis(200)), &rt.halted).await {
                    return;
                }
                n += 1;
            }
        }
    }
    // Init containers, in order.
    let inits = pod.spec.clone().unwrap_or_default().init_containers.unwrap_or_default();
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.clone())
        .unwrap_or_else(|| "Always".into());
    // A kubelet with the `init-containers-skipped` fault starts the app containers at once.
    let skip_inits = kl.net.faults().is_on("init-containers-skipped");
    for (i, c) in inits.iter().enumerate() {
        if skip_inits {
            break;
        }
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        if sidecar {
            tokio::spawn(supervise(kl.clone(), rt.clone(), c.clone(), true, i, "Always".into()));
            continue;
        }
        let ok = supervise(
            kl.clone(),
            rt.clone(),
            c.clone(),
            true,
            i,
            if policy == "Never" {
                "Never".into()
            } else {
                "OnFailure".into()
            },
        )
        .await;
        if !ok {
            return;
        }
    }
    rt.state.lock().expect("state lock").init_done = true;
    rt.touch();
    let mains = pod.spec.clone().unwrap_or_default().containers;
    let handles: Vec<_> = mains
        .iter()
        .enumerate()
        .map(|(i, c)| tokio::spawn(supervise(kl.clone(), rt.clone(), c.clone(), false, i, policy.clone())))
        .collect();
    for h in handles {
        let _ = h.await;
    }
    rt.touch();
}

/// How many node status periods make one kubelet pod sync period: the real kubelet reports
/// status every 10 s and resyncs each pod every minute (`syncFrequency`), so a profile's
/// status period sets the sync period too (12 s in `fast`, a minute in `realistic`).
const SYNC_PERIODS_PER_STATUS: u32 = 6;

/// The periodic pod sync's volume part: every sync period, ConfigMap, Secret, downward API and
/// projected volumes are rebuilt from the current objects and pod metadata and swapped in
/// atomically, until the pod is deleted. This is how a ConfigMap update or a new label reaches
/// a running container (eventually, not at once: real clusters take up to the sync period plus
/// the object cache's TTL). The `volume-updates-stopped` fault stops it (a kubelet that never
/// refreshes mounted contents). A failed refresh keeps the old contents and reports
/// `FailedMount`, as the kubelet does.
async fn volume_resync(kl: Arc<Kubelet>, rt: Arc<PodRt>, pod_dir: std::path::PathBuf, ip: Ipv4Addr) {
    let period = kl.cfg.profile.node_status() * SYNC_PERIODS_PER_STATUS;
    loop {
        tokio::select! {
            _ = rt.deleting.cancelled() => return,
            _ = kl.cancel.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        if kl.net.faults().is_on("volume-updates-stopped") {
            continue;
        }
        let pod = rt.pod();
        let fields = pod_fields(&kl, &pod, ip);
        if let Err(e) = PodVolumes::resync(&kl.client, &pod, &pod_dir, &fields, kl.net.faults()).await {
            kl.pod_event(&rt, None, "Warning", "FailedMount", &e.to_string());
        }
    }
}

fn pod_fields(kl: &Kubelet, pod: &Pod, ip: Ipv4Addr) -> PodFields {
    PodFields {
        pod: pod.clone(),
        pod_ip: ip.to_string(),
        host_ip: kl.node_ip().to_string(),
        node_cpu: kl.cfg.allocatable_cpu_millis() as f64 / 1000.0,
        node_memory: kl.cfg.allocatable_memory_bytes() as f64,
    }
}

fn with_ctr<R>(rt: &PodRt, init: bool, idx: usize, f: impl FnOnce(&mut Ctr) -> R) -> R {
    let mut st = rt.state.lock().expect("state lock");
    let c = if init { &mut st.init[idx] } else { &mut st.main[idx] };
    f(c)
}

/// Why a container could not be started this time.
enum StartFailure {
    /// Waiting with this reason and message; retry after a back-off.
    Waiting { reason: &'static str, message: String },
    /// Started and failed at once (exit code 128, StartError).
    StartError(String),
}

/// Runs one container until it should not be restarted any more (or the pod is deleted).
/// Returns whether it finished successfully (for init containers).
async fn supervise(kl: Arc<Kubelet>, rt: Arc<PodRt>, c: Container, init: bool, idx: usize, policy: String) -> bool {
    let mut backoff_n = 0u32;
    let mut pull_n = 0u32;
    loop {
        if rt.halted.is_cancelled() {
            return false;
        }
        let run = match start_container(&kl, &rt, &c, init, idx).await {
            Ok(run) => run,
            Err(StartFailure::Waiting { reason, message }) => {
                let is_pull = reason == "ErrImagePull" || reason == "ErrImageNeverPull";
                with_ctr(&rt, init, idx, |ct| {
                    ct.state = CState::waiting(reason, Some(message.clone()))
                });
                rt.touch();
                let wait = kl.cfg.profile.backoff(pull_n).max(Duration::from_millis(100));
                pull_n += 1;
                if reason == "ErrImagePull" {
                    // The kubelet shows ErrImagePull once, then ImagePullBackOff while waiting.
                    if !sleep_or(Duration::from_millis(300).min(wait), &rt.halted).await {
                        return false;
                    }
                    let image = c.image.clone().unwrap_or_default();
                    kl.pod_event(
                        &rt,
                        Some((&c.name, init)),
                        "Normal",
                        "BackOff",
                        &format!("Back-off pulling image \"{image}\""),
                    );
                    kl.pod_event(
                        &rt,
                        Some((&c.name, init)),
                        "Warning",
                        "Failed",
                        "Error: ImagePullBackOff",
                    );
                    with_ctr(&rt, init, idx, |ct| {
                        ct.state = CState::waiting(
                            "ImagePullBackOff",
                            Some(format!("Back-off pulling image \"{image}\": ErrImagePull: {message}")),
                        )
                    });
                    rt.touch();
                }
                let _ = is_pull;
                if !sleep_or(wait, &rt.halted).await {
                    return false;
                }
                continue;
            }
            Err(StartFailure::StartError(msg)) => {
                let cid = format!("containerd://{:064x}", rand::random::<u128>());
                let now = jiff::Timestamp::now();
                with_ctr(&rt, init, idx, |ct| {
                    ct.container_id = Some(cid.clone());
                    ct.state = CState::Terminated {
                        exit_code: 128,
                        reason: "StartError".into(),
                        message: Some(msg.clone()),
                        started_at: None,
                        finished_at: now,
                        container_id: cid.clone(),
                    };
                });
                kl.pod_event(
                    &rt,
                    Some((&c.name, init)),
                    "Warning",
                    "Failed",
                    &format!("Error: {msg}"),
                );
                rt.touch();
                128
            }
        };
        let code = if run == 128
            && with_ctr(
                &rt,
                init,
                idx,
                |ct| matches!(&ct.state, CState::Terminated { reason, .. } if reason == "StartError"),
            ) {
            128
        } else {
            run
        };
        if rt.halted.is_cancelled() {
            return false;
        }
        let restart = match policy.as_str() {
            "Always" => true,
            "OnFailure" => code != 0,
            _ => false,
        };
        if !restart {
            if code != 0 && init {
                let mut st = rt.state.lock().expect("state lock");
                st.failed = Some((
                    "Failed".into(),
                    format!("init container {} failed with exit code {code}", c.name),
                ));
            }
            rt.touch();
            return code == 0;
        }
        // As the kubelet's doBackOff: the first exit has no back-off entry yet, so the
        // container restarts at once; later exits wait in CrashLoopBackOff for the back-off
        // (10 s, 20 s, ... scaled by the profile).
        backoff_n += 1;
        if backoff_n == 1 {
            with_ctr(&rt, init, idx, |ct| {
                ct.last = Some(ct.state.clone());
                ct.state = CState::waiting("ContainerCreating", None);
                ct.ready = false;
                ct.started = false;
                ct.restart_count += 1;
            });
            rt.touch();
            continue;
        }
        let wait = kl.cfg.profile.backoff(backoff_n - 2);
        let msg = format!(
            "back-off {} restarting failed container={} pod={}",
            fmt_secs(wait),
            c.name,
            rt.label()
        );
        with_ctr(&rt, init, idx, |ct| {
            ct.last = Some(ct.state.clone());
            ct.state = CState::waiting("CrashLoopBackOff", Some(msg));
            ct.ready = false;
            ct.started = false;
        });
        kl.pod_event(
            &rt,
            Some((&c.name, init)),
            "Warning",
            "BackOff",
            &format!("Back-off restarting failed container {} in pod {}", c.name, rt.label()),
        );
        rt.touch();
        if !sleep_or(wait, &rt.halted).await {
            return false;
        }
        with_ctr(&rt, init, idx, |ct| ct.restart_count += 1);
    }
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 60.0 {
        format!("{}m{}s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else if s >= 1.0 {
        format!("{}s", s as u64)
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Registry hosts the pod has pull credentials for (from its imagePullSecrets).
async fn credential_hosts(kl: &Kubelet, pod: &Pod) -> Vec<String> {
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let api: Api<Secret> = Api::namespaced(kl.client.clone(), &ns);
    let mut hosts = Vec::new();
    for r in pod
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.clone())
        .unwrap_or_default()
    {
        let Ok(Some(s)) = api.get_opt(&r.name).await else {
            continue;
        };
        let data = s.data.unwrap_or_default();
        let Some(raw) = data.get(".dockerconfigjson").or_else(|| data.get(".dockercfg")) else {
            continue;
        };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&raw.0) else {
            continue;
        };
        let auths = v.get("auths").unwrap_or(&v);
        if let Some(m) = auths.as_object() {
            for k in m.keys() {
                let host = k
                    .trim_start_matches("https://")
                    .trim_start_matches("http://")
                    .split('/')
                    .next()
                    .unwrap_or(k);
                hosts.push(host.to_string());
            }
        }
    }
    hosts
}

async fn pull(kl: &Kubelet, rt: &PodRt, c: &Container, init: bool) -> Result<Arc<Image>, StartFailure> {
    let image = c.image.clone().unwrap_or_default();
    let r = registry::ImageRef::parse(&image);
    let default_policy = if r.tag == "latest" && r.digest.is_none() {
        "Always"
    } else {
        "IfNotPresent"
    };
    let mut policy = c.image_pull_policy.clone().unwrap_or_else(|| default_policy.into());
    if kl.net.faults().pull_policy_ignored() {
        policy = "IfNotPresent".into();
    }
    let key = r.full();
    // A runtime with the `image-cache-off` fault keeps no image store: nothing is ever present.
    let cached = if kl.net.faults().is_on("image-cache-off") {
        None
    } else {
        kl.images.lock().expect("images lock").get(&key).cloned()
    };
    let field = Some((c.name.as_str(), init));
    match (policy.as_str(), cached) {
        ("Never", None) => {
            let msg = format!("Container image \"{image}\" is not present with pull policy of Never");
            kl.pod_event(rt, field, "Warning", "ErrImageNeverPull", &msg);
            kl.pod_event(rt, field, "Warning", "Failed", "Error: ErrImageNeverPull");
            return Err(StartFailure::Waiting {
                reason: "ErrImageNeverPull",
                message: msg,
            });
        }
        ("Never" | "IfNotPresent", Some(img)) => {
            kl.pod_event(
                rt,
                field,
                "Normal",
                "Pulled",
                &format!("Container image \"{image}\" already present on machine"),
            );
            return Ok(img);
        }
        _ => {}
    }
    kl.pod_event(rt, field, "Normal", "Pulling", &format!("Pulling image \"{image}\""));
    // `pull-secrets-ignored`: the kubelet hands the runtime no credentials. `registry-auth-off`:
    // the private registry serves everyone (it is misconfigured public).
    let mut creds = if kl.net.faults().is_on("pull-secrets-ignored") {
        Vec::new()
    } else {
        credential_hosts(kl, &rt.pod()).await
    };
    if kl.net.faults().is_on("registry-auth-off") {
        creds.push(r.registry.clone());
    }
    let started = Instant::now();
    let resolved = if kl.net.faults().is_on("registry-unreachable") {
        Err(format!(
            "failed to pull and unpack image \"{image}\": failed to resolve reference \"{key}\": failed to do request: dial tcp {}:443: i/o timeout (registry unreachable from node {})",
            r.registry, kl.cfg.name
        ))
    } else {
        registry::resolve(&image, kl.cfg.os, kl.cfg.windows_build.as_deref(), &creds).map_err(|e| e.to_string())
    };
    if let Err(e) = &resolved
        && kl.net.faults().is_on("pull-errors-hidden")
    {
        debug!(image, error = %e, "pull failed; hidden by the pull-errors-hidden fault");
        return Err(StartFailure::Waiting {
            reason: "ContainerCreating",
            message: String::new(),
        });
    }
    // The `errors-unexplained` fault: the runtime reports failures without their cause.
    let resolved = resolved.map_err(|e| {
        if kl.net.faults().is_on("errors-unexplained") {
            format!("failed to pull and unpack image \"{image}\": unknown error")
        } else {
            e
        }
    });
    match resolved {
        Ok(img) => {
            let already = kl.images.lock().expect("images lock").contains_key(&key);
            let d = if already {
                kl.cfg.profile.pull(img.weight) / 20
            } else {
                kl.cfg.profile.pull(img.weight)
            };
            if !sleep_or(d, &rt.halted).await {
                return Err(StartFailure::Waiting {
                    reason: "ContainerCreating",
                    message: "pod is being deleted".into(),
                });
            }
            let took = started.elapsed().as_secs_f64();
            kl.pod_event(
                rt,
                field,
                "Normal",
                "Pulled",
                &format!("Successfully pulled image \"{image}\" in {took:.3}s ({took:.3}s including waiting). Image size: {} bytes.", img.size_bytes),
            );
            let img = Arc::new(img);
            kl.images.lock().expect("images lock").insert(key, img.clone());
            Ok(img)
        }
        Err(e) => {
            kl.pod_event(
                rt,
                field,
                "Warning",
                "Failed",
                &format!("Failed to pull image \"{image}\": {e}"),
            );
            kl.pod_event(rt, field, "Warning", "Failed", "Error: ErrImagePull");
            Err(StartFailure::Waiting {
                reason: "ErrImagePull",
                message: e,
            })
        }
    }
}

/// Known Windows container users (the built-in accounts of Windows container images).
const WINDOWS_USERS: &[&str] = &[
    "ContainerUser",
    "ContainerAdministrator",
    "NT AUTHORITY\\SYSTEM",
    "NT AUTHORITY\\Local service",
    "NT AUTHORITY\\NetworkService",
];

fn effective_user(kl: &Kubelet, pod: &Pod, c: &Container, img: &Image) -> (String, Option<bool>) {
    let psc = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    let csc = c.security_context.clone().unwrap_or_default();
    let non_root = csc.run_as_non_root.or(psc.run_as_non_root);
    match kl.cfg.os {
        // A runtime with the `run-as-username-ignored` fault runs every container as its
        // image's default user.
        Os::Windows if kl.net.faults().is_on("run-as-username-ignored") => (img.default_user.clone(), non_root),
        Os::Windows => {
            let u = csc
                .windows_options
                .as_ref()
                .and_then(|w| w.run_as_user_name.clone())
                .or_else(|| psc.windows_options.as_ref().and_then(|w| w.run_as_user_name.clone()))
                .unwrap_or_else(|| img.default_user.clone());
            (u, non_root)
        }
        Os::Linux => {
            let u = csc
                .run_as_user
                .or(psc.run_as_user)
                .map_or_else(|| img.default_user.clone(), |u| u.to_string());
            (u, non_root)
        }
    }
}

/// Pulls, checks, creates and starts one container run, then waits for it to exit and returns
/// the exit code.
async fn start_container(
    kl: &Arc<Kubelet>,
    rt: &Arc<PodRt>,
    c: &Container,
    init: bool,
    idx: usize,
) -> Result<i32, StartFailure> {
    let pod = rt.pod();
    let field = Some((c.name.as_str(), init));
    let img = pull(kl, rt, c, init).await?;
    with_ctr(rt, init, idx, |ct| ct.image_id = Some(img.image_id()));
    let fail_create = |reason: &'static str, msg: String| {
        kl.pod_event(rt, field, "Warning", "Failed", &format!("Error: {msg}"));
        Err(StartFailure::Waiting { reason, message: msg })
    };
    // Configuration (CreateContainerConfigError).
    let (ip, dns, volumes) = {
        let st = rt.state.lock().expect("state lock");
        (
            st.ip.unwrap_or(Ipv4Addr::UNSPECIFIED),
            st.dns.clone().unwrap_or(Err("no dns".into())),
            st.volumes.clone().unwrap_or_default(),
        )
    };
    let (user, non_root) = effective_user(kl, &pod, c, &img);
    // A kubelet with the `run-as-non-root-ignored` fault never verifies runAsNonRoot.
    if non_root == Some(true) && !kl.net.faults().is_on("run-as-non-root-ignored") {
        let root = match kl.cfg.os {
            Os::Windows => user.eq_ignore_ascii_case("ContainerAdministrator"),
            Os::Linux => user == "root" || user == "0",
        };
        if root {
            let msg = match kl.cfg.os {
                Os::Windows => format!(
                    "container's runAsUserName ({user}) which will be regarded as root identity and will break non-root policy (pod: \"{}\", container: {})",
                    rt.label(),
                    c.name
                ),
                Os::Linux => format!(
                    "container has runAsNonRoot and image will run as root (pod: \"{}\", container: {})",
                    rt.label(),
                    c.name
                ),
            };
            return fail_create("CreateContainerConfigError", msg);
        }
    }
    let fields = pod_fields(kl, &pod, ip);
    let hostname = pod
        .spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .unwrap_or_else(|| rt.name.clone());
    // A kubelet with the `service-env-missing` fault has no Service informer: no
    // docker-links-style variables.
    let services = if kl.net.faults().is_on("service-env-missing") {
        Vec::new()
    } else {
        kl.services.state()
    };
    let faults = kl.net.faults().clone();
    let mut env = match runtime::container_env(
        &kl.client,
        &pod,
        c,
        &fields,
        &runtime::EnvNode {
            services: &services,
            os: kl.cfg.os,
            hostname: &hostname,
            faults: &faults,
        },
    )
    .await
    {
        Ok(e) => e,
        Err(e) => return fail_create("CreateContainerConfigError", error_chain(&e)),
    };
    if kl.cfg.os == Os::Windows {
        // Windows gives every process its account's USERNAME and USERPROFILE (`echo %USERNAME%`
        // is how the upstream runAsUserName cases read the user); an account such as
        // `NT AUTHORITY\SYSTEM` shows its name without the domain.
        let account = user.rsplit('\\').next().unwrap_or(&user).to_string();
        env.entry("USERPROFILE".into())
            .or_insert_with(|| format!("C:\\Users\\{account}"));
        env.entry("USERNAME".into()).or_insert(account);
    }
    // Creation (CreateContainerError): OS/build mismatch, mounts, unsupported resources.
    if let Some(why) = img.create_mismatch(kl.cfg.os, kl.cfg.windows_build.as_deref()) {
        let why = if kl.net.faults().is_on("errors-unexplained") {
            "unknown error".to_string()
        } else {
            why
        };
        return fail_create(
            "CreateContainerError",
            format!("failed to create containerd container: {why}"),
        );
    }
    let mounts = match volumes.mounts_for(c, kl.cfg.os) {
        Ok(m) => m,
        Err(why) => {
            return fail_create(
                "CreateContainerError",
                format!("failed to create containerd container: {why}"),
            );
        }
    };
    // `linux-fields-enforced`: a Windows runtime that tries to apply Linux-only security
    // settings instead of ignoring them (pods without spec.os.name may carry them).
    if kl.cfg.os == Os::Windows && kl.net.faults().is_on("linux-fields-enforced") {
        let psc = pod
            .spec
            .as_ref()
            .and_then(|s| s.security_context.clone())
            .unwrap_or_default();
        let csc = c.security_context.clone().unwrap_or_default();
        let linux_only = psc.se_linux_options.is_some()
            || psc.run_as_user.is_some()
            || psc.run_as_group.is_some()
            || csc.se_linux_options.is_some()
            || csc.run_as_user.is_some()
            || csc.run_as_group.is_some();
        if linux_only {
            return fail_create(
                "CreateContainerError",
                "failed to create containerd container: SELinux options, runAsUser and runAsGroup are not supported on Windows".into(),
            );
        }
    }
    if kl.cfg.os == Os::Windows {
        let res = c.resources.clone().unwrap_or_default();
        let huge = res
            .limits
            .iter()
            .chain(res.requests.iter())
            .flat_map(|m| m.keys())
            .any(|k| k.starts_with("hugepages-"));
        if huge && !kl.cfg.os.supports_memory_medium() {
            return fail_create(
                "CreateContainerError",
                "failed to create containerd container: hugepages are not supported on Windows nodes".into(),
            );
        }
    }
    let expand = |v: &Option<Vec<String>>| -> Vec<String> {
        let v = v.clone().unwrap_or_default();
        if faults.is_on("env-expansion-off") {
            return v;
        }
        v.iter().map(|s| runtime::expand_refs(s, &env)).collect()
    };
    let argv0 = img.argv(&expand(&c.command), &expand(&c.args));
    let cid = format!("{:032x}{:032x}", rand::random::<u128>(), rand::random::<u128>());
    let container_dir = kl
        .cfg
        .root_dir
        .join("pods")
        .join(&rt.uid)
        .join("containers")
        .join(&c.name);
    let rootfs = container_dir.join("rootfs");
    if let Err(e) = std::fs::create_dir_all(&rootfs) {
        return fail_create(
            "CreateContainerError",
            format!("failed to create containerd container: creating rootfs: {e}"),
        );
    }
    seed_rootfs(kl, &rootfs, &pod, &hostname, ip, dns.as_ref().ok());
    let read_only_root = kl.cfg.os == Os::Linux
        && c.security_context
            .as_ref()
            .and_then(|s| s.read_only_root_filesystem)
            .unwrap_or(false);
    let fs = FsView::new(
        kl.cfg.os,
        rootfs,
        read_only_root,
        mounts_with_defaults(mounts),
        kl.net.faults().clone(),
    );
    let windows_user_unknown = kl.cfg.os == Os::Windows && !WINDOWS_USERS.iter().any(|u| u.eq_ignore_ascii_case(&user));
    // Start delay (sandbox + container start) from the profile.
    // The `slow-container-starts` fault: an overloaded node where every sandbox + container
    // start takes 35 s more (past the 30 s p50 that upstream's density case allows).
    let mut start_delay = kl.cfg.profile.start(kl.cfg.os);
    if kl.net.faults().is_on("slow-container-starts") {
        start_delay += Duration::from_secs(35);
    }
    if !sleep_or(start_delay, &rt.halted).await {
        return Err(StartFailure::Waiting {
            reason: "ContainerCreating",
            message: "pod is being deleted".into(),
        });
    }
    let logs = Arc::new(LogBuffer::default());
    let usage = Arc::new(Usage::default());
    with_ctr(rt, init, idx, |ct| {
        ct.container_id = Some(format!("containerd://{cid}"));
        if ct.restart_count > 0 || ct.last.is_some() {
            ct.prev_logs = Some(ct.logs.clone());
        }
        ct.logs = logs.clone();
        ct.usage = usage.clone();
        ct.base_memory = base_memory(&img);
        // CPU counters belong to one container instance, and starting its process already
        // costs CPU time, so even an idle container reports usageCoreNanoSeconds > 0 from its
        // first stats read on.
        ct.cpu_ns = Arc::new(AtomicU64::new(startup_cpu_ns(kl.cfg.os)));
        ct.cpu_rate = Arc::new(AtomicU64::new(0));
    });
    kl.pod_event(
        rt,
        field,
        "Normal",
        "Created",
        &format!("Created container: {}", c.name),
    );
    if windows_user_unknown {
        return Err(StartFailure::StartError(format!(
            "failed to create containerd task: failed to create shim task: hcs::System::CreateProcess {cid}: The user name or password is incorrect.: unknown (runAsUserName {user:?})"
        )));
    }
    let Some(a0) = argv0.first().cloned() else {
        return Err(StartFailure::StartError(
            "failed to create containerd task: no command specified".into(),
        ));
    };
    if programs::find(&a0, &img).is_none() {
        return Err(StartFailure::StartError(programs::not_found_message(&a0, &img)));
    }
    let stop = CancellationToken::new();
    let kill = CancellationToken::new();
    // A runtime with the `logs-lost` fault never records container output.
    let out = {
        let logs = logs.clone();
        let lost = kl.net.faults().is_on("logs-lost");
        Output::new(move |s, d| {
            if !lost {
                logs.write(s, d)
            }
        })
    };
    let cwd = c.working_dir.clone().unwrap_or_else(|| "/".into());
    let ctx = Ctx {
        pod: Arc::new(PodInfo {
            name: rt.name.clone(),
            namespace: rt.namespace.clone(),
            uid: rt.uid.clone(),
            hostname: hostname.clone(),
            ip,
            node: kl.cfg.name.clone(),
            node_ip: kl.node_ip(),
            os: kl.cfg.os,
            dns: dns.clone(),
        }),
        container: c.name.clone(),
        image: img.clone(),
        env,
        fs,
        net: kl.net.clone(),
        out,
        cancel: stop.clone(),
        usage: usage.clone(),
        user,
        cwd,
    };
    let started_at = jiff::Timestamp::now();
    let mut task = tokio::spawn(programs::run(ctx.clone(), argv0, None));
    // The process runs (exec and termination can reach it), but as in the kubelet the container
    // is reported Running only once its postStart hook has returned (the pod worker is blocked
    // in the hook until then).
    with_ctr(rt, init, idx, |ct| {
        ct.exec = Some(ctx.clone());
        ct.run_stop = Some(stop.clone());
        ct.run_kill = Some(kill.clone());
        ct.ready = false;
    });
    kl.pod_event(rt, field, "Normal", "Started", &format!("Started container {}", c.name));
    // postStart hook (a kubelet with the `hooks-ignored` fault never runs it).
    if let Some(h) = c.lifecycle.as_ref().and_then(|l| l.post_start.clone())
        && !kl.net.faults().is_on("hooks-ignored")
        && let Err(msg) = run_handler(kl, &ctx, &h, c).await
    {
        kl.pod_event(rt, field, "Warning", "FailedPostStartHook", &msg);
        kl.pod_event(
            rt,
            field,
            "Normal",
            "Killing",
            &format!("FailedPostStartHook: Stopping container {}", c.name),
        );
        stop.cancel();
    }
    let probes_ignored = kl.net.faults().is_on("probes-ignored");
    with_ctr(rt, init, idx, |ct| {
        ct.state = CState::Running { started_at };
        ct.started = c.startup_probe.is_none() || probes_ignored;
        ct.ready = !init && (probes_ignored || (c.readiness_probe.is_none() && c.startup_probe.is_none()));
    });
    rt.touch();
    let probes = CancellationToken::new();
    if !init && !probes_ignored {
        spawn_probes(
            kl.clone(),
            rt.clone(),
            c.clone(),
            idx,
            ctx.clone(),
            probes.clone(),
            stop.clone(),
        );
    }
    let code = tokio::select! {
        r = &mut task => r.unwrap_or(1),
        _ = kill.cancelled() => {
            task.abort();
            137
        }
    };
    probes.cancel();
    let code = if code == programs::terminated_code(kl.cfg.os) && kill.is_cancelled() {
        137
    } else {
        code
    };
    logs.close();
    let finished = jiff::Timestamp::now();
    let message = termination_message(kl, &ctx, c, code, &logs);
    // A runtime with the `exit-codes-lost` fault reports every exit as a clean one.
    let code = if kl.net.faults().is_on("exit-codes-lost") {
        0
    } else {
        code
    };
    with_ctr(rt, init, idx, |ct| {
        ct.state = CState::Terminated {
            exit_code: code,
            reason: if code == 0 { "Completed".into() } else { "Error".into() },
            message,
            started_at: Some(started_at),
            finished_at: finished,
            container_id: format!("containerd://{cid}"),
        };
        ct.ready = false;
        ct.exec = None;
        ct.run_stop = None;
        ct.run_kill = None;
    });
    rt.touch();
    Ok(code)
}

/// The kubelet's cap on a termination message read from the file (4096 bytes).
const MAX_TERMINATION_MESSAGE_BYTES: usize = 4096;
/// How much log tail `FallbackToLogsOnError` uses: the last 80 lines, at most 2048 bytes.
const FALLBACK_LOG_LINES: usize = 80;
const FALLBACK_LOG_BYTES: usize = 2048;

/// The `state.terminated.message` of a finished run, as the kubelet fills it: the contents of
/// `terminationMessagePath` (default `/dev/termination-log`), or — under
/// `terminationMessagePolicy: FallbackToLogsOnError`, when that file is empty and the container
/// failed — the tail of its log. A kubelet with the `termination-message-lost` fault reports none.
fn termination_message(kl: &Kubelet, ctx: &Ctx, c: &Container, code: i32, logs: &LogBuffer) -> Option<String> {
    if kl.net.faults().is_on("termination-message-lost") {
        return None;
    }
    let path = c
        .termination_message_path
        .clone()
        .unwrap_or_else(|| "/dev/termination-log".into());
    let mut from_file = ctx.fs.read(&path).unwrap_or_default();
    from_file.truncate(MAX_TERMINATION_MESSAGE_BYTES);
    if !from_file.is_empty() {
        return Some(String::from_utf8_lossy(&from_file).into_owned());
    }
    let any_exit = kl.net.faults().is_on("fallback-to-logs-always");
    if (code == 0 && !any_exit) || c.termination_message_policy.as_deref() != Some("FallbackToLogsOnError") {
        return None;
    }
    let text = log_text(&logs.since(0), false);
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(FALLBACK_LOG_LINES)..].join("\n");
    let mut start = tail.len().saturating_sub(FALLBACK_LOG_BYTES);
    while !tail.is_char_boundary(start) {
        start += 1;
    }
    let tail = &tail[start..];
    (!tail.is_empty()).then(|| tail.to_string())
}

fn mounts_with_defaults(m: Vec<Mount>) -> Vec<Mount> {
    m
}

/// CPU time a container's process start takes, in nanoseconds: a Windows container's start
/// (its own session, services and the entrypoint) costs tens of milliseconds of CPU, a Linux
/// one a few.
fn startup_cpu_ns(os: Os) -> u64 {
    let ms = match os {
        Os::Windows => rand::random_range(30..80),
        Os::Linux => rand::random_range(3..12),
    };
    ms * 1_000_000
}

fn base_memory(img: &Image) -> u64 {
    let win = img.platform.os() == Os::Windows;
    let base: u64 = if img.has(registry::Tool::Pause) {
        1 << 20
    } else {
        6 << 20
    };
    if win { base + (20 << 20) } else { base }
}

/// Writes the files the runtime puts into a container: `/etc/hosts` and `/etc/resolv.conf` on
/// Linux (the kubelet manages them), the default hosts file on Windows (not managed).
fn seed_rootfs(kl: &Kubelet, rootfs: &std::path::Path, pod: &Pod, hostname: &str, ip: Ipv4Addr, dns: Option<&PodDns>) {
    let write = |rel: &str, data: String| {
        let p = rootfs.join(rel);
        if let Some(parent) = p.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        if let Err(e) = std::fs::write(&p, data) {
            warn!(path = %p.display(), error = %e, "seeding container file failed");
        }
    };
    match kl.cfg.os {
        Os::Linux => {
            let mut hosts = String::from(
                "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
            );
            let spec = pod.spec.clone().unwrap_or_default();
            let fqdn = match (&spec.subdomain, &pod.metadata.namespace) {
                (Some(sd), Some(ns)) => format!("{hostname}.{sd}.{ns}.svc.cluster.local\t"),
                _ => String::new(),
            };
            hosts.push_str(&format!("{ip}\t{fqdn}{hostname}\n"));
            for ha in spec.host_aliases.iter().flatten() {
                hosts.push_str(&format!(
                    "\n# Entries added by HostAliases.\n{}\t{}\n",
                    ha.ip,
                    ha.hostnames.clone().unwrap_or_default().join("\t")
                ));
            }
            write("etc/hosts", hosts);
            if let Some(d) = dns {
                let mut r = String::new();
                if !d.searches.is_empty() {
                    r.push_str(&format!("search {}\n", d.searches.join(" ")));
                }
                for ns in &d.nameservers {
                    r.push_str(&format!("nameserver {ns}\n"));
                }
                r.push_str(&format!("options ndots:{}\n", d.ndots));
                write("etc/resolv.conf", r);
            }
            write("etc/hostname", format!("{hostname}\n"));
        }
        Os::Windows => {
            write(
                "windows/system32/drivers/etc/hosts",
                "# Copyright (c) 1993-2009 Microsoft Corp.\r\n#\r\n# This is a sample HOSTS file used by Microsoft TCP/IP for Windows.\r\n".into(),
            );
        }
    }
}

/// Runs a lifecycle handler (exec or httpGet); the error is the event message.
async fn run_handler(
    kl: &Kubelet,
    ctx: &Ctx,
    h: &k8s_openapi::api::core::v1::LifecycleHandler,
    c: &Container,
) -> Result<(), String> {
    if let Some(e) = &h.exec {
        let argv = e.command.clone().unwrap_or_default();
        if kl.net.faults().is_on("exec-broken") {
            return Err(format!(
                "Exec lifecycle hook ({argv:?}) for Container \"{}\" in Pod \"{}\" failed - error: {}",
                c.name,
                ctx.pod.name,
                "rpc error: code = Unknown desc = failed to exec in container: the runtime's exec is broken (exec-broken fault)"
            ));
        }
        let (out, buf) = Output::capture();
        let sub = Ctx {
            out,
            cancel: ctx.cancel.child_token(),
            ..ctx.clone()
        };
        if argv.first().and_then(|a| programs::find(a, &ctx.image)).is_none() {
            return Err(format!(
                "Exec lifecycle hook ({argv:?}) for Container \"{}\" in Pod \"{}\" failed - error: {}",
                c.name,
                ctx.pod.name,
                programs::not_found_message(argv.first().map_or("", String::as_str), &ctx.image)
            ));
        }
        let code = programs::run(sub, argv.clone(), None).await;
        if code != 0 {
            let output = String::from_utf8_lossy(&buf.lock().expect("capture lock")).to_string();
            return Err(format!(
                "Exec lifecycle hook ({argv:?}) for Container \"{}\" in Pod \"{}_{}({})\" failed - error: command '{}' exited with {code}: , message: {output:?}",
                c.name,
                ctx.pod.name,
                ctx.pod.namespace,
                ctx.pod.uid,
                argv.join(" ")
            ));
        }
        return Ok(());
    }
    if let Some(g) = &h.http_get {
        let port = resolve_port(&g.port, c).ok_or_else(|| {
            format!(
                "HTTP lifecycle hook for Container \"{}\": unknown port {:?}",
                c.name, g.port
            )
        })?;
        let host: IpAddr = g
            .host
            .as_deref()
            .and_then(|h| h.parse().ok())
            .unwrap_or(IpAddr::V4(ctx.pod.ip));
        let path = g.path.clone().unwrap_or_else(|| "/".into());
        let src = Source {
            ip: None,
            node: Some(kl.cfg.name.clone()),
            os: kl.cfg.os,
            is_pod: false,
        };
        let addr = SocketAddr::new(host, port);
        return match http::get(
            kl.net.dialer(),
            &src,
            addr,
            &addr.to_string(),
            &path,
            &[],
            Duration::from_secs(10),
        )
        .await
        {
            Ok(r) if (200..400).contains(&r.status) => Ok(()),
            Ok(r) => Err(format!(
                "HTTP lifecycle hook ({path}) for Container \"{}\" in Pod \"{}\" failed - error: HTTP status {}",
                c.name, ctx.pod.name, r.status
            )),
            Err(e) => Err(format!(
                "HTTP lifecycle hook ({path}) for Container \"{}\" in Pod \"{}\" failed - error: {}",
                c.name,
                ctx.pod.name,
                error_chain(&e)
            )),
        };
    }
    Err("lifecycle handler has no exec or httpGet action (sleep and tcpSocket handlers are not emulated)".into())
}

fn resolve_port(p: &IntOrString, c: &Container) -> Option<u16> {
    match p {
        IntOrString::Int(n) => u16::try_from(*n).ok(),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|cp| cp.name.as_deref() == Some(name.as_str()))
            .and_then(|cp| u16::try_from(cp.container_port).ok()),
    }
}

/// Runs one probe; the error is the probe's failure output.
async fn probe_once(kl: &Kubelet, ctx: &Ctx, p: &Probe, c: &Container) -> Result<(), String> {
    let timeout = Duration::from_secs(p.timeout_seconds.unwrap_or(1).max(1) as u64);
    let src = Source {
        ip: None,
        node: Some(kl.cfg.name.clone()),
        os: kl.cfg.os,
        is_pod: false,
    };
    if let Some(e) = &p.exec {
        let argv = e.command.clone().unwrap_or_default();
        if kl.net.faults().is_on("exec-broken") {
            return Err("rpc error: code = Unknown desc = failed to exec in container: the runtime's exec is broken (exec-broken fault)".into());
        }
        if argv.first().and_then(|a| programs::find(a, &ctx.image)).is_none() {
            return Err(programs::not_found_message(
                argv.first().map_or("", String::as_str),
                &ctx.image,
            ));
        }
        let (out, buf) = Output::capture();
        let sub = Ctx {
            out,
            cancel: ctx.cancel.child_token(),
            ..ctx.clone()
        };
        let cancel = sub.cancel.clone();
        return match tokio::time::timeout(timeout, programs::run(sub, argv.clone(), None)).await {
            Ok(0) => Ok(()),
            Ok(code) => Err(format!(
                "command {argv:?} exited with {code}: {}",
                String::from_utf8_lossy(&buf.lock().expect("capture lock"))
            )),
            Err(_) => {
                cancel.cancel();
                Err(format!("command {argv:?} timed out"))
            }
        };
    }
    if let Some(g) = &p.http_get {
        let port = resolve_port(&g.port, c).ok_or_else(|| format!("unknown port {:?}", g.port))?;
        let host: IpAddr = g
            .host
            .as_deref()
            .and_then(|h| h.parse().ok())
            .unwrap_or(IpAddr::V4(ctx.pod.ip));
        let path = g.path.clone().unwrap_or_else(|| "/".into());
        let headers: Vec<(String, String)> = g
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        if g.scheme.as_deref() == Some("HTTPS") {
            return Err("HTTPS probes are not emulated by the simulator".into());
        }
        let addr = SocketAddr::new(host, port);
        return match http::get(kl.net.dialer(), &src, addr, &addr.to_string(), &path, &headers, timeout).await {
            Ok(r) if (200..400).contains(&r.status) => Ok(()),
            Ok(r) => Err(format!("HTTP probe failed with statuscode: {}", r.status)),
            Err(e) => Err(error_chain(&e)),
        };
    }
    if let Some(t) = &p.tcp_socket {
        let port = resolve_port(&t.port, c).ok_or_else(|| format!("unknown port {:?}", t.port))?;
        let host: IpAddr = t
            .host
            .as_deref()
            .and_then(|h| h.parse().ok())
            .unwrap_or(IpAddr::V4(ctx.pod.ip));
        let addr = SocketAddr::new(host, port);
        return match tokio::time::timeout(timeout, kl.net.dialer().tcp(&src, addr)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("dial tcp {addr}: {}", error_chain(&e))),
            Err(_) => Err(format!("dial tcp {addr}: i/o timeout")),
        };
    }
    Err("grpc probes are not emulated by the simulator".into())
}

fn spawn_probes(
    kl: Arc<Kubelet>,
    rt: Arc<PodRt>,
    c: Container,
    idx: usize,
    ctx: Ctx,
    done: CancellationToken,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let started_at = Instant::now();
        let period = |p: &Probe| Duration::from_secs(p.period_seconds.unwrap_or(10).max(1) as u64);
        let delay = |p: &Probe| Duration::from_secs(p.initial_delay_seconds.unwrap_or(0).max(0) as u64);
        let field = Some((c.name.as_str(), false));
        // Startup probe gates the others.
        if let Some(sp) = &c.startup_probe {
            if !sleep_or(delay(sp), &done).await {
                return;
            }
            let threshold = sp.failure_threshold.unwrap_or(3).max(1);
            let mut fails = 0;
            loop {
                match probe_once(&kl, &ctx, sp, &c).await {
                    Ok(()) => break,
                    Err(out) => {
                        fails += 1;
                        kl.pod_event(
                            &rt,
                            field,
                            "Warning",
                            "Unhealthy",
                            &format!("Startup probe failed: {out}"),
                        );
                        if fails >= threshold {
                            kl.pod_event(
                                &rt,
                                field,
                                "Normal",
                                "Killing",
                                &format!("Container {} failed startup probe, will be restarted", c.name),
                            );
                            stop_with_grace(&kl, &rt, idx, &stop).await;
                            return;
                        }
                    }
                }
                if !sleep_or(period(sp), &done).await {
                    return;
                }
            }
            with_ctr(&rt, false, idx, |ct| ct.started = true);
            rt.touch();
        }
        with_ctr(&rt, false, idx, |ct| {
            ct.started = true;
            if c.readiness_probe.is_none() {
                ct.ready = true;
            }
        });
        rt.touch();
        let mut next_ready = c.readiness_probe.as_ref().map(|p| started_at + delay(p));
        let mut next_live = c.liveness_probe.as_ref().map(|p| started_at + delay(p));
        let (mut r_ok, mut r_fail, mut l_fail) = (0, 0, 0);
        loop {
            let next = [next_ready, next_live].into_iter().flatten().min();
            let Some(next) = next else { return };
            let now = Instant::now();
            if next > now && !sleep_or(next - now, &done).await {
                return;
            }
            let now = Instant::now();
            if let (Some(t), Some(p)) = (next_ready, &c.readiness_probe)
                && t <= now
            {
                let r = probe_once(&kl, &ctx, p, &c).await;
                if done.is_cancelled() {
                    return;
                }
                match r {
                    Ok(()) => {
                        r_fail = 0;
                        r_ok += 1;
                        if r_ok >= p.success_threshold.unwrap_or(1).max(1) {
                            let changed = with_ctr(&rt, false, idx, |ct| !std::mem::replace(&mut ct.ready, true));
                            if changed {
                                rt.touch();
                            }
                        }
                    }
                    Err(out) => {
                        r_ok = 0;
                        r_fail += 1;
                        kl.pod_event(
                            &rt,
                            field,
                            "Warning",
                            "Unhealthy",
                            &format!("Readiness probe failed: {out}"),
                        );
                        if r_fail >= p.failure_threshold.unwrap_or(3).max(1) {
                            let changed = with_ctr(&rt, false, idx, |ct| std::mem::replace(&mut ct.ready, false));
                            if changed {
                                rt.touch();
                            }
                        }
                    }
                }
                next_ready = Some(now + period(p));
            }
            if let (Some(t), Some(p)) = (next_live, &c.liveness_probe)
                && t <= now
            {
                match probe_once(&kl, &ctx, p, &c).await {
                    Ok(()) => l_fail = 0,
                    Err(out) => {
                        if done.is_cancelled() {
                            return;
                        }
                        l_fail += 1;
                        kl.pod_event(
                            &rt,
                            field,
                            "Warning",
                            "Unhealthy",
                            &format!("Liveness probe failed: {out}"),
                        );
                        if l_fail >= p.failure_threshold.unwrap_or(3).max(1) {
                            kl.pod_event(
                                &rt,
                                field,
                                "Normal",
                                "Killing",
                                &format!("Container {} failed liveness probe, will be restarted", c.name),
                            );
                            stop_with_grace(&kl, &rt, idx, &stop).await;
                            return;
                        }
                    }
                }
                next_live = Some(now + period(p));
            }
        }
    });
}

fn grace_of(pod: &Pod) -> Duration {
    let secs = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
        .unwrap_or(30)
        .max(0);
    Duration::from_secs(secs as u64)
}

/// Sends the stop signal, then kills after the pod's grace period.
async fn stop_with_grace(_kl: &Kubelet, rt: &PodRt, idx: usize, stop: &CancellationToken) {
    stop.cancel();
    let kill = with_ctr(rt, false, idx, |ct| ct.run_kill.clone());
    let grace = grace_of(&rt.pod());
    if let Some(kill) = kill {
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            kill.cancel();
        });
    }
}

/// A running container as termination sees it: (init, index, name, context, stop, kill).
type RunningCtr = (
    bool,
    usize,
    String,
    Option<Ctx>,
    Option<CancellationToken>,
    Option<CancellationToken>,
);

/// Graceful termination: preStop hooks, the stop signal, and a kill at the grace deadline.
async fn terminate(kl: &Arc<Kubelet>, rt: &Arc<PodRt>) {
    let pod = rt.pod();
    let grace = if rt.gone.is_cancelled() || kl.cancel.is_cancelled() {
        Duration::ZERO
    } else {
        grace_of(&pod)
    };
    let deadline = Instant::now() + grace;
    let spec = pod.spec.clone().unwrap_or_default();
    let running: Vec<RunningCtr> = {
        let st = rt.state.lock().expect("state lock");
        st.init
            .iter()
            .enumerate()
            .map(|(i, c)| (true, i, c))
            .chain(st.main.iter().enumerate().map(|(i, c)| (false, i, c)))
            // A container whose postStart hook is still running is not reported Running yet,
            // but its process is: it has a stop token.
            .filter(|(_, _, c)| c.state.is_running() || c.run_stop.is_some())
            .map(|(init, i, c)| {
                (
                    init,
                    i,
                    c.name.clone(),
                    c.exec.clone(),
                    c.run_stop.clone(),
                    c.run_kill.clone(),
                )
            })
            .collect()
    };
    let mut waits = Vec::new();
    for (init, _i, name, ctx, stop, kill) in running {
        kl.pod_event(
            rt,
            Some((&name, init)),
            "Normal",
            "Killing",
            &format!("Stopping container {name}"),
        );
        let c = spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == name)
            .cloned();
        let kl2 = kl.clone();
        let rt2 = rt.clone();
        waits.push(tokio::spawn(async move {
            if let (Some(c), Some(ctx)) = (&c, &ctx)
                && let Some(h) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.clone())
                && !kl2.net.faults().is_on("hooks-ignored")
            {
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, run_handler(&kl2, ctx, &h, c)).await {
                    Ok(Err(msg)) => kl2.pod_event(&rt2, Some((&c.name, init)), "Warning", "FailedPreStopHook", &msg),
                    Ok(Ok(())) => {}
                    Err(_) => kl2.pod_event(
                        &rt2,
                        Some((&c.name, init)),
                        "Warning",
                        "FailedPreStopHook",
                        "PreStopHook did not finish within the grace period",
                    ),
                }
            }
            if let Some(s) = stop {
                s.cancel();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::sleep(left).await;
            if let Some(k) = kill {
                k.cancel();
            }
        }));
    }
    // Wait until every container has exited (or been killed at the deadline).
    let until = deadline + Duration::from_secs(2);
    loop {
        let any_running = {
            let st = rt.state.lock().expect("state lock");
            st.init
                .iter()
                .chain(st.main.iter())
                .any(|c| c.state.is_running() || c.run_stop.is_some())
        };
        if !any_running || Instant::now() > until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for w in waits {
        w.abort();
    }
    // Containers that never ran are reported as terminated too, as the kubelet does.
    let now = jiff::Timestamp::now();
    let mut guard = rt.state.lock().expect("state lock");
    let st = &mut *guard;
    for c in st.init.iter_mut().chain(st.main.iter_mut()) {
        if let CState::Waiting { .. } = c.state
            && c.container_id.is_some()
        {
            c.state = CState::Terminated {
                exit_code: 137,
                reason: "ContainerStatusUnknown".into(),
                message: Some("The container could not be located when the pod was deleted.".into()),
                started_at: None,
                finished_at: now,
                container_id: c.container_id.clone().unwrap_or_default(),
            };
        }
        c.ready = false;
    }
}

/// Computes the pod status from the runtime state.
fn build_status(kl: &Kubelet, rt: &PodRt) -> serde_json::Value {
    let pod = rt.pod();
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = spec.restart_policy.clone().unwrap_or_else(|| "Always".into());
    let mut st = rt.state.lock().expect("state lock");
    let cs = |c: &Ctr| ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone(),
        image_id: c.image_id.clone().unwrap_or_default(),
        container_id: c.container_id.clone(),
        ready: c.ready,
        restart_count: c.restart_count as i32,
        started: Some(c.started && c.state.is_running()),
        state: Some(c.state.to_api()),
        last_state: Some(c.last.as_ref().map(CState::to_api).unwrap_or_default()),
        ..Default::default()
    };
    let init_statuses: Vec<ContainerStatus> = st.init.iter().map(cs).collect();
    let statuses: Vec<ContainerStatus> = st.main.iter().map(cs).collect();
    let terminal = |c: &Ctr| match &c.state {
        CState::Terminated { exit_code, .. } => match policy.as_str() {
            "Always" => false,
            "OnFailure" => *exit_code == 0,
            _ => true,
        },
        _ => false,
    };
    let all_terminal = !st.main.is_empty() && st.main.iter().all(terminal);
    let any_started = st.main.iter().any(|c| c.container_id.is_some() || c.restart_count > 0);
    let phase = if st.failed.is_some() {
        "Failed"
    } else if !st.init_done {
        "Pending"
    } else if all_terminal {
        if st
            .main
            .iter()
            .all(|c| matches!(c.state, CState::Terminated { exit_code: 0, .. }))
        {
            "Succeeded"
        } else {
            "Failed"
        }
    } else if any_started
        && st
            .main
            .iter()
            .any(|c| c.state.is_running() || c.last.is_some() || matches!(c.state, CState::Terminated { .. }))
    {
        "Running"
    } else {
        "Pending"
    };
    let completed = phase == "Succeeded" || phase == "Failed";
    let unready: Vec<String> = st.main.iter().filter(|c| !c.ready).map(|c| c.name.clone()).collect();
    let uninit: Vec<String> = if st.init_done {
        vec![]
    } else {
        st.init
            .iter()
            .filter(|c| !matches!(c.state, CState::Terminated { exit_code: 0, .. }))
            .map(|c| c.name.clone())
            .collect()
    };
    let now = jiff::Timestamp::now();
    let sandbox_ready = st.sandbox_ready;
    let init_done = st.init_done;
    let mut set = |t: &'static str, ok: bool, reason: Option<String>, msg: Option<String>| {
        let e = st.conditions.entry(t).or_insert((ok, now, reason.clone(), msg.clone()));
        if e.0 != ok {
            *e = (ok, now, reason, msg);
        } else {
            e.2 = reason;
            e.3 = msg;
        }
    };
    set("PodReadyToStartContainers", sandbox_ready, None, None);
    let init_ok = uninit.is_empty();
    set(
        "Initialized",
        init_ok,
        (!init_ok).then(|| "ContainersNotInitialized".to_string()),
        (!init_ok).then(|| format!("containers with incomplete status: [{}]", uninit.join(" "))),
    );
    let ready = unready.is_empty() && !completed && init_done;
    let (reason, msg) = if completed {
        (Some("PodCompleted".to_string()), None)
    } else if !ready {
        (
            Some("ContainersNotReady".to_string()),
            Some(format!("containers with unready status: [{}]", unready.join(" "))),
        )
    } else {
        (None, None)
    };
    set("ContainersReady", ready, reason.clone(), msg.clone());
    set("Ready", ready, reason, msg);
    set("PodScheduled", true, None, None);
    let conditions: Vec<PodCondition> = st
        .conditions
        .iter()
        .map(|(t, (ok, at, reason, msg))| PodCondition {
            type_: (*t).to_string(),
            status: if *ok { "True" } else { "False" }.into(),
            last_transition_time: Some(Time(*at)),
            reason: reason.clone(),
            message: msg.clone(),
            ..Default::default()
        })
        .collect();
    let mut status = serde_json::json!({
        "phase": phase,
        "conditions": conditions,
        "hostIP": kl.node_ip().to_string(),
        "hostIPs": [{"ip": kl.node_ip().to_string()}],
        "containerStatuses": statuses,
        "qosClass": qos_class(&pod),
    });
    // A kubelet with the `host-ip-unreported` fault (no usable --node-ip) reports no host IP.
    if kl.net.faults().is_on("host-ip-unreported") {
        status["hostIP"] = serde_json::Value::Null;
        status["hostIPs"] = serde_json::Value::Null;
    }
    if !init_statuses.is_empty() {
        status["initContainerStatuses"] = serde_json::to_value(&init_statuses).unwrap_or_default();
    }
    if let Some(ip) = st.ip {
        status["podIP"] = ip.to_string().into();
        status["podIPs"] = serde_json::to_value(vec![PodIP { ip: ip.to_string() }]).unwrap_or_default();
    }
    if let Some(t) = st.start_time {
        status["startTime"] = serde_json::to_value(Time(t)).unwrap_or_default();
    }
    if let Some((reason, msg)) = &st.failed {
        status["reason"] = reason.clone().into();
        status["message"] = msg.clone().into();
    }
    status
}

fn qos_class(pod: &Pod) -> &'static str {
    let spec = pod.spec.clone().unwrap_or_default();
    let mut any = false;
    let mut guaranteed = true;
    for c in &spec.containers {
        let r = c.resources.clone().unwrap_or_default();
        let (l, q) = (r.limits.unwrap_or_default(), r.requests.unwrap_or_default());
        if !l.is_empty() || !q.is_empty() {
            any = true;
        }
        for k in ["cpu", "memory"] {
            match (l.get(k), q.get(k)) {
                (Some(a), Some(b)) if a != b => guaranteed = false,
                (None, _) => guaranteed = false,
                _ => {}
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

async fn status_writer(kl: Arc<Kubelet>, rt: Arc<PodRt>) {
    let api: Api<Pod> = Api::namespaced(kl.client.clone(), &rt.namespace);
    let mut last = serde_json::Value::Null;
    loop {
        tokio::select! {
            _ = rt.dirty.notified() => {}
            _ = rt.gone.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        let status = build_status(&kl, &rt);
        if status == last {
            continue;
        }
        match api
            .patch_status(
                &rt.name,
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({ "status": status })),
            )
            .await
        {
            Ok(_) => last = status,
            Err(kube::Error::Api(s)) if s.code == 404 => return,
            Err(e) => {
                debug!(pod = %rt.name, error = %e, "pod status update failed");
                rt.touch();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Errors of `exec` into a container.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// No such pod on this node.
    #[error("pod {0} not found")]
    PodNotFound(String),
    /// No such container, or it is not running.
    #[error("container {container} is not valid for pod {pod}")]
    ContainerNotRunning {
        /// The pod.
        pod: String,
        /// The container.
        container: String,
    },
    /// The command is not in the image.
    #[error("{0}")]
    NotFound(String),
}

impl Kubelet {
    /// Runs `argv` in a running container, streaming output into `out`; returns the exit code.
    pub(crate) async fn exec(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        argv: Vec<String>,
        stdin: Option<Vec<u8>>,
        out: Output,
    ) -> Result<i32, ExecError> {
        let rt = self
            .find_pod(ns, pod)
            .ok_or_else(|| ExecError::PodNotFound(format!("{ns}/{pod}")))?;
        let ctx = {
            let st = rt.state.lock().expect("state lock");
            let c = st
                .main
                .iter()
                .chain(st.init.iter())
                .find(|c| c.name == container || container.is_empty());
            c.and_then(|c| c.exec.clone())
        }
        .ok_or_else(|| ExecError::ContainerNotRunning {
            pod: pod.into(),
            container: container.into(),
        })?;
        if self.net.faults().is_on("exec-broken") {
            return Err(ExecError::NotFound("rpc error: code = Unknown desc = failed to exec in container: the runtime's exec is broken (exec-broken fault)".into()));
        }
        let a0 = argv.first().cloned().unwrap_or_default();
        if programs::find(&a0, &ctx.image).is_none() {
            let msg = match self.cfg.os {
                Os::Linux => format!(
                    "OCI runtime exec failed: exec failed: unable to start container process: exec: \"{a0}\": executable file not found in $PATH: unknown (the simulator emulates no program {a0:?} in image {})",
                    ctx.image.name
                ),
                Os::Windows => format!(
                    "hcs::System::CreateProcess: The system cannot find the file specified.: unknown (the simulator emulates no program {a0:?} in image {})",
                    ctx.image.name
                ),
            };
            return Err(ExecError::NotFound(msg));
        }
        let sub = Ctx {
            out,
            cancel: ctx.cancel.child_token(),
            ..ctx
        };
        Ok(programs::run(sub, argv, stdin).await)
    }

    /// The log of a container (the previous run's with `previous`).
    pub(crate) fn logs(&self, ns: &str, pod: &str, container: &str, previous: bool) -> Option<Arc<LogBuffer>> {
        let rt = self.find_pod(ns, pod)?;
        let st = rt.state.lock().expect("state lock");
        let c = if container.is_empty() {
            st.main.first()
        } else {
            st.main.iter().chain(st.init.iter()).find(|c| c.name == container)
        }?;
        if previous {
            c.prev_logs.clone()
        } else {
            Some(c.logs.clone())
        }
    }

    /// The pods on this node, as `/pods` lists them.
    pub(crate) fn pod_list(&self) -> Vec<Pod> {
        self.pods.lock().expect("pods lock").values().map(|p| p.pod()).collect()
    }
}

/// Writes a log to `out` (used by tests and the `/containerLogs` endpoint).
pub(crate) fn log_text(lines: &[runtime::LogLine], timestamps: bool) -> Vec<u8> {
    let mut v = Vec::new();
    for l in lines {
        if timestamps {
            v.extend_from_slice(format!("{} ", l.ts.strftime("%Y-%m-%dT%H:%M:%S%.9fZ")).as_bytes());
        }
        v.extend_from_slice(&l.data);
        let _ = l.stream == Stream::Stderr;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    #[test]
    fn windows_refuses_host_network_sandboxes() {
        let pod = Pod {
            spec: Some(PodSpec {
                host_network: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(sandbox_error(Os::Windows, &pod, false).unwrap().contains("hostNetwork"));
        assert!(sandbox_error(Os::Windows, &pod, true).is_none());
        assert!(sandbox_error(Os::Linux, &pod, false).is_none());
    }

    #[test]
    fn allocatable_is_capacity_minus_reserved_and_eviction() {
        let cfg = NodeConfig::new("n", Os::Windows, 0, AddressBlock(206), PathBuf::from("/tmp/x"));
        assert_eq!(cfg.allocatable_cpu_millis(), 3800);
        assert_eq!(cfg.allocatable_memory_bytes(), (16 << 30) - (1100 << 20));
    }

    #[test]
    fn qos_classes() {
        let pod = Pod {
            spec: Some(PodSpec {
                containers: vec![Container::default()],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(qos_class(&pod), "BestEffort");
    }
}
