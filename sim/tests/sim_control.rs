//! The simulated control plane against the simulated API server: scheduling rules (taints,
//! selectors, affinity, resources, nodeName, preemption), DaemonSets per OS, Deployments,
//! Jobs, garbage collection and namespace deletion.
//!
//! No kubelet runs here: Node objects are created by the test, and a tiny stand-in kubelet
//! ([`FakeKubelet`]) marks bound pods Running and Ready and confirms deletions, as a real
//! kubelet would. Tests that need pods to stay un-started leave it out.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_daemonset_lands_on_windows_nodes_only() {
    let c = Cluster::start(ControlConfig::default(), true).await;
    heterogeneous_nodes(&c.client).await;
    create_ns(&c.client, "ds").await;
    let dss: Api<DaemonSet> = c.api("ds");
    for (name, extra) in [
        (
            "win",
            json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "tolerations": windows_toleration()}),
        ),
        ("any", json!({})),
    ] {
        let ds: DaemonSet = obj(json!({"metadata": {"name": name}, "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(extra)}}}));
        dss.create(&PostParams::default(), &ds).await.unwrap();
    }
    let pods: Api<Pod> = c.api("ds");
    let win = until(
        &pods,
        ListParams::default().labels("app=win"),
        "windows daemon pods bound",
        |ps| ps.len() == 2 && ps.iter().all(|p| !node_of(p).is_empty()),
    )
    .await;
    let nodes: BTreeSet<String> = win.iter().map(node_of).collect();
    assert_eq!(nodes, BTreeSet::from(["windows-0".to_owned(), "windows-1".to_owned()]));
    // Without the toleration the taint keeps the daemon off Windows nodes.
    let any = until(
        &pods,
        ListParams::default().labels("app=any"),
        "untolerating daemon pod bound",
        |ps| ps.len() == 1 && ps.iter().all(|p| !node_of(p).is_empty()),
    )
    .await;
    assert_eq!(node_of(&any[0]), "linux-0");
    let ds = until(
        &dss,
        ListParams::default().fields("metadata.name=win"),
        "daemonset status",
        |d| {
            d.first().and_then(|d| d.status.as_ref()).is_some_and(|s| {
                s.desired_number_scheduled == 2 && s.number_ready == 2 && s.updated_number_scheduled == Some(2)
            })
        },
    )
    .await;
    assert_eq!(ds[0].status.as_ref().unwrap().number_misscheduled, 0);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_without_toleration_stays_off_windows_nodes() {
    let c = Cluster::start(ControlConfig::default(), false).await;
    heterogeneous_nodes(&c.client).await;
    create_ns(&c.client, "sched").await;
    let pods: Api<Pod> = c.api("sched");
    let pod: Pod = obj(json!({"metadata": {"name": "wants-windows"},
        "spec": pod_spec(json!({"nodeSelector": {"kubernetes.io/os": "windows"}}))}));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let expected = "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
        2 node(s) had untolerated taint {os: windows}. preemption: 0/3 nodes are available: \
        3 Preemption is not helpful for scheduling.";
    let seen = until(
        &pods,
        ListParams::default().fields("metadata.name=wants-windows"),
        "Unschedulable condition",
        |ps| {
            ps.first()
                .and_then(|p| pod_condition(p, "PodScheduled"))
                .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
        },
    )
    .await;
    let cond = pod_condition(&seen[0], "PodScheduled").unwrap().clone();
    assert_eq!(cond.message.as_deref(), Some(expected));
    assert!(node_of(&seen[0]).is_empty());
    let events: Api<Event> = c.api("sched");
    let evs = until(
        &events,
        ListParams::default().fields("involvedObject.name=wants-windows"),
        "FailedScheduling event",
        |es| {
            es.iter()
                .any(|e| e.reason.as_deref() == Some("FailedScheduling") && e.message.as_deref() == Some(expected))
        },
    )
    .await;
    let ev = evs.iter().find(|e| e.message.as_deref() == Some(expected)).unwrap();
    assert_eq!(ev.type_.as_deref(), Some("Warning"));

    // Adding the toleration (a new pod) lets it onto a Windows node.
    let pod: Pod = obj(json!({"metadata": {"name": "tolerates"},
        "spec": pod_spec(json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "tolerations": windows_toleration()}))}));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let node = bound_node(&pods, "tolerates", "tolerating pod bound").await;
    assert!(node.starts_with("windows-"));
    let msg = event_message(&events, "tolerates", "Scheduled").await;
    assert_eq!(msg, format!("Successfully assigned sched/tolerates to {node}"));

    // A node joining fixes the first pod: retried when nodes change.
    add_node(&c.client, "windows-2", "windows", "4", "8Gi").await;
    let nodes: Api<Node> = Api::all(c.client.clone());
    merge_patch(&nodes, "windows-2", json!({"spec": {"taints": null}})).await;
    let node = bound_node(&pods, "wants-windows", "retried pod bound").await;
    assert_eq!(node, "windows-2");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_affinity_resources_and_node_name() {
    let c = Cluster::start(ControlConfig::default(), false).await;
    add_node(&c.client, "small", "linux", "1", "1Gi").await;
    add_node(&c.client, "big", "linux", "8", "16Gi").await;
    let nodes: Api<Node> = Api::all(c.client.clone());
    merge_patch(
        &nodes,
        "big",
        json!({"metadata": {"labels": {"size": "big", "cores": "8"}}}),
    )
    .await;
    create_ns(&c.client, "rules").await;
    let pods: Api<Pod> = c.api("rules");
    let affinity = |op: &str, values: Value| {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "size", "operator": op, "values": values}]}]}}})
    };
    let cases = [
        ("selector", json!({"nodeSelector": {"size": "big"}}), Some("big")),
        (
            "affinity-in",
            json!({"affinity": affinity("In", json!(["big"]))}),
            Some("big"),
        ),
        (
            "affinity-notin",
            json!({"affinity": affinity("NotIn", json!(["big"]))}),
            Some("small"),
        ),
        (
            "affinity-gt",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]}]}}}}),
            Some("big"),
        ),
        (
            "fields",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["small"]}]}]}}}}),
            Some("small"),
        ),
        (
            "needs-cpu",
            json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "6", "memory": "1Gi"}}}]}),
            Some("big"),
        ),
        (
            "too-big",
            json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "64"}}}]}),
            None,
        ),
        ("no-match", json!({"nodeSelector": {"size": "huge"}}), None),
    ];
    for (name, extra, _) in &cases {
        let pod: Pod = obj(json!({"metadata": {"name": name}, "spec": pod_spec(extra.clone())}));
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    // nodeName set by the user: the scheduler leaves it alone.
    let pinned: Pod = obj(json!({"metadata": {"name": "pinned"}, "spec": pod_spec(json!({"nodeName": "small"}))}));
    pods.create(&PostParams::default(), &pinned).await.unwrap();
    let all = until(
        &pods,
        ListParams::default(),
        "every schedulable pod bound and the rest reported",
        |ps| {
            cases.iter().all(|(name, _, want)| {
                ps.iter().find(|p| p.name_any() == *name).is_some_and(|p| match want {
                    Some(_) => !node_of(p).is_empty(),
                    None => {
                        pod_condition(p, "PodScheduled").is_some_and(|c| c.reason.as_deref() == Some("Unschedulable"))
                    }
                })
            })
        },
    )
    .await;
    for (name, _, want) in &cases {
        let p = all.iter().find(|p| p.name_any() == *name).unwrap();
        match want {
            Some(n) => assert_eq!(node_of(p), *n, "{name}"),
            None => assert!(node_of(p).is_empty(), "{name} should stay pending"),
        }
    }
    let msg = |name: &str| {
        all.iter()
            .find(|p| p.name_any() == name)
            .and_then(|p| pod_condition(p, "PodScheduled")?.message.clone())
            .unwrap_or_default()
    };
    assert!(
        msg("too-big").starts_with("0/2 nodes are available: 2 Insufficient cpu."),
        "{}",
        msg("too-big")
    );
    assert!(
        msg("too-big")
            .ends_with("preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."),
        "{}",
        msg("too-big")
    );
    assert!(
        msg("no-match").starts_with("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.")
    );
    assert_eq!(node_of(all.iter().find(|p| p.name_any() == "pinned").unwrap()), "small");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higher_priority_pod_preempts_a_lower_one() {
    let c = Cluster::start(ControlConfig::default(), true).await;
    add_node(&c.client, "only", "linux", "2", "4Gi").await;
    let classes: Api<PriorityClass> = Api::all(c.client.clone());
    let pc: PriorityClass = obj(json!({"metadata": {"name": "high"}, "value": 1000}));
    classes.create(&PostParams::default(), &pc).await.unwrap();
    create_ns(&c.client, "prio").await;
    let pods: Api<Pod> = c.api("prio");
    let with_cpu = |cpu: &str| json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}]});
    let low: Pod = obj(json!({"metadata": {"name": "low"}, "spec": with_cpu("1500m")}));
    pods.create(&PostParams::default(), &low).await.unwrap();
    bound_node(&pods, "low", "low pod bound").await;
    let mut spec = with_cpu("1");
    spec["priorityClassName"] = json!("high");
    let high: Pod = obj(json!({"metadata": {"name": "high"}, "spec": spec}));
    pods.create(&PostParams::default(), &high).await.unwrap();
    let after = until(&pods, ListParams::default(), "high pod bound after preemption", |ps| {
        ps.iter().any(|p| p.name_any() == "high" && node_of(p) == "only") && !ps.iter().any(|p| p.name_any() == "low")
    })
    .await;
    assert_eq!(after.len(), 1);
    let events: Api<Event> = c.api("prio");
    let msg = event_message(&events, "low", "Preempted").await;
    assert!(
        msg.starts_with("Preempted by pod ") && msg.ends_with(" on node only"),
        "{msg}"
    );
    c.stop().await;
}

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    obj(json!({"metadata": {"name": name}, "spec": {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": image}]}}}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_scales_and_rolls_out_through_replicasets() {
    let c = Cluster::start(ControlConfig::default(), true).await;
    add_node(&c.client, "linux-0", "linux", "8", "16Gi").await;
    add_node(&c.client, "linux-1", "linux", "8", "16Gi").await;
    create_ns(&c.client, "apps").await;
    let deps: Api<Deployment> = c.api("apps");
    let rss: Api<ReplicaSet> = c.api("apps");
    let pods: Api<Pod> = c.api("apps");
    deps.create(&PostParams::default(), &deployment("web", 3, "nginx:1.0"))
        .await
        .unwrap();
    let complete = |want: i32| {
        move |ds: &[Deployment]| {
            ds.first().is_some_and(|d| {
                let s = d.status.clone().unwrap_or_default();
                s.observed_generation == d.metadata.generation
                    && s.updated_replicas == Some(want)
                    && s.replicas == Some(want)
                    && s.available_replicas == Some(want)
                    && s.conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Progressing" && c.reason.as_deref() == Some("NewReplicaSetAvailable"))
                    && s.conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Available" && c.status == "True")
            })
        }
    };
    until(&deps, ListParams::default(), "rollout of 3 complete", complete(3)).await;
    let first = rss.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(first.len(), 1);
    let rs1 = first[0].clone();
    assert_eq!(rs1.annotations()["deployment.kubernetes.io/revision"], "1");
    let hash = rs1.labels()["pod-template-hash"].clone();
    assert_eq!(rs1.name_any(), format!("web-{hash}"));
    let ps = pods.list(&ListParams::default().labels("app=web")).await.unwrap().items;
    assert_eq!(ps.len(), 3);
    assert!(ps.iter().all(|p| p.labels()["pod-template-hash"] == hash));
    // Spread over both nodes (least allocated).
    assert_eq!(ps.iter().map(node_of).collect::<BTreeSet<_>>().len(), 2);

    merge_patch(&deps, "web", json!({"spec": {"replicas": 5}})).await;
    until(&deps, ListParams::default(), "scaled to 5", complete(5)).await;
    assert_eq!(rss.list(&ListParams::default()).await.unwrap().items.len(), 1);

    merge_patch(
        &deps,
        "web",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2.0"}]}}}}),
    )
    .await;
    let done = until(&deps, ListParams::default(), "rolling update complete", |ds| {
        complete(5)(ds)
            && ds[0]
                .annotations()
                .get("deployment.kubernetes.io/revision")
                .map(String::as_str)
                == Some("2")
    })
    .await;
    assert_eq!(done[0].status.as_ref().unwrap().updated_replicas, Some(5));
    let sets = rss.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(sets.len(), 2);
    let new = sets.iter().find(|r| r.name_any() != rs1.name_any()).unwrap();
    let old = sets.iter().find(|r| r.name_any() == rs1.name_any()).unwrap();
    assert_eq!(new.spec.as_ref().unwrap().replicas, Some(5));
    assert_eq!(old.spec.as_ref().unwrap().replicas, Some(0));
    assert_eq!(new.annotations()["deployment.kubernetes.io/revision"], "2");
    let events: Api<Event> = c.api("apps");
    let evs = events
        .list(&ListParams::default().fields("involvedObject.name=web"))
        .await
        .unwrap()
        .items;
    assert!(
        evs.iter().any(|e| e.reason.as_deref() == Some("ScalingReplicaSet")
            && e.message.as_deref() == Some(&format!("Scaled up replica set {} from 0 to 1", new.name_any()))),
        "{evs:#?}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_completes_when_its_pods_succeed() {
    let c = Cluster::start(ControlConfig::default(), false).await;
    add_node(&c.client, "linux-0", "linux", "8", "16Gi").await;
    create_ns(&c.client, "batch").await;
    let jobs: Api<Job> = c.api("batch");
    let pods: Api<Pod> = c.api("batch");
    let job: Job = obj(
        json!({"metadata": {"name": "work"}, "spec": {"completions": 2, "parallelism": 1,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}),
    );
    jobs.create(&PostParams::default(), &job).await.unwrap();
    for round in 0..2 {
        let ps = until(
            &pods,
            ListParams::default().labels("job-name=work"),
            "a job pod to run",
            |ps| ps.iter().filter(|p| phase(p) != Some("Succeeded")).count() == 1,
        )
        .await;
        assert_eq!(ps.len(), round + 1, "parallelism 1 runs one pod at a time");
        let p = ps.iter().find(|p| phase(p) != Some("Succeeded")).unwrap();
        set_phase(&pods, &p.name_any(), "Succeeded").await;
    }
    let done = until(&jobs, ListParams::default(), "Complete condition", |js| {
        true_job_condition(js, "Complete").is_some()
    })
    .await;
    let st = done[0].status.as_ref().unwrap();
    assert_eq!(st.succeeded, Some(2));
    assert!(st.start_time.is_some() && st.completion_time.is_some());
    assert_eq!(
        pods.list(&ListParams::default().labels("job-name=work"))
            .await
            .unwrap()
            .items
            .len(),
        2
    );

    // A job whose pods fail runs out of its backoff limit.
    let failing: Job = obj(json!({"metadata": {"name": "fails"}, "spec": {"backoffLimit": 0,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}));
    jobs.create(&PostParams::default(), &failing).await.unwrap();
    let ps = until(
        &pods,
        ListParams::default().labels("job-name=fails"),
        "failing job pod",
        |ps| ps.len() == 1,
    )
    .await;
    set_phase(&pods, &ps[0].name_any(), "Failed").await;
    let failed = until(
        &jobs,
        ListParams::default().fields("metadata.name=fails"),
        "Failed condition",
        |js| true_job_condition(js, "Failed").is_some(),
    )
    .await;
    let cond = true_job_condition(&failed, "Failed").unwrap();
    assert_eq!(cond.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(failed[0].status.as_ref().unwrap().failed, Some(1));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_deletion_removes_contents_and_the_namespace() {
    let c = Cluster::start(ControlConfig::default(), true).await;
    add_node(&c.client, "linux-0", "linux", "8", "16Gi").await;
    create_ns(&c.client, "doomed").await;
    let sas: Api<ServiceAccount> = c.api("doomed");
    until(&sas, ListParams::default(), "default service account", |s| {
        s.iter().any(|s| s.name_any() == "default")
    })
    .await;
    let deps: Api<Deployment> = c.api("doomed");
    deps.create(&PostParams::default(), &deployment("web", 2, "nginx"))
        .await
        .unwrap();
    let cms: Api<ConfigMap> = c.api("doomed");
    cms.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "cfg"}, "data": {"a": "b"}})),
    )
    .await
    .unwrap();
    let svcs: Api<Service> = c.api("doomed");
    svcs.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = c.api("doomed");
    until(&pods, ListParams::default(), "two running pods", |ps| {
        ps.len() == 2 && ps.iter().all(|p| phase(p) == Some("Running"))
    })
    .await;
    let eps: Api<Endpoints> = c.api("doomed");
    until(&eps, ListParams::default(), "endpoints with both pods", |e| {
        e.iter().any(|e| {
            e.name_any() == "web"
                && e.subsets
                    .iter()
                    .flatten()
                    .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
                    .sum::<usize>()
                    == 2
        })
    })
    .await;
    let slices: Api<EndpointSlice> = c.api("doomed");
    until(
        &slices,
        ListParams::default().labels("kubernetes.io/service-name=web"),
        "endpointslice",
        |s| s.len() == 1 && s[0].endpoints.len() == 2,
    )
    .await;

    let nss: Api<Namespace> = Api::all(c.client.clone());
    nss.delete("doomed", &DeleteParams::background()).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match nss.get_opt("doomed").await.unwrap() {
            None => break,
            Some(ns) => {
                assert!(tokio::time::Instant::now() < deadline, "namespace still there: {ns:#?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    assert!(
        pods.list(&ListParams::default())
            .await
            .map(|l| l.items.is_empty())
            .unwrap_or(true)
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collector_follows_owner_references() {
    let c = Cluster::start(ControlConfig::default(), true).await;
    add_node(&c.client, "linux-0", "linux", "8", "16Gi").await;
    create_ns(&c.client, "gc").await;
    let rss: Api<ReplicaSet> = c.api("gc");
    let pods: Api<Pod> = c.api("gc");
    let rs = |name: &str| -> ReplicaSet {
        obj(
            json!({"metadata": {"name": name}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        )
    };
    for name in ["bg", "orphans"] {
        rss.create(&PostParams::default(), &rs(name)).await.unwrap();
        until(
            &pods,
            ListParams::default().labels(&format!("app={name}")),
            "replicaset pods",
            |ps| ps.len() == 2,
        )
        .await;
    }
    rss.delete("bg", &DeleteParams::background()).await.unwrap();
    until(
        &pods,
        ListParams::default().labels("app=bg"),
        "dependents collected",
        |ps| ps.is_empty(),
    )
    .await;
    rss.delete("orphans", &DeleteParams::orphan()).await.unwrap();
    until(&rss, ListParams::default(), "orphaning owner gone", |r| r.is_empty()).await;
    let left = until(
        &pods,
        ListParams::default().labels("app=orphans"),
        "orphans released",
        |ps| ps.len() == 2 && ps.iter().all(|p| p.owner_references().is_empty()),
    )
    .await;
    assert_eq!(left.len(), 2);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_creates_pods_in_order_with_stable_names() {
    let c = Cluster::start(ControlConfig::default(), true).await;
    add_node(&c.client, "linux-0", "linux", "8", "16Gi").await;
    create_ns(&c.client, "sts").await;
    let sets: Api<StatefulSet> = c.api("sts");
    let set: StatefulSet = obj(
        json!({"metadata": {"name": "db"}, "spec": {"replicas": 3, "serviceName": "db",
        "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    );
    sets.create(&PostParams::default(), &set).await.unwrap();
    let pods: Api<Pod> = c.api("sts");
    let ps = until(
        &pods,
        ListParams::default().labels("app=db"),
        "three stateful pods",
        |ps| ps.len() == 3,
    )
    .await;
    let mut names: Vec<String> = ps.iter().map(|p| p.name_any()).collect();
    names.sort();
    assert_eq!(names, ["db-0", "db-1", "db-2"]);
    // Ordered: each later pod was created after the previous one was Ready.
    let created = |n: &str| {
        ps.iter()
            .find(|p| p.name_any() == n)
            .unwrap()
            .metadata
            .creation_timestamp
            .clone()
            .unwrap()
            .0
    };
    assert!(created("db-0") <= created("db-1") && created("db-1") <= created("db-2"));
    let p1 = ps.iter().find(|p| p.name_any() == "db-1").unwrap();
    assert_eq!(p1.spec.as_ref().unwrap().hostname.as_deref(), Some("db-1"));
    assert_eq!(p1.spec.as_ref().unwrap().subdomain.as_deref(), Some("db"));
    until(&sets, ListParams::default(), "statefulset ready", |s| {
        s.first()
            .and_then(|s| s.status.as_ref())
            .is_some_and(|st| st.ready_replicas == Some(3))
    })
    .await;
    merge_patch(&sets, "db", json!({"spec": {"replicas": 1}})).await;
    let ps = until(
        &pods,
        ListParams::default().labels("app=db"),
        "scaled down to db-0",
        |ps| ps.len() == 1,
    )
    .await;
    assert_eq!(ps[0].name_any(), "db-0");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_runs_on_schedule_with_an_accelerated_clock() {
    // One simulated minute per real second.
    let cfg = ControlConfig::default().clock(Arc::new(ScaledClock::new(60.0)));
    let c = Cluster::start(cfg, false).await;
    create_ns(&c.client, "cron").await;
    let cjs: Api<CronJob> = c.api("cron");
    let cj: CronJob = obj(json!({"metadata": {"name": "tick"}, "spec": {"schedule": "* * * * *",
        "concurrencyPolicy": "Allow",
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}}}}));
    cjs.create(&PostParams::default(), &cj).await.unwrap();
    let jobs: Api<Job> = c.api("cron");
    let js = until(&jobs, ListParams::default(), "two scheduled jobs", |js| js.len() >= 2).await;
    for j in &js {
        let suffix = j.name_any().strip_prefix("tick-").unwrap().to_owned();
        assert!(
            suffix.parse::<i64>().is_ok(),
            "job name {} ends in minutes",
            j.name_any()
        );
        assert_eq!(j.owner_references()[0].name, "tick");
    }
    let cj = until(&cjs, ListParams::default(), "cronjob status", |c| {
        c.first()
            .and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.last_schedule_time.is_some() && s.active.is_some())
    })
    .await;
    assert!(!cj[0].status.as_ref().unwrap().active.as_ref().unwrap().is_empty());
    c.stop().await;
}

/// A CronJob every simulated minute whose Jobs never finish (no kubelet runs their pods).
fn endless_cronjob(name: &str, policy: &str) -> CronJob {
    obj(json!({"metadata": {"name": name}, "spec": {"schedule": "* * * * *",
        "concurrencyPolicy": policy,
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}}}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_forbid_holds_runs_back_and_replace_swaps_jobs() {
    // One simulated minute per real second.
    let cfg = ControlConfig::default()
        .clock(Arc::new(ScaledClock::new(60.0)))
        .only(&[Component::CronJob, Component::Job]);
    let c = Cluster::start(cfg, false).await;
    create_ns(&c.client, "conc").await;
    let cjs: Api<CronJob> = c.api("conc");
    for (name, policy) in [("forbid", "Forbid"), ("replace", "Replace")] {
        cjs.create(&PostParams::default(), &endless_cronjob(name, policy))
            .await
            .unwrap();
    }
    // Forbid: the next run is held back with upstream's JobAlreadyActive event, and
    // lastScheduleTime stays at the run that started.
    let events: Api<Event> = c.api("conc");
    until(&events, ListParams::default(), "a JobAlreadyActive event", |es| {
        es.iter().any(|e| {
            e.reason.as_deref() == Some("JobAlreadyActive") && e.involved_object.name.as_deref() == Some("forbid")
        })
    })
    .await;
    let jobs: Api<Job> = c.api("conc");
    let owned_by = |js: &[Job], cj: &str| -> Vec<String> {
        js.iter()
            .filter(|j| j.owner_references().iter().any(|o| o.name == cj))
            .map(ResourceExt::name_any)
            .collect()
    };
    let all = jobs.list(&ListParams::default()).await.unwrap().items;
    let forbid_jobs = owned_by(&all, "forbid");
    assert_eq!(forbid_jobs.len(), 1, "Forbid started {forbid_jobs:?}");
    let forbid = cjs.get("forbid").await.unwrap();
    let last = forbid.status.and_then(|s| s.last_schedule_time).unwrap().0;
    assert_eq!(
        format!("forbid-{}", last.as_second() / 60),
        forbid_jobs[0],
        "lastScheduleTime stays at the run that started"
    );
    // Replace: a later run deletes the earlier Job; the CronJob lists one active Job.
    let first = until(&jobs, ListParams::default(), "a replace job", |js| {
        !owned_by(js, "replace").is_empty()
    })
    .await;
    let first = owned_by(&first, "replace")[0].clone();
    until(&cjs, ListParams::default(), "replace running a newer job alone", |cs| {
        cs.iter().filter(|c| c.name_any() == "replace").any(|c| {
            let active: Vec<String> = c
                .status
                .iter()
                .flat_map(|s| s.active.iter().flatten())
                .filter_map(|r| r.name.clone())
                .collect();
            active.len() == 1 && active[0] != first
        })
    })
    .await;
    until(&jobs, ListParams::default(), "the replaced job gone", |js| {
        js.iter()
            .all(|j| j.name_any() != first || j.metadata.deletion_timestamp.is_some())
    })
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_cut_keeps_informers_consistent() {
    // The control plane's caches must survive the API server ending every watch.
    let c = Cluster::start(ControlConfig::default().only(&[Component::Scheduler]), false).await;
    add_node(&c.client, "linux-0", "linux", "8", "16Gi").await;
    create_ns(&c.client, "cut").await;
    c.server.as_ref().unwrap().state().cut_watches();
    let pods: Api<Pod> = c.api("cut");
    let pod: Pod = obj(json!({"metadata": {"name": "after-cut"}, "spec": pod_spec(json!({}))}));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    until(&pods, ListParams::default(), "pod bound after a watch cut", |ps| {
        ps.first().is_some_and(|p| node_of(p) == "linux-0")
    })
    .await;
    c.stop().await;
}
