//! What serving a custom kind needs beyond the generic verbs: its Table (additional printer
//! columns), its scale subresource (replica and selector paths) and its OpenAPI v3 schema
//! (so `kubectl explain` finds it).

use serde_json::{Map, Value, json};

use super::{Custom, PrinterColumn, pointer};
use crate::api::registry::ResourceDef;

/// The columns a version prints: Name, then its `additionalPrinterColumns`, or upstream's
/// default `Age` when it declares none.
fn columns(custom: &Custom) -> Vec<PrinterColumn> {
    if custom.columns.is_empty() {
        return vec![PrinterColumn {
            name: "Age".into(),
            ty: "date".into(),
            format: String::new(),
            description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.".into(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".into(),
        }];
    }
    custom.columns.clone()
}

/// Reads a simple JSONPath (`.spec.replicas`, `.status.conditions[0].type`).
pub fn read_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in path
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('.')
        .split('.')
    {
        if seg.is_empty() {
            continue;
        }
        let (key, index) = match seg.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (seg, None),
        };
        if !key.is_empty() {
            cur = cur.get(key)?;
        }
        if let Some(i) = index {
            cur = cur.get(i)?;
        }
    }
    Some(cur)
}

/// A cell as upstream's table convertor makes it (`cellForJSONValue`): integers truncate
/// floats, numbers widen integers, dates become an age (`5m`), strings print any value, and a
/// value of the wrong type is nothing (`<none>` in kubectl).
fn cell(col: &PrinterColumn, obj: &Value) -> Value {
    let Some(v) = read_path(obj, &col.json_path).filter(|v| !v.is_null()) else {
        return Value::Null;
    };
    match (col.ty.as_str(), v) {
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, |f| json!(f)),
        ("boolean", Value::Bool(_)) => v.clone(),
        ("date", Value::String(ts)) => json!(
            crate::api::meta::age_secs(ts).map_or_else(|| "<invalid>".to_string(), crate::api::meta::human_duration)
        ),
        ("string", Value::String(_)) => v.clone(),
        ("string", other) => json!(other.to_string()),
        _ => Value::Null,
    }
}

/// The Table of custom objects (`include` is the `includeObject` choice).
pub fn table(custom: &Custom, items: &[Value], include: &str, list_meta: Option<Value>) -> Value {
    let cols = columns(custom);
    let mut defs = vec![json!({"name": "Name", "type": "string", "format": "name",
        "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        "priority": 0})];
    defs.extend(cols.iter().map(|c| {
        json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
    }));
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut cells = vec![o.pointer("/metadata/name").cloned().unwrap_or(json!(""))];
            cells.extend(cols.iter().map(|c| cell(c, o)));
            let mut row = json!({"cells": cells});
            match include {
                "Object" => row["object"] = o.clone(),
                "None" => {}
                _ => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": o.get("metadata").cloned().unwrap_or_default()})
                }
            }
            row
        })
        .collect();
    let metadata = list_meta.unwrap_or_else(|| {
        json!({"resourceVersion": items.first().and_then(|o| o.pointer("/metadata/resourceVersion")).cloned().unwrap_or(json!(""))})
    });
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": defs, "rows": rows})
}

/// The replica counts and selector a custom object's scale subresource shows:
/// (spec replicas, status replicas, selector). Upstream reads absent counts as 0.
pub fn scale_fields(custom: &Custom, obj: &Value) -> Option<(i64, i64, String)> {
    let paths = custom.scale.as_ref()?;
    let spec = read_path(obj, &paths.spec_replicas)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let status = read_path(obj, &paths.status_replicas)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let selector = paths
        .label_selector
        .as_deref()
        .and_then(|p| read_path(obj, p))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Some((spec, status, selector))
}

/// Writes a new desired replica count at the version's `specReplicasPath`.
pub fn set_replicas(custom: &Custom, obj: &mut Value, replicas: i64) {
    let Some(paths) = custom.scale.as_ref() else { return };
    let ptr = pointer(&paths.spec_replicas);
    let mut cur = obj;
    let segs: Vec<&str> = ptr.trim_start_matches('/').split('/').collect();
    for (i, seg) in segs.iter().enumerate() {
        if i + 1 == segs.len() {
            if let Some(m) = cur.as_object_mut() {
                m.insert(seg.to_string(), json!(replicas));
            }
            return;
        }
        if !cur.get(*seg).is_some_and(Value::is_object) {
            cur[*seg] = json!({});
        }
        cur = &mut cur[*seg];
    }
}

/// The component schema of a custom kind in its group-version's OpenAPI v3 document: the
/// version's schema with the object fields every kind has and the kind's identity.
pub fn openapi_schema(def: &ResourceDef, custom: &Custom) -> Value {
    let mut s = custom.schema.clone();
    if !s.is_object() {
        s = json!({"type": "object"});
    }
    let props = s
        .as_object_mut()
        .expect("schema is an object")
        .entry("properties")
        .or_insert_with(|| json!({}));
    if let Some(p) = props.as_object_mut() {
        p.entry("apiVersion").or_insert_with(|| json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}));
        p.entry("kind").or_insert_with(|| json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}));
        p.insert("metadata".into(), json!({"type": "object", "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}));
    }
    s["x-kubernetes-group-version-kind"] = json!([{"group": def.group, "version": def.version, "kind": def.kind}]);
    s
}

/// The list schema of a custom kind.
pub fn openapi_list_schema(def: &ResourceDef, custom: &Custom, item_ref: &str) -> Value {
    let mut props = Map::new();
    props.insert("apiVersion".into(), json!({"type": "string"}));
    props.insert("kind".into(), json!({"type": "string"}));
    props.insert("metadata".into(), json!({"type": "object"}));
    props.insert("items".into(), json!({"type": "array", "items": {"$ref": item_ref}}));
    json!({"type": "object", "required": ["items"], "properties": props,
        "x-kubernetes-group-version-kind": [{"group": def.group, "version": def.version, "kind": custom.list_kind}]})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::crd::ScalePaths;

    fn custom() -> Custom {
        Custom {
            crd_name: "widgets.example.com".into(),
            schema: json!({"type": "object"}),
            columns: vec![PrinterColumn {
                name: "Size".into(),
                ty: "integer".into(),
                format: String::new(),
                description: String::new(),
                priority: 0,
                json_path: ".spec.size".into(),
            }],
            scale: Some(ScalePaths {
                spec_replicas: ".spec.size".into(),
                status_replicas: ".status.size".into(),
                label_selector: Some(".status.selector".into()),
            }),
            list_kind: "WidgetList".into(),
            default_on_read: true,
        }
    }

    #[test]
    fn prints_columns_and_scales_at_the_declared_paths() {
        let c = custom();
        let obj = json!({"metadata": {"name": "a"}, "spec": {"size": 2}, "status": {"selector": "app=a"}});
        let t = table(&c, std::slice::from_ref(&obj), "None", None);
        assert_eq!(t["rows"][0]["cells"], json!(["a", 2]));
        assert_eq!(scale_fields(&c, &obj), Some((2, 0, "app=a".into())));
        let mut o = json!({"metadata": {}});
        set_replicas(&c, &mut o, 5);
        assert_eq!(o["spec"]["size"], 5);
        assert_eq!(read_path(&json!({"a": [{"b": 1}]}), ".a[0].b"), Some(&json!(1)));
    }
}
