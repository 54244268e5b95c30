//! The node lifecycle controller against nodes the test drives by hand, as a kubelet would:
//! a node that posts Ready=False gets the not-ready taints and keeps its pods Ready; a node
//! that goes silent is marked Unknown after the grace period, tainted unreachable, and its pods
//! are marked not ready; both lose their taints once Ready again.

use std::sync::Mutex;

use k8s_openapi::api::coordination::v1::Lease;

use super::*;

/// Posts `status` (`True`/`False`) as the node's Ready condition with a fresh heartbeat every
/// 300 ms while `state` holds `Some`, as a kubelet does; `None` stops it (the node goes silent).
fn heartbeat(client: Client, name: &'static str, state: Arc<Mutex<Option<&'static str>>>, cancel: CancellationToken) {
    tokio::spawn(async move {
        let nodes: Api<Node> = Api::all(client);
        loop {
            let Some(status) = *state.lock().unwrap() else {
                return;
            };
            let now = jiff::Timestamp::now().to_string();
            let reason = if status == "True" {
                "KubeletReady"
            } else {
                "KubeletNotReady"
            };
            let patch = json!({"status": {"conditions": [{"type": "Ready", "status": status, "reason": reason,
                "lastHeartbeatTime": now, "lastTransitionTime": "2025-01-01T00:00:00Z"}]}});
            let _ = nodes
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(300)) => {}
            }
        }
    });
}

fn node_taints(n: &Node) -> Vec<(String, String)> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| (t.key.clone(), t.effect.clone()))
        .collect()
}

fn ready_of(n: &Node) -> Option<(String, String)> {
    let c = n
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
}

