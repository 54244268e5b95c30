//! Which webhooks a request is sent to, decided in upstream's order: rules (with
//! `matchPolicy: Equivalent` trying the other served versions of the same resource), then
//! `namespaceSelector`, `objectSelector` and last the CEL `matchConditions`
//! (`generic.Webhook.ShouldCallHook`).

use serde_json::{Value, json};

use super::{Attributes, Operation};
use crate::api::error::{ApiError, ApiResult};
use crate::api::registry::ResourceDef;
use crate::api::selector::LabelSelector;
use crate::api::state::AppState;

/// A webhook chosen for a request, with the resource version it is called for.
pub struct Invocation {
    /// The resource the webhook matched: the request's, or an equivalent one.
    pub def: &'static ResourceDef,
}

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether one `RuleWithOperations` covers the request made through `def`.
pub(crate) fn rule_matches(rule: &Value, attrs: &Attributes, def: &ResourceDef) -> bool {
    let any = |list: &[&str], want: &str| list.iter().any(|x| *x == "*" || *x == want);
    if !any(&strs(rule.get("operations")), attrs.op.as_str())
        || !any(&strs(rule.get("apiGroups")), def.group)
        || !any(&strs(rule.get("apiVersions")), def.version)
    {
        return false;
    }
    // Upstream: a namespace is cluster-scoped, whatever namespace the request names.
    let cluster_scoped = attrs.namespace.is_empty() || (def.group.is_empty() && def.plural == "namespaces");
    let scope_ok = match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "Cluster" => cluster_scoped,
        "Namespaced" => !cluster_scoped,
        _ => true,
    };
    if !scope_ok {
        return false;
    }
    strs(rule.get("resources")).iter().any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r, ""));
        let res_ok = res == "*" || res == def.plural;
        let sub_ok = if sub.is_empty() {
            attrs.sub.is_empty()
        } else {
            sub == "*" || sub == attrs.sub
        };
        // A lone `*` is every resource without its subresources; `x/*` is x and all of its
        // subresources (upstream's `rules.Matcher`).
        res_ok && sub_ok
    })
}

/// Whether any rule of `hook` covers the request made through `def`.
fn rules_match(hook: &Value, attrs: &Attributes, def: &ResourceDef) -> bool {
    hook.get("rules")
        .and_then(Value::as_array)
        .is_some_and(|rs| rs.iter().any(|r| rule_matches(r, attrs, def)))
}

/// The resource the webhook is called for: the request's own when a rule covers it, else
/// (under `matchPolicy: Equivalent`) another served version of the same stored resource.
fn matched_resource(st: &AppState, hook: &Value, attrs: &Attributes) -> Option<&'static ResourceDef> {
    if rules_match(hook, attrs, attrs.def) {
        return Some(attrs.def);
    }
    if hook.get("matchPolicy").and_then(Value::as_str) == Some("Exact") {
        return None;
    }
    let key = attrs.def.storage_key();
    st.crds
        .all()
        .into_iter()
        .filter(|d| !std::ptr::eq(*d, attrs.def) && d.storage_key() == key)
        .find(|d| rules_match(hook, attrs, d))
}

/// `namespaceSelector`: cluster-scoped requests other than for namespaces always match; a
/// namespace being created or updated is judged by its own labels, other requests by their
/// namespace's stored labels (a namespace that does not exist is upstream's 404).
pub(crate) fn namespace_matches(
    st: &AppState,
    hook: &Value,
    attrs: &Attributes,
    obj: Option<&Value>,
) -> ApiResult<bool> {
    let is_ns = attrs.def.group.is_empty() && attrs.def.plural == "namespaces";
    if attrs.namespace.is_empty() && !is_ns {
        return Ok(true);
    }
    let sel = LabelSelector::from_object(hook.get("namespaceSelector").unwrap_or(&json!({})));
    if sel.is_empty() {
        return Ok(true);
    }
    if is_ns
        && matches!(attrs.op, Operation::Create | Operation::Update)
        && let Some(o) = obj
    {
        return Ok(sel.matches(o));
    }
    let name = if is_ns { &attrs.name } else { &attrs.namespace };
    match st.store.get("/namespaces", "", name) {
        Some(ns) => Ok(sel.matches(&ns)),
        None => Err(ApiError::not_found("", "namespaces", name)),
    }
}

