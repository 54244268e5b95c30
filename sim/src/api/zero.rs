//! The zero values the real server writes: Go's `encoding/json` marshals every struct field that
//! lacks `omitempty`, and a struct-typed `status` even when empty, so a DaemonSet nobody has
//! reconciled yet still reads back with `numberReady: 0`.
//!
//! Typed clients depend on this: the Python client refuses a `V1DaemonSetStatus` without
//! `currentNumberScheduled`, and Go and kube-rs structs read `status: {}` differently from no
//! status at all. The main function is [`fill`], applied to every object as it is served.

use serde_json::{Value, json};

use super::registry::ResourceDef;

/// A Go zero value.
#[derive(Clone, Copy)]
enum Zero {
    Int,
    Bool,
}

impl Zero {
    fn value(self) -> Value {
        match self {
            Zero::Int => json!(0),
            Zero::Bool => json!(false),
        }
    }
}

use Zero::{Bool, Int};

/// Kinds whose Go type holds `Status` as a struct (always marshalled), with the status fields
/// that lack `omitempty` in `staging/src/k8s.io/api/<group>/<version>/types.go` (v1.33).
/// A kind's status zeros: group, plural, and the fields with their zero value.
type StatusZeros = (&'static str, &'static str, &'static [(&'static str, Zero)]);

const STATUS: &[StatusZeros] = &[
    ("", "replicationcontrollers", &[("replicas", Int)]),
    ("apps", "replicasets", &[("replicas", Int)]),
    ("apps", "deployments", &[]),
    (
        "apps",
        "daemonsets",
        &[
            ("currentNumberScheduled", Int),
            ("numberMisscheduled", Int),
            ("desiredNumberScheduled", Int),
            ("numberReady", Int),
        ],
    ),
    ("apps", "statefulsets", &[("replicas", Int), ("availableReplicas", Int)]),
    ("batch", "jobs", &[]),
    ("batch", "cronjobs", &[]),
    ("autoscaling", "horizontalpodautoscalers", &[("desiredReplicas", Int)]),
    (
        "policy",
        "poddisruptionbudgets",
        &[
            ("disruptionsAllowed", Int),
            ("currentHealthy", Int),
            ("desiredHealthy", Int),
            ("expectedPods", Int),
        ],
    ),
    ("networking.k8s.io", "ingresses", &[]),
    ("storage.k8s.io", "volumeattachments", &[("attached", Bool)]),
    ("certificates.k8s.io", "certificatesigningrequests", &[]),
    ("flowcontrol.apiserver.k8s.io", "flowschemas", &[]),
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations", &[]),
];

/// Whether [`fill`] would leave `obj` as it is.
pub fn is_filled(def: &ResourceDef, obj: &Value) -> bool {
    let Some((_, _, fields)) = STATUS.iter().find(|(g, p, _)| *g == def.group && *p == def.plural) else {
        return true;
    };
    let Some(s) = obj.get("status").and_then(Value::as_object) else {
        return false;
    };
    fields.iter().all(|(k, _)| s.contains_key(*k)) && (def.plural != "ingresses" || s.contains_key("loadBalancer"))
}

/// Adds the zero-valued fields Go would marshal for an object of `def`; present fields stay.
pub fn fill(def: &ResourceDef, obj: &mut Value) {
    let Some(m) = obj.as_object_mut() else { return };
    if let Some((_, _, fields)) = STATUS.iter().find(|(g, p, _)| *g == def.group && *p == def.plural) {
        let status = m.entry("status").or_insert_with(|| json!({}));
        if status.is_null() {
            *status = json!({});
        }
        if let Some(s) = status.as_object_mut() {
            for (k, z) in fields.iter() {
                s.entry(k.to_string()).or_insert_with(|| z.value());
            }
            // IngressStatus.loadBalancer is a struct too.
            if def.plural == "ingresses" {
                s.entry("loadBalancer").or_insert_with(|| json!({}));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::registry::find;

    #[test]
    fn daemonset_reads_back_with_required_counts() {
        let mut ds = json!({"metadata": {"name": "d"}, "spec": {}});
        fill(find("apps", "v1", "daemonsets").unwrap(), &mut ds);
        for k in [
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
        ] {
            assert_eq!(ds["status"][k], 0, "{k}");
        }
        assert!(
            ds["status"].get("numberAvailable").is_none(),
            "omitempty fields stay absent"
        );
    }

    #[test]
    fn set_fields_are_kept_and_other_kinds_untouched() {
        let mut sts = json!({"status": {"replicas": 3}});
        fill(find("apps", "v1", "statefulsets").unwrap(), &mut sts);
        assert_eq!(sts["status"], json!({"replicas": 3, "availableReplicas": 0}));
        let mut cm = json!({"data": {}});
        fill(find("", "v1", "configmaps").unwrap(), &mut cm);
        assert_eq!(cm, json!({"data": {}}));
    }

    #[test]
    fn is_filled_says_whether_fill_changes_anything() {
        let sts_def = find("apps", "v1", "statefulsets").unwrap();
        let mut sts = json!({"status": {"replicas": 3}});
        assert!(!is_filled(sts_def, &sts));
        fill(sts_def, &mut sts);
        assert!(is_filled(sts_def, &sts));
        assert!(!is_filled(sts_def, &json!({"spec": {}})), "no status at all");
        let ing = find("networking.k8s.io", "v1", "ingresses").unwrap();
        let mut i = json!({"status": {}});
        assert!(!is_filled(ing, &i));
        fill(ing, &mut i);
        assert!(is_filled(ing, &i));
        assert!(is_filled(find("", "v1", "configmaps").unwrap(), &json!({"data": {}})));
    }
}
