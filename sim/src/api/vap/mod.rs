//! ValidatingAdmissionPolicy (`admissionregistration.k8s.io/v1`), as kube-apiserver 1.33's
//! `ValidatingAdmissionPolicy` plugin runs it: after the mutating webhooks and object
//! validation, before the validating webhooks. Every binding whose policy matches the request
//! evaluates the policy's CEL validations against `object`, `oldObject`, `request`, `params`,
//! `namespaceObject` and `variables`, and acts on a failure as the binding says: Deny (the
//! request fails), Warn (a `Warning` header), Audit.
//!
//! The main function is [`validate`], which [`super::webhook::validate`] calls first. `config`
//! holds the two kinds' defaults and validation.
//!
//! Deliberately not modelled: the audit log (an Audit action and `auditAnnotations` are logged
//! at info instead: the simulator keeps no audit log), the `authorizer` CEL library and
//! Kubernetes' CEL extension functions (the `cel` crate has the standard library only; an
//! expression using them fails to evaluate and the failure policy decides), CEL cost limits,
//! and type checking against the matched kinds' schemas (`status.typeChecking` is set, with no
//! warnings).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::error::ApiError;
use super::meta;
use super::registry::ResourceDef;
use super::state::AppState;
use super::webhook::matching::{namespace_matches, object_matches, request_var, rule_matches};
use super::webhook::{Attributes, add_warning};

pub mod config;

/// The API group of the policy kinds.
pub const GROUP: &str = "admissionregistration.k8s.io";
/// Plural of the policy kind.
pub const POLICIES: &str = "validatingadmissionpolicies";
/// Plural of the binding kind.
pub const BINDINGS: &str = "validatingadmissionpolicybindings";

/// What one binding decided about the request.
struct Failure {
    message: String,
    reason: String,
}

/// Whether `mr` (a policy's `matchConstraints` or a binding's `matchResources`) covers the
/// request: namespace and object selectors, no exclude rule, and a resource rule (none at all
/// matches everything, upstream's `Matcher.Matches`).
fn resources_match(st: &AppState, mr: &Value, attrs: &Attributes, obj: Option<&Value>) -> Result<bool, ApiError> {
    if !namespace_matches(st, mr, attrs, obj)? || !object_matches(mr, attrs, obj) {
        return Ok(false);
    }
    let named = |rule: &Value| {
        let names: Vec<&str> = rule
            .get("resourceNames")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        (names.is_empty() || names.contains(&attrs.name.as_str())) && rule_matches(rule, attrs, attrs.def)
    };
    let rules = |key: &str| mr.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    if rules("excludeResourceRules").iter().any(named) {
        return Ok(false);
    }
    let include = rules("resourceRules");
    Ok(include.is_empty() || include.iter().any(named))
}

/// A CEL evaluation context with the admission variables.
fn context(
    vars: &[(&str, &Value)],
    variables: &HashMap<String, cel::Value>,
) -> Result<cel::Context<'static, 'static>, String> {
    let mut ctx = cel::Context::default();
    for (name, v) in vars {
        ctx.add_variable_from_value(*name, crate::api::crd::cel::json_to_cel(v));
    }
    ctx.add_variable_from_value("variables", variables.clone());
    Ok(ctx)
}

fn eval(expr: &str, ctx: &cel::Context<'_, '_>) -> Result<cel::Value, String> {
    let program = crate::api::crd::cel::compile(expr).map_err(|e| format!("compilation failed: {e}"))?;
    program.execute(ctx).map_err(|e| e.to_string())
}

