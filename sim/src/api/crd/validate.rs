//! Validation of a CustomResourceDefinition itself, with upstream's field paths and texts
//! (`ValidateCustomResourceDefinition` and the v1 requirement of a structural schema per
//! version).
//!
//! Where upstream's cause value is a Go struct printed with `%#v` (the whole `spec.versions`
//! list), the cause shows the versions' JSON instead; the field, reason and sentence are
//! upstream's.

use serde_json::{Value, json};

use crate::api::error::Cause;
use crate::api::validate::{LABEL_1035, LABEL_1035_MSG, SUBDOMAIN, SUBDOMAIN_MSG};

fn text<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

fn label_1035(value: &str, field: &str, out: &mut Vec<Cause>) {
    if !value.is_empty() && (value.len() > 63 || !LABEL_1035.is_match(value)) {
        out.push(Cause::invalid(field, &json!(value), LABEL_1035_MSG));
    }
}

/// Validates a CRD (`old` is the stored one on updates).
pub fn validate(crd: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let group = text(crd, "/spec/group");
    let plural = text(crd, "/spec/names/plural");
    let name = text(crd, "/metadata/name");
    if !name.is_empty() && name != format!("{plural}.{group}") {
        out.push(Cause::invalid(
            "metadata.name",
            &json!(name),
            r#"must be spec.names.plural+"."+spec.group"#,
        ));
    }
    if group.is_empty() {
        out.push(Cause::required("spec.group"));
    } else if group.len() > 253 || !SUBDOMAIN.is_match(group) {
        out.push(Cause::invalid("spec.group", &json!(group), SUBDOMAIN_MSG));
    } else if !group.contains('.') {
        out.push(Cause::invalid(
            "spec.group",
            &json!(group),
            "should be a domain with at least one dot",
        ));
    }
    match text(crd, "/spec/scope") {
        "" => out.push(Cause::required("spec.scope")),
        "Cluster" | "Namespaced" => {}
        other => out.push(Cause::not_supported(
            "spec.scope",
            &json!(other),
            &["Cluster", "Namespaced"],
        )),
    }
    versions(crd, out);
    for (field, key) in [
        ("spec.names.plural", "plural"),
        ("spec.names.singular", "singular"),
        ("spec.names.kind", "kind"),
        ("spec.names.listKind", "listKind"),
    ] {
        if text(crd, &format!("/spec/names/{key}")).is_empty() {
            out.push(Cause::required(field));
        }
    }
    label_1035(plural, "spec.names.plural", out);
    label_1035(text(crd, "/spec/names/singular"), "spec.names.singular", out);
    if let Some(shorts) = crd.pointer("/spec/names/shortNames").and_then(Value::as_array) {
        for (i, s) in shorts.iter().enumerate() {
            label_1035(
                s.as_str().unwrap_or_default(),
                &format!("spec.names.shortNames[{i}]"),
                out,
            );
        }
    }
    match text(crd, "/spec/conversion/strategy") {
        "" | "None" | "Webhook" => {}
        other => out.push(Cause::not_supported(
            "spec.conversion.strategy",
            &json!(other),
            &["None", "Webhook"],
        )),
    }
    if let Some(old) = old {
        let established = old
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|c| c["type"] == "Established" && c["status"] == "True"));
        // An established CRD's scope and kind shape its stored objects.
        if established {
            for (field, p) in [("spec.scope", "/spec/scope"), ("spec.names.kind", "/spec/names/kind")] {
                if text(crd, p) != text(old, p) {
                    out.push(Cause::invalid(field, &json!(text(crd, p)), "field is immutable"));
                }
            }
        }
        for (field, p) in [
            ("spec.group", "/spec/group"),
            ("spec.names.plural", "/spec/names/plural"),
        ] {
            if text(crd, p) != text(old, p) {
                out.push(Cause::invalid(field, &json!(text(crd, p)), "field is immutable"));
            }
        }
    }
}

