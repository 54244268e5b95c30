//! RBAC: whether a user's bindings grant a request, as upstream's RBAC authorizer
//! (plugin/pkg/auth/authorizer/rbac) decides it, plus the `system:masters` superuser group.
//!
//! The main structure is [`Authorizer`]. Authorisation is on every request's path, so the
//! rules a user holds are gathered once (walking every binding) and cached per user (name and
//! groups); the cache is keyed on the store's RBAC write counter, so any write to a Role,
//! ClusterRole or binding makes the next request of every user regather.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::attributes::Attributes;
use super::user::{MASTERS, UserInfo};
use crate::api::store::Store;

/// Storage keys of the RBAC resources (`group/plural`).
pub const ROLES: &str = "rbac.authorization.k8s.io/roles";
/// See [`ROLES`].
pub const CLUSTER_ROLES: &str = "rbac.authorization.k8s.io/clusterroles";
/// See [`ROLES`].
pub const ROLE_BINDINGS: &str = "rbac.authorization.k8s.io/rolebindings";
/// See [`ROLES`].
pub const CLUSTER_ROLE_BINDINGS: &str = "rbac.authorization.k8s.io/clusterrolebindings";

/// Most users cached at once; past it the cache starts over (users are few in practice).
const CACHE_CAP: usize = 4096;

/// One PolicyRule.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rule {
    /// `verbs`.
    pub verbs: Vec<String>,
    /// `apiGroups`.
    pub api_groups: Vec<String>,
    /// `resources` (`pods`, `pods/log`, `*`, `*/scale`).
    pub resources: Vec<String>,
    /// `resourceNames`.
    pub resource_names: Vec<String>,
    /// `nonResourceURLs` (`/healthz`, `/api/*`, `*`).
    pub non_resource_urls: Vec<String>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default()
}

impl Rule {
    /// A rule from its JSON form.
    pub fn from_json(v: &Value) -> Self {
        Rule {
            verbs: strings(v.get("verbs")),
            api_groups: strings(v.get("apiGroups")),
            resources: strings(v.get("resources")),
            resource_names: strings(v.get("resourceNames")),
            non_resource_urls: strings(v.get("nonResourceURLs")),
        }
    }

    /// Upstream's `RuleAllows`.
    pub fn allows(&self, a: &Attributes) -> bool {
        if !self.verbs.iter().any(|v| v == "*" || *v == a.verb) {
            return false;
        }
        if a.resource_request {
            let combined = a.resource_and_sub();
            self.api_groups.iter().any(|g| g == "*" || *g == a.group)
                && self
                    .resources
                    .iter()
                    .any(|r| resource_matches(r, &combined, &a.subresource))
                && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
        } else {
            self.non_resource_urls.iter().any(|u| url_matches(u, &a.path))
        }
    }
}

fn resource_matches(rule: &str, combined: &str, sub: &str) -> bool {
    if rule == "*" || rule == combined {
        return true;
    }
    !sub.is_empty() && rule.len() == sub.len() + 2 && rule.starts_with("*/") && rule.ends_with(sub)
}

fn url_matches(rule: &str, path: &str) -> bool {
    if rule == "*" || rule == path {
        return true;
    }
    rule.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
}

/// A rule and upstream's reason for allowing by it (`RBAC: allowed by ...`), built once when
/// the user's rules are gathered so the hot path only clones an `Arc`.
#[derive(Debug, Clone)]
struct Grant {
    rule: Rule,
    reason: Arc<str>,
}

/// Everything a user's bindings grant: cluster-wide, and per namespace.
#[derive(Debug, Default)]
struct UserRules {
    cluster: Vec<Grant>,
    namespaced: HashMap<String, Vec<Grant>>,
    /// Bindings whose role is missing: upstream reports them as the reason of a denial.
    cluster_errors: Vec<String>,
    namespaced_errors: HashMap<String, Vec<String>>,
}

