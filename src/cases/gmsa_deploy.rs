//! The windows-gmsa admission webhook, deployed as its deploy script does
//! (kubernetes-sigs/windows-gmsa `admission-webhook/deploy/deploy-gmsa-webhook.sh` with
//! `gmsa-crd.yml` and `gmsa-webhook.yml.tpl`), for upstream's `GMSA Full` cases.
//!
//! Upstream's case runs that script in a pod that downloads it from GitHub; crossconf reaches
//! nothing outside the cluster, so the same objects are made here: a namespace labelled
//! `gmsa-webhook: disabled` (the webhooks skip it), a serving certificate for the Service's
//! name in a Secret, the `GMSACredentialSpec` CRD (`windows.k8s.io`, cluster-scoped), a
//! ClusterRole letting the webhook read credential specs and create
//! LocalSubjectAccessReviews and its binding, a one-replica Deployment of the webhook image on
//! a Linux node (tolerating control-plane taints, `--tolerate-master`), a Service on 443, and
//! the Validating and Mutating webhook configurations on pod creation. The one difference: the
//! script has the cluster's CA sign the certificate through a CertificateSigningRequest;
//! here a CA of the case's own signs it and is the configurations' `caBundle`.
//!
//! Every cluster-scoped object made is recorded in [`Deployed`], which deletes them (and the
//! webhook's namespace) whether the case passed or failed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{EnvVar, HTTPGetAction, Probe, Secret, Service, ServiceAccount, Toleration};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};

use crate::framework::wait::conditions as wc;
use crate::framework::webhook::certs;
use crate::framework::workloads::{deployment, secret, secret_volume, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder};
use crate::os::Os;

/// The webhook's name (upstream's `webHookName`, the script's `--name`).
pub const NAME: &str = "gmsa-webhook";
/// The CRD's name.
pub const CRD_NAME: &str = "gmsacredentialspecs.windows.k8s.io";
/// The image the deploy script runs by default.
pub const IMAGE: &str = "sigwindowstools/k8s-gmsa-webhook:latest";
/// The webhook's name in both configurations.
const HOOK_NAME: &str = "admission-webhook.windows-gmsa.sigs.k8s.io";
/// How long the webhook's endpoints get to appear after its Deployment rolled out.
const ENDPOINTS_WITHIN: Duration = Duration::from_secs(30);

/// What [`deploy`] made, to be removed by [`Deployed::clean_up`].
#[derive(Debug, Default)]
pub struct Deployed {
    namespace: Option<String>,
    crd: bool,
    cluster_roles: Vec<String>,
    cluster_role_bindings: Vec<String>,
    webhook_configurations: bool,
}

impl Deployed {
    /// Records a ClusterRole the case itself made, to go with the rest.
    pub fn add_cluster_role(&mut self, name: &str) {
        self.cluster_roles.push(name.to_string());
    }

    /// Deletes everything recorded, webhook configurations first (so no pod creation in the
    /// cluster waits on a webhook being torn down); a missing object is fine.
    ///
    /// # Errors
    /// The first refusal, after trying every deletion.
    pub async fn clean_up(&self, client: kube::Client) -> CaseResult {
        let dp = DeleteParams::default();
        let mut errors = Vec::new();
        let mut note = |what: String, r: Result<(), kube::Error>| match r {
            Ok(()) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => errors.push(format!("deleting {what}: {e}")),
        };
        let all = |_: ()| client.clone();
        if self.webhook_configurations {
            let r = Api::<MutatingWebhookConfiguration>::all(all(()))
                .delete(NAME, &dp)
                .await
                .map(|_| ());
            note(format!("MutatingWebhookConfiguration {NAME}"), r);
            let r = Api::<ValidatingWebhookConfiguration>::all(all(()))
                .delete(NAME, &dp)
                .await
                .map(|_| ());
            note(format!("ValidatingWebhookConfiguration {NAME}"), r);
        }
        if self.crd {
            let r = Api::<CustomResourceDefinition>::all(all(()))
                .delete(CRD_NAME, &dp)
                .await
                .map(|_| ());
            note(format!("CustomResourceDefinition {CRD_NAME}"), r);
        }
        for name in &self.cluster_role_bindings {
            let r = Api::<ClusterRoleBinding>::all(all(()))
                .delete(name, &dp)
                .await
                .map(|_| ());
            note(format!("ClusterRoleBinding {name}"), r);
        }
        for name in &self.cluster_roles {
            let r = Api::<ClusterRole>::all(all(())).delete(name, &dp).await.map(|_| ());
            note(format!("ClusterRole {name}"), r);
        }
        if let Some(ns) = &self.namespace {
            let r = crate::framework::delete_namespace(&client, ns).await;
            note(format!("namespace {ns}"), r);
        }
        match errors.first() {
            None => Ok(()),
            Some(_) => Err(CaseError::failed(format!(
                "cleaning up after the GMSA case: {}",
                errors.join("; ")
            ))),
        }
    }
}

