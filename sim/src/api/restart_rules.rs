//! A pod container's own `restartPolicy` and `restartPolicyRules` (KEP-5307, feature gate
//! `ContainerRestartRules`) as the API server treats them.
//!
//! kube-apiserver 1.33 has neither: `restartPolicyRules` is an unknown field its decoder prunes,
//! and `restartPolicy` is allowed on init containers only (`validateContainers`: "may not be
//! set for non-init containers"). The simulator is a 1.33 server, so that is its behaviour with
//! the gate off. With the gate on it behaves as 1.34 does with the gate on:
//! - the typed (1.33) round trip of the decoder would drop `restartPolicyRules`, so
//!   [`restore`] puts each container's rules back after it, checked against the 1.34 types
//!   (`ContainerRestartRule`, `ContainerRestartRuleOnExitCodes`) so a misspelt key inside a rule
//!   is still an unknown field and a wrongly typed value still a decoding error;
//! - [`rules`] is upstream's `validateContainerRestartPolicy` for regular containers, and for
//!   regular init containers that carry rules.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::Cause;
use crate::gates::{CONTAINER_RESTART_RULES, FeatureGates};

/// The container lists of a pod spec that may carry a container-level restart policy.
const CONTAINER_KEYS: [&str; 2] = ["initContainers", "containers"];

/// Upstream's `validContainerRestartPolicies` order.
const POLICIES: &[&str] = &["Always", "OnFailure", "Never"];

/// Upstream's limit on the rules of one container.
const MAX_RULES: usize = 20;

/// Upstream's limit on the exit codes of one rule.
const MAX_EXIT_CODES: usize = 255;

/// `core/v1.ContainerRestartRule` of 1.34 (the decoder's view: unknown keys are dropped, the
/// known ones typed).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleDe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit_codes: Option<ExitCodesDe>,
}

/// `core/v1.ContainerRestartRuleOnExitCodes` of 1.34.
#[derive(Debug, Serialize, Deserialize)]
struct ExitCodesDe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    operator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    values: Option<Vec<i32>>,
}

/// Whether the gate is on for pods of kind `kind`.
pub fn applies(gates: &FeatureGates, kind: &str) -> bool {
    kind == "Pod" && gates.enabled(CONTAINER_RESTART_RULES)
}

/// The typed form of one container's `restartPolicyRules` (what the 1.34 decoder keeps), or
/// the decoding error upstream answers with a 400.
pub fn typed(rules: &Value) -> Result<Value, serde_json::Error> {
    let typed: Option<Vec<RuleDe>> = serde_json::from_value(rules.clone())?;
    serde_json::to_value(typed)
}

/// The `(pointer, path)` of every container's `restartPolicyRules` in pod `input`: where to
/// put it back and how an unknown-field report names it.
pub fn locations(input: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for key in CONTAINER_KEYS {
        let list = input
            .pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (i, c) in list.iter().enumerate() {
            if c.get("restartPolicyRules").is_some_and(|r| !r.is_null()) {
                out.push((
                    format!("/spec/{key}/{i}/restartPolicyRules"),
                    format!("spec.{key}[{i}].restartPolicyRules"),
                ));
            }
        }
    }
    out
}

/// Appends the container restart policy causes of pod spec `spec` at `base`: with the gate on,
/// upstream's `validateContainerRestartPolicy` for each regular container that sets a policy
/// or rules, and for each regular init container with rules; with it off, 1.33's refusal of a
/// policy on a regular container.
pub fn rules(gates: &FeatureGates, spec: &Value, base: &str, out: &mut Vec<Cause>) {
    let on = gates.enabled(CONTAINER_RESTART_RULES);
    for key in CONTAINER_KEYS {
        let list = spec
            .get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (i, c) in list.iter().enumerate() {
            let path = format!("{base}.{key}[{i}]");
            let policy = c.get("restartPolicy").filter(|p| !p.is_null());
            let rules = c
                .get("restartPolicyRules")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let regular = key == "containers";
            if !on {
                if regular && policy.is_some() {
                    out.push(Cause::forbidden(
                        format!("{path}.restartPolicy"),
                        "may not be set for non-init containers",
                    ));
                }
                continue;
            }
            // A sidecar (init container with restartPolicy Always) is the sidecar validation's.
            let sidecar = !regular && policy.and_then(Value::as_str) == Some("Always");
            if (regular && (policy.is_some() || !rules.is_empty())) || (!regular && !sidecar && !rules.is_empty()) {
                container_policy(policy, rules, &path, out);
            }
        }
    }
}

/// Upstream's `validateContainerRestartPolicy` of one container at `path`.
fn container_policy(policy: Option<&Value>, rules: &[Value], path: &str, out: &mut Vec<Cause>) {
    let policy_field = format!("{path}.restartPolicy");
    match policy {
        None if !rules.is_empty() => out.push(
            Cause::required(&policy_field)
                .with_message("Required value: must specify restartPolicy when restart rules are used"),
        ),
        None => {}
        Some(p) if p.as_str().is_some_and(|s| POLICIES.contains(&s)) => {}
        Some(p) => out.push(Cause::not_supported(&policy_field, p, POLICIES)),
    }
    let rules_field = format!("{path}.restartPolicyRules");
    if rules.len() > MAX_RULES {
        out.push(too_many(&rules_field, rules.len(), MAX_RULES));
    }
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("{rules_field}[{i}]");
        let action = rule.get("action").cloned().unwrap_or(Value::String(String::new()));
        if action.as_str() != Some("Restart") {
            out.push(Cause::not_supported(format!("{at}.action"), &action, &["Restart"]));
        }
        let Some(codes) = rule.get("exitCodes").filter(|c| !c.is_null()) else {
            out.push(Cause::required(format!("{at}.exitCodes")).with_message("Required value: must be specified"));
            continue;
        };
        let operator = codes.get("operator").cloned().unwrap_or(Value::String(String::new()));
        if !matches!(operator.as_str(), Some("In" | "NotIn")) {
            out.push(Cause::not_supported(
                format!("{at}.exitCodes.operator"),
                &operator,
                &["In", "NotIn"],
            ));
        }
        let values = codes.get("values").and_then(Value::as_array).map_or(0, Vec::len);
        if values > MAX_EXIT_CODES {
            out.push(too_many(&format!("{at}.exitCodes.values"), values, MAX_EXIT_CODES));
        }
    }
}

