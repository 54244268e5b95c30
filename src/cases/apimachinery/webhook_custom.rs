//! Adapted cases: `[sig-api-machinery] AdmissionWebhook` cases on custom resources
//! (test/e2e/apimachinery/webhook.go): webhooks denying creates, updates and deletes of custom
//! objects, mutating them, mutating them after the CRD's storage version changed, and the API
//! server pruning what a webhook adds outside the CRD's schema.
//!
//! Each case makes its own namespaced CRD (upstream's `crd.CreateTestCRD` /
//! `createAdmissionWebhookMultiVersionTestCRDWithV1Storage`), named after the case namespace,
//! creates its objects in the case namespace (which the webhooks select) and deletes the CRD
//! after its webhook configurations are gone.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::crd::{case_suffix, create_established, delete_gone};
use super::webhook::{refusal, with_server};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, Framework, RUN_ID_LABEL};
use crate::{ensure, fail};

/// Upstream webhook.go "should be able to deny custom resource creation, update and deletion".
pub(crate) const DENY_CR: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    should be able to deny custom resource creation, update and deletion [Conformance]";
/// Upstream webhook.go "should mutate custom resource".
pub(crate) const MUTATE_CR: &str =
    "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should mutate custom resource [Conformance]";
/// Upstream webhook.go "should mutate custom resource with different stored version".
pub(crate) const MUTATE_CR_STORED_VERSION: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    should mutate custom resource with different stored version [Conformance]";
/// Upstream webhook.go "should mutate custom resource with pruning".
pub(crate) const MUTATE_CR_PRUNING: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    should mutate custom resource with pruning [Conformance]";

/// The cases of this file.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(DENY_CR, Kind::Adapted, deny_custom_resource),
        case!(MUTATE_CR, Kind::Adapted, mutate_custom_resource),
        case!(MUTATE_CR_STORED_VERSION, Kind::Adapted, mutate_stored_version),
        case!(MUTATE_CR_PRUNING, Kind::Adapted, mutate_pruning),
    ]
}

/// The group of the cases' CRDs (upstream: `<base name>.example.com`).
const GROUP: &str = "webhook.example.com";
/// The data key and values upstream's `/custom-resource` handler judges.
const DATA_KEY: &str = "webhook-e2e-test";
/// Upstream's refusals of a custom object.
const DENIED_WRITE: &str = "the custom resource contains unwanted data";
const DENIED_DELETE: &str = "the custom resource cannot be deleted because it contains unwanted key and value";

/// A schema that keeps every field (upstream's `XPreserveUnknownFields: true`).
fn open_schema() -> JSONSchemaProps {
    JSONSchemaProps {
        type_: Some("object".into()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..Default::default()
    }
}

/// Upstream's pruning schema: `data` declares `mutation-start` and `mutation-stage-1` only.
fn pruning_schema() -> JSONSchemaProps {
    let string = || JSONSchemaProps {
        type_: Some("string".into()),
        ..Default::default()
    };
    JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some(BTreeMap::from([(
            "data".to_string(),
            JSONSchemaProps {
                type_: Some("object".into()),
                properties: Some(BTreeMap::from([
                    ("mutation-start".to_string(), string()),
                    ("mutation-stage-1".to_string(), string()),
                ])),
                ..Default::default()
            },
        )])),
        ..Default::default()
    }
}