/// The `GMSACredentialSpec` CRD of `gmsa-crd.yml`: cluster-scoped, `v1` stored and
/// `v1alpha1` served, `credspec` an object of the credential spec's fields.
fn crd() -> Result<CustomResourceDefinition, CaseError> {
    let s = |t: &str| serde_json::json!({"type": t});
    let schema = serde_json::json!({
        "openAPIV3Schema": {"type": "object", "properties": {"credspec": {
            "description": "GMSA Credential Spec",
            "type": "object",
            "properties": {
                "ActiveDirectoryConfig": {"type": "object", "properties": {
                    "GroupManagedServiceAccounts": {"type": "array", "items": {"type": "object", "properties": {
                        "Name": s("string"), "Scope": s("string")}}},
                    "HostAccountConfig": {"type": "object", "properties": {
                        "PluginGUID": s("string"), "PortableCcgVersion": s("string"), "PluginInput": s("string")}},
                }},
                "CmsPlugins": {"type": "array", "items": s("string")},
                "DomainJoinConfig": {"type": "object", "properties": {
                    "DnsName": s("string"), "DnsTreeName": s("string"), "Guid": s("string"),
                    "MachineAccountName": s("string"), "NetBiosName": s("string"), "Sid": s("string")}},
            }
        }}}
    });
    let version = |name: &str, storage: bool| serde_json::json!({"name": name, "served": true, "storage": storage, "schema": schema.clone()});
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME, "annotations": {
            "api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/tree/master/keps/sig-windows/689-windows-gmsa"}},
        "spec": {
            "group": "windows.k8s.io",
            "versions": [version("v1", true), version("v1alpha1", false)],
            "names": {"kind": "GMSACredentialSpec", "plural": "gmsacredentialspecs"},
            "scope": "Cluster",
        }
    }))
    .map_err(|e| CaseError::failed(format!("building the GMSACredentialSpec CRD: {e}")))
}

fn meta(name: &str, ns: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(str::to_string),
        ..Default::default()
    }
}

/// The webhook's rule: pod `operations` of the core group, any version.
fn pod_rule(operations: &[&str]) -> RuleWithOperations {
    RuleWithOperations {
        operations: Some(operations.iter().map(ToString::to_string).collect()),
        api_groups: Some(vec![String::new()]),
        api_versions: Some(vec!["*".into()]),
        resources: Some(vec!["pods".into()]),
        scope: None,
    }
}

/// "don't run on ${NAMESPACE}": every namespace but those labelled `gmsa-webhook: disabled`.
fn not_disabled() -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "gmsa-webhook".into(),
            operator: "NotIn".into(),
            values: Some(vec!["disabled".into()]),
        }]),
        match_labels: None,
    }
}

fn client_config(ns: &str, path: &str, ca: &ByteString) -> WebhookClientConfig {
    WebhookClientConfig {
        service: Some(ServiceReference {
            name: NAME.into(),
            namespace: ns.into(),
            path: Some(path.into()),
            port: None,
        }),
        ca_bundle: Some(ca.clone()),
        url: None,
    }
}