/// `objectSelector`: the new or the old object's labels match (an absent object is unlabelled).
pub(crate) fn object_matches(hook: &Value, attrs: &Attributes, obj: Option<&Value>) -> bool {
    let sel = LabelSelector::from_object(hook.get("objectSelector").unwrap_or(&json!({})));
    if sel.is_empty() {
        return true;
    }
    let labelled = |o: &Value| o.pointer("/metadata").is_some() && sel.matches(o);
    obj.is_some_and(labelled) || attrs.old.as_ref().is_some_and(labelled)
}

/// The `request` variable of a match condition, as upstream builds it from the attributes.
pub(crate) fn request_var(attrs: &Attributes, def: &ResourceDef) -> Value {
    let (kind, request_kind) = attrs.kinds(def);
    json!({
        "kind": kind,
        "resource": {"group": def.group, "version": def.version, "resource": def.plural},
        "subResource": attrs.sub,
        "requestKind": request_kind,
        "requestResource": {"group": attrs.def.group, "version": attrs.def.version, "resource": attrs.def.plural},
        "requestSubResource": attrs.sub,
        "name": attrs.name,
        "namespace": attrs.namespace,
        "operation": attrs.op.as_str(),
        "userInfo": super::call::user_info(&attrs.user),
        "dryRun": attrs.dry_run,
        "options": attrs.options,
    })
}

/// Why a match condition could not be evaluated.
#[derive(Debug, thiserror::Error)]
enum ConditionError {
    #[error("compilation failed: {0}")]
    Compile(String),
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Eval(String),
    #[error("expression must evaluate to bool, got {0}")]
    NotBool(String),
}

/// Evaluates one condition on `object`, `oldObject` and `request` (no `authorizer`: the
/// simulator has no CEL authorizer library).
fn condition(expr: &str, obj: Option<&Value>, old: Option<&Value>, request: &Value) -> Result<bool, ConditionError> {
    let program = crate::api::crd::cel::compile(expr).map_err(ConditionError::Compile)?;
    let mut ctx = cel::Context::default();
    for (name, v) in [
        ("object", obj.cloned().unwrap_or(Value::Null)),
        ("oldObject", old.cloned().unwrap_or(Value::Null)),
        ("request", request.clone()),
    ] {
        ctx.add_variable(name, v)
            .map_err(|e| ConditionError::Input(e.to_string()))?;
    }
    match program.execute(&ctx) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(ConditionError::NotBool(format!("{other:?}"))),
        Err(e) => Err(ConditionError::Eval(e.to_string())),
    }
}

/// Whether `hook` is called for the request; `Err` when a match condition fails to evaluate
/// under `failurePolicy: Fail` (upstream answers 403 naming the condition).
pub fn should_call(
    st: &AppState,
    hook: &Value,
    attrs: &Attributes,
    obj: Option<&Value>,
) -> ApiResult<Option<Invocation>> {
    let Some(def) = matched_resource(st, hook, attrs) else {
        return Ok(None);
    };
    if !namespace_matches(st, hook, attrs, obj)? || !object_matches(hook, attrs, obj) {
        return Ok(None);
    }
    let conditions = hook
        .get("matchConditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !conditions.is_empty() {
        let request = request_var(attrs, def);
        let ignore = hook.get("failurePolicy").and_then(Value::as_str) == Some("Ignore");
        let mut errors = Vec::new();
        for c in &conditions {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            let expr = c.get("expression").and_then(Value::as_str).unwrap_or_default();
            match condition(expr, obj, attrs.old.as_ref(), &request) {
                // One false condition skips the webhook, whatever errors others had.
                Ok(false) => return Ok(None),
                Ok(true) => {}
                Err(e) => errors.push(format!("failed to evaluate match condition {name:?}: {e}")),
            }
        }
        if !errors.is_empty() {
            let hook_name = hook.get("name").and_then(Value::as_str).unwrap_or_default();
            tracing::warn!(webhook = hook_name, errors = ?errors, "match conditions failed to evaluate");
            if ignore {
                return Ok(None);
            }
            let name = if attrs.name.is_empty() {
                "Unknown"
            } else {
                attrs.name.as_str()
            };
            return Err(ApiError::forbidden(format!(
                "{} {name:?} is forbidden: {}",
                super::qualified(attrs.def),
                errors.join(", ")
            ))
            .with_group_details(attrs.def.group, attrs.def.plural, name));
        }
    }
    Ok(Some(Invocation { def }))
}

