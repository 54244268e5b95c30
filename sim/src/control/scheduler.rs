//! The scheduler: binds pending pods to nodes ([`run`]), reports why a pod fits nowhere, and
//! preempts lower-priority pods for a higher-priority one.
//!
//! One pass looks at every pending pod of this scheduler, highest priority first, filters the
//! nodes with [`super::predicates::fits`], scores the survivors least-allocated (spreading), and
//! POSTs a `Binding`. Pods it bound are "assumed" on their node until the cache shows the
//! binding, so one pass never overfills a node. A pass runs on every pod or node change and on
//! each resync, which is upstream's "retry when the cluster changes".

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod, PodCondition};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{ApiContext, Result, is_conflict, is_not_found};
use super::events::{EventType, Recorder};
use super::informer::{Informer, Wake};
use super::plane::{Component, Ctx};
use super::predicates::{
    UnfitReason, fits, fits_without, free_resources, holds_resources, least_allocated_score, pod_requests,
    preemption_summary, unschedulable_summary,
};
use super::util::set_condition;

/// Upstream's built-in priority classes, for clusters whose API server does not create them.
const SYSTEM_CLASSES: [(&str, i32); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

/// How often a pod that still fits nowhere gets a new FailedScheduling event without changes.
const REPORT_AGAIN_AFTER: Duration = Duration::from_secs(60);

/// How long a binding is assumed before the cache must show it.
const ASSUME_TTL: Duration = Duration::from_secs(30);

struct State {
    assumed: HashMap<String, (Pod, Instant)>,
    reported: HashMap<String, (String, Instant)>,
}

/// Runs the scheduler until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let pods = ctx.informers.get::<Pod>();
    let nodes = ctx.informers.get::<Node>();
    let classes = ctx.informers.get::<PriorityClass>();
    tracing::debug!("scheduler waiting for caches");
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = async { pods.ready().await?; nodes.ready().await } => r?,
    }
    tracing::debug!("scheduler caches ready");
    let recorder = ctx.recorder(Component::Scheduler);
    let mut state = State {
        assumed: HashMap::new(),
        reported: HashMap::new(),
    };
    let mut wake = Wake::new(
        vec![pods.subscribe(), nodes.subscribe(), classes.subscribe()],
        ctx.cfg.resync,
    );
    loop {
        pass(&ctx, &recorder, &pods, &nodes, &classes, &mut state).await;
        if !wake.next(None, &ctx.cancel).await {
            return Ok(());
        }
    }
}

/// The pod's priority: `spec.priority` when the API server resolved it, else its class's value,
/// else the global default class, else 0.
pub fn priority(pod: &Pod, classes: &[Arc<PriorityClass>]) -> i32 {
    let spec = pod.spec.as_ref();
    if let Some(p) = spec.and_then(|s| s.priority) {
        return p;
    }
    if let Some(name) = spec
        .and_then(|s| s.priority_class_name.as_deref())
        .filter(|n| !n.is_empty())
    {
        if let Some(c) = classes.iter().find(|c| c.metadata.name.as_deref() == Some(name)) {
            return c.value;
        }
        if let Some((_, v)) = SYSTEM_CLASSES.iter().find(|(n, _)| *n == name) {
            return *v;
        }
    }
    classes
        .iter()
        .find(|c| c.global_default == Some(true))
        .map_or(0, |c| c.value)
}

fn may_preempt(pod: &Pod, classes: &[Arc<PriorityClass>]) -> bool {
    let spec = pod.spec.as_ref();
    let policy = spec.and_then(|s| s.preemption_policy.clone()).or_else(|| {
        let name = spec.and_then(|s| s.priority_class_name.as_deref())?;
        classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))?
            .preemption_policy
            .clone()
    });
    policy.as_deref() != Some("Never")
}

fn is_pending_for(pod: &Pod, scheduler: &str) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return false };
    spec.node_name.as_deref().is_none_or(str::is_empty)
        && spec.scheduler_name.as_deref().unwrap_or("default-scheduler") == scheduler
        && pod.metadata.deletion_timestamp.is_none()
        && holds_resources(pod)
}

fn nominated_node(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
}