/// The params a binding names: `Ok(None)` for a policy without `paramKind`, else the
/// matching objects (empty when none is found).
fn params(st: &AppState, policy: &Value, binding: &Value, attrs: &Attributes) -> Result<Option<Vec<Value>>, String> {
    let Some(kind) = policy.pointer("/spec/paramKind").filter(|k| k.is_object()) else {
        return Ok(None);
    };
    let api_version = kind.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind_name = kind.get("kind").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let def = st
        .crds
        .all()
        .into_iter()
        .find(|d| d.group == group && d.version == version && d.kind == kind_name)
        .ok_or_else(|| {
            format!("failed to find resource referenced by paramKind: '{group}/{version}, Kind={kind_name}'")
        })?;
    let Some(pr) = binding.pointer("/spec/paramRef").filter(|p| p.is_object()) else {
        return Err(format!(
            "ValidatingAdmissionPolicy '{}' has a paramKind but its binding '{}' has no paramRef",
            meta::name(policy),
            meta::name(binding)
        ));
    };
    let ns = if def.namespaced {
        pr.get("namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or(attrs.namespace.as_str())
            .to_string()
    } else {
        String::new()
    };
    let key = def.storage_key();
    if let Some(name) = pr.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        return Ok(Some(st.store.get(&key, &ns, name).into_iter().collect()));
    }
    let sel = crate::api::selector::LabelSelector::from_object(pr.get("selector").unwrap_or(&json!({})));
    let (all, _) = st.store.list(&key, def.namespaced.then_some(ns.as_str()));
    Ok(Some(all.into_iter().filter(|o| sel.matches(o)).collect()))
}

/// Evaluates `policy` for one set of params (or none): match conditions, variables, then the
/// validations; `Ok(None)` when the request passes (or a match condition excludes it).
fn evaluate(policy: &Value, base: &[(&str, &Value)], param: &Value) -> Result<Option<Failure>, String> {
    let mut vars: Vec<(&str, &Value)> = base.to_vec();
    vars.push(("params", param));
    let mut variables: HashMap<String, cel::Value> = HashMap::new();
    let spec = policy.get("spec").cloned().unwrap_or(json!({}));
    let list = |key: &str| spec.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    for c in list("matchConditions") {
        let expr = c.get("expression").and_then(Value::as_str).unwrap_or_default();
        let ctx = context(&vars, &variables)?;
        match eval(expr, &ctx) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => return Ok(None),
            Ok(other) => return Err(format!("matchCondition '{expr}' must evaluate to bool, got {other:?}")),
            Err(e) => return Err(format!("expression '{expr}' resulted in error: {e}")),
        }
    }
    for v in list("variables") {
        let name = v.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        let expr = v.get("expression").and_then(Value::as_str).unwrap_or_default();
        let ctx = context(&vars, &variables)?;
        let value = eval(expr, &ctx).map_err(|e| format!("expression '{expr}' resulted in error: {e}"))?;
        variables.insert(name, value);
    }
    for v in list("validations") {
        let expr = v.get("expression").and_then(Value::as_str).unwrap_or_default();
        let ctx = context(&vars, &variables)?;
        match eval(expr, &ctx) {
            Ok(cel::Value::Bool(true)) => continue,
            Ok(cel::Value::Bool(false)) => {}
            Ok(other) => return Err(format!("expression '{expr}' must evaluate to bool, got {other:?}")),
            Err(e) => return Err(format!("expression '{expr}' resulted in error: {e}")),
        }
        let fixed = v.get("message").and_then(Value::as_str).filter(|m| !m.is_empty());
        let from_expr = v
            .get("messageExpression")
            .and_then(Value::as_str)
            .and_then(|me| match eval(me, &ctx) {
                Ok(cel::Value::String(s)) if !s.trim().is_empty() => Some(s.to_string()),
                _ => None,
            });
        let message = from_expr
            .or_else(|| fixed.map(String::from))
            .unwrap_or_else(|| format!("failed expression: {expr}"));
        let reason = v.get("reason").and_then(Value::as_str).unwrap_or("Invalid").to_string();
        return Ok(Some(Failure { message, reason }));
    }
    Ok(None)
}

