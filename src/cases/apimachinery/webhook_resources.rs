//! Adapted cases: `[sig-api-machinery] AdmissionWebhook` cases on what webhooks are offered
//! besides object writes in a namespace (test/e2e/apimachinery/webhook.go): the discovery
//! documents of the configuration kinds, a CONNECT (`pods/attach`), a cluster-scoped
//! CustomResourceDefinition create, and the configuration kinds themselves, which webhooks
//! must never see.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, ValidatingWebhook, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroup, APIGroupList, APIResourceList, LabelSelector};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};

use super::crd::random_crd;
use super::webhook::{refusal, with_server};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::webhook::{SCOPE_LABEL, WebhookServer, rule};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};
use crate::{ensure, fail};

/// Upstream webhook.go "should include webhook resources in discovery documents".
pub(crate) const DISCOVERY: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    should include webhook resources in discovery documents [Conformance]";
/// Upstream webhook.go "should be able to deny attaching pod".
pub(crate) const DENY_ATTACH: &str =
    "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should be able to deny attaching pod [Conformance]";
/// Upstream webhook.go "should deny crd creation".
pub(crate) const DENY_CRD: &str =
    "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should deny crd creation [Conformance]";
/// Upstream webhook.go "should not be able to mutate or prevent deletion of webhook
/// configuration objects".
pub(crate) const CONFIGS_EXEMPT: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    should not be able to mutate or prevent deletion of webhook configuration objects [Conformance]";

/// The cases of this file.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(DISCOVERY, Kind::Adapted, discovery),
        case!(DENY_ATTACH, Kind::Adapted, deny_attach),
        case!(DENY_CRD, Kind::Adapted, deny_crd),
        case!(CONFIGS_EXEMPT, Kind::Adapted, configs_exempt),
    ]
}

const GROUP: &str = "admissionregistration.k8s.io";
const RESOURCES: [&str; 2] = ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"];

/// Upstream webhook.go `It("should include webhook resources in discovery documents")`: `/apis`
/// lists the admissionregistration.k8s.io group with version v1, the group's document names
/// itself and lists v1, and `/apis/admissionregistration.k8s.io/v1` lists both webhook
/// configuration resources.
pub(crate) async fn discovery(f: &Framework) -> CaseResult {
    f.step("fetching the /apis discovery document");
    let groups: APIGroupList = f.get_path("/apis").await?;
    let Some(group) = groups.groups.iter().find(|g| g.name == GROUP) else {
        fail!(
            "the {GROUP} API group is not in the /apis discovery document (groups: {:?})",
            groups.groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>()
        );
    };
    ensure!(
        group.versions.iter().any(|v| v.version == "v1"),
        "the {GROUP} group in /apis does not list version v1 (versions: {:?})",
        group
            .versions
            .iter()
            .map(|v| v.group_version.as_str())
            .collect::<Vec<_>>()
    );

    f.step(format!("fetching the /apis/{GROUP} discovery document"));
    let group: APIGroup = f.get_path(&format!("/apis/{GROUP}")).await?;
    ensure!(
        group.name == GROUP,
        "/apis/{GROUP} names its group {:?}, expected {GROUP:?}",
        group.name
    );
    ensure!(
        group.versions.iter().any(|v| v.version == "v1"),
        "/apis/{GROUP} does not list version v1 (versions: {:?})",
        group
            .versions
            .iter()
            .map(|v| v.group_version.as_str())
            .collect::<Vec<_>>()
    );

    f.step(format!("fetching the /apis/{GROUP}/v1 discovery document"));
    let list: APIResourceList = f.get_path(&format!("/apis/{GROUP}/v1")).await?;
    ensure!(
        list.group_version == format!("{GROUP}/v1"),
        "/apis/{GROUP}/v1 gives groupVersion {:?}, expected \"{GROUP}/v1\"",
        list.group_version
    );
    for want in RESOURCES {
        ensure!(
            list.resources.iter().any(|r| r.name == want),
            "{want} is not in the /apis/{GROUP}/v1 discovery document (resources: {:?})",
            list.resources.iter().map(|r| r.name.as_str()).collect::<Vec<_>>()
        );
    }
    Ok(())
}

/// Upstream's `toBeAttachedPodName`.
const ATTACHED_POD: &str = "to-be-attached-pod";