async fn pass(
    ctx: &Ctx,
    recorder: &Recorder,
    pods: &Informer<Pod>,
    nodes: &Informer<Node>,
    classes: &Informer<PriorityClass>,
    state: &mut State,
) {
    let mut node_list = nodes.list();
    node_list.sort_by_key(|n| n.name_any());
    let classes = classes.list();
    let all = pods.list();

    let by_uid: HashMap<&str, &Arc<Pod>> = all
        .iter()
        .filter_map(|p| Some((p.metadata.uid.as_deref()?, p)))
        .collect();
    state.assumed.retain(|uid, (_, at)| {
        let still_unbound = by_uid.get(uid.as_str()).is_some_and(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none_or(str::is_empty)
        });
        still_unbound && at.elapsed() < ASSUME_TTL
    });
    state.reported.retain(|uid, _| by_uid.contains_key(uid.as_str()));

    let mut bound: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    for p in &all {
        if let Some(n) = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
        {
            bound.entry(n.to_owned()).or_default().push((**p).clone());
        }
    }
    for (p, _) in state.assumed.values() {
        let n = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        bound.entry(n).or_default().push(p.clone());
    }

    let mut pending: Vec<(i32, &Arc<Pod>)> = all
        .iter()
        .filter(|p| is_pending_for(p, &ctx.cfg.scheduler_name))
        .filter(|p| !p.metadata.uid.as_ref().is_some_and(|u| state.assumed.contains_key(u)))
        .map(|p| (priority(p, &classes), p))
        .collect();
    pending.sort_by(|(pa, a), (pb, b)| {
        pb.cmp(pa)
            .then_with(|| a.metadata.creation_timestamp.cmp(&b.metadata.creation_timestamp))
    });
    tracing::trace!(pending = pending.len(), nodes = node_list.len(), "scheduling pass");
    let disabled = ctx.cfg.faults.values("scheduler-filter-off");
    let nominated: Vec<(i32, Pod)> = pending
        .iter()
        .filter(|(_, p)| nominated_node(p).is_some())
        .map(|(prio, p)| (*prio, Pod::clone(p)))
        .collect();

    for (prio, pod) in &pending {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut reasons: Vec<(String, UnfitReason)> = Vec::new();
        let mut best: Option<(i64, usize, String)> = None;
        for node in &node_list {
            let name = node.name_any();
            let mut on: Vec<&Pod> = bound.get(&name).map(|v| v.iter().collect()).unwrap_or_default();
            // Room promised to higher-priority nominated pods is not available to this one.
            on.extend(
                nominated
                    .iter()
                    .filter(|(np, p)| {
                        *np >= *prio && p.metadata.uid.as_deref() != Some(&uid) && nominated_node(p) == Some(&name)
                    })
                    .map(|(_, p)| p),
            );
            match fits_without(pod, node, &on, &disabled) {
                Ok(()) => {
                    let requests = pod_requests(pod.spec.as_ref().expect("pending pods have a spec"));
                    let score = least_allocated_score(&requests, &free_resources(node, &on), node);
                    let candidate = (score, on.len(), name);
                    let better = match &best {
                        None => true,
                        Some((s, n, _)) => candidate.0 > *s || (candidate.0 == *s && candidate.1 < *n),
                    };
                    if better {
                        best = Some(candidate);
                    }
                }
                Err(r) => reasons.push((name, r)),
            }
        }
        match best {
            Some((_, _, node)) => match bind(ctx, recorder, pod, &node).await {
                Ok(()) => {
                    let mut assumed = Pod::clone(pod);
                    if let Some(s) = assumed.spec.as_mut() {
                        s.node_name = Some(node.clone());
                    }
                    bound.entry(node).or_default().push(assumed.clone());
                    state.assumed.insert(uid.clone(), (assumed, Instant::now()));
                    state.reported.remove(&uid);
                }
                Err(e) if e.is_conflict() || e.is_not_found() => {
                    tracing::debug!(pod = %pod.name_any(), error = %e, "binding raced with another change");
                }
                Err(e) => tracing::warn!(pod = %pod.name_any(), error = %super::error::chain(&e), "binding failed"),
            },
            None => {
                let outcome = if may_preempt(pod, &classes) && !ctx.cfg.faults.is_on("preemption-off") {
                    preempt(ctx, recorder, pod, *prio, &node_list, &bound, &classes, &reasons).await
                } else {
                    Preemption::NotEligible("preemption: not eligible due to preemptionPolicy=Never.".into())
                };
                let reasons: Vec<UnfitReason> = reasons.into_iter().map(|(_, r)| r).collect();
                let mut message = unschedulable_summary(node_list.len(), &reasons);
                let nominate = match outcome {
                    Preemption::Nominated(n) => Some(n),
                    Preemption::Waiting => None,
                    Preemption::NotEligible(m) => {
                        message = format!("{message} {m}");
                        None
                    }
                };
                if let Err(e) = report_unschedulable(ctx, recorder, pod, &message, nominate, state).await {
                    tracing::warn!(pod = %pod.name_any(), error = %super::error::chain(&e), "failed to report unschedulable pod");
                }
            }
        }
    }
}

