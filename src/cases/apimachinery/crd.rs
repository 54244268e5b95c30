//! Adapted cases: CustomResourceDefinition resources (upstream
//! `test/e2e/apimachinery/custom_resource_definition.go`).
//!
//! These exercise the API server alone, so the Windows and Linux variants run the same body: a
//! Windows job keeps these TestGrid rows because every operator and Helm chart it installs (the
//! GMSA webhook's CRD, CSI drivers) depends on them. CRDs are cluster-scoped, so each carries
//! the run-id label (the run's sweep finds any a failure leaves) and a name derived from the
//! case's namespace, so parallel cases and runs never share one.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionCondition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, Framework, RUN_ID_LABEL};
use crate::{ensure, fail};

/// Upstream custom_resource_definition.go "creating/deleting custom resource definition objects works".
pub(crate) const CREATE_DELETE: &str = "[sig-api-machinery] CustomResourceDefinition resources \
     [Privileged:ClusterAdmin] Simple CustomResourceDefinition creating/deleting custom resource definition objects works [Conformance]";
/// Upstream custom_resource_definition.go "listing custom resource definition objects works".
pub(crate) const LISTING: &str = "[sig-api-machinery] CustomResourceDefinition resources [Privileged:ClusterAdmin] \
     Simple CustomResourceDefinition listing custom resource definition objects works [Conformance]";
/// Upstream custom_resource_definition.go "getting/updating/patching custom resource definition status sub-resource works".
pub(crate) const STATUS: &str = "[sig-api-machinery] CustomResourceDefinition resources [Privileged:ClusterAdmin] \
     Simple CustomResourceDefinition getting/updating/patching custom resource definition status sub-resource works [Conformance]";
/// Upstream custom_resource_definition.go "should include custom resource definition resources in discovery documents".
pub(crate) const DISCOVERY: &str = "[sig-api-machinery] CustomResourceDefinition resources [Privileged:ClusterAdmin] \
     should include custom resource definition resources in discovery documents [Conformance]";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        case!(CREATE_DELETE, Kind::Adapted, create_delete),
        case!(LISTING, Kind::Adapted, listing),
        case!(STATUS, Kind::Adapted, status_subresource),
        case!(DISCOVERY, Kind::Adapted, discovery),
    ]
}

/// The group upstream's fixtures use.
pub(super) const GROUP: &str = "mygroup.example.com";

/// The random part of the case namespace's name: what makes cluster-scoped names (CRDs, their
/// groups) unique to the case.
pub(super) fn case_suffix(f: &Framework) -> String {
    f.ns()
        .rsplit('-')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect()
}