/// The authorizer's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// Upstream's reason (`RBAC: allowed by ...`, or why rules could not be read).
    pub reason: Arc<str>,
}

/// The RBAC authorizer with its per-user cache.
#[derive(Debug, Default)]
pub struct Authorizer {
    cache: Mutex<HashMap<String, (u64, Arc<UserRules>)>>,
}

fn cache_key(u: &UserInfo) -> String {
    let mut k = u.name.clone();
    for g in &u.groups {
        k.push('\0');
        k.push_str(g);
    }
    k
}

/// Whether a binding subject names the user, as upstream's `appliesToUser`.
fn applies_to(s: &Value, u: &UserInfo, binding_ns: &str) -> bool {
    let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
    match s.get("kind").and_then(Value::as_str).unwrap_or_default() {
        "User" => u.name == name,
        "Group" => u.in_group(name),
        "ServiceAccount" => {
            let ns = s
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            super::user::split_sa_user(&u.name) == Some((ns, name))
        }
        _ => false,
    }
}

/// Upstream's `describeSubject`.
fn describe_subject(s: &Value, binding_ns: &str) -> String {
    let kind = s.get("kind").and_then(Value::as_str).unwrap_or_default();
    let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
    if kind == "ServiceAccount" {
        let ns = s
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_ns);
        format!("{kind} {:?}", format!("{name}/{ns}"))
    } else {
        format!("{kind} {name:?}")
    }
}

fn rules_of(role: &Value) -> Vec<Rule> {
    role.get("rules")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(Rule::from_json).collect())
        .unwrap_or_default()
}

impl Authorizer {
    fn rules_for(&self, store: &Store, u: &UserInfo) -> Arc<UserRules> {
        let generation = store.rbac_writes();
        let key = cache_key(u);
        if let Some((g, r)) = self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key)
            && *g == generation
        {
            return r.clone();
        }
        let rules = Arc::new(gather(store, u));
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_CAP {
            cache.clear();
        }
        cache.insert(key, (generation, rules.clone()));
        rules
    }

    /// Upstream's union of the `system:masters` authorizer and RBAC.
    pub fn authorize(&self, store: &Store, u: &UserInfo, a: &Attributes) -> Decision {
        if u.in_group(MASTERS) {
            return Decision {
                allowed: true,
                reason: Arc::from(""),
            };
        }
        let rules = self.rules_for(store, u);
        let ns_grants = (!a.namespace.is_empty())
            .then(|| rules.namespaced.get(&a.namespace))
            .flatten();
        let found = rules
            .cluster
            .iter()
            .chain(ns_grants.into_iter().flatten())
            .find(|g| g.rule.allows(a));
        if let Some(g) = found {
            return Decision {
                allowed: true,
                reason: g.reason.clone(),
            };
        }
        let mut errors = rules.cluster_errors.clone();
        if !a.namespace.is_empty() {
            errors.extend(rules.namespaced_errors.get(&a.namespace).cloned().unwrap_or_default());
        }
        let reason = match errors.len() {
            0 => String::new(),
            1 => format!("RBAC: {}", errors[0]),
            _ => format!("RBAC: [{}]", errors.join(", ")),
        };
        Decision {
            allowed: false,
            reason: reason.into(),
        }
    }

    /// The rules the user holds in `namespace` (cluster-wide ones included; `""` for only
    /// those), as upstream's rule resolver `RulesFor` gives them to the escalation check.
    pub fn rules_for_namespace(&self, store: &Store, u: &UserInfo, namespace: &str) -> Vec<Rule> {
        let rules = self.rules_for(store, u);
        let ns = (!namespace.is_empty())
            .then(|| rules.namespaced.get(namespace))
            .flatten();
        rules
            .cluster
            .iter()
            .chain(ns.into_iter().flatten())
            .map(|g| g.rule.clone())
            .collect()
    }

    /// The rules the user holds in `namespace` (cluster-wide ones included), for
    /// SelfSubjectRulesReview: `(resourceRules, nonResourceRules)`.
    pub fn rules_review(&self, store: &Store, u: &UserInfo, namespace: &str) -> (Vec<Value>, Vec<Value>) {
        let mut resource = Vec::new();
        let mut non_resource = Vec::new();
        if u.in_group(MASTERS) {
            resource.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
            non_resource.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
        }
        let rules = self.rules_for(store, u);
        let ns = rules.namespaced.get(namespace);
        for g in rules.cluster.iter().chain(ns.into_iter().flatten()) {
            let r = &g.rule;
            if !r.resources.is_empty() {
                let mut v = json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
                if !r.resource_names.is_empty() {
                    v["resourceNames"] = json!(r.resource_names);
                }
                resource.push(v);
            }
            if !r.non_resource_urls.is_empty() {
                non_resource.push(json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
            }
        }
        (resource, non_resource)
    }
}

