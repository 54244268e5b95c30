//! ValidatingWebhookConfiguration and MutatingWebhookConfiguration as objects: upstream's v1
//! defaults and validation (messages as `pkg/apis/admissionregistration/validation` words
//! them), so a configuration a real server refuses is refused here too, and one it stores is
//! read back with the same defaulted fields (`kubectl get -o yaml` shows them).

use serde_json::{Value, json};

use crate::api::error::Cause;
use crate::api::validate::{LABEL_1035, NameRule, check_name};

/// The group both kinds belong to.
pub const GROUP: &str = "admissionregistration.k8s.io";

/// Whether `plural` of `group` is one of the two webhook configuration kinds.
pub fn is_config(group: &str, plural: &str) -> bool {
    group == GROUP
        && matches!(
            plural,
            "validatingwebhookconfigurations" | "mutatingwebhookconfigurations"
        )
}

/// Sets a field when it is absent (or null), as Go's defaulters do for nil pointers.
fn set(v: &mut Value, key: &str, value: Value) {
    if v.get(key).is_none_or(Value::is_null)
        && let Some(m) = v.as_object_mut()
    {
        m.insert(key.to_string(), value);
    }
}

/// Upstream's v1 defaults (`SetDefaults_ValidatingWebhook`, `SetDefaults_MutatingWebhook`,
/// `SetDefaults_Rule`, `SetDefaults_ServiceReference`). `sideEffects` and
/// `admissionReviewVersions` have no default in v1: validation requires them.
pub fn default(obj: &mut Value, mutating: bool) {
    let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for h in hooks {
        if !h.is_object() {
            continue;
        }
        set(h, "failurePolicy", json!("Fail"));
        set(h, "matchPolicy", json!("Equivalent"));
        set(h, "namespaceSelector", json!({}));
        set(h, "objectSelector", json!({}));
        set(h, "timeoutSeconds", json!(10));
        if mutating {
            set(h, "reinvocationPolicy", json!("Never"));
        }
        for r in h.get_mut("rules").and_then(Value::as_array_mut).into_iter().flatten() {
            if r.is_object() {
                set(r, "scope", json!("*"));
            }
        }
        if let Some(svc) = h.pointer_mut("/clientConfig/service").filter(|s| s.is_object()) {
            set(svc, "port", json!(443));
        }
    }
}

fn strs(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_str().unwrap_or_default().to_string()).collect())
        .unwrap_or_default()
}

/// Validates a configuration (`ValidateValidatingWebhookConfiguration` and its mutating twin;
/// metadata is checked by the generic validation).
pub fn validate(obj: &Value, mutating: bool, out: &mut Vec<Cause>) {
    let mut seen: Vec<String> = Vec::new();
    for (i, h) in obj
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = format!("webhooks[{i}]");
        webhook(h, mutating, &base, out);
        review_versions(
            h.get("admissionReviewVersions"),
            &format!("{base}.admissionReviewVersions"),
            out,
        );
        let name = h.get("name").and_then(Value::as_str).unwrap_or_default();
        if !name.is_empty() {
            if seen.iter().any(|s| s == name) {
                out.push(Cause::duplicate(format!("{base}.name"), &json!(name)));
            } else {
                seen.push(name.to_string());
            }
        }
    }
}

/// `utilvalidation.IsFullyQualifiedName`: required, at least three dot-separated segments, a
/// DNS-1123 subdomain.
fn fully_qualified(name: &str, field: &str, out: &mut Vec<Cause>) {
    if name.is_empty() {
        out.push(Cause::required(field));
        return;
    }
    if name.split('.').count() < 3 {
        out.push(Cause::invalid(
            field,
            &json!(name),
            "should be a domain with at least three segments separated by dots",
        ));
        return;
    }
    check_name(name, NameRule::Subdomain, field, out);
}

