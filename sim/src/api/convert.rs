//! Conversion between a served version and its storage form, where they differ.
//!
//! Only `events.k8s.io/v1` Events differ: they share storage with core `v1` Events, like
//! upstream, so an event recorded by a kube-rs `Recorder` shows in `kubectl get events` and
//! `describe`.

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

/// Converts an object as sent for `def` into its storage form.
pub fn to_storage(def: &ResourceDef, obj: Value) -> Value {
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
        && obj.get("apiVersion").and_then(Value::as_str) == Some(def.api_version().as_str())
        && obj.get("kind").and_then(Value::as_str) == Some(def.kind)
        && super::zero::is_filled(def, obj)
}

/// Converts a stored object into the form served for `def`, with its apiVersion and kind and
/// the zero values Go would marshal ([`super::zero`]).
pub fn from_storage(def: &ResourceDef, obj: Value) -> Value {
    let mut v = if is_new_events(def) {
        rename(obj, EVENT_RENAMES.iter().map(|(a, b)| (*b, *a)))
    } else {
        obj
    };
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!(def.api_version()));
        m.insert("kind".into(), json!(def.kind));
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
}
