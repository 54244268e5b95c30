//! `[sig-node] NoExecuteTaintManager ... [Serial]` (upstream test/e2e/node/taints.go): the taint
//! eviction controller seen from outside. Each case runs pause pods that tolerate the test's
//! NoExecute taint for a few seconds, taints their node and watches (by label) which pods are
//! deleted when. They taint a node, so they run alone.
//!
//! Upstream's waits are kept: after removing the taint, 75 s (`kubeletPodDeletionDelaySeconds` +
//! 3 × `additionalWaitPerDeleteSeconds`) in which the pod must not be evicted; for the two
//! pods, 110 s (`kubeletPodDeletionDelaySeconds` + 10 × `additionalWaitPerDeleteSeconds`) from
//! the taint for both to be gone. Departures, each stricter than upstream:
//! - a pod counts as evicted for the "not evicted" checks as soon as its deletion timestamp
//!   shows, where upstream waits for the object to be gone;
//! - upstream's pause before removing the taint is 5 ns (`time.NewTimer(5)`, a unit slip); here
//!   it is the 5 s it meant, in which the pod must not be evicted either;
//! - "removing taint cancels eviction" also requires the controller's own record that it
//!   dropped the scheduled eviction (the `TaintManagerEviction` event "Cancelling deletion of Pod
//!   NS/NAME"), so a controller that never scheduled one does not pass;
//! - "evicts pods with minTolerationSeconds" also checks neither pod went before its own
//!   toleration ran out (counted from just before the taint was written), which is what the
//!   case's name claims; upstream only counts two deletions.
//!
//! Not ported: upstream's BeforeEach also waits up to a minute for every node to be healthy
//! (`e2enode.WaitForTotalHealthy`); only its `CheckTestingNSDeletedExcept` is
//! (`wait_for_stable_cluster`), and a tainted or unready node shows in the pod starts instead.

use std::time::{Duration, Instant};

use crate::case;
use crate::cases::scheduling::wait_for_stable_cluster;
use crate::catalog::{Case, Kind};
use crate::framework::update::replace_retrying;
use crate::framework::watch_events::{EventType, EventWatch, Resume};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, pod_node};
use crate::{ensure, fail};
use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Upstream "removing taint cancels eviction".
pub(crate) const REMOVING_TAINT: &str =
    "[sig-node] NoExecuteTaintManager Single Pod [Serial] removing taint cancels eviction [Disruptive] [Conformance]";
/// Upstream "evicts pods with minTolerationSeconds".
pub(crate) const MIN_TOLERATION: &str = "[sig-node] NoExecuteTaintManager Multiple Pods [Serial] evicts pods with \
     minTolerationSeconds [Disruptive] [Conformance]";

/// Upstream `getTestTaint`'s key and value.
const TAINT_KEY: &str = "kubernetes.io/e2e-evict-taint-key";
const TAINT_VALUE: &str = "evictTaintVal";
/// Upstream `kubeletPodDeletionDelaySeconds`.
const KUBELET_POD_DELETION_DELAY: u64 = 60;
/// Upstream `additionalWaitPerDeleteSeconds`.
const WAIT_PER_DELETE: i64 = 5;

/// The NoExecuteTaintManager cases.
pub fn cases() -> Vec<Case> {
    vec![
        case!(REMOVING_TAINT, Kind::Adapted, removing_taint_cancels_eviction),
        case!(MIN_TOLERATION, Kind::Adapted, evicts_with_min_toleration),
    ]
}

fn test_taint() -> Taint {
    Taint {
        key: TAINT_KEY.into(),
        value: Some(TAINT_VALUE.into()),
        effect: "NoExecute".into(),
        time_added: Some(Time(jiff::Timestamp::now())),
    }
}