/// The Node authorizer, simplified: upstream lets a kubelet (`system:node:NAME` in
/// `system:nodes`) do what the `system:node` ClusterRole lists, and only for its own node's
/// objects (pods bound to it, their secrets and configmaps, its Node and Lease). The
/// simulator grants the role's rules without the per-object graph, which is what the
/// `system:node` ClusterRoleBinding to `system:nodes` did before Kubernetes 1.8.
fn node_rules(store: &Store, u: &UserInfo, out: &mut UserRules) {
    if !(u.name.starts_with("system:node:") && u.in_group("system:nodes")) {
        return;
    }
    if let Some(role) = store.get(CLUSTER_ROLES, "", "system:node") {
        let reason: Arc<str> = Arc::from("");
        out.cluster.extend(rules_of(&role).into_iter().map(|rule| Grant {
            rule,
            reason: reason.clone(),
        }));
    }
}

/// Walks every binding for the user's grants.
fn gather(store: &Store, u: &UserInfo) -> UserRules {
    let mut out = UserRules::default();
    node_rules(store, u, &mut out);
    let (crbs, _) = store.list(CLUSTER_ROLE_BINDINGS, None);
    for b in &crbs {
        let Some(subject) = matching_subject(b, u, "") else {
            continue;
        };
        let bname = crate::api::meta::name(b);
        let role = b.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or_default();
        let kind = b.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or_default();
        match store.get(CLUSTER_ROLES, "", role) {
            Some(r) if kind == "ClusterRole" => {
                let reason: Arc<str> = format!(
                    "RBAC: allowed by ClusterRoleBinding {bname:?} of ClusterRole {role:?} to {}",
                    describe_subject(subject, "")
                )
                .into();
                out.cluster.extend(rules_of(&r).into_iter().map(|rule| Grant {
                    rule,
                    reason: reason.clone(),
                }));
            }
            _ => out
                .cluster_errors
                .push(format!("clusterrole.rbac.authorization.k8s.io {role:?} not found")),
        }
    }
    let (rbs, _) = store.list(ROLE_BINDINGS, None);
    for b in &rbs {
        let ns = crate::api::meta::namespace(b);
        let Some(subject) = matching_subject(b, u, ns) else {
            continue;
        };
        let bname = crate::api::meta::name(b);
        let role = b.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or_default();
        let kind = b.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or_default();
        let found = match kind {
            "ClusterRole" => store.get(CLUSTER_ROLES, "", role),
            "Role" => store.get(ROLES, ns, role),
            _ => None,
        };
        match found {
            Some(r) => {
                let reason: Arc<str> = format!(
                    "RBAC: allowed by RoleBinding {:?} of {kind} {role:?} to {}",
                    format!("{bname}/{ns}"),
                    describe_subject(subject, ns)
                )
                .into();
                out.namespaced
                    .entry(ns.to_string())
                    .or_default()
                    .extend(rules_of(&r).into_iter().map(|rule| Grant {
                        rule,
                        reason: reason.clone(),
                    }));
            }
            None => {
                let what = if kind == "Role" { "role" } else { "clusterrole" };
                out.namespaced_errors
                    .entry(ns.to_string())
                    .or_default()
                    .push(format!("{what}.rbac.authorization.k8s.io {role:?} not found"));
            }
        }
    }
    out
}