async fn bind(ctx: &Ctx, recorder: &Recorder, pod: &Pod, node: &str) -> Result<()> {
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            uid: pod.metadata.uid.clone(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_owned()),
            ..ObjectReference::default()
        },
    };
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    api.create_subresource::<_, serde_json::Value>("binding", &name, &PostParams::default(), &binding)
        .await
        .ctx("bind", || format!("pod {ns}/{name} to node {node}"))?;
    tracing::debug!(pod = %format!("{ns}/{name}"), %node, "bound");
    recorder
        .record(
            pod,
            EventType::Normal,
            "Scheduled",
            format!("Successfully assigned {ns}/{name} to {node}"),
        )
        .await;
    Ok(())
}

enum Preemption {
    /// Victims were evicted (or are still terminating) on this node.
    Nominated(String),
    /// An earlier preemption for this pod is still in progress.
    Waiting,
    /// Preemption cannot help; the message part says why.
    NotEligible(String),
}

#[expect(clippy::too_many_arguments, reason = "one pass's snapshot, passed by reference")]
async fn preempt(
    ctx: &Ctx,
    recorder: &Recorder,
    pod: &Pod,
    prio: i32,
    nodes: &[Arc<Node>],
    bound: &BTreeMap<String, Vec<Pod>>,
    classes: &[Arc<PriorityClass>],
    reasons: &[(String, UnfitReason)],
) -> Preemption {
    // Upstream's PodEligibleToPreemptOthers: while victims on the nominated node are still
    // terminating, wait for them instead of evicting more.
    if let Some(n) = nominated_node(pod)
        && bound.get(n).is_some_and(|ps| {
            ps.iter()
                .any(|p| p.metadata.deletion_timestamp.is_some() && priority(p, classes) < prio)
        })
    {
        return Preemption::Waiting;
    }
    let (mut not_helpful, mut no_victims) = (0, 0);
    let mut best: Option<(i32, usize, String, Vec<Pod>)> = None;
    for (name, reason) in reasons {
        if !reason.resolvable_by_preemption() {
            not_helpful += 1;
            continue;
        }
        let Some(node) = nodes.iter().find(|n| n.name_any() == *name) else {
            continue;
        };
        let on = bound.get(name).cloned().unwrap_or_default();
        match select_victims(pod, prio, node, &on, classes) {
            Some(victims) => {
                let top = victims.iter().map(|v| priority(v, classes)).max().unwrap_or(i32::MIN);
                let cand = (top, victims.len(), name.clone(), victims);
                if best.as_ref().is_none_or(|b| (cand.0, cand.1) < (b.0, b.1)) {
                    best = Some(cand);
                }
            }
            None => no_victims += 1,
        }
    }
    let Some((_, _, node, victims)) = best else {
        return Preemption::NotEligible(preemption_summary(nodes.len(), not_helpful, no_victims));
    };
    let preemptor_uid = pod.metadata.uid.clone().unwrap_or_default();
    for v in &victims {
        let ns = v.namespace().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        let cond = json!({"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
            "message": format!("{}: preempting to accommodate a higher priority pod", ctx.cfg.scheduler_name),
            "lastTransitionTime": Time(ctx.now()),
        }]}});
        let mut conditions = v.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        if let Ok(c) = serde_json::from_value::<PodCondition>(cond["status"]["conditions"][0].clone()) {
            set_condition(&mut conditions, c, |c| &c.type_);
        }
        if let Err(e) = api
            .patch_status(
                &v.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": conditions}})),
            )
            .await
            && !is_not_found(&e)
        {
            tracing::debug!(pod = %v.name_any(), error = %e, "failed to mark victim as a disruption target");
        }
        match api.delete(&v.name_any(), &DeleteParams::default()).await {
            Ok(_) => {
                recorder
                    .record(
                        v,
                        EventType::Normal,
                        "Preempted",
                        format!("Preempted by pod {preemptor_uid} on node {node}"),
                    )
                    .await;
                tracing::info!(victim = %v.name_any(), preemptor = %pod.name_any(), %node, "preempted");
            }
            Err(e) if is_not_found(&e) || is_conflict(&e) => {}
            Err(e) => tracing::warn!(victim = %v.name_any(), error = %e, "failed to preempt"),
        }
    }
    Preemption::Nominated(node)
}

/// The fewest lower-priority pods of a node whose removal lets `pod` fit, or `None`.
///
/// Like upstream: remove every lower-priority pod, check the fit, then give pods back
/// (highest priority first) while the pod still fits.
fn select_victims(pod: &Pod, prio: i32, node: &Node, on: &[Pod], classes: &[Arc<PriorityClass>]) -> Option<Vec<Pod>> {
    let (mut lower, higher): (Vec<&Pod>, Vec<&Pod>) = on
        .iter()
        .filter(|p| holds_resources(p))
        .partition(|p| priority(p, classes) < prio && p.metadata.deletion_timestamp.is_none());
    if lower.is_empty() || fits(pod, node, &higher).is_err() {
        return None;
    }
    lower.sort_by_key(|p| std::cmp::Reverse(priority(p, classes)));
    let mut kept = higher;
    let mut victims = Vec::new();
    for p in lower {
        kept.push(p);
        if fits(pod, node, &kept).is_err() {
            kept.pop();
            victims.push(p.clone());
        }
    }
    Some(victims)
}

