//! `[sig-api-machinery] ValidatingAdmissionPolicy` (upstream
//! test/e2e/apimachinery/validatingadmissionpolicy.go): a policy bound to the case's namespace
//! denies the Deployments its CEL validations reject and lets the others, and objects of kinds it
//! does not match, through.
//!
//! Only API calls, so one body serves both OSes (the Deployments' pods are the target OS's
//! pause pods; the policy looks at `spec.replicas` only). Policies and bindings are
//! cluster-scoped: they carry the run-id label and names derived from the case namespace, and
//! match only that namespace (labelled `<namespace>=true`, as upstream's `labelNamespace`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicyBindingSpec, ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{deployment, replica_set, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, RUN_ID_LABEL};

/// Upstream validatingadmissionpolicy.go "should validate against a Deployment".
pub(crate) const VALIDATE_DEPLOYMENT: &str = "[sig-api-machinery] ValidatingAdmissionPolicy [Privileged:ClusterAdmin] should validate against a Deployment [Conformance]";
/// Upstream validatingadmissionpolicy.go "should allow expressions to refer variables.".
pub(crate) const VARIABLES: &str = "[sig-api-machinery] ValidatingAdmissionPolicy [Privileged:ClusterAdmin] should allow expressions to refer variables. [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(VALIDATE_DEPLOYMENT, Kind::Adapted, validate_deployment),
        case!(VARIABLES, Kind::Adapted, variables),
    ]
}

/// How long the marker may be admitted before the policy must deny it. Upstream polls (every
/// 100 ms) until the test's context ends; a policy is in force within seconds.
const MARKER_WITHIN: Duration = Duration::from_secs(30);

/// Upstream `labelNamespace`: the case namespace gets label `<namespace>=true`, which the
/// policy and binding select.
async fn label_namespace(f: &Framework) -> CaseResult {
    let patch = json!({"metadata": {"labels": {f.ns(): "true"}}});
    f.api_all::<Namespace>()
        .patch(f.ns(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// `{<namespace>: "true"}` as a selector.
fn unique_namespace(f: &Framework) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([(f.ns().to_string(), "true".to_string())])),
        ..Default::default()
    }
}

fn cluster_meta(f: &Framework, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        labels: Some(BTreeMap::from([(RUN_ID_LABEL.to_string(), f.run().run_id.clone())])),
        ..Default::default()
    }
}

/// Upstream's policy builder: the case namespace, CREATE and UPDATE of apps/v1 deployments.
fn policy(f: &Framework, variables: Vec<Variable>, validations: Vec<Validation>) -> ValidatingAdmissionPolicy {
    let strings = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
    let rule = NamedRuleWithOperations {
        operations: strings(&["CREATE", "UPDATE"]),
        api_groups: strings(&["apps"]),
        api_versions: strings(&["v1"]),
        resources: strings(&["deployments"]),
        ..Default::default()
    };
    ValidatingAdmissionPolicy {
        metadata: cluster_meta(f, format!("{}.policy.example.com", f.ns())),
        spec: Some(ValidatingAdmissionPolicySpec {
            match_constraints: Some(MatchResources {
                namespace_selector: Some(unique_namespace(f)),
                resource_rules: Some(vec![rule]),
                ..Default::default()
            }),
            validations: Some(validations),
            variables: (!variables.is_empty()).then_some(variables),
            ..Default::default()
        }),
        status: None,
    }
}

/// Upstream `createBinding`: the policy, for the case namespace, with action Deny.
fn binding(f: &Framework, policy: &str) -> ValidatingAdmissionPolicyBinding {
    ValidatingAdmissionPolicyBinding {
        metadata: cluster_meta(f, format!("{}.binding.example.com", f.ns())),
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(policy.to_string()),
            match_resources: Some(MatchResources {
                namespace_selector: Some(unique_namespace(f)),
                ..Default::default()
            }),
            validation_actions: Some(vec!["Deny".into()]),
            ..Default::default()
        }),
    }
}

/// Upstream `basicDeployment`/`basicReplicaSet`'s pod template (a pause container here).
fn template(f: &Framework) -> Result<PodTemplateSpec, CaseError> {
    let pod = f
        .pod("nginx")
        .label("app", "nginx")
        .container(ContainerBuilder::new("pause", "agnhost").args(["pause"]));
    Ok(template_of(pod.build(f)?))
}

/// Deletes `name`, which may be gone already.
async fn delete_quietly<K>(api: &Api<K>, name: &str) -> CaseResult
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(CaseError::from(e).context(format!("deleting {name}"))),
    }
}

/// Creates `obj`, checks it was admitted, and deletes it again.
async fn admitted<K>(f: &Framework, obj: &K, what: &str) -> CaseResult
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    f.step(format!("creating {what}, which the policy must let through"));
    let api: Api<K> = f.api();
    let name = obj.meta().name.clone().unwrap_or_default();
    let created = api.create(&PostParams::default(), obj).await;
    delete_quietly(&api, &name).await?;
    match created {
        Ok(_) => Ok(()),
        Err(e) => Err(CaseError::failed(format!(
            "{what} was refused, expected the policy to admit it: {}",
            crate::framework::render_kube_error(&e)
        ))),
    }
}

