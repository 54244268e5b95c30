//! Defaulting of custom objects from their structural schema: a property with a `default`
//! that the object leaves out gets it, and defaults are applied inside defaults, items and
//! map values, as upstream's structural defaulting walks them (after pruning, before
//! validation).

use serde_json::Value;

/// Applies `schema`'s defaults to `v` in place.
pub fn apply(schema: &Value, v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, s) in props {
                    if !m.contains_key(k)
                        && let Some(d) = s.get("default")
                    {
                        m.insert(k.clone(), d.clone());
                    }
                    if let Some(child) = m.get_mut(k) {
                        apply(s, child);
                    }
                }
            }
            if let Some(add) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let known = schema.get("properties").and_then(Value::as_object);
                for (k, child) in m.iter_mut() {
                    if known.is_none_or(|p| !p.contains_key(k)) {
                        apply(add, child);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for item in items {
                    apply(s, item);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_missing_properties_at_every_depth() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "default": {},
            "properties": {"size": {"type": "integer", "default": 3},
                "ports": {"type": "array", "items": {"type": "object", "properties": {"proto": {"type": "string", "default": "TCP"}}}}}}}});
        let mut obj = json!({"metadata": {}});
        apply(&schema, &mut obj);
        assert_eq!(obj["spec"]["size"], 3);
        let mut obj = json!({"spec": {"size": 1, "ports": [{}]}});
        apply(&schema, &mut obj);
        assert_eq!(obj["spec"], json!({"size": 1, "ports": [{"proto": "TCP"}]}));
    }
}
