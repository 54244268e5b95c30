//! The kubelet's own admission of pods bound without the scheduler (`spec.nodeName`): the
//! general predicates refuse what the node cannot run, as upstream's `predicateAdmitHandler`
//! does, and a label added to the Node just before is seen.

use super::*;
use kube::api::{Patch, PatchParams};

fn rejected(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
}

fn reason_and_message(p: &Pod) -> (String, String) {
    let s = p.status.clone().unwrap_or_default();
    (s.reason.unwrap_or_default(), s.message.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubelet_refuses_pods_the_node_cannot_run() {
    let c = cluster().await;
    let mut greedy = netexec("greedy", "lin-0");
    greedy.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(serde_json::json!({"requests": {"cpu": "100"}})).unwrap());
    create(&c, greedy).await;
    let p = wait_pod(&c, "greedy", "rejected for cpu", rejected).await;
    let (reason, message) = reason_and_message(&p);
    assert_eq!(reason, "OutOfcpu", "{message}");
    assert!(
        message.starts_with(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 100000, used: 0, capacity: 38"
        ),
        "{message}"
    );

    let mut picky = netexec("picky", "win-0");
    picky.spec.as_mut().unwrap().node_selector = Some([("disk".to_string(), "ssd".to_string())].into());
    create(&c, picky).await;
    let p = wait_pod(&c, "picky", "rejected for its node selector", rejected).await;
    assert_eq!(
        reason_and_message(&p),
        (
            "NodeAffinity".into(),
            "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector".into()
        )
    );

    // Labelled first (as `kubectl label node`), the same selector is admitted: the kubelet
    // reads the Node again before refusing for affinity alone.
    Api::<k8s_openapi::api::core::v1::Node>::all(c.client.clone())
        .patch(
            "win-1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"disk": "ssd"}}})),
        )
        .await
        .expect("label node");
    let mut labelled = netexec("labelled", "win-1");
    labelled.spec.as_mut().unwrap().node_selector = Some([("disk".to_string(), "ssd".to_string())].into());
    create(&c, labelled).await;
    wait_pod(&c, "labelled", "Running and Ready", running_ready).await;

    // The rejection is recorded as a Warning event with the predicate's reason.
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(c.client.clone(), NS)
        .list(&Default::default())
        .await
        .expect("events");
    assert!(
        events
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("OutOfcpu") && e.type_.as_deref() == Some("Warning")),
        "no OutOfcpu Warning event"
    );
}