impl Operation {
    /// The name AdmissionReview and rules use.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::registry;

    fn attrs(plural: &str, sub: &str, ns: &str, op: Operation) -> Attributes {
        let def = registry::find("", "v1", plural).unwrap();
        let mut a = Attributes::new(def, op, ns, "x");
        a.sub = sub.to_string();
        a
    }

    fn rule(ops: &[&str], resources: &[&str], scope: &str) -> Value {
        json!({"operations": ops, "apiGroups": [""], "apiVersions": ["v1"], "resources": resources, "scope": scope})
    }

    #[test]
    fn resources_and_subresources_match_as_upstream() {
        let pod = attrs("pods", "", "ns", Operation::Create);
        let status = attrs("pods", "status", "ns", Operation::Update);
        let def = pod.def;
        assert!(rule_matches(&rule(&["CREATE"], &["pods"], "*"), &pod, def));
        assert!(!rule_matches(&rule(&["UPDATE"], &["pods"], "*"), &pod, def));
        assert!(rule_matches(&rule(&["*"], &["*"], "*"), &pod, def));
        // `*` and `pods` leave subresources out; `pods/*` and `*/*` take them in.
        assert!(!rule_matches(&rule(&["*"], &["*"], "*"), &status, def));
        assert!(!rule_matches(&rule(&["*"], &["pods"], "*"), &status, def));
        assert!(rule_matches(&rule(&["*"], &["pods/*"], "*"), &status, def));
        assert!(rule_matches(&rule(&["*"], &["*/status"], "*"), &status, def));
        assert!(rule_matches(&rule(&["*"], &["*/*"], "*"), &status, def));
        // Upstream's `sub == "*" || sub == opSub`: `pods/*` covers the pod itself too.
        assert!(rule_matches(&rule(&["*"], &["pods/*"], "*"), &pod, def));
    }

    #[test]
    fn scope_sees_namespaces_as_cluster_scoped() {
        let ns = attrs("namespaces", "", "", Operation::Create);
        let pod = attrs("pods", "", "ns", Operation::Create);
        assert!(rule_matches(&rule(&["*"], &["*"], "Cluster"), &ns, ns.def));
        assert!(!rule_matches(&rule(&["*"], &["*"], "Namespaced"), &ns, ns.def));
        assert!(rule_matches(&rule(&["*"], &["*"], "Namespaced"), &pod, pod.def));
        assert!(!rule_matches(&rule(&["*"], &["*"], "Cluster"), &pod, pod.def));
    }

    #[test]
    fn object_selector_takes_the_old_or_the_new_labels() {
        let hook = json!({"objectSelector": {"matchLabels": {"a": "b"}}});
        let mut a = attrs("configmaps", "", "ns", Operation::Update);
        let labelled = json!({"metadata": {"labels": {"a": "b"}}});
        let plain = json!({"metadata": {}});
        assert!(object_matches(&hook, &a, Some(&labelled)));
        assert!(!object_matches(&hook, &a, Some(&plain)));
        a.old = Some(labelled);
        assert!(object_matches(&hook, &a, Some(&plain)));
    }

    #[test]
    fn match_conditions_see_object_and_request() {
        let req = json!({"operation": "CREATE", "name": "x"});
        let obj = json!({"metadata": {"name": "x"}});
        assert!(
            condition(
                "object.metadata.name == 'x' && request.operation == 'CREATE'",
                Some(&obj),
                None,
                &req
            )
            .unwrap()
        );
        assert!(
            !condition(
                "oldObject == null && object.metadata.name == 'y'",
                Some(&obj),
                None,
                &req
            )
            .unwrap()
        );
        assert!(matches!(
            condition("1 + 1", Some(&obj), None, &req),
            Err(ConditionError::NotBool(_))
        ));
    }
}
