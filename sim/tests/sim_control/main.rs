//! The simulated control plane against the simulated API server: scheduling rules (taints,
//! selectors, affinity, resources, nodeName, preemption), DaemonSets per OS, Deployments,
//! Jobs, garbage collection and namespace deletion.
//!
//! No kubelet runs here: Node objects are created by the test, and a tiny stand-in kubelet
//! ([`FakeKubelet`]) marks bound pods Running and Ready and confirms deletions, as a real
//! kubelet would. Tests that need pods to stay un-started leave it out.
//!
//! The cluster, the stand-in kubelet and the helpers are here; the tests are grouped by
//! controller: `scheduling` (the scheduler's rules and preemption), `workloads` (Deployments,
//! StatefulSets, Jobs and CronJobs), `lifecycle` (namespace deletion, garbage collection,
//! informers across watch cuts) and `nodelifecycle` (node health, taints and pod readiness).

#![expect(
    clippy::disallowed_methods,
    reason = "the test paces a real server or process with short sleeps"
)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crossconf_sim::addr::AddressBlock;
use crossconf_sim::api::{ApiConfig, ApiServer};
use crossconf_sim::control::{Component, ControlConfig, ControlPlane, ScaledClock, start};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job, JobCondition};
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Event, Namespace, Node, Pod, PodCondition, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// How long any single expectation may take before the test fails.
mod disruption;
mod lifecycle;
mod nodelifecycle;
mod scheduling;
mod workloads;
const WAIT: Duration = Duration::from_secs(30);

struct Cluster {
    server: Option<ApiServer>,
    client: Client,
    cancel: CancellationToken,
    plane: Option<ControlPlane>,
}

impl Cluster {
    async fn start(cfg: ControlConfig, kubelet: bool) -> Self {
        crossconf_sim::install_crypto_provider();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let block = AddressBlock(200 + (std::process::id() % 40) as u8);
        let server = ApiServer::start(ApiConfig::new(block).port(0))
            .await
            .expect("api server starts");
        let client = Client::try_from(server.kube_config()).expect("client builds");
        let cancel = CancellationToken::new();
        let plane = start(client.clone(), cfg, cancel.clone())
            .await
            .expect("control plane starts");
        if kubelet {
            tokio::spawn(fake_kubelet(client.clone(), cancel.clone()));
        }
        Self {
            server: Some(server),
            client,
            cancel,
            plane: Some(plane),
        }
    }

    fn api<K>(&self, ns: &str) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), ns)
    }

    async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(p) = self.plane.take() {
            p.stopped().await;
        }
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
    }
}

/// Stands in for the kubelets: bound pods become Running and Ready with a loopback IP, and
/// deleted pods are confirmed gone (grace period 0), as a kubelet does after stopping them.
async fn fake_kubelet(client: Client, cancel: CancellationToken) {
    let api: Api<Pod> = Api::all(client.clone());
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects();
    let mut stream = std::pin::pin!(stream);
    let mut n = 2u32;
    loop {
        let pod = tokio::select! {
            () = cancel.cancelled() => return,
            p = stream.next() => match p { Some(Ok(p)) => p, Some(Err(_)) => continue, None => return },
        };
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        let ns = pod.namespace().unwrap_or_default();
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        if pod.metadata.deletion_timestamp.is_some() {
            let _ = pods
                .delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
                .await;
            continue;
        }
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if phase == "Pending" || phase.is_empty() {
            n += 1;
            let ip = format!("127.{}.{}.{}", 200, 16 + (n / 250), 2 + n % 250);
            let now = jiff::Timestamp::now().to_string();
            let status = json!({"status": {
            "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "127.0.0.1", "startTime": now,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
            ]}});
            let _ = pods
                .patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&status))
                .await;
            tracing::debug!(pod = %pod.name_any(), %node, "fake kubelet started pod");
        }
    }
}

/// Creates a Ready node with the real OS labels; Windows nodes carry `os=windows:NoSchedule`.
async fn add_node(client: &Client, name: &str, os: &str, cpu: &str, memory: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let taints = if os == "windows" {
        json!([{"key": "os", "value": "windows", "effect": "NoSchedule"}])
    } else {
        json!([])
    };
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/os": os, "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name}},
        "spec": {"taints": taints},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.expect("node created");
    let resources = json!({"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "20Gi"});
    let status = json!({"status": {
        "capacity": resources, "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
    }});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("node status patched");
}

async fn heterogeneous_nodes(client: &Client) {
    add_node(client, "linux-0", "linux", "4", "8Gi").await;
    add_node(client, "windows-0", "windows", "4", "8Gi").await;
    add_node(client, "windows-1", "windows", "4", "8Gi").await;
}

async fn create_ns(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
}

fn obj<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("test object deserialises")
}

/// Waits until `check` holds on the listed objects, returning them; fails with `what`.
async fn until<K, F>(api: &Api<K>, lp: ListParams, what: &str, check: F) -> Vec<K>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    F: Fn(&[K]) -> bool,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut last = Vec::new();
    loop {
        if let Ok(l) = api.list(&lp).await {
            if check(&l.items) {
                return l.items;
            }
            last = l.items;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; last seen: {last:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn node_of(p: &Pod) -> String {
    p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// `p`'s condition of type `type_`, if it has one.
fn pod_condition<'a>(p: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The first listed Job's condition of type `type_`, if it holds (status True).
fn true_job_condition<'a>(js: &'a [Job], type_: &str) -> Option<&'a JobCondition> {
    js.first()?
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Waits until the pod `name` is bound to a node (failing with `what`); returns the node.
async fn bound_node(pods: &Api<Pod>, name: &str, what: &str) -> String {
    let bound = until(
        pods,
        ListParams::default().fields(&format!("metadata.name={name}")),
        what,
        |ps| ps.first().is_some_and(|p| !node_of(p).is_empty()),
    )
    .await;
    node_of(&bound[0])
}

/// Waits for an event with `reason` about the object `name`; returns its message.
async fn event_message(events: &Api<Event>, name: &str, reason: &str) -> String {
    let evs = until(
        events,
        ListParams::default().fields(&format!("involvedObject.name={name}")),
        &format!("{reason} event"),
        |es| es.iter().any(|e| e.reason.as_deref() == Some(reason)),
    )
    .await;
    evs.iter()
        .find(|e| e.reason.as_deref() == Some(reason))
        .unwrap()
        .message
        .clone()
        .unwrap()
}

/// Applies the JSON merge patch `patch` to the object `name`.
async fn merge_patch<K>(api: &Api<K>, name: &str, patch: Value)
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// Sets the pod's phase, as a kubelet reports a container that ended.
async fn set_phase(pods: &Api<Pod>, name: &str, phase: &str) {
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": phase}})),
    )
    .await
    .unwrap();
}

fn pod_spec(extra: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    spec
}

fn windows_toleration() -> Value {
    json!([{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}])
}

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    obj(json!({"metadata": {"name": name}, "spec": {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": image}]}}}}))
}
