//! The DaemonSet controller: one pod on every node the template's nodeSelector and required
//! affinity select and whose NoSchedule/NoExecute taints the pod tolerates (with the tolerations
//! upstream adds to every daemon pod), so an OS-specific DaemonSet lands on that OS only.
//! Daemon pods are pinned with a `matchFields metadata.name` affinity and bound by the scheduler.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodTemplateSpec,
    Toleration,
};
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::deployment::resolve_int_or_percent;
use super::error::{ApiContext, Result};
use super::events::{EventType, Recorder};
use super::history;
use super::informer::{Informer, Requeue, reconcile_each};
use super::plane::{Component, Ctx};
use super::predicates::{matches_node_selector_and_affinity, untolerated_taint};
use super::replicaset::claim_pods;
use super::util::{generate_name_prefix, is_available, is_ready, owner_ref, phase, pod_from_template, template_hash};
use super::writes::{create_owned_pod, delete_owned_pod, patch_status};

/// The label carrying the template revision of a daemon (and stateful) pod.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";
/// The label carrying the DaemonSet generation a daemon pod was created at.
pub const POD_TEMPLATE_GENERATION: &str = "pod-template-generation";

/// Upstream `IsPodUpdated`: a daemon pod is of the current template when its hash label is the
/// current revision's or it was created at the DaemonSet's current generation.
pub fn is_pod_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let labels = pod.labels();
    let hash_matches = !hash.is_empty() && labels.get(CONTROLLER_REVISION_HASH).map(String::as_str) == Some(hash);
    let generation_matches =
        generation.is_some_and(|g| labels.get(POD_TEMPLATE_GENERATION).map(String::as_str) == Some(&g.to_string()));
    hash_matches || generation_matches
}

/// The tolerations upstream adds to every daemon pod (and, for host-network pods,
/// network-unavailable), so daemons keep running through node trouble and on cordoned nodes.
pub fn daemon_tolerations(host_network: bool) -> Vec<Toleration> {
    let mut keys = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if host_network {
        keys.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    keys.into_iter()
        .map(|(k, e)| Toleration {
            key: Some(k.into()),
            operator: Some("Exists".into()),
            effect: Some(e.into()),
            ..Toleration::default()
        })
        .collect()
}

/// The template of the daemon pod for `node`: tolerations added and a required
/// `metadata.name` affinity to the node (upstream's ReplaceDaemonSetPodNodeNameNodeAffinity).
pub fn daemon_template(template: &PodTemplateSpec, node: &str, hash: &str, generation: Option<i64>) -> PodTemplateSpec {
    let mut t = template.clone();
    let labels = t.metadata.get_or_insert_default().labels.get_or_insert_default();
    labels.insert(CONTROLLER_REVISION_HASH.into(), hash.into());
    if let Some(g) = generation {
        labels.insert(POD_TEMPLATE_GENERATION.into(), g.to_string());
    }
    let spec = t.spec.get_or_insert_default();
    let host_network = spec.host_network == Some(true);
    let tolerations = spec.tolerations.get_or_insert_default();
    for tol in daemon_tolerations(host_network) {
        if !tolerations.iter().any(|t| t.key == tol.key && t.effect == tol.effect) {
            tolerations.push(tol);
        }
    }
    let field = vec![NodeSelectorRequirement {
        key: "metadata.name".into(),
        operator: "In".into(),
        values: Some(vec![node.to_owned()]),
    }];
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let na = affinity.node_affinity.get_or_insert_with(NodeAffinity::default);
    let required = na
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(|| NodeSelector {
            node_selector_terms: Vec::new(),
        });
    if required.node_selector_terms.is_empty() {
        required.node_selector_terms.push(NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(field),
        });
    } else {
        for term in &mut required.node_selector_terms {
            term.match_fields = Some(field.clone());
        }
    }
    t
}

/// Whether a daemon pod of `template` should run on `node`.
pub fn should_run(template: &PodTemplateSpec, node: &Node) -> bool {
    let Some(spec) = template.spec.as_ref() else {
        return false;
    };
    if !matches_node_selector_and_affinity(spec, node) {
        return false;
    }
    let mut tolerations = spec.tolerations.clone().unwrap_or_default();
    tolerations.extend(daemon_tolerations(spec.host_network == Some(true)));
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    untolerated_taint(&taints, &tolerations).is_none()
}

