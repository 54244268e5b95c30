//! The two policy kinds' defaults and validation (`ValidatingAdmissionPolicy` and
//! `ValidatingAdmissionPolicyBinding`, admissionregistration.k8s.io/v1), as upstream's
//! `admissionregistration/v1/defaults.go` and `validation.go` have them. Expressions are
//! compiled here, so a policy that cannot compile is refused at write time, not at admission.

use serde_json::{Value, json};

use crate::api::error::Cause;

/// Fills the v1 defaults of a policy.
pub fn default_policy(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.entry("failurePolicy").or_insert_with(|| json!("Fail"));
    if let Some(mc) = spec.get_mut("matchConstraints") {
        default_match_resources(mc);
    }
}

/// Fills the v1 defaults of a binding.
pub fn default_binding(obj: &mut Value) {
    if let Some(mr) = obj.pointer_mut("/spec/matchResources") {
        default_match_resources(mr);
    }
}

fn default_match_resources(mr: &mut Value) {
    let Some(m) = mr.as_object_mut() else { return };
    m.entry("matchPolicy").or_insert_with(|| json!("Equivalent"));
    m.entry("namespaceSelector").or_insert_with(|| json!({}));
    m.entry("objectSelector").or_insert_with(|| json!({}));
    for key in ["resourceRules", "excludeResourceRules"] {
        if let Some(rules) = m.get_mut(key).and_then(Value::as_array_mut) {
            for r in rules.iter_mut().filter_map(Value::as_object_mut) {
                r.entry("scope").or_insert_with(|| json!("*"));
            }
        }
    }
}

fn required(field: &str, why: &str) -> Cause {
    let mut c = Cause::required(field);
    if !why.is_empty() {
        c.message = format!("Required value: {why}");
    }
    c
}

fn unsupported(field: &str, value: &str, supported: &[&str]) -> Cause {
    Cause::not_supported(field, &json!(value), supported)
}

