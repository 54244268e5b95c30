//! Validation of custom objects against their version's structural schema, with upstream's
//! error texts.
//!
//! Upstream runs kube-openapi's schema validator and turns each result into a field error
//! (`kubeOpenAPIResultToFieldErrors`): a wrong type is `FieldValueTypeInvalid` whose value is
//! the JSON type found, a missing required property `Required value`, an enum miss
//! `Unsupported value`, too long a string `Too long`, too many items `Too many`, and every
//! other check `Invalid value` with go-openapi's sentence (`spec.x in body should match
//! '^a$'`). The go-openapi path names the field with dots, array items by index
//! (`spec.ports.0`), which is also what the cause's field says.

use regex::Regex;
use serde_json::{Value, json};

use crate::api::error::Cause;

/// Validates `obj` (a whole custom object, pruned and defaulted) against `schema`; `old` is
/// the stored object on updates (for CEL transition rules).
pub fn validate(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let Some(m) = obj.as_object() else {
        return out;
    };
    // The root's apiVersion, kind and metadata are checked by the generic code, not the schema.
    for (k, s) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(v) = m.get(k) {
            node(s, v, old.and_then(|o| o.get(k)), k, &mut out);
        }
    }
    required(schema, m, "", &mut out);
    if out.is_empty() {
        super::cel::check(schema, obj, old, "", &mut out);
    }
    out
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn required(schema: &Value, m: &serde_json::Map<String, Value>, path: &str, out: &mut Vec<Cause>) {
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !m.contains_key(r) {
            out.push(Cause::required(child(path, r)));
        }
    }
}

/// go-openapi's name of a JSON value's type.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(want: &str, v: &Value) -> bool {
    match want {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        _ => true,
    }
}

/// A number as Go's `%v` prints a float64 bound (`1`, `1.5`).
fn num(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        Some(f) => f.to_string(),
        None => v.to_string(),
    }
}

fn invalid(path: &str, value: &Value, why: String, out: &mut Vec<Cause>) {
    out.push(Cause::invalid(path, value, &why));
}

fn node(schema: &Value, v: &Value, old: Option<&Value>, path: &str, out: &mut Vec<Cause>) {
    let before = out.len();
    shape(schema, v, old, path, out);
    // Upstream evaluates a node's CEL rules only when its schema checks passed.
    if out.len() == before && !v.is_null() {
        super::cel::check(schema, v, old, path, out);
    }
}

/// The OpenAPI checks of one node and its children.
fn shape(schema: &Value, v: &Value, old: Option<&Value>, path: &str, out: &mut Vec<Cause>) {
    if v.is_null() {
        if schema.get("nullable").and_then(Value::as_bool) != Some(true) {
            type_error(schema, v, path, out);
        }
        return;
    }
    if schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
        if !(v.is_string() || v.is_i64() || v.is_u64()) {
            let msg = format!("{path} in body must be of type integer,string: {:?}", type_name(v));
            out.push(type_invalid(path, v, msg));
            return;
        }
    } else if let Some(t) = schema.get("type").and_then(Value::as_str)
        && !type_ok(t, v)
    {
        type_error(schema, v, path, out);
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed
            .iter()
            .map(|a| match a {
                Value::String(s) => format!("{s:?}"),
                other => format!("{:?}", other.to_string()),
            })
            .collect();
        out.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!("Unsupported value: {v}: supported values: {}", list.join(", ")),
            field: path.to_string(),
        });
    }
    match v {
        Value::String(s) => string(schema, v, s, path, out),
        Value::Number(_) => number(schema, v, path, out),
        Value::Array(items) => array(schema, v, items, path, out),
        Value::Object(m) => {
            if schema.get("x-kubernetes-embedded-resource").and_then(Value::as_bool) == Some(true) {
                for f in ["apiVersion", "kind"] {
                    if m.get(f).and_then(Value::as_str).unwrap_or_default().is_empty() {
                        out.push(Cause {
                            reason: "FieldValueRequired".into(),
                            message: "Required value: must not be empty".into(),
                            field: child(path, f),
                        });
                    }
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            for (k, cv) in m {
                let s = props
                    .and_then(|p| p.get(k))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                if let Some(s) = s {
                    node(s, cv, old.and_then(|o| o.get(k)), &child(path, k), out);
                }
            }
            required(schema, m, path, out);
            if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
                && m.len() as u64 > max
            {
                out.push(Cause {
                    reason: "FieldValueTooMany".into(),
                    message: format!("Too many: {}: must have at most {max} items", m.len()),
                    field: path.to_string(),
                });
            }
        }
        _ => {}
    }
}

fn type_invalid(path: &str, v: &Value, msg: String) -> Cause {
    Cause {
        reason: "FieldValueTypeInvalid".into(),
        message: format!("Invalid value: {:?}: {msg}", type_name(v)),
        field: path.to_string(),
    }
}

fn type_error(schema: &Value, v: &Value, path: &str, out: &mut Vec<Cause>) {
    let want = schema.get("type").and_then(Value::as_str).unwrap_or_default();
    let msg = format!("{path} in body must be of type {want}: {:?}", type_name(v));
    out.push(type_invalid(path, v, msg));
}

fn string(schema: &Value, v: &Value, s: &str, path: &str, out: &mut Vec<Cause>) {
    let len = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        let unit = if max == 1 { "byte" } else { "bytes" };
        out.push(Cause {
            reason: "FieldValueTooLong".into(),
            message: format!("Too long: may not be more than {max} {unit}"),
            field: path.to_string(),
        });
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        invalid(
            path,
            v,
            format!("{path} in body should be at least {min} chars long"),
            out,
        );
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        match Regex::new(p) {
            Ok(re) if !re.is_match(s) => invalid(path, v, format!("{path} in body should match '{p}'"), out),
            Ok(_) => {}
            Err(e) => invalid(path, v, format!("pattern {p:?} does not compile: {e}"), out),
        }
    }
}