/// Whether a daemon pod of `template` already on `node` may stay there: upstream's
/// `shouldContinueRunning`, which unlike [`should_run`] only minds NoExecute taints, so the
/// `not-ready:NoSchedule` taint of a node whose kubelet reports NotReady keeps new daemon pods
/// off it without deleting the one running there.
pub fn should_continue_running(template: &PodTemplateSpec, node: &Node) -> bool {
    let Some(spec) = template.spec.as_ref() else {
        return false;
    };
    if !matches_node_selector_and_affinity(spec, node) {
        return false;
    }
    let mut tolerations = spec.tolerations.clone().unwrap_or_default();
    tolerations.extend(daemon_tolerations(spec.host_network == Some(true)));
    let taints: Vec<_> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.effect == "NoExecute")
        .collect();
    untolerated_taint(&taints, &tolerations).is_none()
}

/// [`should_continue_running`] as this controller applies it (see [`runs_on`] for the fault).
fn continues_on(ctx: &Ctx, template: &PodTemplateSpec, node: &Node) -> bool {
    if !ctx.cfg.faults.is_on("daemonset-ignores-node-selector") {
        return should_continue_running(template, node);
    }
    should_continue_running(&without_node_selection(template), node)
}

/// The template without nodeSelector and node affinity.
fn without_node_selection(template: &PodTemplateSpec) -> PodTemplateSpec {
    let mut t = template.clone();
    if let Some(spec) = t.spec.as_mut() {
        spec.node_selector = None;
        if let Some(a) = spec.affinity.as_mut() {
            a.node_affinity = None;
        }
    }
    t
}

/// Whether this controller puts a daemon pod of `template` on `node`: [`should_run`], or with
/// `daemonset-ignores-node-selector` on, only the taint check (a controller that does not read
/// the template's nodeSelector and node affinity; the scheduler still does, so such pods stay
/// Pending on nodes that do not match).
fn runs_on(ctx: &Ctx, template: &PodTemplateSpec, node: &Node) -> bool {
    if !ctx.cfg.faults.is_on("daemonset-ignores-node-selector") {
        return should_run(template, node);
    }
    should_run(&without_node_selection(template), node)
}

/// The node a daemon pod is for: its nodeName, or the node its affinity pins it to.
fn pod_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.clone().filter(|n| !n.is_empty()) {
        return Some(n);
    }
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name" && r.operator == "In")
        .and_then(|r| r.values.as_ref()?.first().cloned())
}

/// Runs the DaemonSet controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let sets = ctx.informers.get::<DaemonSet>();
    let pods = ctx.informers.get::<Pod>();
    let nodes = ctx.informers.get::<Node>();
    let recorder = ctx.recorder(Component::DaemonSet);
    let revisions = ctx.informers.get::<ControllerRevision>();
    let caches = async {
        sets.ready().await?;
        pods.ready().await?;
        revisions.ready().await?;
        nodes.ready().await
    };
    let changes = vec![sets.subscribe(), pods.subscribe(), nodes.subscribe()];
    reconcile_each(&ctx, caches, &sets, changes, |ds, pass| {
        sync(&ctx, &recorder, &pods, &nodes, ds, pass.requeue).boxed()
    })
    .await
}

