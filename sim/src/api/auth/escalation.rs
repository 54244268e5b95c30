//! RBAC's privilege-escalation prevention, as upstream's role and binding storage
//! (pkg/registry/rbac) enforces it on create and update: a Role or ClusterRole may only grant
//! what its author already holds unless they may `escalate` it, and a binding may only bind a
//! role whose rules its author holds unless they may `bind` it. `system:masters` is exempt.
//!
//! The main function is [`check`].

use serde_json::Value;

use super::attributes::Attributes;
use super::rbac::{CLUSTER_ROLES, ROLES, Rule};
use super::user::{MASTERS, UserInfo};
use crate::api::error::ApiError;
use crate::api::registry::ResourceDef;
use crate::api::state::AppState;

/// Refuses the write of an RBAC object `obj` when its author would gain rights by it.
pub fn check(st: &AppState, def: &ResourceDef, obj: &Value, user: &UserInfo) -> Result<(), ApiError> {
    if user.in_group(MASTERS) {
        return Ok(());
    }
    let ns = crate::api::meta::namespace(obj);
    let name = crate::api::meta::name(obj);
    let forbidden = |why: String| {
        ApiError::forbidden(format!(
            "{}.rbac.authorization.k8s.io {name:?} is forbidden: {why}",
            def.plural
        ))
        .with_group_details(def.group, def.plural, name)
    };
    let may = |verb: &str, resource: &str, object: &str, namespace: &str| {
        let a = Attributes {
            verb: verb.into(),
            resource_request: true,
            group: def.group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: object.into(),
            ..Attributes::default()
        };
        st.authz.authorize(&st.store, user, &a).allowed
    };
    let wanted: Vec<Rule> = match def.plural {
        "roles" | "clusterroles" => {
            if may("escalate", def.plural, name, ns) {
                return Ok(());
            }
            if obj.get("aggregationRule").is_some_and(|a| !a.is_null()) {
                // Aggregated roles can gather anything: upstream asks for full authority.
                vec![
                    Rule::from_json(&serde_json::json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})),
                    Rule::from_json(&serde_json::json!({"verbs": ["*"], "nonResourceURLs": ["*"]})),
                ]
            } else {
                rules_of(obj)
            }
        }
        "rolebindings" | "clusterrolebindings" => {
            let kind = obj.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or_default();
            let role = obj.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or_default();
            let (resource, key, role_ns) = if kind == "Role" {
                ("roles", ROLES, ns)
            } else {
                ("clusterroles", CLUSTER_ROLES, "")
            };
            if may("bind", resource, role, ns) {
                return Ok(());
            }
            match st.store.get(key, role_ns, role) {
                Some(r) => rules_of(&r),
                None => {
                    return Err(forbidden(format!(
                        "{}.rbac.authorization.k8s.io {role:?} not found",
                        &resource[..resource.len() - 1]
                    )));
                }
            }
        }
        _ => return Ok(()),
    };
    let held = st.authz.rules_for_namespace(&st.store, user, ns);
    let missing = uncovered(&held, &wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = missing.iter().map(compact).collect();
    Err(forbidden(format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        go_quoted(&user.groups),
        lines.join("\n")
    )))
}

fn rules_of(obj: &Value) -> Vec<Rule> {
    obj.get("rules")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(Rule::from_json).collect())
        .unwrap_or_default()
}

/// Go's `%q` of a string slice: `["a" "b"]`.
fn go_quoted(items: &[String]) -> String {
    let inner: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", inner.join(" "))
}