fn number(schema: &Value, v: &Value, path: &str, out: &mut Vec<Cause>) {
    let x = v.as_f64().unwrap_or_default();
    let excl = |k: &str| schema.get(k).and_then(Value::as_bool) == Some(true);
    if let Some(min) = schema.get("minimum") {
        let m = min.as_f64().unwrap_or_default();
        if excl("exclusiveMinimum") && x <= m {
            invalid(
                path,
                v,
                format!("{path} in body should be greater than {}", num(min)),
                out,
            );
        } else if x < m {
            invalid(
                path,
                v,
                format!("{path} in body should be greater than or equal to {}", num(min)),
                out,
            );
        }
    }
    if let Some(max) = schema.get("maximum") {
        let m = max.as_f64().unwrap_or_default();
        if excl("exclusiveMaximum") && x >= m {
            invalid(path, v, format!("{path} in body should be less than {}", num(max)), out);
        } else if x > m {
            invalid(
                path,
                v,
                format!("{path} in body should be less than or equal to {}", num(max)),
                out,
            );
        }
    }
    if let Some(d) = schema.get("multipleOf").and_then(Value::as_f64)
        && d != 0.0
        && (x / d).fract() != 0.0
    {
        invalid(
            path,
            v,
            format!("{path} in body should be a multiple of {}", num(&json!(d))),
            out,
        );
    }
}

fn array(schema: &Value, v: &Value, items: &[Value], path: &str, out: &mut Vec<Cause>) {
    let n = items.len() as u64;
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && n > max
    {
        out.push(Cause {
            reason: "FieldValueTooMany".into(),
            message: format!("Too many: {n}: must have at most {max} items"),
            field: path.to_string(),
        });
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && n < min
    {
        invalid(path, v, format!("{path} in body should have at least {min} items"), out);
    }
    if let Some(s) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            node(s, item, None, &format!("{path}.{i}"), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 10},
            "color": {"type": "string", "enum": ["red", "blue"]},
            "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
            "port": {"x-kubernetes-int-or-string": true},
            "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
            "note": {"type": "string", "nullable": true}}}}})
    }

    /// The causes as `field: message` lines, sorted (the order follows map iteration).
    fn lines(obj: Value) -> Vec<String> {
        let mut v: Vec<String> = validate(&schema(), &obj, None)
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn reports_upstream_texts() {
        assert_eq!(
            lines(json!({"spec": {"size": "three"}})),
            vec![r#"spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#]
        );
        assert_eq!(lines(json!({"spec": {}})), vec!["spec.size: Required value"]);
        assert_eq!(
            lines(json!({"spec": {"size": 0, "color": "green"}})),
            vec![
                r#"spec.color: Unsupported value: "green": supported values: "red", "blue""#,
                "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
            ]
        );
        assert_eq!(
            lines(json!({"spec": {"size": 2, "name": "ABCDEFG", "tags": ["a", "b"], "port": 1.5, "note": null}})),
            vec![
                r#"spec.name: Invalid value: "ABCDEFG": spec.name in body should match '^[a-z]+$'"#,
                "spec.name: Too long: may not be more than 5 bytes",
                r#"spec.port: Invalid value: "number": spec.port in body must be of type integer,string: "number""#,
                "spec.tags: Too many: 2: must have at most 1 items",
            ]
        );
    }
}
