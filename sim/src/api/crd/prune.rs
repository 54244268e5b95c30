//! Pruning of custom objects: upstream drops every field its structural schema does not
//! specify (unless `x-kubernetes-preserve-unknown-fields` says to keep them) and reports the
//! dropped paths, which `fieldValidation` turns into warnings or a strict 400. Nulls in fields
//! that are not `nullable` are dropped too, before defaulting, as upstream does.

use serde_json::{Map, Value};

/// The fields of an embedded or top-level resource that no schema describes but every
/// object has.
const RESOURCE_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

/// Prunes `obj` (a whole custom object) against its version's `openAPIV3Schema`; returns the
/// dotted paths of the unknown fields it dropped.
pub fn prune(schema: &Value, obj: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    walk(schema, obj, "", true, &mut unknown);
    unknown
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn walk(schema: &Value, v: &mut Value, path: &str, resource: bool, unknown: &mut Vec<String>) {
    match v {
        Value::Object(m) => object(schema, m, path, resource, unknown),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(
                        item_schema,
                        item,
                        &format!("{path}[{i}]"),
                        flag(item_schema, "x-kubernetes-embedded-resource"),
                        unknown,
                    );
                }
            }
        }
        _ => {}
    }
}

fn object(schema: &Value, m: &mut Map<String, Value>, path: &str, resource: bool, unknown: &mut Vec<String>) {
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields")
        || schema.get("additionalProperties").and_then(Value::as_bool) == Some(true);
    let keys: Vec<String> = m.keys().cloned().collect();
    for k in keys {
        if resource && RESOURCE_FIELDS.contains(&k.as_str()) && props.is_none_or(|p| !p.contains_key(&k)) {
            continue;
        }
        let sub = props.and_then(|p| p.get(&k)).or(additional);
        match sub {
            Some(s) => {
                let value = m.get_mut(&k).expect("key listed from the map");
                if value.is_null() && !flag(s, "nullable") {
                    m.remove(&k);
                    continue;
                }
                walk(
                    s,
                    value,
                    &child(path, &k),
                    flag(s, "x-kubernetes-embedded-resource"),
                    unknown,
                );
            }
            None if preserve => {}
            None => {
                m.remove(&k);
                unknown.push(child(path, &k));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drops_unknown_fields_and_keeps_preserved_ones() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}}}});
        let mut obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "spec": {"size": 1, "bogus": 2, "free": {"any": 1}, "list": [{"a": "x", "b": 1}]}, "top": 1});
        let unknown = prune(&schema, &mut obj);
        assert_eq!(unknown, vec!["spec.bogus", "spec.list[0].b", "top"]);
        assert_eq!(
            obj["spec"],
            json!({"size": 1, "free": {"any": 1}, "list": [{"a": "x"}]})
        );
        assert_eq!(obj["metadata"]["name"], "a");
    }
}