/// Upstream's `PolicyRule.CompactString`.
fn compact(r: &Rule) -> String {
    let mut parts = Vec::new();
    for (label, v) in [
        ("APIGroups", &r.api_groups),
        ("Resources", &r.resources),
        ("NonResourceURLs", &r.non_resource_urls),
        ("ResourceNames", &r.resource_names),
        ("Verbs", &r.verbs),
    ] {
        if !v.is_empty() {
            parts.push(format!("{label}:{}", go_quoted(v)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// Upstream's `BreakdownRule`: one rule per verb, group, resource and name (or URL).
fn breakdown(r: &Rule) -> Vec<Rule> {
    let mut out = Vec::new();
    let one = |s: &String| vec![s.clone()];
    for g in &r.api_groups {
        for res in &r.resources {
            for v in &r.verbs {
                if r.resource_names.is_empty() {
                    out.push(Rule {
                        api_groups: one(g),
                        resources: one(res),
                        verbs: one(v),
                        ..Rule::default()
                    });
                }
                for n in &r.resource_names {
                    out.push(Rule {
                        api_groups: one(g),
                        resources: one(res),
                        resource_names: one(n),
                        verbs: one(v),
                        ..Rule::default()
                    });
                }
            }
        }
    }
    for u in &r.non_resource_urls {
        for v in &r.verbs {
            out.push(Rule {
                non_resource_urls: one(u),
                verbs: one(v),
                ..Rule::default()
            });
        }
    }
    out
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], items: &[String]) -> bool {
    items.iter().all(|i| has(set, i))
}

/// Upstream's `ruleCovers`.
fn covers(owner: &Rule, sub: &Rule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &sub.api_groups);
    let resources = has(&owner.resources, "*")
        || sub.resources.iter().all(|path| {
            has(&owner.resources, path)
                || path
                    .split_once('/')
                    .is_some_and(|(_, subres)| has(&owner.resources, &format!("*/{subres}")))
        });
    let urls = sub.non_resource_urls.iter().all(|u| {
        owner
            .non_resource_urls
            .iter()
            .any(|o| o == u || o.strip_suffix('*').is_some_and(|p| u.starts_with(p)))
    });
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && urls && names
}

/// The broken-down rules of `wanted` no rule of `held` covers, compacted per group and
/// resource as upstream's `CompactRules` does and sorted by their compact form.
fn uncovered(held: &[Rule], wanted: &[Rule]) -> Vec<Rule> {
    let mut missing: Vec<Rule> = Vec::new();
    for w in wanted {
        for atom in breakdown(w) {
            if held.iter().any(|h| covers(h, &atom)) {
                continue;
            }
            let same = missing.iter_mut().find(|m| {
                m.resource_names.is_empty()
                    && atom.resource_names.is_empty()
                    && m.non_resource_urls.is_empty()
                    && atom.non_resource_urls.is_empty()
                    && m.api_groups == atom.api_groups
                    && m.resources == atom.resources
            });
            match same {
                Some(m) if !has(&m.verbs, &atom.verbs[0]) => m.verbs.push(atom.verbs[0].clone()),
                Some(_) => {}
                None => missing.push(atom),
            }
        }
    }
    missing.sort_by_key(compact);
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(v: Value) -> Rule {
        Rule::from_json(&v)
    }

    #[test]
    fn coverage_follows_upstream() {
        let held = [
            rule(json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "*/log"]})),
            rule(json!({"verbs": ["get"], "nonResourceURLs": ["/api/*"]})),
        ];
        let wanted = [
            rule(json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "pods/log"]})),
            rule(json!({"verbs": ["get"], "nonResourceURLs": ["/api/v1"]})),
        ];
        assert!(uncovered(&held, &wanted).is_empty());
        let wanted = [rule(
            json!({"verbs": ["create", "delete", "get"], "apiGroups": ["", "apps"], "resources": ["pods"]}),
        )];
        let missing: Vec<String> = uncovered(&held, &wanted).iter().map(compact).collect();
        assert_eq!(
            missing,
            [
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["create" "delete"]}"#,
                r#"{APIGroups:["apps"], Resources:["pods"], Verbs:["create" "delete" "get"]}"#
            ]
        );
        let named = [rule(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]}),
        )];
        assert!(!covers(&named[0], &breakdown(&wanted[0])[0]));
        assert!(uncovered(&held, &named).is_empty());
    }
}