/// An expression that does not compile, with upstream's "compilation failed" text.
fn expression(field: &str, expr: &str, out: &mut Vec<Cause>) {
    if expr.trim().is_empty() {
        out.push(required(field, ""));
        return;
    }
    if let Err(e) = crate::api::crd::cel::compile(expr) {
        out.push(Cause::invalid(field, &json!(expr), &format!("compilation failed: {e}")));
    }
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The validation of a policy.
pub fn validate_policy(obj: &Value, out: &mut Vec<Cause>) {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    match spec.get("matchConstraints") {
        None | Some(Value::Null) => out.push(required("spec.matchConstraints", "")),
        Some(mc) => {
            if mc
                .get("resourceRules")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                out.push(required("spec.matchConstraints.resourceRules", ""));
            }
        }
    }
    if let Some(fp) = str_at(&spec, "failurePolicy")
        && !matches!(fp, "Fail" | "Ignore")
    {
        out.push(unsupported("spec.failurePolicy", fp, &["Fail", "Ignore"]));
    }
    let validations = spec
        .get("validations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let audits = spec
        .get("auditAnnotations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if validations.is_empty() && audits.is_empty() {
        out.push(required(
            "spec.validations",
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    for (i, v) in validations.iter().enumerate() {
        let at = format!("spec.validations[{i}]");
        expression(
            &format!("{at}.expression"),
            str_at(v, "expression").unwrap_or_default(),
            out,
        );
        if let Some(me) = str_at(v, "messageExpression") {
            expression(&format!("{at}.messageExpression"), me, out);
        }
        if let Some(r) = str_at(v, "reason") {
            let ok = ["Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"];
            if !ok.contains(&r) {
                out.push(unsupported(&format!("{at}.reason"), r, &ok));
            }
        }
    }
    for (i, a) in audits.iter().enumerate() {
        let at = format!("spec.auditAnnotations[{i}]");
        if str_at(a, "key").is_none_or(str::is_empty) {
            out.push(required(&format!("{at}.key"), ""));
        }
        expression(
            &format!("{at}.valueExpression"),
            str_at(a, "valueExpression").unwrap_or_default(),
            out,
        );
    }
    for (i, v) in spec
        .get("variables")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.variables[{i}]");
        if str_at(v, "name").is_none_or(str::is_empty) {
            out.push(required(&format!("{at}.name"), ""));
        }
        expression(
            &format!("{at}.expression"),
            str_at(v, "expression").unwrap_or_default(),
            out,
        );
    }
    for (i, c) in spec
        .get("matchConditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.matchConditions[{i}]");
        if str_at(c, "name").is_none_or(str::is_empty) {
            out.push(required(&format!("{at}.name"), ""));
        }
        expression(
            &format!("{at}.expression"),
            str_at(c, "expression").unwrap_or_default(),
            out,
        );
    }
}

/// The validation of a binding.
pub fn validate_binding(obj: &Value, out: &mut Vec<Cause>) {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    if str_at(&spec, "policyName").is_none_or(str::is_empty) {
        out.push(required("spec.policyName", ""));
    }
    let actions: Vec<&str> = spec
        .get("validationActions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if actions.is_empty() {
        out.push(required("spec.validationActions", ""));
    }
    let mut seen = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        let field = format!("spec.validationActions[{i}]");
        if seen.contains(a) {
            out.push(Cause::duplicate(field, &json!(a)));
        } else if !matches!(*a, "Deny" | "Warn" | "Audit") {
            out.push(unsupported(&field, a, &["Audit", "Deny", "Warn"]));
        }
        seen.push(*a);
    }
    if actions.contains(&"Deny") && actions.contains(&"Warn") {
        let shown: Vec<String> = actions.iter().map(|a| format!("{a:?}")).collect();
        out.push(Cause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: []string{{{}}}: must not contain both Deny and Warn \
                 (repeating the same validation failure information in the API response and headers serves no purpose)",
                shown.join(", ")
            ),
            field: "spec.validationActions".into(),
        });
    }
    if let Some(pr) = spec.get("paramRef").filter(|p| p.is_object()) {
        let has_name = str_at(pr, "name").is_some_and(|n| !n.is_empty());
        let has_selector = pr.get("selector").is_some_and(|s| s.is_object());
        if has_name && has_selector {
            out.push(Cause::forbidden(
                "spec.paramRef.name",
                "name and selector are mutually exclusive",
            ));
        }
        if !has_name && !has_selector {
            out.push(required("spec.paramRef", "one of name or selector must be set"));
        }
        match str_at(pr, "parameterNotFoundAction") {
            None => out.push(required("spec.paramRef.parameterNotFoundAction", "")),
            Some("Allow" | "Deny") => {}
            Some(other) => out.push(unsupported(
                "spec.paramRef.parameterNotFoundAction",
                other,
                &["Allow", "Deny"],
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(out: &[Cause]) -> Vec<String> {
        out.iter().map(Cause::line).collect()
    }

    #[test]
    fn policies_need_rules_and_validations_that_compile() {
        let mut out = Vec::new();
        validate_policy(&json!({"spec": {}}), &mut out);
        assert_eq!(
            messages(&out),
            [
                "spec.matchConstraints: Required value",
                "spec.validations: Required value: validations or auditAnnotations must contain at least one item"
            ]
        );
        let mut out = Vec::new();
        let p = json!({"spec": {"matchConstraints": {"resourceRules": [{}]},
            "validations": [{"expression": "object.spec.replicas <="}]}});
        validate_policy(&p, &mut out);
        assert_eq!(out.len(), 1);
        assert!(
            out[0].line().starts_with(
                "spec.validations[0].expression: Invalid value: \"object.spec.replicas <=\": compilation failed: "
            ),
            "{}",
            out[0].line()
        );
    }

    #[test]
    fn bindings_refuse_deny_with_warn_and_duplicates() {
        let mut out = Vec::new();
        validate_binding(
            &json!({"spec": {"policyName": "p", "validationActions": ["Deny", "Warn", "Deny"]}}),
            &mut out,
        );
        let m = messages(&out);
        assert!(
            m.iter()
                .any(|x| x == "spec.validationActions[2]: Duplicate value: \"Deny\""),
            "{m:?}"
        );
        assert!(
            m.iter()
                .any(|x| x.starts_with("spec.validationActions: Invalid value: []string{\"Deny\", \"Warn\", \"Deny\"}: must not contain both Deny and Warn")),
            "{m:?}"
        );
        let mut out = Vec::new();
        validate_binding(&json!({"spec": {"paramRef": {"name": "x"}}}), &mut out);
        assert_eq!(
            messages(&out),
            [
                "spec.policyName: Required value",
                "spec.validationActions: Required value",
                "spec.paramRef.parameterNotFoundAction: Required value"
            ]
        );
    }

    #[test]
    fn defaults_fill_failure_policy_and_match_resources() {
        let mut p = json!({"spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"]}]}}});
        default_policy(&mut p);
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        assert_eq!(p["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(p["spec"]["matchConstraints"]["namespaceSelector"], json!({}));
        assert_eq!(p["spec"]["matchConstraints"]["resourceRules"][0]["scope"], "*");
    }
}
