//! The Node object: registration with its capacity, allocatable, addresses, conditions and
//! system info, the periodic status heartbeat and the Lease in `kube-node-lease` (both of which
//! follow the node's health under the node switches, `node_health`). Separate because it is
//! about the node itself, not about any pod.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference, Time};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use tracing::{debug, info, warn};

use crate::addr::KUBELET_PORT;
use crossconf_model::os::{self, Os};

use super::node_health::{Change, HEALTH_TICK};
use super::{KUBELET_VERSION, Kubelet, KubeletError};

fn q(s: impl Into<String>) -> Quantity {
    Quantity(s.into())
}

impl Kubelet {
    /// The labels the kubelet registers its Node with (`--node-labels` included).
    pub(super) fn registered_labels(&self) -> BTreeMap<String, String> {
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
        labels.extend(c.labels.iter().cloned());
        labels
    }

    fn node_object(&self) -> Node {
        let c = &self.cfg;
        let labels = self.registered_labels();
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

    /// Node allocatable as the kubelet reports it (capacity less reservations and the hard
    /// eviction threshold), which its own admission checks pods against.
    pub(super) fn allocatable(&self) -> BTreeMap<String, Quantity> {
        let c = &self.cfg;
        BTreeMap::from([
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
        ])
    }

    fn node_status(&self) -> NodeStatus {
        let c = &self.cfg;
        let now = Time(jiff::Timestamp::now());
        let since =
            Time(jiff::Timestamp::now() - jiff::SignedDuration::from_secs(self.started.elapsed().as_secs() as i64));
        let mut ready = self.health.ready_condition(Instant::now());
        // The shutdown manager's health check fails while it shuts the node down.
        if let Some(since) = self.power.shutting_down_since() {
            ready = super::node_health::ReadyCondition {
                status: "False",
                reason: "KubeletNotReady",
                message: super::power::NOT_READY_MESSAGE.into(),
                since,
            };
        }
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
        let allocatable = self.allocatable();
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
                if self.eviction.memory_pressure(c.profile.pressure_transition()) {
                    cond(
                        "MemoryPressure",
                        "True",
                        "KubeletHasInsufficientMemory",
                        "kubelet has insufficient memory available",
                    )
                } else {
                    cond(
                        "MemoryPressure",
                        "False",
                        "KubeletHasSufficientMemory",
                        "kubelet has sufficient memory available",
                    )
                },
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
                NodeCondition {
                    type_: "Ready".into(),
                    status: ready.status.into(),
                    reason: Some(ready.reason.into()),
                    message: Some(ready.message),
                    last_heartbeat_time: Some(now.clone()),
                    last_transition_time: Some(Time(ready.since)),
                },
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
                    self.power.boot_id()
                },
                container_runtime_version: format!("containerd://{}", c.runtime_version),
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

    pub(super) async fn register(&self) -> Result<(), KubeletError> {
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
}

/// Posts the node's status every `node_status` period of the profile, and at once when a
/// node switch changes its health (see [`super::node_health`]): the Ready condition flips at
/// the start and end of a flap episode, with upstream's `NodeNotReady`/`NodeReady` events, and
/// a lost node stops posting for good.
pub(super) async fn heartbeat(kl: Arc<Kubelet>) {
    let api: Api<Node> = Api::all(kl.client.clone());
    let mut posted = Instant::now();
    // The power state last posted: a shutdown beginning or a new boot is posted at once.
    let power_state = || (kl.power.shutting_down_since().is_some(), kl.power.boot_id());
    let mut power_posted = power_state();
    loop {
        tokio::select! {
            _ = kl.cancel.cancelled() => return,
            _ = tokio::time::sleep(HEALTH_TICK) => {}
        }
        // A machine that is down (rebooting) has no kubelet to post anything.
        if kl.power.is_down() {
            continue;
        }
        let change = kl.health.evaluate(kl.net.faults(), &kl.cfg.name, Instant::now());
        match change {
            Change::Lost => {
                kl.net.dialer().set_node_lost(&kl.cfg.name, true);
                info!(node = %kl.cfg.name, "node lost (node-lost): no more status, Lease or pod work; its pods are unreachable");
                return;
            }
            Change::RuntimeDown => {
                info!(node = %kl.cfg.name, "container runtime not answering (node-flap): posting NotReady");
                kl.node_event(
                    "Normal",
                    "NodeNotReady",
                    &format!("Node {} status is now: NodeNotReady", kl.cfg.name),
                );
            }
            Change::RuntimeUp => {
                info!(node = %kl.cfg.name, "container runtime answers again: posting Ready");
                kl.node_event(
                    "Normal",
                    "NodeReady",
                    &format!("Node {} status is now: NodeReady", kl.cfg.name),
                );
            }
            Change::None => {
                if posted.elapsed() < kl.cfg.profile.node_status() && power_state() == power_posted {
                    continue;
                }
            }
        }
        posted = Instant::now();
        power_posted = power_state();
        let patch = serde_json::json!({ "status": kl.node_status() });
        if let Err(e) = api
            .patch_status(&kl.cfg.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            warn!(node = %kl.cfg.name, error = %e, "node status update failed");
        }
    }
}

pub(super) async fn lease_loop(kl: Arc<Kubelet>) {
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
        // A lost node renews nothing.
        if kl.health.is_lost() {
            return;
        }
        // Nor does a machine that is down (rebooting).
        tokio::select! {
            () = kl.cancel.cancelled() => return,
            () = kl.power.wait_up() => {}
        }
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
            _ = kl.health.lost().cancelled() => return,
            _ = tokio::time::sleep(kl.cfg.profile.lease_renew()) => {}
        }
    }
}