/// Upstream webhook.go `It("should be able to deny attaching pod")`: a validating webhook on
/// CONNECT of `pods/attach` refuses an attach to a running pod with "attaching to pod
/// 'to-be-attached-pod' is not allowed".
///
/// Upstream runs `kubectl attach -i`; this sends the attach request itself, without asking for
/// a stream upgrade: the API server admits a CONNECT (webhooks included) before it looks at the
/// upgrade, so the refusal is the same Status, and kube's upgrade error would keep only its code.
pub(crate) async fn deny_attach(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let mut hook = s.validating(
            "deny-attaching-pod.k8s.io",
            "/pods/attach",
            vec![rule(&["CONNECT"], "", "v1", &["pods/attach"])],
        );
        // A CONNECT's object (PodAttachOptions) has no labels: upstream's object selector never
        // matches it, so this webhook, as upstream's, has none (markers are not pods anyway).
        hook.object_selector = None;
        s.register_validating(f, "deny-attaching-pod", vec![hook]).await?;

        f.step("creating the pod to attach to");
        let pod = f
            .pod(ATTACHED_POD)
            .container(ContainerBuilder::new("container1", "pause"));
        f.create_pod_ready(&pod).await?;

        f.step("attaching to the pod, which the webhook should deny");
        let path = format!(
            "/api/v1/namespaces/{}/pods/{ATTACHED_POD}/attach?container=container1&stdin=true&stdout=true&stderr=true",
            f.ns()
        );
        let want = format!("attaching to pod '{ATTACHED_POD}' is not allowed");
        // An answer lost with its connection (an API server restarting) says nothing: ask again.
        let mut answer = attach(f, &path).await;
        for _ in 0..3 {
            match &answer {
                Err(kube::Error::Api(_)) | Ok(_) => break,
                Err(_) => answer = attach(f, &path).await,
            }
        }
        match answer {
            Ok(body) => fail!("attaching to pod {ATTACHED_POD} was not refused; the API server answered {body:?}"),
            Err(e) => ensure!(
                refusal(&e).contains(&want),
                "attaching to pod {ATTACHED_POD}: expected a refusal containing {want:?}, got {:?}",
                refusal(&e)
            ),
        }
        Ok(())
    })
    .await
}

/// POSTs the attach request `path` and returns the answer's body.
async fn attach(f: &Framework, path: &str) -> Result<String, kube::Error> {
    let req = http::Request::post(path)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    f.client().request_text(req).await
}

/// Upstream webhook.go `It("should deny crd creation")`: a validating webhook on
/// CustomResourceDefinition creates (selected by an object label unique to the case) refuses
/// a CRD labelled `webhook-e2e-test: webhook-disallow` with "the crd contains unwanted label".
pub(crate) async fn deny_crd(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let mut hook = s.validating(
            "deny-crd-with-unwanted-label.k8s.io",
            "/crd",
            vec![rule(&["CREATE"], "apiextensions.k8s.io", "*", &["customresourcedefinitions"])],
        );
        // CRDs are cluster-scoped: the namespace selector never skips them, so the case's
        // label on the object is what keeps other cases' CRDs away from this webhook.
        hook.object_selector = Some(case_objects(f));
        s.register_validating(f, "deny-crd", vec![hook]).await?;

        f.step("creating a CustomResourceDefinition the webhook should deny");
        let crd = random_crd(
            f,
            0,
            &[(SCOPE_LABEL, f.ns()), ("webhook-e2e-test", "webhook-disallow")],
        );
        let crds: Api<CustomResourceDefinition> = f.api_all();
        let want = "the crd contains unwanted label";
        match crds.create(&PostParams::default(), &crd).await {
            Ok(created) => {
                let name = created.name_any();
                crds.delete(&name, &DeleteParams::default()).await?;
                fail!("CustomResourceDefinition {name} labelled webhook-e2e-test=webhook-disallow was created; expected the webhook to deny it with {want:?}")
            }
            Err(e) => ensure!(
                refusal(&e).contains(want),
                "creating CustomResourceDefinition {}: expected a refusal containing {want:?}, got {:?}",
                crd.name_any(),
                refusal(&e)
            ),
        }
        Ok(())
    })
    .await
}

/// The object selector `scope-label=<case namespace>`: the cluster-scoped objects this case made.
fn case_objects(f: &Framework) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([(SCOPE_LABEL.to_string(), f.ns().to_string())])),
        match_expressions: None,
    }
}

/// Upstream's `addedLabelKey`: what `/add-label` puts on the objects it mutates.
const ADDED_LABEL: &str = "added-label";
/// The label of the dummy configurations the blocking webhooks select (the blocking
/// configurations themselves do not carry it, so they can always be removed).
const TARGET_LABEL: &str = "crossconf.io/webhook-config-target";