/// A `FieldValueTooMany` cause (`field.TooMany`).
fn too_many(field: &str, actual: usize, max: usize) -> Cause {
    Cause {
        reason: "FieldValueTooMany".into(),
        message: format!("Too many: {actual}: must have at most {max} items"),
        field: field.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn on() -> FeatureGates {
        FeatureGates::parse("ContainerRestartRules=true").unwrap()
    }

    fn causes(gates: &FeatureGates, spec: Value) -> Vec<String> {
        let mut out = Vec::new();
        rules(gates, &spec, "spec", &mut out);
        out.iter().map(Cause::line).collect()
    }

    fn rule(operator: &str, values: &[i32]) -> Value {
        json!({"action": "Restart", "exitCodes": {"operator": operator, "values": values}})
    }

    #[test]
    fn gate_off_refuses_a_policy_on_regular_containers_as_1_33_does() {
        let spec = json!({"containers": [{"name": "c", "restartPolicy": "Never"}],
                          "initContainers": [{"name": "s", "restartPolicy": "Always"}]});
        assert_eq!(
            causes(&FeatureGates::default(), spec),
            ["spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"]
        );
    }

    #[test]
    fn gate_on_accepts_policies_and_rules() {
        let spec = json!({"containers": [
            {"name": "a", "restartPolicy": "Never", "restartPolicyRules": [rule("In", &[42])]},
            {"name": "b", "restartPolicy": "Always"},
            {"name": "c", "restartPolicy": "OnFailure", "restartPolicyRules": [rule("NotIn", &[0, 1])]},
            {"name": "d"}
        ]});
        assert!(causes(&on(), spec).is_empty());
    }

    #[test]
    fn gate_on_checks_each_rule() {
        let spec = json!({"containers": [
            {"name": "a", "restartPolicyRules": [rule("In", &[42])]},
            {"name": "b", "restartPolicy": "Sometimes"},
            {"name": "c", "restartPolicy": "Never", "restartPolicyRules": [
                {"action": "Ignore", "exitCodes": {"operator": "In", "values": [1]}},
                {"action": "Restart"},
                {"action": "Restart", "exitCodes": {"operator": "Between", "values": [1]}}
            ]}
        ]});
        assert_eq!(
            causes(&on(), spec),
            [
                "spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used",
                "spec.containers[1].restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                "spec.containers[2].restartPolicyRules[0].action: Unsupported value: \"Ignore\": supported values: \"Restart\"",
                "spec.containers[2].restartPolicyRules[1].exitCodes: Required value: must be specified",
                "spec.containers[2].restartPolicyRules[2].exitCodes.operator: Unsupported value: \"Between\": supported values: \"In\", \"NotIn\"",
            ]
        );
    }

    #[test]
    fn gate_on_limits_rules_and_exit_codes() {
        let codes: Vec<i32> = (1..=256).collect();
        let many: Vec<Value> = (0..21).map(|_| rule("In", &[1])).collect();
        let spec = json!({"containers": [
            {"name": "a", "restartPolicy": "Never", "restartPolicyRules": many},
            {"name": "b", "restartPolicy": "Never", "restartPolicyRules": [rule("In", &codes)]}
        ]});
        assert_eq!(
            causes(&on(), spec),
            [
                "spec.containers[0].restartPolicyRules: Too many: 21: must have at most 20 items",
                "spec.containers[1].restartPolicyRules[0].exitCodes.values: Too many: 256: must have at most 255 items",
            ]
        );
    }

    #[test]
    fn rules_of_sidecars_are_left_to_the_sidecar_checks() {
        let spec = json!({"initContainers": [
            {"name": "s", "restartPolicy": "Always", "restartPolicyRules": [{"action": "Restart"}]},
            {"name": "i", "restartPolicyRules": [rule("In", &[3])]}
        ], "containers": [{"name": "c"}]});
        assert_eq!(
            causes(&on(), spec),
            [
                "spec.initContainers[1].restartPolicy: Required value: must specify restartPolicy when restart rules are used"
            ]
        );
    }

    #[test]
    fn typed_rules_drop_unknown_keys_and_refuse_wrong_types() {
        let kept =
            typed(&json!([{"action": "Restart", "when": 1, "exitCodes": {"operator": "In", "values": [4]}}])).unwrap();
        assert_eq!(
            kept,
            json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [4]}}])
        );
        assert!(typed(&json!([{"exitCodes": {"values": ["x"]}}])).is_err());
        let pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b", "restartPolicyRules": []}]}});
        assert_eq!(
            locations(&pod),
            [(
                "/spec/containers/1/restartPolicyRules".to_string(),
                "spec.containers[1].restartPolicyRules".to_string()
            )]
        );
    }
}
