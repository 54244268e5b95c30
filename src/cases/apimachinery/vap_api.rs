//! `[sig-api-machinery] ValidatingAdmissionPolicy` API operations (upstream
//! test/e2e/apimachinery/validatingadmissionpolicy.go): discovery, create, get, list, watch,
//! patch, update, `/status` (policies only), delete and deletecollection of
//! ValidatingAdmissionPolicies and their bindings.
//!
//! Upstream checks these the way it checks the API priority and fairness kinds, so the flow is
//! [`super::flowcontrol`]'s, given each kind's [`Shape`]. Only API calls, so one body serves
//! both OSes; the objects are cluster-scoped and carry the run-id label.

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicyBindingSpec, ValidatingAdmissionPolicySpec, Validation,
};
use serde_json::json;

use super::flowcontrol::{Shape, api_operations, meta};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseResult, Framework};

/// Upstream validatingadmissionpolicy.go "should support ValidatingAdmissionPolicy API operations".
pub(crate) const POLICY_API: &str = "[sig-api-machinery] ValidatingAdmissionPolicy [Privileged:ClusterAdmin] should support ValidatingAdmissionPolicy API operations [Conformance]";
/// Upstream validatingadmissionpolicy.go "should support ValidatingAdmissionPolicyBinding API
/// operations".
pub(crate) const BINDING_API: &str = "[sig-api-machinery] ValidatingAdmissionPolicy [Privileged:ClusterAdmin] should support ValidatingAdmissionPolicyBinding API operations [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(POLICY_API, Kind::Adapted, policy_api),
        case!(BINDING_API, Kind::Adapted, binding_api),
    ]
}

const GROUP: &str = "admissionregistration.k8s.io";

/// Upstream: a policy limiting Deployments to 100 replicas on CREATE; the patch sets
/// `failurePolicy: Ignore`, the update `Fail`; `/status` gets condition `PatchStatusFailed`.
async fn policy_api(f: &Framework) -> CaseResult {
    let strings = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
    let template = ValidatingAdmissionPolicy {
        metadata: meta(f, "e2e-example-vap-", "example-e2e-vap-label"),
        spec: Some(ValidatingAdmissionPolicySpec {
            validations: Some(vec![Validation {
                expression: "object.spec.replicas <= 100".into(),
                ..Default::default()
            }]),
            match_constraints: Some(MatchResources {
                resource_rules: Some(vec![NamedRuleWithOperations {
                    operations: strings(&["CREATE"]),
                    api_groups: strings(&["apps"]),
                    api_versions: strings(&["v1"]),
                    resources: strings(&["deployments"]),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    };
    api_operations(
        f,
        Shape {
            group: GROUP,
            plural: "validatingadmissionpolicies",
            template,
            patch_spec: json!({"failurePolicy": "Ignore"}),
            patched: json!("Ignore"),
            update: |p| p.spec.get_or_insert_with(Default::default).failure_policy = Some("Fail".into()),
            updated: json!("Fail"),
            field: |p| p.spec.as_ref()?.failure_policy.as_ref().map(|v| json!(v)),
            status_condition: Some(json!({"type": "PatchStatusFailed", "status": "False", "reason": "e2e",
                "message": "Set from an e2e test", "lastTransitionTime": "2024-01-01T00:00:00Z"})),
        },
        "example-e2e-vap-label",
    )
    .await
}

/// Upstream: a Deny binding of policy `replicalimit-policy.example.com` (which need not exist);
/// the patch sets `validationActions: [Warn]`, the update `[Deny]`; bindings have no `/status`.
async fn binding_api(f: &Framework) -> CaseResult {
    let template = ValidatingAdmissionPolicyBinding {
        metadata: meta(f, "e2e-example-vapb-", "example-e2e-vapb-label"),
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some("replicalimit-policy.example.com".into()),
            validation_actions: Some(vec!["Deny".into()]),
            ..Default::default()
        }),
    };
    api_operations(
        f,
        Shape {
            group: GROUP,
            plural: "validatingadmissionpolicybindings",
            template,
            patch_spec: json!({"validationActions": ["Warn"]}),
            patched: json!(["Warn"]),
            update: |b| b.spec.get_or_insert_with(Default::default).validation_actions = Some(vec!["Deny".into()]),
            updated: json!(["Deny"]),
            field: |b| b.spec.as_ref()?.validation_actions.as_ref().map(|v| json!(v)),
            status_condition: None,
        },
        "example-e2e-vapb-label",
    )
    .await
}
