//! The pod status: computing `status` (phase, conditions, container statuses, IPs, QoS
//! class) from the runtime state and writing it whenever the pod changes or the API's copy
//! disagrees on a kubelet-owned condition (the status manager's reconcile). Separate because it
//! is a pure view of the state every other part updates.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, PodIP};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tracing::debug;

use crate::node::runtime::CState;

use super::{Ctr, Kubelet, PodRt};

/// Computes the pod status from the runtime state.
fn build_status(kl: &Kubelet, rt: &PodRt) -> serde_json::Value {
    let pod = rt.pod();
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = spec.restart_policy.clone().unwrap_or_else(|| "Always".into());
    let mut st = rt.state.lock().expect("state lock");
    let cs = |c: &Ctr| ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone(),
        image_id: c.image_id.clone().unwrap_or_default(),
        container_id: c.container_id.clone(),
        ready: c.ready,
        restart_count: c.restart_count as i32,
        started: Some(c.started && c.state.is_running()),
        state: Some(c.state.to_api()),
        last_state: Some(c.last.as_ref().map(CState::to_api).unwrap_or_default()),
        ..Default::default()
    };
    let init_statuses: Vec<ContainerStatus> = st.init.iter().map(cs).collect();
    let statuses: Vec<ContainerStatus> = st.main.iter().map(cs).collect();
    // Ephemeral containers are reported in their own list and count toward neither the phase
    // nor readiness (upstream `generateAPIPodStatus`).
    let ephemeral_statuses: Vec<ContainerStatus> = st.ephemeral.iter().map(cs).collect();
    // A terminated container the kubelet will not restart (its own policy and rules first,
    // then the pod's: upstream `ContainerShouldRestart`).
    let faults = kl.net.faults();
    let rules = rt.rules.get();
    let terminal = |(i, c): (usize, &Ctr)| match &c.state {
        CState::Terminated { exit_code, .. } => spec.containers.get(i).is_none_or(|sc| {
            let own = rules
                .and_then(|r| r.get(&c.name))
                .map(Vec::as_slice)
                .unwrap_or_default();
            !super::restart_rules::should_restart(sc, own, &policy, *exit_code, faults)
        }),
        _ => false,
    };
    let all_terminal = !st.main.is_empty() && st.main.iter().enumerate().all(terminal);
    let any_started = st.main.iter().any(|c| c.container_id.is_some() || c.restart_count > 0);
    let phase = if st.failed.is_some() {
        "Failed"
    } else if !st.init_done {
        "Pending"
    } else if all_terminal {
        if st
            .main
            .iter()
            .all(|c| matches!(c.state, CState::Terminated { exit_code: 0, .. }))
        {
            "Succeeded"
        } else {
            "Failed"
        }
    } else if any_started
        && st
            .main
            .iter()
            .any(|c| c.state.is_running() || c.last.is_some() || matches!(c.state, CState::Terminated { .. }))
    {
        "Running"
    } else {
        "Pending"
    };
    let completed = phase == "Succeeded" || phase == "Failed";
    // Upstream generate.go counts restartable init containers (sidecars) with the app
    // containers: the pod is not ready while one of them is not.
    let sidecars = spec.init_containers.iter().flatten().zip(&st.init);
    let unready: Vec<String> = sidecars
        .filter(|(spec, _)| spec.restart_policy.as_deref() == Some("Always"))
        .map(|(_, c)| c)
        .chain(&st.main)
        .filter(|c| !c.ready)
        .map(|c| c.name.clone())
        .collect();
    let uninit: Vec<String> = if st.init_done {
        vec![]
    } else {
        st.init
            .iter()
            .filter(|c| !matches!(c.state, CState::Terminated { exit_code: 0, .. }))
            .map(|c| c.name.clone())
            .collect()
    };
    let now = jiff::Timestamp::now();
    let sandbox_ready = st.sandbox_ready;
    let init_done = st.init_done;
    let mut set = |t: &'static str, ok: bool, reason: Option<String>, msg: Option<String>| {
        let e = st.conditions.entry(t).or_insert((ok, now, reason.clone(), msg.clone()));
        if e.0 != ok {
            *e = (ok, now, reason, msg);
        } else {
            e.2 = reason;
            e.3 = msg;
        }
    };
    set("PodReadyToStartContainers", sandbox_ready, None, None);
    let init_ok = uninit.is_empty();
    set(
        "Initialized",
        init_ok,
        (!init_ok).then(|| "ContainersNotInitialized".to_string()),
        (!init_ok).then(|| format!("containers with incomplete status: [{}]", uninit.join(" "))),
    );
    let ready = unready.is_empty() && !completed && init_done;
    let (reason, msg) = if completed {
        (Some("PodCompleted".to_string()), None)
    } else if !ready {
        (
            Some("ContainersNotReady".to_string()),
            Some(format!("containers with unready status: [{}]", unready.join(" "))),
        )
    } else {
        (None, None)
    };
    set("ContainersReady", ready, reason.clone(), msg.clone());
    // Upstream generate.go: with its containers ready, the pod is Ready only once every
    // readiness gate's condition is True (a kubelet with `readiness-gates-ignored` skips this).
    let gates = if ready && !kl.net.faults().is_on("readiness-gates-ignored") {
        unready_gates(&pod)
    } else {
        vec![]
    };
    if gates.is_empty() {
        set("Ready", ready, reason, msg);
    } else {
        set(
            "Ready",
            false,
            Some("ReadinessGatesNotReady".into()),
            Some(gates.join(", ")),
        );
    }
    set("PodScheduled", true, None, None);
    let mut conditions: Vec<PodCondition> = st
        .conditions
        .iter()
        .map(|(t, (ok, at, reason, msg))| PodCondition {
            type_: (*t).to_string(),
            status: if *ok { "True" } else { "False" }.into(),
            last_transition_time: Some(Time(*at)),
            reason: reason.clone(),
            message: msg.clone(),
            ..Default::default()
        })
        .collect();
    // The status is written with a merge patch, which replaces the whole list: the conditions
    // others own go back as the API holds them (upstream's status manager keeps them too).
    // A condition the kubelet itself set (the shutdown manager's DisruptionTarget) is its own.
    conditions.extend(
        foreign_conditions(&pod)
            .into_iter()
            .filter(|c| !st.conditions.contains_key(c.type_.as_str())),
    );
    let mut status = serde_json::json!({
        "phase": phase,
        "conditions": conditions,
        "hostIP": kl.node_ip().to_string(),
        "hostIPs": [{"ip": kl.node_ip().to_string()}],
        "containerStatuses": statuses,
        "qosClass": qos_class(&pod),
    });
    // A kubelet with the `host-ip-unreported` fault (no usable --node-ip) reports no host IP.
    if kl.net.faults().is_on("host-ip-unreported") {
        status["hostIP"] = serde_json::Value::Null;
        status["hostIPs"] = serde_json::Value::Null;
    }
    if !init_statuses.is_empty() {
        status["initContainerStatuses"] = serde_json::to_value(&init_statuses).unwrap_or_default();
    }
    if !ephemeral_statuses.is_empty() {
        status["ephemeralContainerStatuses"] = serde_json::to_value(&ephemeral_statuses).unwrap_or_default();
    }
    if let Some(ip) = st.ip {
        status["podIP"] = ip.to_string().into();
        status["podIPs"] = serde_json::to_value(vec![PodIP { ip: ip.to_string() }]).unwrap_or_default();
    }
    if let Some(t) = st.start_time {
        status["startTime"] = serde_json::to_value(Time(t)).unwrap_or_default();
    }
    if let Some((reason, msg)) = &st.failed {
        status["reason"] = reason.clone().into();
        status["message"] = msg.clone().into();
    }
    status
}