/// The type-checking controller's part: after a policy is written, its status records the
/// generation it has seen and the (empty: see the module doc) type-checking result, as
/// upstream's controller does moments after each write; clients such as the conformance case
/// wait for `status.typeChecking`.
pub fn after_write(st: &AppState, def: &ResourceDef, name: &str) {
    if (def.group, def.plural) != (GROUP, POLICIES) {
        return;
    }
    let key = def.storage_key();
    let Some(policy) = st.store.get(&key, "", name) else {
        return;
    };
    let generation = policy
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if policy.pointer("/status/observedGeneration").and_then(Value::as_i64) == Some(generation) {
        return;
    }
    let mut new = policy.clone();
    new["status"] = json!({"observedGeneration": generation, "typeChecking": {}});
    if let Err(e) = st.store.update(&key, "", name, new, Some(super::store::rv_of(&policy))) {
        // Another write got in first; its own after_write records the newer generation.
        tracing::debug!(policy = name, error = ?e, "policy status not recorded");
    }
}

/// Upstream's `reasonToCode`.
fn code_of(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// The policies' verdict on the request (`obj` absent for deletes).
pub fn validate(st: &AppState, attrs: &Attributes, obj: Option<&Value>) -> Result<(), ApiError> {
    if attrs.def.group == GROUP || crate::api::admission::plugin_off(st, "ValidatingAdmissionPolicy") {
        return Ok(());
    }
    let (mut bindings, _) = st.store.list(&format!("{GROUP}/{BINDINGS}"), None);
    if bindings.is_empty() {
        return Ok(());
    }
    bindings.sort_by(|a, b| meta::name(a).cmp(meta::name(b)));
    let (policies, _) = st.store.list(&format!("{GROUP}/{POLICIES}"), None);
    let namespace_obj = if attrs.namespace.is_empty() {
        Value::Null
    } else {
        st.store.get("/namespaces", "", &attrs.namespace).unwrap_or(Value::Null)
    };
    let request = request_var(attrs, attrs.def);
    let object = obj.cloned().unwrap_or(Value::Null);
    let old = attrs.old.clone().unwrap_or(Value::Null);
    let base: [(&str, &Value); 4] = [
        ("object", &object),
        ("oldObject", &old),
        ("request", &request),
        ("namespaceObject", &namespace_obj),
    ];
    for binding in &bindings {
        let policy_name = binding
            .pointer("/spec/policyName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(policy) = policies.iter().find(|p| meta::name(p) == policy_name) else {
            continue;
        };
        let matches = match policy.pointer("/spec/matchConstraints") {
            Some(mc) => resources_match(st, mc, attrs, obj)?,
            None => false,
        };
        let matches = matches
            && match binding.pointer("/spec/matchResources").filter(|m| m.is_object()) {
                Some(mr) => resources_match(st, mr, attrs, obj)?,
                None => true,
            };
        if !matches {
            continue;
        }
        let ignore = policy.pointer("/spec/failurePolicy").and_then(Value::as_str) == Some("Ignore");
        let failure = match params(st, policy, binding, attrs) {
            Err(e) => Some(Err(e)),
            Ok(None) => evaluate(policy, &base, &Value::Null).transpose(),
            Ok(Some(found)) if found.is_empty() => {
                let action = binding
                    .pointer("/spec/paramRef/parameterNotFoundAction")
                    .and_then(Value::as_str)
                    .unwrap_or("Deny");
                (action == "Deny").then(|| {
                    Ok(Failure {
                        message: "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
                        reason: "Invalid".into(),
                    })
                })
            }
            Ok(Some(found)) => found.iter().find_map(|p| evaluate(policy, &base, p).transpose()),
        };
        let failure = match failure {
            None => continue,
            Some(Ok(f)) => f,
            Some(Err(_)) if ignore => continue,
            Some(Err(e)) => Failure {
                message: e,
                reason: "Invalid".into(),
            },
        };
        act(policy, binding, attrs, failure)?;
    }
    Ok(())
}

/// Applies the binding's validation actions to a failure.
fn act(policy: &Value, binding: &Value, attrs: &Attributes, failure: Failure) -> Result<(), ApiError> {
    let (p, b) = (meta::name(policy), meta::name(binding));
    let actions: Vec<&str> = binding
        .pointer("/spec/validationActions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if actions.contains(&"Warn") {
        add_warning(format!(
            "Validation failed for ValidatingAdmissionPolicy '{p}' with binding '{b}': {}",
            failure.message
        ));
    }
    if actions.contains(&"Audit") {
        tracing::info!(policy = p, binding = b, message = %failure.message, "validation failure (Audit action; no audit log here)");
    }
    if actions.contains(&"Deny") {
        let message = format!(
            "ValidatingAdmissionPolicy '{p}' with binding '{b}' denied request: {}",
            failure.message
        );
        return Err(denial(attrs, &failure.reason, message));
    }
    Ok(())
}

/// Upstream's `admission.NewForbidden` with the policy's reason and code, and the message as
/// the one cause.
fn denial(attrs: &Attributes, reason: &str, message: String) -> ApiError {
    let def: &ResourceDef = attrs.def;
    let resource = if def.group.is_empty() {
        def.plural.to_string()
    } else {
        format!("{}.{}", def.plural, def.group)
    };
    let mut e = ApiError::forbidden(format!("{resource} {:?} is forbidden: {message}", attrs.name)).with_group_details(
        def.group,
        def.plural,
        &attrs.name,
    );
    e.code = code_of(reason);
    e.reason = std::borrow::Cow::Owned(reason.to_string());
    if let Some(d) = e.details.as_mut().and_then(Value::as_object_mut) {
        d.insert("causes".into(), json!([{"message": message}]));
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_validations_carry_message_message_expression_or_the_expression() {
        let obj = json!({"spec": {"replicas": 6}});
        let null = Value::Null;
        let base: [(&str, &Value); 4] = [
            ("object", &obj),
            ("oldObject", &null),
            ("request", &null),
            ("namespaceObject", &null),
        ];
        let policy = |v: Value| json!({"spec": {"validations": [v]}});
        let f = evaluate(
            &policy(json!({"expression": "object.spec.replicas <= 5"})),
            &base,
            &null,
        )
        .unwrap()
        .unwrap();
        assert_eq!(f.message, "failed expression: object.spec.replicas <= 5");
        assert_eq!(f.reason, "Invalid");
        let f = evaluate(
            &policy(json!({"expression": "object.spec.replicas <= 5", "message": "too many",
                "messageExpression": "'replicas: ' + string(object.spec.replicas)", "reason": "Forbidden"})),
            &base,
            &null,
        )
        .unwrap()
        .unwrap();
        assert_eq!((f.message.as_str(), f.reason.as_str()), ("replicas: 6", "Forbidden"));
        assert!(
            evaluate(
                &policy(json!({"expression": "object.spec.replicas <= 10"})),
                &base,
                &null
            )
            .unwrap()
            .is_none()
        );
    }

    #[test]
    fn params_variables_and_match_conditions_feed_the_validations() {
        let obj = json!({"spec": {"replicas": 6}});
        let null = Value::Null;
        let base: [(&str, &Value); 4] = [
            ("object", &obj),
            ("oldObject", &null),
            ("request", &null),
            ("namespaceObject", &null),
        ];
        let policy = json!({"spec": {
            "matchConditions": [{"name": "has-spec", "expression": "has(object.spec)"}],
            "variables": [{"name": "limit", "expression": "int(params.data.max)"}],
            "validations": [{"expression": "object.spec.replicas <= variables.limit"}]}});
        let small = json!({"data": {"max": "3"}});
        let large = json!({"data": {"max": "9"}});
        assert!(evaluate(&policy, &base, &small).unwrap().is_some());
        assert!(evaluate(&policy, &base, &large).unwrap().is_none());
        let skipped = json!({"spec": {"matchConditions": [{"name": "never", "expression": "false"}],
            "validations": [{"expression": "false"}]}});
        assert!(evaluate(&skipped, &base, &null).unwrap().is_none());
        let broken = json!({"spec": {"validations": [{"expression": "object.nope.deeper == 1"}]}});
        assert!(evaluate(&broken, &base, &null).is_err());
    }

    #[test]
    fn reasons_map_to_upstreams_codes() {
        assert_eq!(code_of("Invalid"), 422);
        assert_eq!(code_of("Forbidden"), 403);
        assert_eq!(code_of("Unauthorized"), 401);
        assert_eq!(code_of("RequestEntityTooLarge"), 413);
    }
}