async fn sync(
    ctx: &Ctx,
    recorder: &Recorder,
    pods: &Informer<Pod>,
    nodes: &Informer<Node>,
    ds: &Arc<DaemonSet>,
    requeue: &mut Requeue,
) -> Result<()> {
    let nodes = &nodes.list();
    let ns = ds.namespace().unwrap_or_default();
    let name = ds.name_any();
    let Some(spec) = ds.spec.as_ref() else { return Ok(()) };
    let template = &spec.template;
    let generation = ds.metadata.generation;
    let owned = claim_pods(ctx, ds.as_ref(), Some(&spec.selector), pods.in_namespace(&ns)).await?;
    let deleting = ds.metadata.deletion_timestamp.is_some();
    // `revisions-not-written=daemonset`: a controller that keeps no ControllerRevisions.
    let history = if deleting || ctx.cfg.faults.applies_to("revisions-not-written", "daemonset") {
        None
    } else {
        Some(history::construct(ctx, ds, &owned).await?)
    };
    let hash = history.as_ref().map_or_else(
        || template_hash(template, ds.status.as_ref().and_then(|s| s.collision_count)),
        |h| h.hash.clone(),
    );
    let mut by_node: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
    for p in owned {
        if let Some(n) = pod_node(&p) {
            by_node.entry(n).or_default().push(p);
        }
    }
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let now = ctx.now();
    let mut to_create: Vec<String> = Vec::new();
    let mut to_delete: Vec<Arc<Pod>> = Vec::new();
    let mut old_pods: Vec<Arc<Pod>> = Vec::new();
    let mut unavailable = 0;
    for node in nodes {
        let node_name = node.name_any();
        let run_here = runs_on(ctx, template, node);
        let here: Vec<Arc<Pod>> = by_node.remove(&node_name).unwrap_or_default();
        let (alive, failed): (Vec<_>, Vec<_>) = here
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            // `daemonset-failed-pods-kept`: a controller that counts a Failed pod as running.
            .partition(|p| phase(p) != "Failed" || ctx.cfg.faults.is_on("daemonset-failed-pods-kept"));
        for f in &failed {
            recorder
                .record(
                    ds.as_ref(),
                    EventType::Warning,
                    "FailedDaemonPod",
                    format!(
                        "Found failed daemon pod {ns}/{} on node {node_name}, will try to kill it",
                        f.name_any()
                    ),
                )
                .await;
        }
        to_delete.extend(failed);
        if !run_here {
            if continues_on(ctx, template, node) {
                // Kept where it runs (the oldest, as upstream), but none is created.
                let mut alive = alive;
                alive.sort_by_key(|p| p.metadata.creation_timestamp.clone());
                to_delete.extend(alive.into_iter().skip(1));
            } else {
                to_delete.extend(alive);
            }
            continue;
        }
        match alive.len() {
            0 => {
                to_create.push(node_name);
                unavailable += 1;
            }
            _ => {
                let mut alive = alive;
                alive.sort_by_key(|p| p.metadata.creation_timestamp.clone());
                let keep = alive.remove(0);
                to_delete.extend(alive);
                if !is_available(&keep, min_ready, now) {
                    unavailable += 1;
                }
                if !is_pod_updated(&keep, &hash, generation) {
                    old_pods.push(keep);
                }
            }
        }
    }
    // Pods for nodes that no longer exist go too.
    to_delete.extend(
        by_node
            .into_values()
            .flatten()
            .filter(|p| p.metadata.deletion_timestamp.is_none()),
    );

    if !deleting {
        let rolling = spec
            .update_strategy
            .as_ref()
            .and_then(|s| s.type_.as_deref())
            .unwrap_or("RollingUpdate")
            == "RollingUpdate";
        // `rollout-stuck=daemonset`: a controller that never replaces pods of an old template.
        let stuck = ctx.cfg.faults.applies_to("rollout-stuck", "daemonset");
        if rolling && !stuck && !old_pods.is_empty() {
            let desired = nodes.iter().filter(|n| runs_on(ctx, template, n)).count() as i32;
            let max_unavailable = resolve_int_or_percent(
                spec.update_strategy
                    .as_ref()
                    .and_then(|s| s.rolling_update.as_ref())
                    .and_then(|r| r.max_unavailable.as_ref()),
                desired,
                false,
                "1",
            )
            .max(1);
            // Unavailable old pods are replaced at once; available ones within the budget.
            let (broken, healthy): (Vec<_>, Vec<_>) =
                old_pods.into_iter().partition(|p| !is_available(p, min_ready, now));
            let mut budget = max_unavailable - unavailable;
            to_delete.extend(broken);
            for p in healthy {
                if budget <= 0 {
                    break;
                }
                budget -= 1;
                to_delete.push(p);
            }
        }
        for node_name in &to_create {
            let t = daemon_template(template, node_name, &hash, generation);
            let pod = pod_from_template(&t, &ns, owner_ref(ds.as_ref()), None, Some(generate_name_prefix(&name)));
            create_owned_pod(recorder, pods, &api, ds.as_ref(), &pod)
                .await
                .ctx("create", || format!("daemon pod of {ns}/{name} for node {node_name}"))?;
        }
        for p in &to_delete {
            delete_owned_pod(recorder, &api, ds.as_ref(), p, &DeleteParams::default(), Some(pods))
                .await
                .ctx("delete", || format!("pod {ns}/{}", p.name_any()))?;
        }
        if let Some(h) = &history {
            let live: Vec<Arc<Pod>> = pods
                .in_namespace(&ns)
                .into_iter()
                .filter(|p| super::util::controlled_by(&p.metadata, &ds.metadata.uid.clone().unwrap_or_default()))
                .collect();
            history::cleanup(ctx, ds, &h.old, &live).await?;
        }
    }
    update_status(ctx, pods, nodes, ds, &hash, requeue).await
}