/// The pod condition types the kubelet owns (upstream `kubetypes.PodConditionsByKubelet` and
/// `PodReadyToStartContainers`); every other type (readiness gates, `DisruptionTarget`) is set
/// by someone else through the status subresource.
const KUBELET_CONDITIONS: &[&str] = &[
    "PodScheduled",
    "Ready",
    "Initialized",
    "ContainersReady",
    "PodReadyToStartContainers",
];

/// The conditions of `pod` (as the API holds it) that the kubelet does not own.
pub(super) fn foreign_conditions(pod: &Pod) -> Vec<PodCondition> {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .cloned()
        .collect()
}

/// Upstream generate.go's readiness-gate check: one message per gate of `spec.readinessGates`
/// whose condition is missing or not True (empty when every gate is True).
fn unready_gates(pod: &Pod) -> Vec<String> {
    let conditions = pod.status.iter().flat_map(|s| s.conditions.iter().flatten());
    let gates = pod.spec.iter().flat_map(|s| s.readiness_gates.iter().flatten());
    gates
        .filter_map(|g| {
            let t = g.condition_type.as_str();
            match conditions.clone().find(|c| c.type_ == t) {
                None => Some(format!(
                    "corresponding condition of pod readiness gate {t:?} does not exist."
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate {t:?} is not \"True\", but {}",
                    c.status
                )),
                Some(_) => None,
            }
        })
        .collect()
}

