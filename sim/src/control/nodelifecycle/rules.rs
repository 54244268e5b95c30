//! What the node lifecycle controller decides, as pure functions of a Node or Pod and the
//! time: which taints a node's conditions call for, the conditions of a node that stopped
//! reporting, and a pod marked not ready. Kept apart from the loop in `nodelifecycle.rs` so
//! each rule is tested on its own against upstream's behaviour.
//!
//! Sources (kubernetes 1.33): `pkg/controller/nodelifecycle/node_lifecycle_controller.go`
//! (`nodeConditionToTaintKeyStatusMap`, `doNoScheduleTaintingPass`,
//! `processTaintBaseEviction`, `tryUpdateNodeHealth`), `pkg/controller/util/node/controller_utils.go`
//! (`MarkPodsNotReady`, `SwapNodeControllerTaint`, which stamps `timeAdded` on every taint it
//! adds) and `k8s.io/api/core/v1/well_known_taints.go` (the taint keys).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::control::predicates::{TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE};

/// `node.kubernetes.io/memory-pressure`.
const TAINT_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// `node.kubernetes.io/disk-pressure`.
const TAINT_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// `node.kubernetes.io/pid-pressure`.
const TAINT_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
/// `node.kubernetes.io/network-unavailable`.
const TAINT_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

/// The reason of a condition the controller set to Unknown because the kubelet went quiet.
pub(crate) const REASON_STATUS_UNKNOWN: &str = "NodeStatusUnknown";
/// Its message.
pub(crate) const MESSAGE_STATUS_UNKNOWN: &str = "Kubelet stopped posting node status.";

/// A node's Ready condition as the controller reads it (an absent condition counts as Unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// `True`.
    Ready,
    /// `False`: the kubelet says the node is not ready.
    NotReady,
    /// `Unknown` or absent: nobody knows.
    Unknown,
}

/// The Ready condition of `node`, if it has one.
pub(crate) fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// The node's readiness.
pub(crate) fn readiness(node: &Node) -> Readiness {
    match ready_condition(node).map(|c| c.status.as_str()) {
        Some("True") => Readiness::Ready,
        Some("False") => Readiness::NotReady,
        _ => Readiness::Unknown,
    }
}

/// Upstream's `nodeConditionToTaintKeyStatusMap`: the taint a condition in a status calls for.
fn condition_taint(type_: &str, status: &str) -> Option<&'static str> {
    match (type_, status) {
        ("Ready", "False") => Some(TAINT_NOT_READY),
        ("Ready", "Unknown") => Some(TAINT_UNREACHABLE),
        ("MemoryPressure", "True") => Some(TAINT_MEMORY_PRESSURE),
        ("DiskPressure", "True") => Some(TAINT_DISK_PRESSURE),
        ("NetworkUnavailable", "True") => Some(TAINT_NETWORK_UNAVAILABLE),
        ("PIDPressure", "True") => Some(TAINT_PID_PRESSURE),
        _ => None,
    }
}

/// Whether the NoSchedule pass owns taints with `key` (condition taints and unschedulable).
fn managed_no_schedule(key: &str) -> bool {
    [
        TAINT_NOT_READY,
        TAINT_UNREACHABLE,
        TAINT_MEMORY_PRESSURE,
        TAINT_DISK_PRESSURE,
        TAINT_NETWORK_UNAVAILABLE,
        TAINT_PID_PRESSURE,
        TAINT_UNSCHEDULABLE,
    ]
    .contains(&key)
}

fn taints_of(node: &Node) -> Vec<Taint> {
    node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default()
}

fn taint(key: &str, effect: &str, now: Timestamp) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        time_added: Some(Time(now)),
        value: None,
    }
}

/// `doNoScheduleTaintingPass`: the node's taints with the NoSchedule condition taints (and the
/// unschedulable taint of a cordoned node) brought in line with its conditions; `None` when
/// nothing changes. Other taints are left alone.
pub(crate) fn no_schedule_pass(node: &Node, now: Timestamp) -> Option<Vec<Taint>> {
    let mut wanted: Vec<&str> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| condition_taint(&c.type_, &c.status))
        .collect();
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        wanted.push(TAINT_UNSCHEDULABLE);
    }
    let current = taints_of(node);
    let is_managed = |t: &Taint| t.effect == "NoSchedule" && managed_no_schedule(&t.key);
    let stale = current
        .iter()
        .any(|t| is_managed(t) && !wanted.contains(&t.key.as_str()));
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|k| !current.iter().any(|t| is_managed(t) && t.key == *k))
        .collect();
    if !stale && missing.is_empty() {
        return None;
    }
    let mut out: Vec<Taint> = current
        .into_iter()
        .filter(|t| !is_managed(t) || wanted.contains(&t.key.as_str()))
        .collect();
    out.extend(missing.into_iter().map(|k| taint(k, "NoSchedule", now)));
    Some(out)
}