/// Upstream webhook.go `It("should not be able to mutate or prevent deletion of webhook
/// configuration objects")`: with a validating webhook denying every deletion of webhook
/// configurations and a mutating one labelling every new one, a dummy validating and then a
/// dummy mutating configuration are created unlabelled, used, and deleted: the API server never
/// offers these kinds to webhooks.
pub(crate) async fn configs_exempt(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let resources = || vec![rule(&["DELETE"], GROUP, "*", &RESOURCES)];
        let target = LabelSelector {
            match_labels: Some(BTreeMap::from([(TARGET_LABEL.to_string(), f.ns().to_string())])),
            match_expressions: None,
        };
        let mut deny = s.validating(
            "deny-webhook-configuration-deletions.k8s.io",
            "/always-deny",
            resources(),
        );
        deny.failure_policy = Some("Fail".into());
        deny.object_selector = Some(target.clone());
        s.register_validating(f, "deny-webhook-configuration-deletions", vec![deny])
            .await?;
        let mut label = s.mutating(
            "add-label-to-webhook-configurations.k8s.io",
            "/add-label",
            vec![rule(&["CREATE"], GROUP, "*", &RESOURCES)],
        );
        label.failure_policy = Some("Fail".into());
        label.object_selector = Some(target);
        s.register_mutating(f, "add-label-to-webhook-configurations", vec![label])
            .await?;

        f.step("creating a dummy validating webhook configuration");
        let mut cfg = s.validating_config("dummy", vec![dummy_validating(&s)]);
        cfg.labels_mut().insert(TARGET_LABEL.into(), f.ns().into());
        let api = f.api_all::<ValidatingWebhookConfiguration>();
        let created = api.create(&PostParams::default(), &cfg).await?;
        not_mutated(created.labels(), "validating", &created.name_any())?;
        s.wait_ready(f, &created.name_any()).await?;
        f.step("deleting the dummy validating webhook configuration, which must be possible");
        api.delete(&created.name_any(), &DeleteParams::default())
            .await
            .map_err(|e| deletion_refused(&e, "validating", &created.name_any()))?;

        f.step("creating a dummy mutating webhook configuration");
        let mut cfg = s.mutating_config("dummy", vec![dummy_mutating(&s)]);
        cfg.labels_mut().insert(TARGET_LABEL.into(), f.ns().into());
        let api = f.api_all::<MutatingWebhookConfiguration>();
        let created = api.create(&PostParams::default(), &cfg).await?;
        not_mutated(created.labels(), "mutating", &created.name_any())?;
        s.wait_ready(f, &created.name_any()).await?;
        f.step("deleting the dummy mutating webhook configuration, which must be possible");
        api.delete(&created.name_any(), &DeleteParams::default())
            .await
            .map_err(|e| deletion_refused(&e, "mutating", &created.name_any()))?;
        Ok(())
    })
    .await
}

/// Upstream's dummy webhook: a rule no real resource matches, a path the server does not
/// serve, no CA bundle and failurePolicy Ignore, so it never has an effect.
fn dummy_validating(s: &WebhookServer) -> ValidatingWebhook {
    let mut hook = s.validating(
        "dummy-validating-webhook.k8s.io",
        "",
        vec![rule(&["CREATE"], "", "v1", &["invalid"])],
    );
    hook.client_config.ca_bundle = None;
    hook.failure_policy = Some("Ignore".into());
    hook
}

/// The mutating form of [`dummy_validating`].
fn dummy_mutating(s: &WebhookServer) -> MutatingWebhook {
    let mut hook = s.mutating(
        "dummy-mutating-webhook.k8s.io",
        "",
        vec![rule(&["CREATE"], "", "v1", &["invalid"])],
    );
    hook.client_config.ca_bundle = None;
    hook.failure_policy = Some("Ignore".into());
    hook
}

/// Fails when the stored configuration carries the label the mutating webhook adds.
fn not_mutated(labels: &BTreeMap<String, String>, what: &str, name: &str) -> CaseResult {
    ensure!(
        labels.get(ADDED_LABEL).map(String::as_str) != Some("yes"),
        "{what} webhook configuration {name} was stored with label {ADDED_LABEL}=yes: a mutating webhook was \
         called on a webhook configuration, which the API server must never offer to webhooks"
    );
    Ok(())
}

/// The failure of a deletion the blocking webhook should never have been asked about.
fn deletion_refused(e: &kube::Error, what: &str, name: &str) -> CaseError {
    CaseError::failed(format!(
        "deleting {what} webhook configuration {name} failed: {}; webhook configurations must always be \
         removable (webhooks are never called on them)",
        refusal(e)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_labelled_by_the_webhook_is_reported() {
        let added = BTreeMap::from([(ADDED_LABEL.to_string(), "yes".to_string())]);
        let err = not_mutated(&added, "validating", "dummy").expect_err("mutated");
        assert!(err.to_string().contains("was stored with label added-label=yes"));
        assert!(not_mutated(&BTreeMap::new(), "validating", "dummy").is_ok());
    }
}
