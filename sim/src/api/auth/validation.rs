//! Upstream's validation of RBAC objects (pkg/apis/rbac/validation): rules need verbs and
//! may not mix resources with non-resource URLs, bindings need a supported roleRef that never
//! changes, and subjects need a supported kind, the right apiGroup and a name.
//!
//! The main function is [`validate`].

use serde_json::{Value, json};

use crate::api::error::Cause;
use crate::api::registry::ResourceDef;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn non_empty(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_array).is_some_and(|a| !a.is_empty())
}

/// Validates a Role, ClusterRole, RoleBinding or ClusterRoleBinding (`old` on updates).
pub fn validate(def: &ResourceDef, obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    match def.plural {
        "roles" | "clusterroles" => {
            let namespaced = def.plural == "roles";
            let rules = obj
                .get("rules")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            for (i, r) in rules.iter().enumerate() {
                rule(r, &format!("rules[{i}]"), namespaced, out);
            }
        }
        "rolebindings" | "clusterrolebindings" => binding(def, obj, old, out),
        _ => {}
    }
}

fn rule(r: &Value, path: &str, namespaced: bool, out: &mut Vec<Cause>) {
    if !non_empty(r, "verbs") {
        out.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: verbs must contain at least one value".into(),
            field: format!("{path}.verbs"),
        });
    }
    let urls = non_empty(r, "nonResourceURLs");
    if urls {
        if namespaced {
            out.push(Cause::invalid(
                format!("{path}.nonResourceURLs"),
                &r["nonResourceURLs"],
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if non_empty(r, "apiGroups") || non_empty(r, "resources") || non_empty(r, "resourceNames") {
            out.push(Cause::invalid(
                format!("{path}.nonResourceURLs"),
                &r["nonResourceURLs"],
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    if !non_empty(r, "apiGroups") {
        out.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: resource rules must supply at least one api group".into(),
            field: format!("{path}.apiGroups"),
        });
    }
    if !non_empty(r, "resources") {
        out.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: resource rules must supply at least one resource".into(),
            field: format!("{path}.resources"),
        });
    }
}

fn binding(def: &ResourceDef, obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let cluster = def.plural == "clusterrolebindings";
    let role_ref = obj.get("roleRef").cloned().unwrap_or(Value::Null);
    let group = s(&role_ref, "apiGroup");
    if group != RBAC_GROUP {
        out.push(Cause::not_supported("roleRef.apiGroup", &json!(group), &[RBAC_GROUP]));
    }
    let kind = s(&role_ref, "kind");
    let kinds: &[&str] = if cluster {
        &["ClusterRole"]
    } else {
        &["Role", "ClusterRole"]
    };
    if !kinds.contains(&kind) {
        out.push(Cause::not_supported("roleRef.kind", &json!(kind), kinds));
    }
    if s(&role_ref, "name").is_empty() {
        out.push(Cause::required("roleRef.name"));
    }
    let subjects = obj
        .get("subjects")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for (i, sub) in subjects.iter().enumerate() {
        subject(sub, &format!("subjects[{i}]"), cluster, out);
    }
    if let Some(old) = old
        && old.get("roleRef") != obj.get("roleRef")
    {
        out.push(Cause::invalid("roleRef", &role_ref, "cannot change roleRef"));
    }
}

fn subject(sub: &Value, path: &str, cluster: bool, out: &mut Vec<Cause>) {
    if s(sub, "name").is_empty() {
        out.push(Cause::required(format!("{path}.name")));
    }
    let group = s(sub, "apiGroup");
    match s(sub, "kind") {
        "ServiceAccount" => {
            if !group.is_empty() {
                out.push(Cause::not_supported(format!("{path}.apiGroup"), &json!(group), &[""]));
            }
            if cluster && s(sub, "namespace").is_empty() {
                out.push(Cause::required(format!("{path}.namespace")));
            }
        }
        "User" | "Group" => {
            if group != RBAC_GROUP {
                out.push(Cause::not_supported(
                    format!("{path}.apiGroup"),
                    &json!(group),
                    &[RBAC_GROUP],
                ));
            }
        }
        other => out.push(Cause::not_supported(
            format!("{path}.kind"),
            &json!(other),
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::registry;

    fn def(plural: &str) -> &'static ResourceDef {
        registry::find(RBAC_GROUP, "v1", plural).unwrap()
    }

    #[test]
    fn bindings_keep_their_role_ref_and_name_subjects() {
        let b = json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}]});
        let mut out = Vec::new();
        validate(def("rolebindings"), &b, None, &mut out);
        assert!(out.is_empty(), "{out:?}");
        validate(def("clusterrolebindings"), &b, None, &mut out);
        let fields: Vec<_> = out.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["roleRef.kind", "subjects[0].namespace"]);
        let mut changed = b.clone();
        changed["roleRef"]["name"] = json!("other");
        let mut out = Vec::new();
        validate(def("rolebindings"), &changed, Some(&b), &mut out);
        assert_eq!(
            out[0].message,
            format!("Invalid value: {}: cannot change roleRef", changed["roleRef"])
        );
    }

    #[test]
    fn rules_need_verbs_and_do_not_mix_urls() {
        let mut out = Vec::new();
        let role = json!({"rules": [{"verbs": [], "apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["get"], "nonResourceURLs": ["/x"]}]});
        validate(def("roles"), &role, None, &mut out);
        let fields: Vec<_> = out.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["rules[0].verbs", "rules[1].nonResourceURLs"]);
    }
}