fn versions(crd: &Value, out: &mut Vec<Cause>) {
    let list = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut storage = 0;
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, v) in list.iter().enumerate() {
        let name = text(v, "/name");
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        if seen.contains(&name) {
            unique = false;
        }
        seen.push(name);
        let base = format!("spec.versions[{i}]");
        if name.is_empty() || name.len() > 63 || !LABEL_1035.is_match(name) {
            out.push(Cause::invalid(format!("{base}.name"), &json!(name), LABEL_1035_MSG));
        }
        match v.pointer("/schema/openAPIV3Schema") {
            None => out.push(Cause {
                reason: "FieldValueRequired".into(),
                message: "Required value: schemas are required".into(),
                field: format!("{base}.schema.openAPIV3Schema"),
            }),
            Some(s) => structural(s, &format!("{base}.schema.openAPIV3Schema"), true, out),
        }
        if let Some(scale) = v.pointer("/subresources/scale") {
            for key in ["specReplicasPath", "statusReplicasPath"] {
                if text(scale, &format!("/{key}")).is_empty() {
                    out.push(Cause::required(format!("{base}.subresources.scale.{key}")));
                }
            }
        }
    }
    if list.is_empty() {
        out.push(Cause::invalid(
            "spec.versions",
            &json!([]),
            "must have exactly one version marked as storage version",
        ));
        return;
    }
    let shown = Value::Array(list.to_vec());
    if !unique {
        out.push(Cause::invalid(
            "spec.versions",
            &shown,
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        out.push(Cause::invalid(
            "spec.versions",
            &shown,
            "must have exactly one version marked as storage version",
        ));
    }
}

/// The structural-schema rules a v1 CRD must meet: a type on every specified field and item
/// (unless `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields` stands in)
/// and an object at the root.
fn structural(s: &Value, path: &str, root: bool, out: &mut Vec<Cause>) {
    let ty = text(s, "/type");
    let int_or_string = s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true);
    let preserve = s.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true);
    rules_compile(s, path, out);
    if root && ty != "object" {
        if ty.is_empty() {
            out.push(Cause::required(format!("{path}.type")));
        } else {
            out.push(Cause::invalid(
                format!("{path}.type"),
                &json!(ty),
                "must be object at the root",
            ));
        }
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            let child = format!("{path}.properties[{k}]");
            typed(p, &child, "must not be empty for specified object fields", out);
            structural(p, &child, false, out);
        }
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        let child = format!("{path}.items");
        typed(items, &child, "must not be empty for specified array items", out);
        structural(items, &child, false, out);
    }
    if let Some(add) = s.get("additionalProperties").filter(|a| a.is_object()) {
        let child = format!("{path}.additionalProperties");
        typed(add, &child, "must not be empty for specified object fields", out);
        structural(add, &child, false, out);
    }
    if ty == "array" && s.get("items").is_none() && !int_or_string && !preserve {
        out.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: must be specified".into(),
            field: format!("{path}.items"),
        });
    }
}

/// Upstream refuses a CRD whose CEL rules do not compile.
fn rules_compile(s: &Value, path: &str, out: &mut Vec<Cause>) {
    for (i, r) in s
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let rule = text(r, "/rule");
        let field = format!("{path}.x-kubernetes-validations[{i}].rule");
        if rule.is_empty() {
            out.push(Cause::required(field));
        } else if let Err(e) = super::cel::compile(rule) {
            out.push(Cause::invalid(field, &json!(rule), &format!("compilation failed: {e}")));
        }
    }
}

fn typed(s: &Value, path: &str, why: &str, out: &mut Vec<Cause>) {
    let int_or_string = s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true);
    let preserve = s.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true);
    if text(s, "/type").is_empty() && !int_or_string && !preserve {
        out.push(Cause {
            reason: "FieldValueRequired".into(),
            message: format!("Required value: {why}"),
            field: format!("{path}.type"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}}]}})
    }

    fn fields(v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        validate(v, None, &mut out);
        out.iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    #[test]
    fn accepts_a_good_crd_and_names_each_fault() {
        assert!(fields(&crd()).is_empty(), "{:?}", fields(&crd()));
        let mut bad = crd();
        bad["metadata"]["name"] = json!("gadgets.example.com");
        bad["spec"]["group"] = json!("example");
        bad["spec"]["versions"][0]["storage"] = json!(false);
        bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = json!({"properties": {}});
        let got = fields(&bad);
        assert!(
            got.contains(
                &r#"metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group"#
                    .to_string()
            ),
            "{got:?}"
        );
        assert!(got.contains(
            &r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#.to_string()
        ));
        assert!(got.contains(&"spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields".to_string()));
        assert!(got.iter().any(|l| l.starts_with("spec.versions: Invalid value: ")
            && l.ends_with(": must have exactly one version marked as storage version")));
    }
}