fn pair(key: &str, effect: &str) -> (String, String) {
    (key.to_string(), effect.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_and_silent_nodes_are_tainted_and_silent_ones_lose_their_pods_readiness() {
    let cfg = ControlConfig {
        node_monitor_period: Duration::from_millis(500),
        node_monitor_grace_period: Duration::from_secs(3),
        ..ControlConfig::default()
    };
    let c = Cluster::start(cfg, true).await;
    add_node(&c.client, "talker", "linux", "4", "8Gi").await;
    add_node(&c.client, "mute", "linux", "4", "8Gi").await;
    let talker = Arc::new(Mutex::new(Some("True")));
    let mute = Arc::new(Mutex::new(Some("True")));
    heartbeat(c.client.clone(), "talker", talker.clone(), c.cancel.clone());
    heartbeat(c.client.clone(), "mute", mute.clone(), c.cancel.clone());
    // The mute node renews a Lease too, until it goes silent.
    let leases: Api<Lease> = c.api("kube-node-lease");
    leases
        .create(
            &PostParams::default(),
            &obj(
                json!({"metadata": {"name": "mute"}, "spec": {"holderIdentity": "mute", "leaseDurationSeconds": 40,
                "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now())}}),
            ),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = c.api("default");
    for (name, node) in [("on-talker", "talker"), ("on-mute", "mute")] {
        pods.create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": name}, "spec": pod_spec(json!({"nodeName": node}))})),
        )
        .await
        .unwrap();
    }
    until(&pods, ListParams::default(), "both pods Ready", |ps| {
        ps.len() == 2
            && ps
                .iter()
                .all(|p| pod_condition(p, "Ready").is_some_and(|c| c.status == "True"))
    })
    .await;
    let nodes: Api<Node> = Api::all(c.client.clone());
    let named = |name: &'static str| ListParams::default().fields(&format!("metadata.name={name}"));

    // A kubelet posting Ready=False: not-ready taints, its pod stays Ready.
    *talker.lock().unwrap() = Some("False");
    until(
        &nodes,
        named("talker"),
        "not-ready NoSchedule and NoExecute taints",
        |ns| {
            ns.first().is_some_and(|n| {
                let t = node_taints(n);
                t.contains(&pair("node.kubernetes.io/not-ready", "NoSchedule"))
                    && t.contains(&pair("node.kubernetes.io/not-ready", "NoExecute"))
            })
        },
    )
    .await;
    let p = pods.get("on-talker").await.unwrap();
    assert_eq!(pod_condition(&p, "Ready").map(|c| c.status.as_str()), Some("True"));
    // Ready again: the taints go.
    *talker.lock().unwrap() = Some("True");
    until(&nodes, named("talker"), "no taints", |ns| {
        ns.first().is_some_and(|n| node_taints(n).is_empty())
    })
    .await;

    // A node that goes silent: Unknown after the grace period, unreachable taints, pod not ready.
    *mute.lock().unwrap() = None;
    let silent = until(&nodes, named("mute"), "Ready=Unknown", |ns| {
        ns.first()
            .and_then(ready_of)
            .is_some_and(|(s, r)| s == "Unknown" && r == "NodeStatusUnknown")
    })
    .await;
    let message = silent[0].status.as_ref().unwrap().conditions.as_ref().unwrap()[0]
        .message
        .clone();
    assert_eq!(message.as_deref(), Some("Kubelet stopped posting node status."));
    until(
        &nodes,
        named("mute"),
        "unreachable NoSchedule and NoExecute taints",
        |ns| {
            ns.first().is_some_and(|n| {
                let mut t = node_taints(n);
                t.sort();
                t == [
                    pair("node.kubernetes.io/unreachable", "NoExecute"),
                    pair("node.kubernetes.io/unreachable", "NoSchedule"),
                ]
            })
        },
    )
    .await;
    until(&pods, named("on-mute"), "the silent node's pod not Ready", |ps| {
        ps.first()
            .and_then(|p| pod_condition(p, "Ready"))
            .is_some_and(|c| c.status == "False")
    })
    .await;
    let events: Api<Event> = c.api("default");
    assert_eq!(
        event_message(&events, "on-mute", "NodeNotReady").await,
        "Node is not ready"
    );
    assert_eq!(
        event_message(&events, "mute", "NodeNotReady").await,
        "Node mute status is now: NodeNotReady"
    );
    assert_eq!(
        event_message(&events, "mute", "RegisteredNode").await,
        "Node mute event: Registered Node mute in Controller"
    );
    // The talker's pod was never marked.
    let p = pods.get("on-talker").await.unwrap();
    assert_eq!(pod_condition(&p, "Ready").map(|c| c.status.as_str()), Some("True"));
    // The silent node speaks again: Ready, the taints go.
    *mute.lock().unwrap() = Some("True");
    heartbeat(c.client.clone(), "mute", mute.clone(), c.cancel.clone());
    until(&nodes, named("mute"), "Ready and untainted", |ns| {
        ns.first()
            .is_some_and(|n| ready_of(n).is_some_and(|(s, _)| s == "True") && node_taints(n).is_empty())
    })
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_node_lifecycle_controller_a_silent_node_stays_as_it_was() {
    let cfg = ControlConfig {
        node_monitor_period: Duration::from_millis(200),
        node_monitor_grace_period: Duration::from_secs(1),
        ..ControlConfig::default()
    };
    let components: Vec<Component> = Component::ALL
        .into_iter()
        .filter(|c| *c != Component::NodeLifecycle)
        .collect();
    let c = Cluster::start(cfg.only(&components), false).await;
    add_node(&c.client, "quiet", "linux", "4", "8Gi").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let n: Node = Api::<Node>::all(c.client.clone()).get("quiet").await.unwrap();
    assert_eq!(ready_of(&n).map(|(s, _)| s), Some("True".to_string()));
    assert!(node_taints(&n).is_empty(), "{:?}", node_taints(&n));
    c.stop().await;
}

/// The taint eviction controller: a NoExecute taint evicts the pods that do not tolerate it at
/// once (DisruptionTarget `DeletionByTaintManager` first, a `TaintManagerEviction` event), a
/// bounded toleration no earlier than it runs out, and removing the taint cancels what is still
/// scheduled; a toleration without `tolerationSeconds` keeps its pod. No kubelet runs, so
/// evicted pods stay terminating and can be inspected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_execute_taints_evict_per_toleration_and_removal_cancels() {
    let c = Cluster::start(ControlConfig::default(), false).await;
    add_node(&c.client, "n", "linux", "4", "8Gi").await;
    create_ns(&c.client, "te").await;
    let pods: Api<Pod> = c.api("te");
    let tolerating = |seconds: Option<i64>| {
        let mut t = json!({"key": "example.com/evict", "operator": "Exists", "effect": "NoExecute"});
        if let Some(s) = seconds {
            t["tolerationSeconds"] = json!(s);
        }
        json!({"tolerations": [t]})
    };
    for (name, extra) in [
        ("intolerant", json!({})),
        ("forever", tolerating(None)),
        ("short", tolerating(Some(2))),
        ("cancelled", tolerating(Some(6))),
    ] {
        let pod: Pod = obj(json!({"metadata": {"name": name}, "spec": pod_spec(extra)}));
        pods.create(&PostParams::default(), &pod).await.unwrap();
        bound_node(&pods, name, &format!("{name} bound")).await;
    }
    let nodes: Api<Node> = Api::all(c.client.clone());
    let tainted = std::time::Instant::now();
    merge_patch(
        &nodes,
        "n",
        json!({"spec": {"taints": [{"key": "example.com/evict", "effect": "NoExecute"}]}}),
    )
    .await;
    let terminating = |ps: &[Pod], name: &str| {
        ps.iter()
            .any(|p| p.name_any() == name && p.metadata.deletion_timestamp.is_some())
    };
    let seen = until(&pods, ListParams::default(), "intolerant evicted", |ps| {
        terminating(ps, "intolerant")
    })
    .await;
    let intolerant = seen.iter().find(|p| p.name_any() == "intolerant").unwrap();
    let cond = pod_condition(intolerant, "DisruptionTarget").expect("DisruptionTarget condition");
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_deref()),
        ("True", Some("DeletionByTaintManager"))
    );
    assert!(tainted.elapsed() < Duration::from_secs(2), "intolerant evicted late");
    let events: Api<Event> = c.api("te");
    assert_eq!(
        event_message(&events, "intolerant", "TaintManagerEviction").await,
        "Marking for deletion Pod te/intolerant"
    );
    until(&pods, ListParams::default(), "short evicted", |ps| {
        terminating(ps, "short")
    })
    .await;
    assert!(
        tainted.elapsed() >= Duration::from_secs(2),
        "short evicted after {:?}, before its 2 s toleration ran out",
        tainted.elapsed()
    );
    merge_patch(&nodes, "n", json!({"spec": {"taints": []}})).await;
    assert_eq!(
        event_message(&events, "cancelled", "TaintManagerEviction").await,
        "Cancelling deletion of Pod te/cancelled"
    );
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(tainted.elapsed()) + Duration::from_secs(2)).await;
    let left = pods.list(&ListParams::default()).await.unwrap().items;
    for name in ["forever", "cancelled"] {
        assert!(!terminating(&left, name), "{name} was evicted: {left:#?}");
    }
    c.stop().await;
}