/// Upstream `createPodForTaintsTest(true, seconds, ...)`: a pause pod labelled `group=GROUP`
/// tolerating the test taint for `seconds`. Upstream also sets `metadata.deletionGracePeriodSeconds`
/// to 1, which the API server clears on create, so its pods keep the default 30 s grace period;
/// so do these (a shorter one would make "gone within the bound" easier than upstream's).
fn tolerating_pod(f: &Framework, name: &str, group: &str, seconds: i64) -> PodBuilder {
    PodBuilder::new(name, f.target_os())
        .label("group", group)
        .container(ContainerBuilder::new("pause", "pause"))
        .edit_spec(move |spec| {
            spec.tolerations.get_or_insert_with(Vec::new).push(Toleration {
                key: Some(TAINT_KEY.into()),
                value: Some(TAINT_VALUE.into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(seconds),
                ..Default::default()
            });
        })
}

/// Upstream `AddOrUpdateTaintOnNode` + `ExpectNodeHasTaint`.
async fn add_taint(f: &Framework, node: &str, taint: &Taint) -> CaseResult {
    f.step(format!("taint node {node} with {TAINT_KEY}={TAINT_VALUE}:NoExecute"));
    let nodes = f.api_all::<Node>();
    replace_retrying(&nodes, node, |n: &mut Node| {
        let taints = n
            .spec
            .get_or_insert_with(Default::default)
            .taints
            .get_or_insert_with(Vec::new);
        taints.retain(|t| !(t.key == taint.key && t.effect == taint.effect));
        taints.push(taint.clone());
    })
    .await?;
    let seen = nodes.get(node).await?;
    let has = seen
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .iter()
        .any(|t| t.key == taint.key && t.effect == taint.effect && t.value == taint.value);
    ensure!(
        has,
        "node {node} does not carry taint {TAINT_KEY}:NoExecute after the update"
    );
    Ok(())
}

/// Upstream `RemoveTaintOffNode`: drops the taint (by key and effect) and checks it is gone.
async fn remove_taint(f: &Framework, node: &str) -> CaseResult {
    f.step(format!("remove taint {TAINT_KEY}:NoExecute from node {node}"));
    let nodes = f.api_all::<Node>();
    replace_retrying(&nodes, node, |n: &mut Node| {
        if let Some(taints) = n.spec.as_mut().and_then(|s| s.taints.as_mut()) {
            taints.retain(|t| !(t.key == TAINT_KEY && t.effect == "NoExecute"));
        }
    })
    .await?;
    let seen = nodes.get(node).await?;
    let still = seen
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .iter()
        .any(|t| t.key == TAINT_KEY && t.effect == "NoExecute");
    ensure!(
        !still,
        "node {node} still carries taint {TAINT_KEY}:NoExecute after removing it"
    );
    Ok(())
}

/// Runs `body` (given the moment just before the taint was written) on a node tainted with the
/// test taint, then removes the taint whatever `body` returned (removing is idempotent, so a
/// body that removed it already is fine), as upstream's deferred `RemoveTaintOffNode`.
async fn with_taint<F, Fut>(f: &Framework, node: &str, body: F) -> CaseResult
where
    F: FnOnce(Instant) -> Fut,
    Fut: std::future::Future<Output = CaseResult>,
{
    let before = Instant::now();
    let result = match add_taint(f, node, &test_taint()).await {
        Ok(()) => body(before).await,
        Err(e) => Err(e),
    };
    let cleaned = remove_taint(f, node).await;
    result?;
    cleaned
}

/// What the watch saw of one of the case's pods.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// Its deletion timestamp showed (it is terminating).
    Terminating(String),
    /// The object is gone.
    Gone(String),
}

/// The next eviction sign the watch delivers: a pod starting to terminate or gone. `None` when
/// `within` passed quietly.
async fn next_eviction(watch: &mut EventWatch<Pod>, within: Duration) -> Result<Option<Seen>, CaseError> {
    let until = Instant::now() + within;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let Some(n) = watch.next(left).await? else {
            return Ok(None);
        };
        let name = kube::ResourceExt::name_any(&n.object);
        if n.kind == EventType::Deleted {
            return Ok(Some(Seen::Gone(name)));
        }
        if n.object.metadata.deletion_timestamp.is_some() {
            return Ok(Some(Seen::Terminating(name)));
        }
    }
}

/// Fails when the watch sees any of the case's pods evicted within `within`.
async fn expect_no_eviction(watch: &mut EventWatch<Pod>, within: Duration, why: impl Fn(&str) -> String) -> CaseResult {
    match next_eviction(watch, within).await? {
        Some(Seen::Terminating(p) | Seen::Gone(p)) => fail!("{}", why(&p)),
        None => Ok(()),
    }
}

// --- Single Pod: removing taint cancels eviction ----------------------------------------------

/// Upstream: a pod tolerating the taint for 10 s runs; its node is tainted; 5 s later the taint
/// is removed; the pod must not be evicted.
async fn removing_taint_cancels_eviction(f: &Framework) -> CaseResult {
    wait_for_stable_cluster(f).await?;
    let name = "taint-eviction-4";
    let seconds = 2 * WAIT_PER_DELETE;
    let pods = f.api::<Pod>();
    let mut watch = f
        .watch_events(&pods, &format!("group={name}"), None, Resume::Relist)
        .await?;
    f.step(format!("starting pod {name} tolerating the taint for {seconds} s"));
    let pod = f.create_pod_ready(&tolerating_pod(f, name, name, seconds)).await?;
    let node = pod_node(&pod);
    ensure!(!node.is_empty(), "pod {name} runs but names no node");
    f.property("node", &node);
    with_taint(f, &node, |tainted| {
        cancel_body(f, &mut watch, &node, name, seconds, tainted)
    })
    .await
}