/// `processTaintBaseEviction` on the Ready status the monitor pass observed: NotReady wants
/// `not-ready:NoExecute`, Unknown `unreachable:NoExecute` (the two are swapped, never both), a
/// Ready node neither (`markNodeAsReachable`). `None` when the taints are already right.
pub(crate) fn no_execute_pass(node: &Node, observed: Readiness, now: Timestamp) -> Option<Vec<Taint>> {
    let (want, opposite) = match observed {
        Readiness::NotReady => (Some(TAINT_NOT_READY), TAINT_UNREACHABLE),
        Readiness::Unknown => (Some(TAINT_UNREACHABLE), TAINT_NOT_READY),
        Readiness::Ready => (None, ""),
    };
    let current = taints_of(node);
    let is_ours = |t: &Taint| t.effect == "NoExecute" && (t.key == TAINT_NOT_READY || t.key == TAINT_UNREACHABLE);
    let keep = |t: &Taint| !is_ours(t) || want == Some(t.key.as_str());
    let has_want = want.is_none_or(|w| current.iter().any(|t| t.effect == "NoExecute" && t.key == w));
    let has_other = current
        .iter()
        .any(|t| is_ours(t) && (want.is_none() || t.key == opposite));
    if has_want && !has_other {
        return None;
    }
    let mut out: Vec<Taint> = current.iter().filter(|t| keep(t)).cloned().collect();
    if let Some(w) = want
        && !has_want
    {
        out.push(taint(w, "NoExecute", now));
    }
    Some(out)
}

/// The node conditions `tryUpdateNodeHealth` writes once the grace period has passed without a
/// heartbeat: Ready, MemoryPressure, DiskPressure and PIDPressure become Unknown
/// (`NodeStatusUnknown`, "Kubelet stopped posting node status.", transition now, last heartbeat
/// kept); one the kubelet never posted is added as `NodeStatusNeverUpdated`. `None` when the
/// Ready condition would not change (upstream writes only then).
pub(crate) fn conditions_unknown(node: &Node, now: Timestamp) -> Option<Vec<NodeCondition>> {
    let before = ready_condition(node).cloned();
    let mut conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    for type_ in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) if c.status != "Unknown" => {
                c.status = "Unknown".into();
                c.reason = Some(REASON_STATUS_UNKNOWN.into());
                c.message = Some(MESSAGE_STATUS_UNKNOWN.into());
                c.last_transition_time = Some(Time(now));
            }
            Some(_) => {}
            None => conditions.push(NodeCondition {
                type_: type_.into(),
                status: "Unknown".into(),
                reason: Some("NodeStatusNeverUpdated".into()),
                message: Some("Kubelet never posted node status.".into()),
                last_heartbeat_time: node.metadata.creation_timestamp.clone(),
                last_transition_time: Some(Time(now)),
            }),
        }
    }
    let after = conditions.iter().find(|c| c.type_ == "Ready");
    (before.as_ref() != after).then_some(conditions)
}

