//! CEL validation rules (`x-kubernetes-validations`) of a structural schema, evaluated with
//! the `cel` crate.
//!
//! Each rule sees the schema node's value as `self` (and the stored one as `oldSelf` on
//! updates; a rule naming `oldSelf` is a transition rule and, as upstream, is skipped on
//! create). A rule that yields `false` is a cause on the node's path (or its `fieldPath`)
//! with the rule's `message`, else upstream's `failed rule: RULE`, and the node's schema
//! type as the value, with the rule's `reason` (`FieldValueInvalid` by default).
//!
//! The `cel` crate knows the standard CEL library, not Kubernetes' extensions
//! (`isSorted`, `quantity`, `url`...): a rule that fails to evaluate for that reason is
//! logged and not enforced, rather than refusing objects upstream would accept.

use serde_json::{Value, json};

use crate::api::error::Cause;

/// A JSON value as Kubernetes' CEL environments see it: every integer that fits is an `int`
/// (int64), as upstream's unstructured conversion makes it, never a `uint` (which the `cel`
/// crate's serde conversion picks for every non-negative number, so that `x % 2` on a
/// Deployment's replicas fails as `uint % int`).
pub fn json_to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            (None, None) => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(s.clone().into()),
        Value::Array(items) => items.iter().map(json_to_cel).collect::<Vec<_>>().into(),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), json_to_cel(v)))
            .collect::<std::collections::HashMap<_, _>>()
            .into(),
    }
}

/// Compiles a rule; `Err` holds the parser's explanation.
pub fn compile(rule: &str) -> Result<cel::Program, String> {
    cel::Program::compile(rule).map_err(|e| e.to_string())
}

fn child(path: &str, field_path: &str) -> String {
    let rel = field_path.trim_start_matches('.');
    match (path.is_empty(), rel.is_empty()) {
        (_, true) => path.to_string(),
        (true, false) => rel.to_string(),
        (false, false) => format!("{path}.{rel}"),
    }
}

/// Evaluates the rules of `schema` on `v` (at `path`), adding a cause per failed rule.
pub fn check(schema: &Value, v: &Value, old: Option<&Value>, path: &str, out: &mut Vec<Cause>) {
    let Some(rules) = schema.get("x-kubernetes-validations").and_then(Value::as_array) else {
        return;
    };
    for r in rules {
        let rule = r.get("rule").and_then(Value::as_str).unwrap_or_default();
        if rule.is_empty() || (rule.contains("oldSelf") && old.is_none()) {
            continue;
        }
        let program = match compile(rule) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(rule, error = %e, "CEL rule does not compile; not enforced");
                continue;
            }
        };
        let mut ctx = cel::Context::default();
        if let Err(e) = ctx.add_variable("self", v.clone()) {
            tracing::warn!(rule, error = %e, "CEL rule input not convertible; not enforced");
            continue;
        }
        if let Some(o) = old
            && let Err(e) = ctx.add_variable("oldSelf", o.clone())
        {
            tracing::warn!(rule, error = %e, "CEL rule input not convertible; not enforced");
            continue;
        }
        match program.execute(&ctx) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => out.push(failure(schema, r, rule, path)),
            Ok(other) => tracing::warn!(rule, result = ?other, "CEL rule is not a boolean; not enforced"),
            Err(e) => tracing::warn!(rule, error = %e, "CEL rule evaluation failed; not enforced"),
        }
    }
}

fn failure(schema: &Value, r: &Value, rule: &str, path: &str) -> Cause {
    let message = r
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map_or_else(|| format!("failed rule: {rule}"), String::from);
    let field = child(path, r.get("fieldPath").and_then(Value::as_str).unwrap_or_default());
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or_default();
    match r.get("reason").and_then(Value::as_str).unwrap_or("FieldValueInvalid") {
        "FieldValueForbidden" => Cause::forbidden(field, &message),
        "FieldValueRequired" => Cause {
            reason: "FieldValueRequired".into(),
            message: format!("Required value: {message}"),
            field,
        },
        "FieldValueDuplicate" => Cause {
            reason: "FieldValueDuplicate".into(),
            message: format!("Duplicate value: {message}"),
            field,
        },
        _ => Cause::invalid(field, &json!(ty), &message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_rules_become_causes_and_transition_rules_wait_for_an_old_value() {
        let schema = json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "message": "min must not exceed max"},
            {"rule": "self.max >= oldSelf.max", "reason": "FieldValueForbidden", "fieldPath": ".max"},
            {"rule": "size(self.name) > 2"}]});
        let mut out = Vec::new();
        check(
            &schema,
            &json!({"min": 5, "max": 3, "name": "ab"}),
            None,
            "spec",
            &mut out,
        );
        let lines: Vec<String> = out.iter().map(|c| format!("{}: {}", c.field, c.message)).collect();
        assert_eq!(
            lines,
            [
                r#"spec: Invalid value: "object": min must not exceed max"#,
                r#"spec: Invalid value: "object": failed rule: size(self.name) > 2"#,
            ]
        );
        let mut out = Vec::new();
        check(
            &schema,
            &json!({"min": 1, "max": 3, "name": "abc"}),
            Some(&json!({"min": 1, "max": 4, "name": "abc"})),
            "spec",
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].field.as_str(), out[0].reason.as_str()),
            ("spec.max", "FieldValueForbidden")
        );
        assert!(compile("self.a <").is_err());
    }

    #[test]
    fn json_integers_are_cel_ints() {
        let v = json_to_cel(&json!({"spec": {"replicas": 3, "ratio": 0.5, "tags": ["a"]}}));
        let mut ctx = cel::Context::default();
        ctx.add_variable_from_value("object", v);
        let odd = compile("object.spec.replicas % 2 == 1 && object.spec.ratio < 1.0 && object.spec.tags[0] == 'a'")
            .unwrap()
            .execute(&ctx);
        assert_eq!(odd, Ok(cel::Value::Bool(true)));
    }
}
