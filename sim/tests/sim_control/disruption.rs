//! The disruption controller: a PodDisruptionBudget's status follows the pods it selects and
//! their controller's scale, and an eviction it allowed is counted until the pod is gone.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::EvictParams;

use super::*;

fn budget_is(allowed: i32, healthy: i32, desired: i32, expected: i32) -> impl Fn(&[PodDisruptionBudget]) -> bool {
    move |bs: &[PodDisruptionBudget]| {
        bs.first().is_some_and(|b| {
            let s = b.status.clone().unwrap_or_default();
            s.observed_generation == b.metadata.generation
                && (
                    s.disruptions_allowed,
                    s.current_healthy,
                    s.desired_healthy,
                    s.expected_pods,
                ) == (allowed, healthy, desired, expected)
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_status_follows_pods_and_evictions() {
    let c = Cluster::start(ControlConfig::default(), true).await;
    add_node(&c.client, "linux-0", "linux", "8", "16Gi").await;
    create_ns(&c.client, "pdb").await;
    let deps: Api<Deployment> = c.api("pdb");
    let pods: Api<Pod> = c.api("pdb");
    // kube-rs retries a 429 for minutes by default; the refusal is what this test checks.
    let mut cfg = c.server.as_ref().expect("running").kube_config();
    cfg.default_retry = false;
    let evictions: Api<Pod> = Api::namespaced(Client::try_from(cfg).unwrap(), "pdb");
    let pdbs: Api<PodDisruptionBudget> = c.api("pdb");
    deps.create(&PostParams::default(), &deployment("web", 3, "nginx:1.0"))
        .await
        .unwrap();
    pdbs.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "web"},
            "spec": {"maxUnavailable": "34%", "selector": {"matchLabels": {"app": "web"}}}})),
    )
    .await
    .unwrap();
    // 34% of 3 rounds up to 2 unavailable: 1 must stay healthy, 2 may go.
    let ready = until(
        &pdbs,
        ListParams::default(),
        "3 healthy pods, 2 disruptions allowed",
        budget_is(2, 3, 1, 3),
    )
    .await;
    let cond = ready[0].status.clone().unwrap().conditions.unwrap();
    assert_eq!(
        (cond[0].type_.as_str(), cond[0].status.as_str(), cond[0].reason.as_str()),
        ("DisruptionAllowed", "True", "SufficientPods")
    );

    // A tighter budget: minAvailable 3 leaves nothing to disrupt.
    merge_patch(
        &pdbs,
        "web",
        json!({"spec": {"maxUnavailable": null, "minAvailable": 3}}),
    )
    .await;
    let tight = until(
        &pdbs,
        ListParams::default(),
        "no disruption allowed",
        budget_is(0, 3, 3, 3),
    )
    .await;
    assert_eq!(tight[0].metadata.generation, Some(2));
    let cond = &tight[0].status.clone().unwrap().conditions.unwrap()[0];
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "InsufficientPods")
    );
    let victim = pods.list(&ListParams::default().labels("app=web")).await.unwrap().items[0].name_any();
    match evictions.evict(&victim, &EvictParams::default()).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(
                (s.code, s.message.as_str()),
                (429, "Cannot evict pod as it would violate the pod's disruption budget.")
            );
        }
        other => panic!("expected a 429, got {other:?}"),
    }

    // Room for one: the eviction goes through, the Deployment replaces the pod, and the budget
    // comes back to one allowed disruption once the replacement is ready.
    merge_patch(&pdbs, "web", json!({"spec": {"minAvailable": 2}})).await;
    until(
        &pdbs,
        ListParams::default(),
        "one disruption allowed",
        budget_is(1, 3, 2, 3),
    )
    .await;
    evictions
        .evict(&victim, &EvictParams::default())
        .await
        .expect("eviction allowed");
    until(
        &pods,
        ListParams::default().labels("app=web"),
        "the evicted pod replaced",
        |ps| {
            ps.iter().all(|p| p.name_any() != victim) && ps.len() == 3 && ps.iter().all(|p| phase(p) == Some("Running"))
        },
    )
    .await;
    let back = until(&pdbs, ListParams::default(), "budget restored", budget_is(1, 3, 2, 3)).await;
    assert!(
        back[0]
            .status
            .clone()
            .unwrap()
            .disrupted_pods
            .unwrap_or_default()
            .is_empty(),
        "the deleted pod leaves disruptedPods"
    );
    c.stop().await;
}