/// `MarkPodsNotReady` for one pod: its Ready condition set to False (transition time now,
/// reason and message kept), or `None` when it has no Ready condition or it is already False.
pub(crate) fn pod_not_ready(pod: &Pod, now: Timestamp) -> Option<Pod> {
    let mut pod = pod.clone();
    let cond = pod
        .status
        .as_mut()?
        .conditions
        .as_mut()?
        .iter_mut()
        .find(|c| c.type_ == "Ready")?;
    if cond.status == "False" {
        return None;
    }
    cond.status = "False".into();
    cond.last_transition_time = Some(Time(now));
    Some(pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(ready: &str, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n", "creationTimestamp": "2025-01-01T00:00:00Z"},
            "spec": {"taints": taints},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": ready, "reason": "KubeletReady",
                 "lastHeartbeatTime": "2025-01-01T00:00:10Z", "lastTransitionTime": "2025-01-01T00:00:01Z"},
            ]},
        }))
        .unwrap()
    }

    fn keys(taints: &[Taint]) -> Vec<(String, String)> {
        taints.iter().map(|t| (t.key.clone(), t.effect.clone())).collect()
    }

    fn now() -> Timestamp {
        "2025-01-01T00:01:00Z".parse().unwrap()
    }

    #[test]
    fn no_schedule_taints_follow_the_ready_condition() {
        let os = json!([{"key": "os", "value": "windows", "effect": "NoSchedule"}]);
        assert_eq!(no_schedule_pass(&node("True", os.clone()), now()), None);
        let t = no_schedule_pass(&node("False", os.clone()), now()).unwrap();
        assert_eq!(
            keys(&t),
            [
                ("os".into(), "NoSchedule".into()),
                (TAINT_NOT_READY.into(), "NoSchedule".into())
            ]
        );
        assert_eq!(
            t[1].time_added,
            Some(Time(now())),
            "SwapNodeControllerTaint stamps timeAdded"
        );
        let t = no_schedule_pass(
            &node("Unknown", json!([{"key": TAINT_NOT_READY, "effect": "NoSchedule"}])),
            now(),
        )
        .unwrap();
        assert_eq!(keys(&t), [(TAINT_UNREACHABLE.into(), "NoSchedule".into())]);
        // Ready again: the condition taint goes, the NoExecute one is not this pass's business.
        let t = no_schedule_pass(
            &node(
                "True",
                json!([{"key": TAINT_NOT_READY, "effect": "NoSchedule"}, {"key": TAINT_NOT_READY, "effect": "NoExecute"}]),
            ),
            now(),
        )
        .unwrap();
        assert_eq!(keys(&t), [(TAINT_NOT_READY.into(), "NoExecute".into())]);
        let mut cordoned = node("True", json!(null));
        cordoned.spec.as_mut().unwrap().unschedulable = Some(true);
        assert_eq!(
            keys(&no_schedule_pass(&cordoned, now()).unwrap()),
            [(TAINT_UNSCHEDULABLE.into(), "NoSchedule".into())]
        );
    }

    #[test]
    fn no_execute_taints_swap_between_not_ready_and_unreachable() {
        let t = no_execute_pass(&node("False", json!(null)), Readiness::NotReady, now()).unwrap();
        assert_eq!(keys(&t), [(TAINT_NOT_READY.into(), "NoExecute".into())]);
        let tainted = node("False", json!([{"key": TAINT_NOT_READY, "effect": "NoExecute"}]));
        assert_eq!(no_execute_pass(&tainted, Readiness::NotReady, now()), None);
        let t = no_execute_pass(&tainted, Readiness::Unknown, now()).unwrap();
        assert_eq!(keys(&t), [(TAINT_UNREACHABLE.into(), "NoExecute".into())]);
        assert_eq!(no_execute_pass(&tainted, Readiness::Ready, now()), Some(vec![]));
        assert_eq!(
            no_execute_pass(&node("True", json!(null)), Readiness::Ready, now()),
            None
        );
    }

    #[test]
    fn a_silent_node_gets_every_condition_unknown() {
        let n = node("True", json!(null));
        let conds = conditions_unknown(&n, now()).unwrap();
        let ready = conds.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "Unknown");
        assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(ready.message.as_deref(), Some("Kubelet stopped posting node status."));
        assert_eq!(ready.last_transition_time, Some(Time(now())));
        assert_eq!(
            ready.last_heartbeat_time,
            Some(Time("2025-01-01T00:00:10Z".parse().unwrap())),
            "the last heartbeat stays"
        );
        let never = conds.iter().find(|c| c.type_ == "DiskPressure").unwrap();
        assert_eq!(never.reason.as_deref(), Some("NodeStatusNeverUpdated"));
        assert_eq!(conds.len(), 4);
        let mut gone = n.clone();
        gone.status.as_mut().unwrap().conditions = Some(conds);
        assert_eq!(conditions_unknown(&gone, now()), None, "written once");
    }

    #[test]
    fn pods_are_marked_not_ready_once() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"conditions": [
            {"type": "ContainersReady", "status": "True"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:05Z"}]}}))
        .unwrap();
        let marked = pod_not_ready(&pod, now()).unwrap();
        let conds = marked.status.as_ref().unwrap().conditions.as_ref().unwrap();
        assert_eq!(conds[0].status, "True", "only Ready changes");
        assert_eq!(conds[1].status, "False");
        assert_eq!(conds[1].last_transition_time, Some(Time(now())));
        assert_eq!(pod_not_ready(&marked, now()), None);
    }
}