/// Whether the API's copy of the pod disagrees with the kubelet on a condition the kubelet
/// owns (someone else, such as the node lifecycle controller's `MarkPodsNotReady`, changed
/// it): the status manager's `needsReconcile`, after which it writes its own status again.
fn needs_reconcile(api: &Pod, status: &serde_json::Value) -> bool {
    let Some(ours) = status["conditions"].as_array() else {
        return false;
    };
    let theirs = api.status.as_ref().and_then(|s| s.conditions.as_ref());
    ours.iter().any(|c| {
        let (Some(t), Some(s)) = (c["type"].as_str(), c["status"].as_str()) else {
            return false;
        };
        theirs
            .and_then(|cs| cs.iter().find(|x| x.type_ == t))
            .is_none_or(|x| x.status != s)
    })
}

fn qos_class(pod: &Pod) -> &'static str {
    let spec = pod.spec.clone().unwrap_or_default();
    let mut any = false;
    let mut guaranteed = true;
    for c in &spec.containers {
        let r = c.resources.clone().unwrap_or_default();
        let (l, q) = (r.limits.unwrap_or_default(), r.requests.unwrap_or_default());
        if !l.is_empty() || !q.is_empty() {
            any = true;
        }
        for k in ["cpu", "memory"] {
            match (l.get(k), q.get(k)) {
                (Some(a), Some(b)) if a != b => guaranteed = false,
                (None, _) => guaranteed = false,
                _ => {}
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

pub(super) async fn status_writer(kl: Arc<Kubelet>, rt: Arc<PodRt>) {
    let api: Api<Pod> = Api::namespaced(kl.client.clone(), &rt.namespace);
    let mut last = serde_json::Value::Null;
    loop {
        tokio::select! {
            _ = rt.dirty.notified() => {}
            _ = rt.gone.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        // A lost node posts nothing more.
        if kl.health.is_lost() || kl.power.is_down() {
            continue;
        }
        let status = build_status(&kl, &rt);
        let known = rt.pod();
        if status == last && !needs_reconcile(&known, &status) {
            continue;
        }
        // The patch carries the resourceVersion the status was built from: the conditions
        // others own are written back as they stood then, so a write that raced with theirs
        // must be refused (409) and rebuilt rather than erase what they wrote.
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": known.metadata.resource_version },
            "status": status,
        });
        match api
            .patch_status(&rt.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                last = status;
                rt.observe(written);
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                match api.get(&rt.name).await {
                    Ok(fresh) => rt.observe(fresh),
                    Err(e) => debug!(pod = %rt.name, error = %e, "pod re-read after a conflict failed"),
                }
                rt.touch();
            }
            Err(kube::Error::Api(s)) if s.code == 404 => return,
            Err(e) => {
                debug!(pod = %rt.name, error = %e, "pod status update failed");
                rt.touch();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Writes the pod's status as it stands once its containers have stopped, before the
/// kubelet's final delete: upstream's status manager deletes a pod only after its terminal
/// status reached the API server (`canBeDeleted`). A pod a finalizer keeps after that delete
/// (a Job's tracking finalizer) must show its terminal phase and the conditions others set
/// (`DisruptionTarget`) to whoever removes the finalizer. A conflict is rebuilt from a fresh
/// read; a pod already gone needs nothing; other failures are retried a few times, then the
/// status writer's own loop has the last word.
pub(super) async fn post_final_status(kl: &Kubelet, rt: &PodRt) {
    let api: Api<Pod> = Api::namespaced(kl.client.clone(), &rt.namespace);
    for _ in 0..10 {
        if kl.health.is_lost() || kl.power.is_down() {
            return;
        }
        let status = build_status(kl, rt);
        let known = rt.pod();
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": known.metadata.resource_version },
            "status": status,
        });
        match api
            .patch_status(&rt.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                rt.observe(written);
                return;
            }
            Err(kube::Error::Api(s)) if s.code == 404 => return,
            Err(kube::Error::Api(s)) if s.code == 409 => match api.get(&rt.name).await {
                Ok(fresh) => rt.observe(fresh),
                Err(e) => debug!(pod = %rt.name, error = %e, "pod re-read after a conflict failed"),
            },
            Err(e) => {
                debug!(pod = %rt.name, error = %e, "final pod status update failed");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    #[test]
    fn a_status_changed_by_someone_else_is_reconciled() {
        let ours = serde_json::json!({"conditions": [
            {"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}]});
        let api = |ready: &str| -> Pod {
            serde_json::from_value(serde_json::json!({"status": {"conditions": [
                {"type": "Ready", "status": ready}, {"type": "ContainersReady", "status": "True"},
                {"type": "DisruptionTarget", "status": "True"}]}}))
            .unwrap()
        };
        assert!(!needs_reconcile(&api("True"), &ours));
        assert!(needs_reconcile(&api("False"), &ours), "MarkPodsNotReady is undone");
        assert!(needs_reconcile(&Pod::default(), &ours));
    }

    fn gated(conditions: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "spec": {"containers": [], "readinessGates": [
                {"conditionType": "k8s.io/test-condition1"}, {"conditionType": "k8s.io/test-condition2"}]},
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    #[test]
    fn readiness_gates_hold_ready_until_every_condition_is_true() {
        let none = gated(serde_json::json!([{"type": "Ready", "status": "True"}]));
        assert_eq!(
            unready_gates(&none),
            [
                "corresponding condition of pod readiness gate \"k8s.io/test-condition1\" does not exist.",
                "corresponding condition of pod readiness gate \"k8s.io/test-condition2\" does not exist."
            ]
        );
        let one = gated(serde_json::json!([
            {"type": "k8s.io/test-condition1", "status": "True"},
            {"type": "k8s.io/test-condition2", "status": "False"}]));
        assert_eq!(
            unready_gates(&one),
            ["the status of pod readiness gate \"k8s.io/test-condition2\" is not \"True\", but False"]
        );
        let both = gated(serde_json::json!([
            {"type": "k8s.io/test-condition1", "status": "True"},
            {"type": "k8s.io/test-condition2", "status": "True"}]));
        assert!(unready_gates(&both).is_empty());
        assert!(
            unready_gates(&Pod::default()).is_empty(),
            "no gates, nothing to wait for"
        );
    }

    #[test]
    fn conditions_others_own_are_kept() {
        let pod = gated(serde_json::json!([
            {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"},
            {"type": "k8s.io/test-condition1", "status": "True"}, {"type": "DisruptionTarget", "status": "True"}]));
        let kept: Vec<String> = foreign_conditions(&pod).into_iter().map(|c| c.type_).collect();
        assert_eq!(kept, ["k8s.io/test-condition1", "DisruptionTarget"]);
    }

    #[test]
    fn qos_classes() {
        let pod = Pod {
            spec: Some(PodSpec {
                containers: vec![Container::default()],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(qos_class(&pod), "BestEffort");
    }
}