async fn report_unschedulable(
    ctx: &Ctx,
    recorder: &Recorder,
    pod: &Pod,
    message: &str,
    nominate: Option<String>,
    state: &mut State,
) -> Result<()> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let mut conditions = status.conditions.clone().unwrap_or_default();
    let changed = set_condition(
        &mut conditions,
        PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            message: Some(message.to_owned()),
            last_transition_time: Some(Time(ctx.now())),
            ..PodCondition::default()
        },
        |c| &c.type_,
    );
    let nominate_changed = nominate
        .as_deref()
        .is_some_and(|n| status.nominated_node_name.as_deref() != Some(n));
    if changed || nominate_changed {
        let mut patch = json!({"status": {"conditions": conditions}});
        if let Some(n) = &nominate {
            patch["status"]["nominatedNodeName"] = json!(n);
        }
        let ns = pod.namespace().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        match api
            .patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(e).ctx("patch status of", || format!("pod {ns}/{}", pod.name_any())),
        }
    }
    let due = match state.reported.get(&uid) {
        Some((m, at)) => m != message || at.elapsed() >= REPORT_AGAIN_AFTER,
        None => true,
    };
    if due {
        recorder
            .record(pod, EventType::Warning, "FailedScheduling", message)
            .await;
        state.reported.insert(uid, (message.to_owned(), Instant::now()));
        tracing::debug!(pod = %pod.name_any(), %message, "unschedulable");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn class(name: &str, value: i32, default: bool) -> Arc<PriorityClass> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name}, "value": value, "globalDefault": default}))
                .unwrap(),
        )
    }

    #[test]
    fn priority_resolution_order() {
        let classes = vec![class("high", 1000, false), class("dflt", 5, true)];
        let p = |spec: serde_json::Value| pod(json!({"metadata": {"name": "p"}, "spec": spec}));
        assert_eq!(
            priority(
                &p(json!({"containers": [], "priority": 7, "priorityClassName": "high"})),
                &classes
            ),
            7
        );
        assert_eq!(
            priority(&p(json!({"containers": [], "priorityClassName": "high"})), &classes),
            1000
        );
        assert_eq!(
            priority(
                &p(json!({"containers": [], "priorityClassName": "system-node-critical"})),
                &classes
            ),
            2_000_001_000
        );
        assert_eq!(priority(&p(json!({"containers": []})), &classes), 5);
        assert_eq!(priority(&p(json!({"containers": []})), &[]), 0);
    }

    #[test]
    fn victims_are_the_fewest_lowest_priority_pods() {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"}, "status": {
            "allocatable": {"cpu": "2", "memory": "1Gi", "pods": "10"},
            "conditions": [{"type": "Ready", "status": "True"}]}}))
        .unwrap();
        let mk = |name: &str, cpu: &str, prio: i32| {
            pod(json!({"metadata": {"name": name}, "spec": {"priority": prio,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}))
        };
        let on = vec![mk("a", "500m", 1), mk("b", "1", 2), mk("c", "500m", 100)];
        let preemptor = mk("p", "1", 10);
        let victims = select_victims(&preemptor, 10, &node, &on, &[]).unwrap();
        let names: Vec<_> = victims.iter().map(|v| v.name_any()).collect();
        // Giving back b (priority 2) first leaves no room, so b goes; a fits back in.
        assert_eq!(names, vec!["b"]);
        // A pod that would not fit even on an empty node has no victims.
        assert!(select_victims(&mk("huge", "3", 10), 10, &node, &on, &[]).is_none());
        // Equal or higher priority pods are never victims.
        assert!(select_victims(&mk("p", "1", 1), 1, &node, &on, &[]).is_none());
    }

    #[test]
    fn pending_means_unbound_ours_and_alive() {
        let p = |spec: serde_json::Value| pod(json!({"metadata": {"name": "p"}, "spec": spec}));
        assert!(is_pending_for(&p(json!({"containers": []})), "default-scheduler"));
        assert!(!is_pending_for(
            &p(json!({"containers": [], "nodeName": "n"})),
            "default-scheduler"
        ));
        assert!(!is_pending_for(
            &p(json!({"containers": [], "schedulerName": "other"})),
            "default-scheduler"
        ));
    }
}