/// A namespaced CRD unique to the case serving `versions` (name, storage), each with `schema`.
fn test_crd(f: &Framework, versions: &[(&str, bool)], schema: &JSONSchemaProps) -> CustomResourceDefinition {
    let name = format!("e2e-test-webhook-{}-crd", case_suffix(f));
    let plural = format!("{name}s");
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{plural}.{GROUP}")),
            labels: Some(BTreeMap::from([(RUN_ID_LABEL.to_string(), f.run().run_id.clone())])),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: GROUP.into(),
            names: CustomResourceDefinitionNames {
                plural,
                singular: Some(name.clone()),
                kind: format!("E2eTestWebhook{}Crd", case_suffix(f)),
                list_kind: Some(format!("E2eTestWebhook{}CrdList", case_suffix(f))),
                ..Default::default()
            },
            scope: "Namespaced".into(),
            versions: versions
                .iter()
                .map(|(v, storage)| CustomResourceDefinitionVersion {
                    name: (*v).into(),
                    served: true,
                    storage: *storage,
                    schema: Some(CustomResourceValidation {
                        open_api_v3_schema: Some(schema.clone()),
                    }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
        status: None,
    }
}

/// The case-namespace handle of `crd`'s objects through `version`.
fn objects(f: &Framework, crd: &CustomResourceDefinition, version: &str) -> (Api<DynamicObject>, ApiResource) {
    let gvk = GroupVersionKind::gvk(&crd.spec.group, version, &crd.spec.names.kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
    (Api::namespaced_with(f.client(), f.ns(), &ar), ar)
}

/// A custom object `name` with `data`.
fn object(ar: &ApiResource, name: &str, data: &[(&str, &str)]) -> DynamicObject {
    let data: serde_json::Map<String, Value> = data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    DynamicObject::new(name, ar).data(json!({ "data": data }))
}

/// A rule on `operations` of every served version of `crd`'s objects (upstream's
/// `servedAPIVersions`).
fn crd_rule(crd: &CustomResourceDefinition, operations: &[&str]) -> RuleWithOperations {
    let strings = |v: &[&str]| Some(v.iter().map(ToString::to_string).collect());
    RuleWithOperations {
        operations: strings(operations),
        api_groups: Some(vec![crd.spec.group.clone()]),
        api_versions: Some(
            crd.spec
                .versions
                .iter()
                .filter(|v| v.served)
                .map(|v| v.name.clone())
                .collect(),
        ),
        resources: Some(vec![crd.spec.names.plural.clone()]),
        scope: None,
    }
}

/// Creates `crd`, runs `checks` with the webhook server deployed, and deletes the CRD once the
/// webhook configurations are gone; the checks' failure wins over a cleanup failure.
async fn with_crd<'a, Fut>(
    f: &'a Framework,
    crd: &CustomResourceDefinition,
    checks: impl FnOnce(crate::framework::webhook::WebhookServer, CustomResourceDefinition) -> Fut,
) -> CaseResult
where
    Fut: Future<Output = CaseResult> + 'a,
{
    let crd = create_established(f, crd).await?;
    let name = crd.name_any();
    let result = with_server(f, move |s| checks(s, crd)).await;
    let cleaned = delete_gone(f, &name).await;
    result.and(cleaned)
}

/// The `data` map of a custom object as sent or stored.
fn data_of(obj: &DynamicObject) -> Value {
    obj.data.get("data").cloned().unwrap_or(Value::Null)
}

/// Fails unless custom object `obj`'s data is exactly `want`.
fn expect_data(obj: &DynamicObject, want: &[(&str, &str)]) -> CaseResult {
    let want: serde_json::Map<String, Value> = want.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let got = data_of(obj);
    ensure!(
        got == Value::Object(want.clone()),
        "custom object {} was stored with data {got}, expected {}",
        obj.name_any(),
        Value::Object(want)
    );
    Ok(())
}

/// Reads custom object `name`, sets `data[DATA_KEY] = value` and writes it back (PUT), again
/// on a conflict, as upstream's `updateCustomResource`.
async fn update_data(api: &Api<DynamicObject>, name: &str, value: &str) -> Result<DynamicObject, kube::Error> {
    let mut tries = 0;
    loop {
        let mut obj = api.get(name).await?;
        if !obj.data.get("data").is_some_and(Value::is_object) {
            obj.data["data"] = json!({});
        }
        obj.data["data"][DATA_KEY] = json!(value);
        match api.replace(name, &PostParams::default(), &obj).await {
            Err(kube::Error::Api(s)) if s.code == 409 && tries < 5 => tries += 1,
            other => return other,
        }
    }
}

/// Fails unless `answer` is a refusal containing `want`.
fn expect_refusal<T>(answer: Result<T, kube::Error>, what: &str, want: &str) -> CaseResult {
    match answer {
        Ok(_) => fail!("{what} was admitted; expected the webhook to refuse it with {want:?}"),
        Err(e) => ensure!(
            refusal(&e).contains(want),
            "{what}: expected a refusal containing {want:?}, got {:?}",
            refusal(&e)
        ),
    }
    Ok(())
}

/// Upstream webhook.go `It("should be able to deny custom resource creation, update and
/// deletion")`: a validating webhook on creates, updates and deletes of the CRD's objects
/// refuses an object with unwanted data, an update to unwanted data and the deletion of an
/// object marked non-deletable; once the mark is changed the object can be deleted.
pub(crate) async fn deny_custom_resource(f: &Framework) -> CaseResult {
    let crd = test_crd(f, &[("v1", true)], &open_schema());
    with_crd(f, &crd, async move |s, crd| {
        let hook = s.validating(
            "deny-unwanted-custom-resource-data.k8s.io",
            "/custom-resource",
            vec![crd_rule(&crd, &["CREATE", "UPDATE", "DELETE"])],
        );
        s.register_validating(f, "deny-custom-resource", vec![hook]).await?;
        let (api, ar) = objects(f, &crd, "v1");

        f.step("creating a custom object the webhook should deny");
        let answer = api
            .create(
                &PostParams::default(),
                &object(&ar, "cr-instance-1", &[(DATA_KEY, "webhook-disallow")]),
            )
            .await;
        expect_refusal(
            answer,
            "creating custom object cr-instance-1 with unwanted data",
            DENIED_WRITE,
        )?;

        f.step("creating a custom object whose deletion the webhook should deny");
        api.create(
            &PostParams::default(),
            &object(&ar, "cr-instance-2", &[(DATA_KEY, "webhook-nondeletable")]),
        )
        .await
        .map_err(|e| CaseError::from(e).context("creating custom object cr-instance-2"))?;

        f.step("updating the custom object with unwanted data");
        let answer = update_data(&api, "cr-instance-2", "webhook-disallow").await;
        expect_refusal(
            answer,
            "updating custom object cr-instance-2 to unwanted data",
            DENIED_WRITE,
        )?;

        f.step("deleting the custom object, which the webhook should deny");
        let answer = api.delete("cr-instance-2", &DeleteParams::default()).await;
        expect_refusal(answer, "deleting custom object cr-instance-2", DENIED_DELETE)?;

        f.step("removing the offending value and deleting the custom object");
        update_data(&api, "cr-instance-2", "webhook-allow").await.map_err(|e| {
            CaseError::failed(format!(
                "updating custom object cr-instance-2 to allowed data: {}",
                refusal(&e)
            ))
        })?;
        api.delete("cr-instance-2", &DeleteParams::default())
            .await
            .map_err(|e| {
                CaseError::failed(format!(
                    "deleting custom object cr-instance-2 once allowed: {}",
                    refusal(&e)
                ))
            })?;
        Ok(())
    })
    .await
}

/// Registers upstream's two staged mutating webhooks on `crd`'s objects: stage 1 on creates
/// and updates, stage 2 on creates.
async fn register_staged(
    f: &Framework,
    s: &crate::framework::webhook::WebhookServer,
    crd: &CustomResourceDefinition,
) -> CaseResult {
    let hooks = vec![
        s.mutating(
            "mutate-custom-resource-data-stage-1.k8s.io",
            "/mutating-custom-resource",
            vec![crd_rule(crd, &["CREATE", "UPDATE"])],
        ),
        s.mutating(
            "mutate-custom-resource-data-stage-2.k8s.io",
            "/mutating-custom-resource",
            vec![crd_rule(crd, &["CREATE"])],
        ),
    ];
    s.register_mutating(f, "mutate-custom-resource", hooks).await?;
    Ok(())
}

/// Upstream's `testMutatingCustomResourceWebhook`: a custom object created with
/// `mutation-start` is stored with what the webhooks added (less what the schema prunes).
async fn create_mutated(f: &Framework, crd: &CustomResourceDefinition, want: &[(&str, &str)]) -> CaseResult {
    let (api, ar) = objects(f, crd, "v1");
    f.step("creating a custom object the webhooks should mutate");
    let created = api
        .create(
            &PostParams::default(),
            &object(&ar, "cr-instance-1", &[("mutation-start", "yes")]),
        )
        .await
        .map_err(|e| CaseError::from(e).context("creating custom object cr-instance-1"))?;
    expect_data(&created, want)
}

/// Upstream webhook.go `It("should mutate custom resource")`: the two mutating webhooks add
/// `mutation-stage-1` and `mutation-stage-2` to a new custom object.
pub(crate) async fn mutate_custom_resource(f: &Framework) -> CaseResult {
    let crd = test_crd(f, &[("v1", true)], &open_schema());
    with_crd(f, &crd, async move |s, crd| {
        register_staged(f, &s, &crd).await?;
        create_mutated(
            f,
            &crd,
            &[
                ("mutation-start", "yes"),
                ("mutation-stage-1", "yes"),
                ("mutation-stage-2", "yes"),
            ],
        )
        .await
    })
    .await
}

/// Upstream webhook.go `It("should mutate custom resource with different stored version")`: a
/// custom object is created while v1 is the storage version; the CRD then makes v2 the storage
/// version, and a JSON patch through v2 adding `/dummy` is applied, with the webhooks' data kept.
pub(crate) async fn mutate_stored_version(f: &Framework) -> CaseResult {
    let crd = test_crd(f, &[("v1", true), ("v2", false)], &open_schema());
    with_crd(f, &crd, async move |s, crd| {
        register_staged(f, &s, &crd).await?;
        let (v1, ar) = objects(f, &crd, "v1");
        f.step("creating a custom object while v1 is the storage version");
        v1.create(
            &PostParams::default(),
            &object(&ar, "cr-instance-1", &[("mutation-start", "yes")]),
        )
        .await
        .map_err(|e| CaseError::from(e).context("creating custom object cr-instance-1"))?;

        f.step("patching the CustomResourceDefinition to make v2 the storage version");
        let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
        let patch = json!({"spec": {"versions": [
            {"name": "v1", "served": true, "storage": false, "schema": schema},
            {"name": "v2", "served": true, "storage": true, "schema": schema},
        ]}});
        f.api_all::<CustomResourceDefinition>()
            .patch(&crd.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| CaseError::from(e).context(format!("making v2 the storage version of {}", crd.name_any())))?;

        f.step("JSON-patching the custom object through v2");
        let path = format!(
            "/apis/{}/v2/namespaces/{}/{}/cr-instance-1",
            crd.spec.group,
            f.ns(),
            crd.spec.names.plural
        );
        let patched: DynamicObject = f
            .json_patch(&path, &json!([{"op": "add", "path": "/dummy", "value": "test"}]))
            .await?;
        expect_data(
            &patched,
            &[
                ("mutation-start", "yes"),
                ("mutation-stage-1", "yes"),
                ("mutation-stage-2", "yes"),
            ],
        )?;
        let dummy = patched.data.get("dummy");
        ensure!(
            dummy == Some(&json!("test")),
            "custom object cr-instance-1 patched through v2 has dummy {dummy:?}, expected \"test\""
        );
        Ok(())
    })
    .await
}

/// Upstream webhook.go `It("should mutate custom resource with pruning")`: with a schema that
/// declares `mutation-start` and `mutation-stage-1` only, the `mutation-stage-2` the second
/// webhook adds is pruned before the object is stored.
pub(crate) async fn mutate_pruning(f: &Framework) -> CaseResult {
    let crd = test_crd(f, &[("v1", true), ("v2", false)], &pruning_schema());
    with_crd(f, &crd, async move |s, crd| {
        register_staged(f, &s, &crd).await?;
        create_mutated(f, &crd, &[("mutation-start", "yes"), ("mutation-stage-1", "yes")]).await
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_cover_every_served_version() {
        let mut crd = CustomResourceDefinition::default();
        crd.spec.group = GROUP.into();
        crd.spec.names.plural = "things".into();
        crd.spec.versions = vec![
            CustomResourceDefinitionVersion {
                name: "v1".into(),
                served: true,
                ..Default::default()
            },
            CustomResourceDefinitionVersion {
                name: "v2".into(),
                served: false,
                ..Default::default()
            },
        ];
        let r = crd_rule(&crd, &["CREATE"]);
        assert_eq!(r.api_versions, Some(vec!["v1".to_string()]));
        assert_eq!(r.resources, Some(vec!["things".to_string()]));
    }

    #[test]
    fn stored_data_is_compared_exactly() {
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Thing"), "things");
        let obj = object(&ar, "a", &[("mutation-start", "yes"), ("mutation-stage-2", "yes")]);
        assert!(expect_data(&obj, &[("mutation-start", "yes")]).is_err());
        assert!(expect_data(&obj, &[("mutation-start", "yes"), ("mutation-stage-2", "yes")]).is_ok());
    }
}