async fn update_status(
    ctx: &Ctx,
    pods: &Informer<Pod>,
    nodes: &[Arc<Node>],
    ds: &DaemonSet,
    hash: &str,
    requeue: &mut Requeue,
) -> Result<()> {
    let ns = ds.namespace().unwrap_or_default();
    let uid = ds.metadata.uid.clone().unwrap_or_default();
    let Some(spec) = ds.spec.as_ref() else { return Ok(()) };
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let now = ctx.now();
    let mut by_node: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
    for p in pods.in_namespace(&ns) {
        if super::util::controlled_by(&p.metadata, &uid)
            && p.metadata.deletion_timestamp.is_none()
            && phase(&p) != "Failed"
            && let Some(n) = pod_node(&p)
        {
            by_node.entry(n).or_default().push(p);
        }
    }
    let (mut desired, mut current, mut mis, mut ready, mut available, mut updated) = (0, 0, 0, 0, 0, 0);
    for node in nodes {
        let here = by_node.get(&node.name_any());
        let run_here = runs_on(ctx, &spec.template, node);
        if run_here {
            desired += 1;
        }
        let Some(p) = here.and_then(|v| v.first()) else {
            continue;
        };
        if !run_here {
            mis += 1;
            continue;
        }
        current += 1;
        if is_ready(p) {
            ready += 1;
        }
        if is_available(p, min_ready, now) {
            available += 1;
        } else if is_ready(p) {
            requeue.after(Duration::from_secs(1));
        }
        if is_pod_updated(p, hash, ds.metadata.generation) {
            updated += 1;
        }
    }
    let desired_status = json!({
        "desiredNumberScheduled": desired,
        "currentNumberScheduled": current,
        "numberMisscheduled": mis,
        "numberReady": ready,
        "numberAvailable": available,
        "numberUnavailable": desired - available,
        "updatedNumberScheduled": updated,
        "observedGeneration": ds.metadata.generation,
    });
    let have = serde_json::to_value(&ds.status).unwrap_or_default();
    let differs = desired_status
        .as_object()
        .expect("object")
        .iter()
        .any(|(k, v)| have.get(k).cloned().unwrap_or(json!(0)) != if v.is_null() { json!(0) } else { v.clone() });
    if differs {
        let api: Api<DaemonSet> = Api::namespaced(ctx.client.clone(), &ns);
        patch_status(&api, &ds.name_any(), desired_status, || {
            format!("daemonset {ns}/{}", ds.name_any())
        })
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Taint;

    fn node(os: &str, taint: bool) -> Node {
        let mut v = json!({"metadata": {"name": format!("{os}-0"), "labels": {"kubernetes.io/os": os}}});
        if taint {
            v["spec"] = json!({"taints": [{"key": "os", "value": os, "effect": "NoSchedule"}]});
        }
        serde_json::from_value(v).unwrap()
    }

    fn template(v: serde_json::Value) -> PodTemplateSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn os_specific_daemonsets_pick_their_os() {
        let windows = template(json!({"spec": {"nodeSelector": {"kubernetes.io/os": "windows"},
            "tolerations": [{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "x"}]}}));
        assert!(should_run(&windows, &node("windows", true)));
        assert!(!should_run(&windows, &node("linux", false)));
        // A NotReady node's NoSchedule taint keeps new daemon pods off, the running one stays;
        // an untolerated NoExecute taint evicts it.
        let taint = |n: &mut Node, key: &str, effect: &str| {
            n.spec
                .get_or_insert_default()
                .taints
                .get_or_insert_default()
                .push(Taint {
                    key: key.into(),
                    effect: effect.into(),
                    ..Taint::default()
                });
        };
        let mut not_ready = node("windows", true);
        taint(&mut not_ready, "node.kubernetes.io/not-ready", "NoSchedule");
        assert!(!should_run(&windows, &not_ready));
        assert!(should_continue_running(&windows, &not_ready));
        taint(&mut not_ready, "dedicated", "NoExecute");
        assert!(!should_continue_running(&windows, &not_ready));
        let anywhere = template(json!({"spec": {"containers": [{"name": "c", "image": "x"}]}}));
        assert!(should_run(&anywhere, &node("linux", false)));
        assert!(
            !should_run(&anywhere, &node("windows", true)),
            "untolerated taint keeps it off"
        );
        let cordoned: Node = serde_json::from_value(json!({"metadata": {"name": "c"},
            "spec": {"unschedulable": true, "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}})).unwrap();
        assert!(should_run(&anywhere, &cordoned), "daemons tolerate cordoned nodes");
    }

    #[test]
    fn daemon_pods_are_pinned_and_tolerant() {
        let t = template(
            json!({"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
        );
        let d = daemon_template(&t, "n7", "h", Some(3));
        let spec = d.spec.as_ref().unwrap();
        let terms = &spec
            .affinity
            .as_ref()
            .unwrap()
            .node_affinity
            .as_ref()
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .unwrap()
            .node_selector_terms;
        assert_eq!(
            terms[0].match_fields.as_ref().unwrap()[0].values.as_ref().unwrap(),
            &vec!["n7".to_owned()]
        );
        assert_eq!(spec.tolerations.as_ref().unwrap().len(), 6);
        let labels = d.metadata.unwrap().labels.unwrap();
        assert_eq!(labels[CONTROLLER_REVISION_HASH], "h");
        assert_eq!(labels[POD_TEMPLATE_GENERATION], "3");
        let pod = Pod {
            spec: Some(spec.clone()),
            ..Pod::default()
        };
        assert_eq!(pod_node(&pod).as_deref(), Some("n7"));
    }
}