/// Deploys the webhook as upstream's `deployGmsaWebhook` does (namespace `<case ns>-webhook`)
/// and waits until it is ready; records what it made in `made` as it goes, so a failure
/// half-way still cleans up.
///
/// # Errors
/// A failure naming the step.
pub async fn deploy(f: &Framework, made: &mut Deployed) -> CaseResult {
    let ns = f
        .create_scoped_namespace("webhook", &[("gmsa-webhook", "disabled")])
        .await?;
    made.namespace = Some(ns.clone());
    let client = f.client();
    let role = format!("{ns}-{NAME}-rbac-role");

    f.step("creating the webhook's serving certificate");
    let c = certs(&format!("{NAME}.{ns}.svc")).map_err(|e| CaseError::failed(e.to_string()))?;
    let mut tls = secret(NAME, &[("tls_private_key", &c.key), ("tls_certificate", &c.cert)]);
    tls.metadata.namespace = Some(ns.clone());
    Api::<Secret>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &tls)
        .await
        .map_err(|e| CaseError::from(e).context("creating the webhook's TLS Secret"))?;

    f.step("creating the GMSACredentialSpec CRD");
    let crds = f.api_all::<CustomResourceDefinition>();
    // The script replaces a CRD left by an earlier deployment.
    if crds.get_opt(CRD_NAME).await?.is_some() {
        crds.delete(CRD_NAME, &DeleteParams::default()).await?;
        f.wait_for(
            &crds,
            CRD_NAME,
            |c: Option<&CustomResourceDefinition>| c.is_none(),
            "to be deleted",
        )
        .await?;
    }
    made.crd = true;
    crds.create(&PostParams::default(), &crd()?)
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating CustomResourceDefinition {CRD_NAME}")))?;
    f.wait_for(
        &crds,
        CRD_NAME,
        |c: Option<&CustomResourceDefinition>| {
            c.and_then(|c| c.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
        },
        "to be Established",
    )
    .await?;

    f.step("creating the webhook's service account and RBAC role");
    Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &ServiceAccount {
                metadata: meta(NAME, Some(&ns)),
                ..Default::default()
            },
        )
        .await?;
    let rule = |groups: &str, resources: &str, verb: &str| PolicyRule {
        api_groups: Some(vec![groups.into()]),
        resources: Some(vec![resources.into()]),
        verbs: vec![verb.into()],
        ..Default::default()
    };
    made.cluster_roles.push(role.clone());
    f.api_all::<ClusterRole>()
        .create(
            &PostParams::default(),
            &ClusterRole {
                metadata: meta(&role, None),
                rules: Some(vec![
                    rule("windows.k8s.io", "gmsacredentialspecs", "get"),
                    rule("authorization.k8s.io", "localsubjectaccessreviews", "create"),
                ]),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating ClusterRole {role}")))?;
    let binding = format!("{ns}-{NAME}-binding-to-{role}");
    made.cluster_role_bindings.push(binding.clone());
    f.api_all::<ClusterRoleBinding>()
        .create(
            &PostParams::default(),
            &ClusterRoleBinding {
                metadata: meta(&binding, None),
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: NAME.into(),
                    namespace: Some(ns.clone()),
                    api_group: None,
                }]),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "ClusterRole".into(),
                    name: role.clone(),
                },
            },
        )
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating ClusterRoleBinding {binding}")))?;

    f.step("deploying the webhook");
    let probe = Probe {
        http_get: Some(HTTPGetAction {
            scheme: Some("HTTPS".into()),
            path: Some("/health".into()),
            port: IntOrString::Int(443),
            ..Default::default()
        }),
        ..Default::default()
    };
    let server = ContainerBuilder::literal(NAME, IMAGE)
        .port(443, "TCP")
        .mount("tls", "/tls", true)
        .with(move |c| {
            c.image_pull_policy = Some("IfNotPresent".into());
            c.readiness_probe = Some(probe.clone());
            c.env = Some(vec![
                EnvVar {
                    name: "TLS_KEY".into(),
                    value: Some("/tls/key".into()),
                    value_from: None,
                },
                EnvVar {
                    name: "TLS_CRT".into(),
                    value: Some("/tls/crt".into()),
                    value_from: None,
                },
            ]);
        });
    let pod = PodBuilder::new(NAME, Os::Linux)
        .label("app", NAME)
        .volume(secret_volume(
            "tls",
            NAME,
            &[("tls_private_key", "key"), ("tls_certificate", "crt")],
        ))
        .container(server)
        .edit_spec(|spec| {
            spec.service_account_name = Some(NAME.into());
            spec.node_selector = Some(BTreeMap::from([("kubernetes.io/os".to_string(), "linux".to_string())]));
            spec.os = None;
            spec.tolerations = Some(vec![Toleration {
                key: Some("node-role.kubernetes.io/master".into()),
                operator: Some("Exists".into()),
                effect: Some("NoSchedule".into()),
                ..Default::default()
            }]);
        })
        .build(f)?;
    let mut dep = deployment(NAME, 1, template_of(pod));
    dep.metadata.namespace = Some(ns.clone());
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
    deployments.create(&PostParams::default(), &dep).await?;
    let mut svc = Service {
        metadata: meta(NAME, Some(&ns)),
        ..Default::default()
    };
    svc.spec = Some(k8s_openapi::api::core::v1::ServiceSpec {
        ports: Some(vec![k8s_openapi::api::core::v1::ServicePort {
            port: 443,
            target_port: Some(IntOrString::Int(443)),
            ..Default::default()
        }]),
        selector: Some(BTreeMap::from([("app".to_string(), NAME.to_string())])),
        ..Default::default()
    });
    Api::<Service>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &svc)
        .await?;

    f.step("registering the validating and mutating webhooks");
    let ca = ByteString(c.ca.into_bytes());
    made.webhook_configurations = true;
    f.api_all::<ValidatingWebhookConfiguration>()
        .create(
            &PostParams::default(),
            &ValidatingWebhookConfiguration {
                metadata: meta(NAME, None),
                webhooks: Some(vec![ValidatingWebhook {
                    name: HOOK_NAME.into(),
                    client_config: client_config(&ns, "/validate", &ca),
                    rules: Some(vec![pod_rule(&["CREATE", "UPDATE"])]),
                    failure_policy: Some("Fail".into()),
                    admission_review_versions: vec!["v1".into(), "v1beta1".into()],
                    side_effects: "None".into(),
                    namespace_selector: Some(not_disabled()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating ValidatingWebhookConfiguration {NAME}")))?;
    f.api_all::<MutatingWebhookConfiguration>()
        .create(
            &PostParams::default(),
            &MutatingWebhookConfiguration {
                metadata: meta(NAME, None),
                webhooks: Some(vec![MutatingWebhook {
                    name: HOOK_NAME.into(),
                    client_config: client_config(&ns, "/mutate", &ca),
                    rules: Some(vec![pod_rule(&["CREATE"])]),
                    failure_policy: Some("Fail".into()),
                    admission_review_versions: vec!["v1".into(), "v1beta1".into()],
                    side_effects: "None".into(),
                    namespace_selector: Some(not_disabled()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating MutatingWebhookConfiguration {NAME}")))?;

    // Upstream waits for the Deployment to be ready (`waitForDeployment`), the script for its
    // pod's readiness; the API server reaches it once the Service has a ready endpoint.
    f.wait_for(
        &deployments,
        NAME,
        wc::is_deployment_rolled_out(),
        "GMSA webhook to become ready",
    )
    .await
    .map_err(|e| e.context("GMSA webhook did not become ready"))?;
    wait_endpoint(f, &ns).await
}

/// Waits until the webhook's Service has a ready endpoint.
async fn wait_endpoint(f: &Framework, ns: &str) -> CaseResult {
    let slices = Api::<EndpointSlice>::namespaced(f.client(), ns);
    let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={NAME}"));
    let deadline = Instant::now() + ENDPOINTS_WITHIN.min(f.remaining());
    // A list a second: a rate limit on polling, not a fixed sleep.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let ready = slices.list(&lp).await?.items.iter().any(|s| {
            s.endpoints
                .iter()
                .any(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false))
        });
        if ready {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(CaseError::failed(format!(
                "GMSA webhook did not become ready: Service {ns}/{NAME} has no ready endpoint {ENDPOINTS_WITHIN:?} after its Deployment rolled out"
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_is_cluster_scoped_and_stores_v1() {
        let c = crd().expect("CRD");
        assert_eq!(c.spec.scope, "Cluster");
        assert_eq!(c.spec.names.kind, "GMSACredentialSpec");
        let stored: Vec<&str> = c
            .spec
            .versions
            .iter()
            .filter(|v| v.storage)
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(stored, ["v1"]);
    }

    #[test]
    fn the_webhooks_skip_only_disabled_namespaces() {
        let s = not_disabled();
        let e = &s.match_expressions.expect("expressions")[0];
        assert_eq!((e.key.as_str(), e.operator.as_str()), ("gmsa-webhook", "NotIn"));
        assert_eq!(pod_rule(&["CREATE"]).api_versions, Some(vec!["*".to_string()]));
    }
}