async fn cancel_body(
    f: &Framework,
    watch: &mut EventWatch<Pod>,
    node: &str,
    name: &str,
    seconds: i64,
    tainted: Instant,
) -> CaseResult {
    f.step("waiting a short time to make sure the pod is queued for deletion");
    expect_no_eviction(watch, Duration::from_secs(WAIT_PER_DELETE.unsigned_abs()), |p| {
        format!(
            "Pod was evicted despite toleration: {p} was evicted {:?} after the taint although it tolerates it \
             for {seconds} s",
            tainted.elapsed()
        )
    })
    .await?;
    remove_taint(f, node).await?;
    let quiet = Duration::from_secs(KUBELET_POD_DELETION_DELAY + 3 * WAIT_PER_DELETE.unsigned_abs());
    f.step(format!("waiting {quiet:?} to make sure that toleration time passed"));
    expect_no_eviction(watch, quiet, |p| {
        format!(
            "Pod was evicted despite toleration: {p} was evicted {:?} after the taint although the taint was \
             removed before its {seconds} s toleration ran out",
            tainted.elapsed()
        )
    })
    .await?;
    let cancelled = format!("Cancelling deletion of Pod {}/{name}", f.ns());
    let events = f.pod_events(name).await?;
    let recorded = events.iter().any(|e| {
        e.reason.as_deref() == Some("TaintManagerEviction") && e.message.as_deref() == Some(cancelled.as_str())
    });
    let seen: Vec<String> = events
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.as_deref().unwrap_or("?"),
                e.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    ensure!(
        recorded,
        "the taint eviction controller did not record TaintManagerEviction {cancelled:?} on pod {name} after the \
         taint was removed (no eviction had been scheduled); its events: {seen:?}"
    );
    Ok(())
}

// --- Multiple Pods: evicts pods with minTolerationSeconds ---------------------------------------

/// Upstream: two pods on one node tolerate the taint for 5 s and 25 s; after tainting the node
/// both are evicted (each no earlier than its toleration allows).
async fn evicts_with_min_toleration(f: &Framework) -> CaseResult {
    wait_for_stable_cluster(f).await?;
    let group = "taint-eviction-b";
    let pods = f.api::<Pod>();
    let mut watch = f
        .watch_events(&pods, &format!("group={group}"), None, Resume::Relist)
        .await?;
    let (name1, name2) = (format!("{group}1"), format!("{group}2"));
    let (short, long) = (WAIT_PER_DELETE, 5 * WAIT_PER_DELETE);
    f.step("starting pods");
    let pod1 = f.create_pod_ready(&tolerating_pod(f, &name1, group, short)).await?;
    let node = pod_node(&pod1);
    ensure!(!node.is_empty(), "pod {name1} runs but names no node");
    let host = f
        .api_all::<Node>()
        .get(&node)
        .await?
        .metadata
        .labels
        .unwrap_or_default()
        .get(crate::os::HOSTNAME_LABEL)
        .cloned()
        .ok_or_else(|| {
            CaseError::failed(format!(
                "error getting {} label on node {node}",
                crate::os::HOSTNAME_LABEL
            ))
        })?;
    let pinned = tolerating_pod(f, &name2, group, long).edit_spec(move |s| {
        s.node_selector
            .get_or_insert_with(Default::default)
            .insert(crate::os::HOSTNAME_LABEL.into(), host.clone());
    });
    let pod2 = f.create_pod_ready(&pinned).await?;
    ensure!(
        pod_node(&pod2) == node,
        "pod {name2} runs on {}, expected node {node} with {name1}",
        pod_node(&pod2)
    );
    f.property("node", &node);
    let names = [(name1, short), (name2, long)];
    with_taint(f, &node, |tainted| {
        min_toleration_body(&mut watch, &node, &names, tainted)
    })
    .await
}

async fn min_toleration_body(
    watch: &mut EventWatch<Pod>,
    node: &str,
    names: &[(String, i64)],
    tainted: Instant,
) -> CaseResult {
    let bound = Duration::from_secs(KUBELET_POD_DELETION_DELAY + 10 * WAIT_PER_DELETE.unsigned_abs());
    // When each pod first showed it was evicted (terminating or gone), and which are gone.
    let mut evicted: Vec<(String, Duration)> = Vec::new();
    let mut gone: Vec<String> = Vec::new();
    while gone.len() < names.len() {
        let left = bound.saturating_sub(tainted.elapsed());
        let Some(seen) = next_eviction(watch, left).await? else {
            fail!(
                "Failed to evict all Pods. {} pod(s) is not evicted: within {bound:?} of tainting node {node} \
                 the watch saw {evicted:?} evicted and {gone:?} gone",
                names.len() - gone.len()
            );
        };
        let (Seen::Terminating(p) | Seen::Gone(p)) = &seen;
        let Some((_, tolerated)) = names.iter().find(|(n, _)| n == p) else {
            fail!("pod {p} was evicted, but it is not one of the case's pods");
        };
        if !evicted.iter().any(|(n, _)| n == p) {
            let after = tainted.elapsed();
            ensure!(
                after >= Duration::from_secs(tolerated.unsigned_abs()),
                "pod {p} was evicted {after:?} after the taint, before its {tolerated} s toleration ran out"
            );
            evicted.push((p.clone(), after));
        }
        if matches!(seen, Seen::Gone(_)) && !gone.contains(p) {
            gone.push(p.clone());
        }
    }
    Ok(())
}