fn matching_subject<'a>(binding: &'a Value, u: &UserInfo, ns: &str) -> Option<&'a Value> {
    binding
        .get("subjects")
        .and_then(Value::as_array)?
        .iter()
        .find(|s| applies_to(s, u, ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    fn attrs(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            ..Attributes::default()
        }
    }

    #[test]
    fn kubelets_get_the_system_node_rules_and_others_do_not() {
        let s = Store::new(100);
        s.create(
            CLUSTER_ROLES,
            "",
            "system:node",
            json!({"metadata": {"name": "system:node"},
            "rules": [{"verbs": ["patch"], "apiGroups": [""], "resources": ["nodes/status"]}]}),
        )
        .unwrap();
        let z = Authorizer::default();
        let a = attrs("patch", "", "nodes", "status", "", "win-0");
        let node = UserInfo {
            name: "system:node:win-0".into(),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
            ..UserInfo::default()
        };
        assert!(z.authorize(&s, &node, &a).allowed);
        let impostor = UserInfo {
            name: "system:node:win-0".into(),
            groups: vec!["system:authenticated".into()],
            ..UserInfo::default()
        };
        assert!(!z.authorize(&s, &impostor, &a).allowed);
    }

    #[test]
    fn rule_matching_follows_upstream() {
        let r = Rule::from_json(
            &json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "*/scale"], "resourceNames": ["a"]}),
        );
        assert!(r.allows(&attrs("get", "", "pods", "", "ns", "a")));
        assert!(!r.allows(&attrs("get", "", "pods", "", "ns", "b")));
        assert!(!r.allows(&attrs("list", "", "pods", "", "ns", "")));
        assert!(r.allows(&attrs("get", "", "deployments", "scale", "ns", "a")));
        assert!(!r.allows(&attrs("get", "", "pods", "log", "ns", "a")));
        let u = Rule::from_json(&json!({"verbs": ["get"], "nonResourceURLs": ["/api/*", "/version"]}));
        let path = |p: &str| Attributes {
            verb: "get".into(),
            path: p.into(),
            ..Attributes::default()
        };
        assert!(u.allows(&path("/api/v1")));
        assert!(u.allows(&path("/version")));
        assert!(!u.allows(&path("/healthz")));
    }

    #[test]
    fn bindings_grant_and_cache_follows_writes() {
        let s = Store::new(100);
        s.create(
            ROLES,
            "ns",
            "r",
            json!({"metadata": {"name": "r", "namespace": "ns"},
            "rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}]}),
        )
        .unwrap();
        let u = UserInfo::service_account("ns", "sa", "x");
        let z = Authorizer::default();
        let a = attrs("list", "", "pods", "", "ns", "");
        assert!(!z.authorize(&s, &u, &a).allowed);
        s.create(
            ROLE_BINDINGS,
            "ns",
            "rb",
            json!({"metadata": {"name": "rb", "namespace": "ns"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}),
        )
        .unwrap();
        let d = z.authorize(&s, &u, &a);
        assert!(d.allowed);
        assert_eq!(
            &*d.reason,
            r#"RBAC: allowed by RoleBinding "rb/ns" of Role "r" to ServiceAccount "sa/ns""#
        );
        assert!(!z.authorize(&s, &u, &attrs("list", "", "pods", "", "other", "")).allowed);
        s.remove(ROLES, "ns", "r", None).unwrap();
        let d = z.authorize(&s, &u, &a);
        assert!(!d.allowed);
        assert_eq!(&*d.reason, r#"RBAC: role.rbac.authorization.k8s.io "r" not found"#);
    }
}
