//! Validation of ephemeral containers (upstream `validateEphemeralContainers` and
//! `ValidatePodEphemeralContainersUpdate`): they may only be added, through the
//! `pods/ephemeralcontainers` subresource, never set on create, changed or removed, and carry
//! none of the fields that would make a workload depend on them (ports, probes, lifecycle,
//! resources).

use serde_json::{Value, json};

use super::error::Cause;

/// The container fields an ephemeral container may set (upstream
/// `allowedEphemeralContainerFields`); any other is forbidden.
const ALLOWED: &[&str] = &[
    "name",
    "image",
    "command",
    "args",
    "workingDir",
    "envFrom",
    "env",
    "volumeMounts",
    "volumeDevices",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
    "securityContext",
    "stdin",
    "stdinOnce",
    "tty",
    "targetContainerName",
];

const FORBIDDEN: &str = "cannot be set for an Ephemeral Container";

fn list<'a>(spec: &'a Value, key: &str) -> &'a [Value] {
    spec.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn name(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// A pod create: `spec.ephemeralContainers` may not be set.
pub fn on_create(spec: &Value, out: &mut Vec<Cause>) {
    if !list(spec, "ephemeralContainers").is_empty() {
        out.push(Cause::forbidden("spec.ephemeralContainers", "cannot be set on create"));
    }
}

/// The rules each ephemeral container of a pod spec follows: a name unique across the pod's
/// containers, an image, a target that is a regular or init container, and only the allowed
/// fields (no subPath mounts either).
pub fn spec_rules(spec: &Value, out: &mut Vec<Cause>) {
    let others: Vec<&str> = list(spec, "containers")
        .iter()
        .chain(list(spec, "initContainers"))
        .map(name)
        .collect();
    let mut all = others.clone();
    for (i, ec) in list(spec, "ephemeralContainers").iter().enumerate() {
        let path = format!("spec.ephemeralContainers[{i}]");
        let n = name(ec);
        if n.is_empty() {
            out.push(Cause::required(format!("{path}.name")));
        } else if all.contains(&n) {
            out.push(Cause::duplicate(format!("{path}.name"), &json!(n)));
        } else {
            all.push(n);
        }
        if ec
            .get("image")
            .and_then(Value::as_str)
            .is_none_or(|s| s.trim().is_empty())
        {
            out.push(Cause::required(format!("{path}.image")));
        }
        if let Some(t) = ec.get("targetContainerName").and_then(Value::as_str)
            && !t.is_empty()
            && !others.contains(&t)
        {
            out.push(Cause {
                reason: "FieldValueNotFound".into(),
                message: format!("Not found: {t:?}"),
                field: format!("{path}.targetContainerName"),
            });
        }
        for (k, v) in ec.as_object().into_iter().flatten() {
            let zero = v.is_null()
                || v.as_array().is_some_and(Vec::is_empty)
                || v.as_object().is_some_and(serde_json::Map::is_empty);
            if !zero && !ALLOWED.contains(&k.as_str()) {
                out.push(Cause::forbidden(format!("{path}.{k}"), FORBIDDEN));
            }
        }
        for (j, m) in list(ec, "volumeMounts").iter().enumerate() {
            for key in ["subPath", "subPathExpr"] {
                if m.get(key).and_then(Value::as_str).is_some_and(|s| !s.is_empty()) {
                    out.push(Cause::forbidden(format!("{path}.volumeMounts[{j}].{key}"), FORBIDDEN));
                }
            }
        }
    }
}

/// A write through `pods/ephemeralcontainers`: the new list follows [`spec_rules`], and every
/// ephemeral container already there is still there, unchanged (order may differ: a patch
/// does not keep it).
pub fn update(old: &Value, new: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    if old
        .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_some()
    {
        out.push(Cause::forbidden("", "static pods do not support ephemeral containers"));
        return out;
    }
    let empty = json!({});
    let new_spec = new.get("spec").unwrap_or(&empty);
    spec_rules(new_spec, &mut out);
    let news = list(new_spec, "ephemeralContainers");
    for o in list(old.get("spec").unwrap_or(&empty), "ephemeralContainers") {
        match news.iter().find(|n| name(n) == name(o)) {
            None => out.push(Cause::forbidden(
                "spec.ephemeralContainers",
                &format!("existing ephemeral containers {:?} may not be removed\n", name(o)),
            )),
            Some(n) if n != o => out.push(Cause::forbidden(
                "spec.ephemeralContainers",
                &format!("existing ephemeral containers {:?} may not be changed\n", name(o)),
            )),
            Some(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ecs: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "busybox"}], "ephemeralContainers": ecs}})
    }

    #[test]
    fn only_additions_of_allowed_fields_pass() {
        let old = pod(json!([{"name": "debugger", "image": "busybox"}]));
        let added = pod(
            json!([{"name": "debugger", "image": "busybox"}, {"name": "d2", "image": "agnhost", "targetContainerName": "app"}]),
        );
        assert!(update(&old, &added).is_empty());
        let removed = pod(json!([]));
        assert!(update(&old, &removed)[0].message.contains("may not be removed"));
        let changed = pod(json!([{"name": "debugger", "image": "agnhost"}]));
        assert!(update(&old, &changed)[0].message.contains("may not be changed"));
        let ports = pod(
            json!([{"name": "debugger", "image": "busybox"}, {"name": "d2", "image": "busybox", "ports": [{"containerPort": 80}]}]),
        );
        let c = update(&old, &ports);
        assert_eq!(c[0].field, "spec.ephemeralContainers[1].ports");
        assert!(c[0].message.contains(FORBIDDEN));
        let dup = pod(json!([{"name": "debugger", "image": "busybox"}, {"name": "app", "image": "busybox"}]));
        assert_eq!(update(&old, &dup)[0].field, "spec.ephemeralContainers[1].name");
        let target = pod(
            json!([{"name": "debugger", "image": "busybox"}, {"name": "d2", "image": "busybox", "targetContainerName": "nope"}]),
        );
        assert_eq!(update(&old, &target)[0].reason, "FieldValueNotFound");
    }

    #[test]
    fn a_create_may_not_carry_ephemeral_containers() {
        let mut out = Vec::new();
        on_create(&pod(json!([{"name": "d", "image": "busybox"}]))["spec"], &mut out);
        assert_eq!(out[0].field, "spec.ephemeralContainers");
        out.clear();
        on_create(&pod(json!([]))["spec"], &mut out);
        assert!(out.is_empty());
    }
}
