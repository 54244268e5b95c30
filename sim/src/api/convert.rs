//! Conversion between a served version and its storage form, where they differ.
//!
//! `events.k8s.io/v1` Events share storage with core `v1` Events, like upstream, so an event
//! recorded by a kube-rs `Recorder` shows in `kubectl get events` and `describe`.
//! `autoscaling/v1` HorizontalPodAutoscalers are stored as `autoscaling/v2`: v1's
//! `targetCPUUtilizationPercentage` is v2's CPU `Resource` metric with a `Utilization` target
//! (upstream pkg/apis/autoscaling/v1/conversion.go), and the v2 metrics v1 cannot express are
//! left out of the v1 form (upstream keeps them in an annotation; nothing here reads it).

use serde_json::{Map, Value, json};

use super::registry::ResourceDef;

/// Field renames between events.k8s.io/v1 (left) and core/v1 (right).
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn is_new_events(def: &ResourceDef) -> bool {
    def.group == "events.k8s.io"
}

fn rename(obj: Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) -> Value {
    let Value::Object(mut m) = obj else { return obj };
    for (from, to) in pairs {
        if let Some(v) = m.remove(from) {
            m.insert(to.to_string(), v);
        }
    }
    Value::Object(m)
}

fn is_hpa_v1(def: &ResourceDef) -> bool {
    def.group == "autoscaling" && def.version == "v1"
}

/// An autoscaling/v1 HorizontalPodAutoscaler in its autoscaling/v2 storage form.
fn hpa_v1_to_v2(mut obj: Value) -> Value {
    let Some(m) = obj.as_object_mut() else { return obj };
    m.insert("apiVersion".into(), json!("autoscaling/v2"));
    if let Some(spec) = m.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(target) = spec.remove("targetCPUUtilizationPercentage")
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": target}}}]),
        );
    }
    if let Some(status) = m.get_mut("status").and_then(Value::as_object_mut)
        && let Some(current) = status.remove("currentCPUUtilizationPercentage")
    {
        status.insert(
            "currentMetrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": current}}}]),
        );
    }
    obj
}

/// The CPU utilization of a v2 metric list (`spec.metrics` targets, `status.currentMetrics`
/// current values).
fn cpu_utilization(metrics: Option<&Value>, field: &str) -> Option<Value> {
    metrics?
        .as_array()?
        .iter()
        .find(|m| m["type"] == "Resource" && m["resource"]["name"] == "cpu")
        .and_then(|m| m["resource"][field].get("averageUtilization").cloned())
}

/// An autoscaling/v2 HorizontalPodAutoscaler in the autoscaling/v1 form.
fn hpa_v2_to_v1(mut obj: Value) -> Value {
    let Some(m) = obj.as_object_mut() else { return obj };
    if let Some(spec) = m.get_mut("spec").and_then(Value::as_object_mut) {
        let target = cpu_utilization(spec.get("metrics"), "target");
        spec.remove("metrics");
        spec.remove("behavior");
        if let Some(t) = target {
            spec.insert("targetCPUUtilizationPercentage".into(), t);
        }
    }
    if let Some(status) = m.get_mut("status").and_then(Value::as_object_mut) {
        let current = cpu_utilization(status.get("currentMetrics"), "current");
        status.remove("currentMetrics");
        status.remove("conditions");
        if let Some(c) = current {
            status.insert("currentCPUUtilizationPercentage".into(), c);
        }
    }
    obj
}

/// Converts an object as sent for `def` into its storage form.
pub fn to_storage(def: &ResourceDef, obj: Value) -> Value {
    if is_hpa_v1(def) {
        return hpa_v1_to_v2(obj);
    }
    if !is_new_events(def) {
        return obj;
    }
    let mut v = rename(obj, EVENT_RENAMES.iter().copied());
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!("v1"));
        if m.get("source").is_none()
            && let Some(c) = m.get("reportingComponent").cloned()
        {
            let mut src = Map::new();
            src.insert("component".into(), c);
            if let Some(h) = m.get("reportingInstance").cloned() {
                src.insert("host".into(), h);
            }
            m.insert("source".into(), Value::Object(src));
        }
    }
    v
}

/// Whether [`from_storage`] would return `obj` unchanged (the common case: a stored pod already
/// names its apiVersion and kind), so a list can serve the stored copy without copying it.
pub fn served_as_stored(def: &ResourceDef, obj: &Value) -> bool {
    !is_new_events(def)
        && !is_hpa_v1(def)
        && obj.get("apiVersion").and_then(Value::as_str) == Some(def.api_version().as_str())
        && obj.get("kind").and_then(Value::as_str) == Some(def.kind)
        && super::zero::is_filled(def, obj)
}

/// Converts a stored object into the form served for `def`, with its apiVersion and kind and
/// the zero values Go would marshal ([`super::zero`]).
pub fn from_storage(def: &ResourceDef, obj: Value) -> Value {
    let mut v = if is_new_events(def) {
        rename(obj, EVENT_RENAMES.iter().map(|(a, b)| (*b, *a)))
    } else if is_hpa_v1(def) {
        hpa_v2_to_v1(obj)
    } else {
        obj
    };
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!(def.api_version()));
        m.insert("kind".into(), json!(def.kind));
    }
    // Upstream defaults custom objects when decoding them from storage too, so a default added
    // to the schema shows on objects stored before it (without being written back).
    if let Some(custom) = def.custom.filter(|c| c.default_on_read) {
        super::crd::defaults::apply(&custom.schema, &mut v);
    }
    super::zero::fill(def, &mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::registry::find;

    #[test]
    fn new_events_round_trip_through_core_storage() {
        let def = find("events.k8s.io", "v1", "events").unwrap();
        let sent = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hi", "reportingController": "ctl",
            "reportingInstance": "ctl-1", "reason": "Started", "type": "Normal"});
        let stored = to_storage(def, sent);
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "hi");
        assert_eq!(stored["source"]["component"], "ctl");
        let core = from_storage(find("", "v1", "events").unwrap(), stored.clone());
        assert_eq!(core["apiVersion"], "v1");
        let back = from_storage(def, stored);
        assert_eq!(back["note"], "hi");
        assert_eq!(back["apiVersion"], "events.k8s.io/v1");
    }

    #[test]
    fn hpa_v1_round_trips_through_v2_storage() {
        let v1 = find("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
        let sent = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h"}, "spec": {"maxReplicas": 3, "targetCPUUtilizationPercentage": 50,
            "scaleTargetRef": {"kind": "Deployment", "name": "d"}},
            "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentCPUUtilizationPercentage": 20}});
        let stored = to_storage(v1, sent);
        assert_eq!(stored["apiVersion"], "autoscaling/v2");
        assert_eq!(
            stored["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            50
        );
        assert!(stored["spec"].get("targetCPUUtilizationPercentage").is_none());
        let back = from_storage(v1, stored.clone());
        assert_eq!(back["apiVersion"], "autoscaling/v1");
        assert_eq!(back["spec"]["targetCPUUtilizationPercentage"], 50);
        assert_eq!(back["status"]["currentCPUUtilizationPercentage"], 20);
        assert!(back["spec"].get("metrics").is_none());
        let v2 = from_storage(find("autoscaling", "v2", "horizontalpodautoscalers").unwrap(), stored);
        assert_eq!(v2["apiVersion"], "autoscaling/v2");
    }
}