/// A cluster-scoped CRD like upstream's `NewRandomNameV1CustomResourceDefinition`: one served
/// and stored version `v1beta1`, a schema keeping unknown fields, names unique to this case
/// (`index` tells a case's several CRDs apart).
pub(super) fn random_crd(f: &Framework, index: usize, labels: &[(&str, &str)]) -> CustomResourceDefinition {
    let suffix = case_suffix(f);
    let plural = format!("foo{suffix}{index}s");
    let kind = format!("Foo{suffix}{index}");
    let mut all_labels = BTreeMap::from([(RUN_ID_LABEL.to_string(), f.run().run_id.clone())]);
    all_labels.extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{plural}.{GROUP}")),
            labels: Some(all_labels),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: GROUP.into(),
            names: CustomResourceDefinitionNames {
                plural: plural.clone(),
                singular: Some(format!("foo{suffix}{index}")),
                kind: kind.clone(),
                list_kind: Some(format!("{kind}List")),
                ..Default::default()
            },
            scope: "Cluster".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: "v1beta1".into(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(JSONSchemaProps {
                        type_: Some("object".into()),
                        x_kubernetes_preserve_unknown_fields: Some(true),
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

fn condition_true(crd: &CustomResourceDefinition, kind: &str) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == "True"))
}

/// Creates `crd` and waits, as upstream's `CreateNewV1CustomResourceDefinitionWatchUnsafe`
/// does, until it is Established and its resource answers a list.
pub(super) async fn create_established(
    f: &Framework,
    crd: &CustomResourceDefinition,
) -> Result<CustomResourceDefinition, CaseError> {
    let crds: Api<CustomResourceDefinition> = f.api_all();
    let name = crd.name_any();
    crds.create(&PostParams::default(), crd).await?;
    let ready = f
        .wait_for(
            &crds,
            &name,
            |c: Option<&CustomResourceDefinition>| c.is_some_and(|c| condition_true(c, "Established")),
            "to be Established (condition Established=True)",
        )
        .await?;
    let Some(ready) = ready else {
        fail!("CustomResourceDefinition {name} vanished while waiting for Established");
    };
    objects_api(f, &ready)
        .list(&ListParams::default())
        .await
        .map_err(|e| CaseError::from(e).context(format!("listing the new resource {}", ready.spec.names.plural)))?;
    Ok(ready)
}

/// The cluster-wide handle of the custom objects of `crd`'s first version (the CRDs here
/// are cluster-scoped and serve one version, as upstream's fixtures).
pub(super) fn objects_api(f: &Framework, crd: &CustomResourceDefinition) -> Api<DynamicObject> {
    let version = crd.spec.versions.first().map_or("v1beta1", |v| v.name.as_str());
    let gvk = GroupVersionKind::gvk(&crd.spec.group, version, &crd.spec.names.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
    Api::all_with(f.client(), &resource)
}

/// Deletes a CRD and waits until it is gone, as upstream's `DeleteV1CustomResourceDefinition`.
pub(super) async fn delete_gone(f: &Framework, name: &str) -> CaseResult {
    let crds: Api<CustomResourceDefinition> = f.api_all();
    crds.delete(name, &DeleteParams::default()).await?;
    f.wait_for(
        &crds,
        name,
        |c: Option<&CustomResourceDefinition>| c.is_none(),
        "to be deleted",
    )
    .await?;
    Ok(())
}

/// Upstream: a random CRD is created (and becomes Established) and deleted, both successfully.
async fn create_delete(f: &Framework) -> CaseResult {
    let crd = create_established(f, &random_crd(f, 0, &[])).await?;
    f.step("deleting the CustomResourceDefinition");
    delete_gone(f, &crd.name_any()).await
}

/// Upstream: ten labelled CRDs and one unlabelled; a label-selected list returns exactly the
/// ten with the specs they were created with; a deletecollection by the label removes them and
/// leaves the unlabelled one.
async fn listing(f: &Framework) -> CaseResult {
    const SIZE: usize = 10;
    let crds: Api<CustomResourceDefinition> = f.api_all();
    let label = ("e2e-list-test-uuid", f.ns());
    let mut created = Vec::new();
    for i in 0..SIZE {
        created.push(create_established(f, &random_crd(f, i, &[label])).await?);
    }
    let other = create_established(f, &random_crd(f, SIZE, &[])).await?;
    let result = async {
        let selector = format!("{}={}", label.0, label.1);
        let listed = crds.list(&ListParams::default().labels(&selector)).await?;
        ensure!(
            listed.items.len() == SIZE,
            "listing CustomResourceDefinitions with {selector} returned {} ({:?}), expected the {SIZE} labelled ones",
            listed.items.len(),
            listed.items.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
        );
        for actual in &listed.items {
            let Some(expected) = created.iter().find(|c| c.name_any() == actual.name_any()) else {
                fail!(
                    "the label-selected list holds {}, which this case did not create",
                    actual.name_any()
                );
            };
            ensure!(
                actual.spec == expected.spec,
                "CustomResourceDefinition {} lists with a spec different from the one created:\nlisted: {:?}\ncreated: {:?}",
                actual.name_any(),
                actual.spec,
                expected.spec
            );
        }
        f.step("deleting the labelled CustomResourceDefinitions as a collection");
        crds.delete_collection(&DeleteParams::default(), &ListParams::default().labels(&selector))
            .await?;
        for c in &created {
            f.wait_for(&crds, &c.name_any(), |c: Option<&CustomResourceDefinition>| c.is_none(), "to be deleted by the collection delete")
                .await?;
        }
        ensure!(
            crds.get_opt(&other.name_any()).await?.is_some(),
            "the unlabelled CustomResourceDefinition {} was deleted by a collection delete selecting {selector}",
            other.name_any()
        );
        Ok(())
    }
    .await;
    let cleanup = delete_gone(f, &other.name_any()).await;
    result.and(cleanup)
}

/// Upstream: the status subresource reads the CRD (spec included); a condition added through
/// an update of the status and one set by a JSON patch of the status are each visible in what
/// the server returns.
async fn status_subresource(f: &Framework) -> CaseResult {
    let crd = create_established(f, &random_crd(f, 0, &[])).await?;
    let name = crd.name_any();
    let crds: Api<CustomResourceDefinition> = f.api_all();
    let result = async {
        let mut current = crds.get_status(&name).await?;
        ensure!(
            current.spec == crd.spec,
            "the status subresource of {name} shows spec {:?}, expected the created spec {:?}",
            current.spec,
            crd.spec
        );
        let status = current.status.get_or_insert_with(Default::default);
        let mut conditions = status.conditions.clone().unwrap_or_default();
        conditions.push(CustomResourceDefinitionCondition {
            message: Some("updated".into()),
            ..Default::default()
        });
        status.conditions = Some(conditions);
        let updated = crds.replace_status(&name, &PostParams::default(), &current).await?;
        ensure!(
            has_message(&updated, "updated"),
            "after UpdateStatus with a condition \"updated\", {name} reports conditions {:?}",
            conditions_of(&updated)
        );
        // A JSON patch (RFC 6902) of the status subresource, sent as upstream's client does.
        let patch = json!([{"op": "add", "path": "/status/conditions", "value": [{"message": "patched"}]}]);
        let patched: CustomResourceDefinition = f
            .json_patch(
                &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}/status"),
                &patch,
            )
            .await?;
        ensure!(
            has_message(&patched, "patched"),
            "after a JSON patch of the status with a condition \"patched\", {name} reports conditions {:?}",
            conditions_of(&patched)
        );
        Ok(())
    }
    .await;
    let cleanup = delete_gone(f, &name).await;
    result.and(cleanup)
}

fn conditions_of(crd: &CustomResourceDefinition) -> Vec<(String, String)> {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .map(|c| (c.type_.clone(), c.message.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

fn has_message(crd: &CustomResourceDefinition, message: &str) -> bool {
    conditions_of(crd).iter().any(|(_, m)| m == message)
}

/// Upstream: `/apis` lists the apiextensions.k8s.io group with version v1,
/// `/apis/apiextensions.k8s.io` names itself and lists v1, and `/apis/apiextensions.k8s.io/v1`
/// lists the customresourcedefinitions resource.
async fn discovery(f: &Framework) -> CaseResult {
    let get = |path: &'static str| async move {
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| CaseError::failed(e.to_string()))?;
        let text = f
            .client()
            .request_text(req)
            .await
            .map_err(|e| CaseError::from(e).context(format!("fetching {path}")))?;
        serde_json::from_str::<Value>(&text).map_err(|e| CaseError::failed(format!("{path} is not JSON: {e}: {text}")))
    };
    let has_v1 = |group: &Value| {
        group["versions"]
            .as_array()
            .is_some_and(|vs| vs.iter().any(|v| v["version"] == "v1"))
    };
    f.step("fetching the /apis discovery document");
    let apis = get("/apis").await?;
    let Some(group) = apis["groups"]
        .as_array()
        .and_then(|gs| gs.iter().find(|g| g["name"] == "apiextensions.k8s.io"))
    else {
        fail!(
            "apiextensions.k8s.io API group not found in /apis discovery document; groups: {:?}",
            apis["groups"]
                .as_array()
                .map(|gs| gs.iter().filter_map(|g| g["name"].as_str()).collect::<Vec<_>>())
        );
    };
    ensure!(
        has_v1(group),
        "apiextensions.k8s.io/v1 API group version not found in /apis discovery document: {group}"
    );
    f.step("fetching the /apis/apiextensions.k8s.io discovery document");
    let group = get("/apis/apiextensions.k8s.io").await?;
    ensure!(
        group["name"] == "apiextensions.k8s.io",
        "/apis/apiextensions.k8s.io names group {}, expected apiextensions.k8s.io",
        group["name"]
    );
    ensure!(
        has_v1(&group),
        "apiextensions.k8s.io/v1 API group version not found in /apis/apiextensions.k8s.io discovery document: {group}"
    );
    f.step("fetching the /apis/apiextensions.k8s.io/v1 discovery document");
    let list = get("/apis/apiextensions.k8s.io/v1").await?;
    ensure!(
        list["groupVersion"] == "apiextensions.k8s.io/v1",
        "/apis/apiextensions.k8s.io/v1 reports groupVersion {}, expected apiextensions.k8s.io/v1",
        list["groupVersion"]
    );
    ensure!(
        list["resources"]
            .as_array()
            .is_some_and(|rs| rs.iter().any(|r| r["name"] == "customresourcedefinitions")),
        "customresourcedefinitions resource not found in /apis/apiextensions.k8s.io/v1 discovery document: {}",
        list["resources"]
    );
    Ok(())
}