/// Creates the policy and its binding, waits until the marker Deployment (one replica) is
/// denied as Invalid, then checks that Deployment `replicated` with `replicas` and a
/// one-replica ReplicaSet are admitted; deletes the policy and binding.
async fn deny_marker_admit_others(f: &Framework, policy: ValidatingAdmissionPolicy, replicas: i32) -> CaseResult {
    label_namespace(f).await?;
    let policies: Api<ValidatingAdmissionPolicy> = f.api_all();
    let bindings: Api<ValidatingAdmissionPolicyBinding> = f.api_all();
    let policy_name = policy.metadata.name.clone().unwrap_or_default();
    let binding = binding(f, &policy_name);
    let binding_name = binding.metadata.name.clone().unwrap_or_default();
    f.step("creating the policy and its binding");
    policies.create(&PostParams::default(), &policy).await?;
    let result = async {
        bindings.create(&PostParams::default(), &binding).await?;
        wait_marker_denied(f).await?;
        admitted(
            f,
            &deployment("replicated", replicas, template(f)?),
            &format!("Deployment replicated ({replicas} replicas)"),
        )
        .await?;
        admitted(
            f,
            &replica_set("non-replicated", 1, template(f)?),
            "ReplicaSet non-replicated (1 replica)",
        )
        .await
    }
    .await;
    let cleanup = async {
        delete_quietly(&bindings, &binding_name).await?;
        delete_quietly(&policies, &policy_name).await
    }
    .await;
    result.and(cleanup)
}

/// Upstream "waiting until the marker is denied": creates Deployment `marker-deployment` (one
/// replica), deleting it when admitted, until a create is refused as Invalid. Upstream tries
/// every 100 ms; once a second (as the webhook cases' markers) spares the controllers the
/// Deployments an unenforced policy lets through.
async fn wait_marker_denied(f: &Framework) -> CaseResult {
    f.step("waiting until the marker Deployment is denied");
    let api: Api<Deployment> = f.api();
    let marker = deployment("marker-deployment", 1, template(f)?);
    let until = Instant::now() + MARKER_WITHIN.min(f.remaining());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let answer = api.create(&PostParams::default(), &marker).await;
        delete_quietly(&api, "marker-deployment").await?;
        let last = match answer {
            Err(kube::Error::Api(s)) if s.code == 422 && s.reason == "Invalid" => return Ok(()),
            Err(e) => {
                return Err(CaseError::failed(format!(
                    "the marker Deployment was refused, but not as Invalid (the policy's denial): {}",
                    crate::framework::render_kube_error(&e)
                )));
            }
            Ok(_) => "admitted",
        };
        if Instant::now() >= until {
            return Err(CaseError::failed(format!(
                "the policy never denied the marker Deployment (one replica) within {MARKER_WITHIN:?}; it was {last}"
            )));
        }
    }
}

fn validation(expression: &str, message: Option<&str>, message_expression: Option<&str>) -> Validation {
    Validation {
        expression: expression.into(),
        message: message.map(String::from),
        message_expression: message_expression.map(String::from),
        ..Default::default()
    }
}

/// Upstream: a policy requiring more than one replica (with a message expression) and the
/// request's namespace to be the case's; the one-replica marker is denied, a two-replica
/// Deployment and a one-replica ReplicaSet are admitted.
async fn validate_deployment(f: &Framework) -> CaseResult {
    let namespace_check = format!("namespaceObject.metadata.name == '{}'", f.ns());
    let policy = policy(
        f,
        Vec::new(),
        vec![
            validation(
                "object.spec.replicas > 1",
                None,
                Some("'wants replicas > 1, got ' + object.spec.replicas"),
            ),
            validation(
                &namespace_check,
                Some("Internal error! Other namespace should not be allowed."),
                None,
            ),
        ],
    );
    deny_marker_admit_others(f, policy, 2).await
}

/// Upstream: variables `replicas` (the Deployment's) and `oddReplicas` (from `replicas`), and
/// validations on them; the one-replica marker is denied, a three-replica Deployment and a
/// one-replica ReplicaSet are admitted.
async fn variables(f: &Framework) -> CaseResult {
    let vars = vec![
        Variable {
            name: "replicas".into(),
            expression: "object.spec.replicas".into(),
        },
        Variable {
            name: "oddReplicas".into(),
            expression: "variables.replicas % 2 == 1".into(),
        },
    ];
    let policy = policy(
        f,
        vars,
        vec![
            validation("variables.replicas > 1", None, None),
            validation("variables.oddReplicas", None, None),
        ],
    );
    deny_marker_admit_others(f, policy, 3).await
}