fn webhook(h: &Value, mutating: bool, base: &str, out: &mut Vec<Cause>) {
    fully_qualified(
        h.get("name").and_then(Value::as_str).unwrap_or_default(),
        &format!("{base}.name"),
        out,
    );
    for (j, r) in h
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        rule(r, &format!("{base}.rules[{j}]"), out);
    }
    let enum_field = |key: &str, allowed: &[&str], out: &mut Vec<Cause>| {
        if let Some(v) = h.get(key).filter(|v| !v.is_null())
            && !allowed.contains(&v.as_str().unwrap_or_default())
        {
            out.push(Cause::not_supported(format!("{base}.{key}"), v, allowed));
        }
    };
    enum_field("failurePolicy", &["Fail", "Ignore"], out);
    enum_field("matchPolicy", &["Equivalent", "Exact"], out);
    match h.get("sideEffects").filter(|v| !v.is_null()) {
        None => out.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: must specify one of None, NoneOnDryRun".into(),
            field: format!("{base}.sideEffects"),
        }),
        Some(_) => enum_field("sideEffects", &["None", "NoneOnDryRun"], out),
    }
    if let Some(t) = h.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        out.push(Cause::invalid(
            format!("{base}.timeoutSeconds"),
            &json!(t),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    if mutating {
        enum_field("reinvocationPolicy", &["IfNeeded", "Never"], out);
    }
    client_config(
        h.get("clientConfig").unwrap_or(&Value::Null),
        &format!("{base}.clientConfig"),
        out,
    );
    match_conditions(h.get("matchConditions"), &format!("{base}.matchConditions"), out);
}

fn rule(r: &Value, base: &str, out: &mut Vec<Cause>) {
    let ops = strs(r.get("operations"));
    if ops.is_empty() {
        out.push(Cause::required(format!("{base}.operations")));
    }
    if ops.len() > 1 && ops.iter().any(|o| o == "*") {
        out.push(Cause::invalid(
            format!("{base}.operations"),
            &json!(ops),
            "if '*' is present, must not specify other operations",
        ));
    }
    const OPS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    for (k, o) in ops.iter().enumerate() {
        if !OPS.contains(&o.as_str()) {
            out.push(Cause::not_supported(format!("{base}.operations[{k}]"), &json!(o), OPS));
        }
    }
    let groups = strs(r.get("apiGroups"));
    if groups.is_empty() {
        out.push(Cause::required(format!("{base}.apiGroups")));
    }
    if groups.len() > 1 && groups.iter().any(|g| g == "*") {
        out.push(Cause::invalid(
            format!("{base}.apiGroups"),
            &json!(groups),
            "if '*' is present, must not specify other API groups",
        ));
    }
    let versions = strs(r.get("apiVersions"));
    if versions.is_empty() {
        out.push(Cause::required(format!("{base}.apiVersions")));
    }
    if versions.len() > 1 && versions.iter().any(|v| v == "*") {
        out.push(Cause::invalid(
            format!("{base}.apiVersions"),
            &json!(versions),
            "if '*' is present, must not specify other API versions",
        ));
    }
    for (k, v) in versions.iter().enumerate() {
        if v.is_empty() {
            out.push(Cause::required(format!("{base}.apiVersions[{k}]")));
        }
    }
    resources(&strs(r.get("resources")), &format!("{base}.resources"), out);
    if let Some(s) = r.get("scope").filter(|s| !s.is_null())
        && !matches!(s.as_str(), Some("*" | "Cluster" | "Namespaced"))
    {
        out.push(Cause::not_supported(
            format!("{base}.scope"),
            s,
            &["*", "Cluster", "Namespaced"],
        ));
    }
}

/// Upstream's `validateResources`: `x/*` and `*/y` exclude naming what they already cover.
fn resources(res: &[String], field: &str, out: &mut Vec<Cause>) {
    if res.is_empty() {
        out.push(Cause::required(field));
    }
    let mut wild_sub: Vec<&str> = Vec::new();
    let mut wild_res: Vec<&str> = Vec::new();
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, rs) in res.iter().enumerate() {
        if rs.is_empty() {
            out.push(Cause::required(format!("{field}[{i}]")));
            continue;
        }
        double |= rs == "*/*";
        single |= rs == "*";
        let Some((r, s)) = rs.split_once('/') else {
            plain = rs != "*";
            continue;
        };
        if wild_sub.contains(&r) {
            out.push(Cause::invalid(
                format!("{field}[{i}]"),
                &json!(rs),
                &format!("if '{r}/*' is present, must not specify {rs}"),
            ));
        }
        if wild_res.contains(&s) {
            out.push(Cause::invalid(
                format!("{field}[{i}]"),
                &json!(rs),
                &format!("if '*/{s}' is present, must not specify {rs}"),
            ));
        }
        if s == "*" {
            wild_sub.push(r);
        }
        if r == "*" {
            wild_res.push(s);
        }
    }
    if res.len() > 1 && double {
        out.push(Cause::invalid(
            field,
            &json!(res),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        out.push(Cause::invalid(
            field,
            &json!(res),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
}

fn review_versions(v: Option<&Value>, field: &str, out: &mut Vec<Cause>) {
    let versions = strs(v);
    if versions.is_empty() {
        out.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: must specify one of v1, v1beta1".into(),
            field: field.to_string(),
        });
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, ver) in versions.iter().enumerate() {
        if seen.contains(&ver.as_str()) {
            out.push(Cause::invalid(
                format!("{field}[{i}]"),
                &json!(ver),
                "duplicate version",
            ));
            continue;
        }
        seen.push(ver);
        if ver.len() > 63 || !LABEL_1035.is_match(ver) {
            out.push(Cause::invalid(
                format!("{field}[{i}]"),
                &json!(ver),
                crate::api::validate::LABEL_1035_MSG,
            ));
        }
    }
    if !versions.iter().any(|v| v == "v1" || v == "v1beta1") {
        out.push(Cause::invalid(
            field,
            &json!(versions),
            "must include at least one of v1, v1beta1",
        ));
    }
}

/// `exactly one of url or service`, then `ValidateWebhookURL` or `ValidateWebhookService`.
fn client_config(cc: &Value, field: &str, out: &mut Vec<Cause>) {
    let url = cc.get("url").and_then(Value::as_str);
    let svc = cc.get("service").filter(|s| s.is_object());
    match (url, svc) {
        (Some(u), None) => url_rules(u, &format!("{field}.url"), out),
        (None, Some(s)) => service_rules(s, &format!("{field}.service"), out),
        _ => out.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: exactly one of url or service is required".into(),
            field: field.to_string(),
        }),
    }
}

fn url_rules(u: &str, field: &str, out: &mut Vec<Cause>) {
    const FORM: &str = "; desired format: https://host[/path]";
    let (scheme, rest) = u.split_once("://").unwrap_or(("", u));
    if scheme != "https" {
        out.push(Cause::invalid(
            field,
            &json!(scheme),
            &format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = if scheme.is_empty() { "" } else { &rest[..authority_end] };
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if host.is_empty() {
        out.push(Cause::invalid(
            field,
            &json!(host),
            &format!("host must be specified{FORM}"),
        ));
    }
    if let Some(u) = user {
        out.push(Cause::invalid(
            field,
            &json!(u),
            "user information is not permitted in the URL",
        ));
    }
    if let Some((_, frag)) = u.split_once('#')
        && !frag.is_empty()
    {
        out.push(Cause::invalid(
            field,
            &json!(frag),
            "fragments are not permitted in the URL",
        ));
    }
    let before_frag = u.split('#').next().unwrap_or_default();
    if let Some((_, q)) = before_frag.split_once('?')
        && !q.is_empty()
    {
        out.push(Cause::invalid(
            field,
            &json!(q),
            "query parameters are not permitted in the URL",
        ));
    }
}

fn service_rules(s: &Value, field: &str, out: &mut Vec<Cause>) {
    for key in ["name", "namespace"] {
        if s.get(key).and_then(Value::as_str).unwrap_or_default().is_empty() {
            out.push(Cause::required(format!("{field}.{key}")));
        }
    }
    let port = s.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        out.push(Cause::invalid(
            format!("{field}.port"),
            &json!(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let path = s.get("path").and_then(Value::as_str).unwrap_or_default();
    if path.is_empty() || path == "/" {
        return;
    }
    if path == "//" {
        out.push(Cause::invalid(
            format!("{field}.path"),
            &json!(path),
            "segment[0] may not be empty",
        ));
        return;
    }
    if !path.starts_with('/') {
        out.push(Cause::invalid(
            format!("{field}.path"),
            &json!(path),
            "must start with a '/'",
        ));
    }
}

/// Names unique and required, expressions required and compiling (at most 64 conditions).
fn match_conditions(mc: Option<&Value>, field: &str, out: &mut Vec<Cause>) {
    let Some(list) = mc.and_then(Value::as_array) else {
        return;
    };
    if list.len() > 64 {
        out.push(Cause {
            reason: "FieldValueTooMany".into(),
            message: format!("Too many: {}: must have at most 64 items", list.len()),
            field: field.to_string(),
        });
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            out.push(Cause::required(format!("{field}[{i}].name")));
        } else if names.contains(&name) {
            out.push(Cause::duplicate(format!("{field}[{i}].name"), &json!(name)));
        } else {
            names.push(name);
        }
        let expr = c.get("expression").and_then(Value::as_str).unwrap_or_default();
        if expr.trim().is_empty() {
            out.push(Cause::required(format!("{field}[{i}].expression")));
        } else if let Err(e) = crate::api::crd::cel::compile(expr) {
            out.push(Cause::invalid(
                format!("{field}[{i}].expression"),
                &json!(expr),
                &format!("compilation failed: {e}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstreams() {
        let mut c = json!({"webhooks": [{"name": "a.b.c", "rules": [{"operations": ["CREATE"]}],
            "clientConfig": {"service": {"name": "s", "namespace": "n"}}}]});
        default(&mut c, true);
        let h = &c["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["namespaceSelector"], json!({}));
        assert_eq!(h["objectSelector"], json!({}));
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["reinvocationPolicy"], "Never");
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
        assert!(h.get("sideEffects").is_none());
    }

    #[test]
    fn validation_words_as_upstream() {
        let c = json!({"webhooks": [{"name": "short.name", "timeoutSeconds": 31,
            "rules": [{"operations": ["CREATE", "*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*", "pods"]}],
            "clientConfig": {}}]});
        let mut out = Vec::new();
        validate(&c, false, &mut out);
        let lines: Vec<String> = out.iter().map(Cause::line).collect();
        for want in [
            "webhooks[0].name: Invalid value: \"short.name\": should be a domain with at least three segments separated by dots",
            "webhooks[0].rules[0].operations: Invalid value: [\"CREATE\",\"*\"]: if '*' is present, must not specify other operations",
            "webhooks[0].rules[0].resources: Invalid value: [\"*\",\"pods\"]: if '*' is present, must not specify other resources without subresources",
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
            "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
            "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
        ] {
            assert!(lines.iter().any(|l| l == want), "missing {want:?} in {lines:#?}");
        }
    }

    #[test]
    fn match_conditions_must_compile() {
        // The expression of upstream's conformance case "should reject ... with invalid match
        // conditions", which looks for "compilation failed".
        let c = json!({"webhooks": [{"name": "a.b.c", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1/x"},
            "matchConditions": [{"name": "invalid-expression-1", "expression": "... [] bad expression"},
                {"name": "ok", "expression": "object.metadata.name != 'skip-me'"}]}]});
        let mut out = Vec::new();
        validate(&c, false, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].field, "webhooks[0].matchConditions[0].expression");
        assert!(out[0].message.contains("compilation failed"), "{}", out[0].message);
    }
}
