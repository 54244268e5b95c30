//! The pod admission plugins that feed scheduling: RuntimeClass (overhead, nodeSelector and
//! tolerations merged into the pod) and Priority (the value of the pod's PriorityClass).

use serde_json::{Value, json};

use crate::api::error::{ApiError, ApiResult};
use crate::api::meta;
use crate::api::state::AppState;

/// RuntimeClass admission: overhead, and the class's nodeSelector and tolerations merged into
/// the pod; a missing class or a conflicting nodeSelector refuses the pod (`Err` is why, which
/// the caller words as upstream's `admission.NewForbidden`).
pub(super) fn runtime_class(st: &AppState, pod: &mut Value) -> Result<(), String> {
    let Some(rc_name) = pod
        .pointer("/spec/runtimeClassName")
        .and_then(Value::as_str)
        .map(String::from)
    else {
        return Ok(());
    };
    let rc = st
        .store
        .get("node.k8s.io/runtimeclasses", "", &rc_name)
        .ok_or_else(|| format!("pod rejected: RuntimeClass {rc_name:?} not found"))?;
    if let Some(o) = rc.pointer("/overhead/podFixed") {
        pod["spec"]["overhead"] = o.clone();
    }
    if let Some(sel) = rc.pointer("/scheduling/nodeSelector").and_then(Value::as_object) {
        let spec = &mut pod["spec"];
        if !spec.get("nodeSelector").is_some_and(Value::is_object) {
            spec["nodeSelector"] = json!({});
        }
        for (k, v) in sel {
            match spec["nodeSelector"].get(k) {
                Some(existing) if existing != v => {
                    return Err(format!(
                        "pod rejected: conflict: runtimeClass.scheduling.nodeSelector[{k}] = {}; pod.spec.nodeSelector[{k}] = {}",
                        v.as_str().unwrap_or_default(),
                        existing.as_str().unwrap_or_default()
                    ));
                }
                _ => spec["nodeSelector"][k] = v.clone(),
            }
        }
    }
    if let Some(tols) = rc.pointer("/scheduling/tolerations").and_then(Value::as_array) {
        let spec = &mut pod["spec"];
        if !spec.get("tolerations").is_some_and(Value::is_array) {
            spec["tolerations"] = json!([]);
        }
        let list = spec["tolerations"].as_array_mut().expect("array");
        for t in tols {
            if !list.contains(t) {
                list.push(t.clone());
            }
        }
    }
    Ok(())
}

/// Priority admission: the value of the pod's PriorityClass.
pub(super) fn priority(st: &AppState, pod: &mut Value) -> ApiResult<()> {
    let Some(pc) = pod
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from)
    else {
        return Ok(());
    };
    let class = st
        .store
        .get("scheduling.k8s.io/priorityclasses", "", &pc)
        .ok_or_else(|| {
            ApiError::forbidden(format!(
                "pods {:?} is forbidden: no PriorityClass with name {pc} was found",
                meta::name(pod)
            ))
        })?;
    pod["spec"]["priority"] = class.get("value").cloned().unwrap_or(json!(0));
    if let Some(p) = class.get("preemptionPolicy") {
        pod["spec"]["preemptionPolicy"] = p.clone();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::admission::on_create;
    use crate::api::admission::testutil::state;
    use crate::api::registry::find;

    #[test]
    fn runtime_class_scheduling_is_merged_and_conflicts_refused() {
        let st = state();
        st.store
            .create("node.k8s.io/runtimeclasses", "", "win", json!({"metadata": {"name": "win"}, "handler": "runhcs",
                "scheduling": {"nodeSelector": {"kubernetes.io/os": "windows"}, "tolerations": [{"key": "os", "value": "windows", "effect": "NoSchedule"}]}}))
            .unwrap();
        let def = find("", "v1", "pods").unwrap();
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"runtimeClassName": "win", "containers": [{"name": "c", "image": "i"}]}});
        on_create(&st, def, &mut p).unwrap();
        assert_eq!(p["spec"]["nodeSelector"]["kubernetes.io/os"], "windows");
        assert!(
            p["spec"]["tolerations"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["key"] == "os")
        );
        assert_eq!(p["status"]["phase"], "Pending");
        let mut bad = json!({"metadata": {"name": "q"}, "spec": {"runtimeClassName": "win", "nodeSelector": {"kubernetes.io/os": "linux"},
            "containers": [{"name": "c", "image": "i"}]}});
        assert_eq!(on_create(&st, def, &mut bad).unwrap_err().code, 403);
    }

    #[test]
    fn a_missing_runtime_class_is_forbidden_unless_the_plugin_is_off() {
        let st = state();
        let def = find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "r"}, "spec": {"runtimeClassName": "missing", "containers": [{"name": "c", "image": "i"}]}});
        let err = on_create(&st, def, &mut pod.clone()).unwrap_err();
        assert_eq!(err.code, 403);
        assert!(
            err.message
                .contains(r#"pods "r" is forbidden: pod rejected: RuntimeClass "missing" not found"#),
            "{}",
            err.message
        );
        st.cfg.faults.set("admission-off", "RuntimeClass", true);
        assert!(on_create(&st, def, &mut pod.clone()).is_ok());
    }
}
