//! `[sig-api-machinery] API priority and fairness` API cases (upstream
//! test/e2e/apimachinery/flowcontrol.go): FlowSchema and PriorityLevelConfiguration are
//! discovered with their status subresources, and support create, get, list, watch, patch,
//! update, status get/patch/update, delete and deletecollection.
//!
//! The two cases have one shape; [`api_operations`] runs it for either kind. Only API calls, so
//! one body serves both OSes.

use std::fmt::Debug;

use k8s_openapi::ClusterResourceScope;
use k8s_openapi::api::flowcontrol::v1::{
    FlowDistinguisherMethod, FlowSchema, FlowSchemaSpec, LimitResponse, LimitedPriorityLevelConfiguration,
    NonResourcePolicyRule, PolicyRulesWithSubjects, PriorityLevelConfiguration, PriorityLevelConfigurationReference,
    PriorityLevelConfigurationSpec, Subject, UserSubject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroup, APIGroupList, APIResourceList, ObjectMeta};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::update::replace_retrying;
use crate::framework::watch_events::{EventType, Resume};
use crate::framework::{CaseError, CaseResult, Framework, RUN_ID_LABEL};
use crate::{ensure, fail};

/// Upstream flowcontrol.go "should support FlowSchema API operations".
pub(crate) const FLOW_SCHEMA: &str =
    "[sig-api-machinery] API priority and fairness should support FlowSchema API operations [Conformance]";
/// Upstream flowcontrol.go "should support PriorityLevelConfiguration API operations".
pub(crate) const PRIORITY_LEVEL: &str = "[sig-api-machinery] API priority and fairness should support PriorityLevelConfiguration API operations [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(FLOW_SCHEMA, Kind::Adapted, flow_schema),
        case!(PRIORITY_LEVEL, Kind::Adapted, priority_level),
    ]
}

const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// What differs between the kinds whose API operations upstream checks the same way
/// (FlowSchema, PriorityLevelConfiguration, and the ValidatingAdmissionPolicy kinds): the group
/// and plural, the object to create, the spec field the patch and the update change and where
/// to read it, and the condition the `/status` patch adds.
pub(super) struct Shape<K> {
    pub(super) group: &'static str,
    pub(super) plural: &'static str,
    pub(super) template: K,
    /// The merge patch's `spec` part (upstream sets the field to 9999 / 4).
    pub(super) patch_spec: Value,
    /// The field as the patch sets it.
    pub(super) patched: Value,
    /// Sets the field to the update's value (9000 / 6).
    pub(super) update: fn(&mut K),
    pub(super) updated: Value,
    /// Reads the field.
    pub(super) field: fn(&K) -> Option<Value>,
    /// The condition the `/status` patch adds; `None` for a kind without a status subresource.
    pub(super) status_condition: Option<Value>,
}

/// `generateName: prefix`, the run-id label and `label=<case namespace>` (the selector of the
/// case's objects).
pub(super) fn meta(f: &Framework, prefix: &str, label: &str) -> ObjectMeta {
    ObjectMeta {
        generate_name: Some(prefix.into()),
        labels: Some(
            [
                (label.to_string(), f.ns().to_string()),
                (RUN_ID_LABEL.to_string(), f.run().run_id.clone()),
            ]
            .into(),
        ),
        ..Default::default()
    }
}

/// Upstream: the FlowSchema operations on a schema for a user that does not exist.
async fn flow_schema(f: &Framework) -> CaseResult {
    let template = FlowSchema {
        metadata: meta(f, "e2e-example-fs-", "example-e2e-fs-label"),
        spec: Some(FlowSchemaSpec {
            matching_precedence: Some(10000),
            priority_level_configuration: PriorityLevelConfigurationReference {
                name: "global-default".into(),
            },
            distinguisher_method: Some(FlowDistinguisherMethod { type_: "ByUser".into() }),
            rules: Some(vec![PolicyRulesWithSubjects {
                subjects: vec![Subject {
                    kind: "User".into(),
                    user: Some(UserSubject {
                        name: "example-e2e-non-existent-user".into(),
                    }),
                    ..Default::default()
                }],
                non_resource_rules: Some(vec![NonResourcePolicyRule {
                    verbs: vec!["*".into()],
                    non_resource_urls: vec!["*".into()],
                }]),
                ..Default::default()
            }]),
        }),
        status: None,
    };
    api_operations(
        f,
        Shape {
            group: GROUP,
            plural: "flowschemas",
            template,
            patch_spec: json!({"matchingPrecedence": 9999}),
            patched: json!(9999),
            update: |fs| fs.spec.get_or_insert_with(Default::default).matching_precedence = Some(9000),
            updated: json!(9000),
            field: |fs| fs.spec.as_ref()?.matching_precedence.map(|p| json!(p)),
            status_condition: Some(json!({"type": "PatchStatusFailed", "status": "False", "reason": "e2e"})),
        },
        "example-e2e-fs-label",
    )
    .await
}

/// Upstream: the PriorityLevelConfiguration operations on a Limited level of 2 shares.
async fn priority_level(f: &Framework) -> CaseResult {
    let template = PriorityLevelConfiguration {
        metadata: meta(f, "e2e-example-pl-", "example-e2e-pl-label"),
        spec: Some(PriorityLevelConfigurationSpec {
            type_: "Limited".into(),
            limited: Some(LimitedPriorityLevelConfiguration {
                nominal_concurrency_shares: Some(2),
                limit_response: Some(LimitResponse {
                    type_: "Reject".into(),
                    queuing: None,
                }),
                ..Default::default()
            }),
            exempt: None,
        }),
        status: None,
    };
    api_operations(
        f,
        Shape {
            group: GROUP,
            plural: "prioritylevelconfigurations",
            template,
            patch_spec: json!({"limited": {"nominalConcurrencyShares": 4}}),
            patched: json!(4),
            update: |pl| {
                if let Some(l) = pl.spec.as_mut().and_then(|s| s.limited.as_mut()) {
                    l.nominal_concurrency_shares = Some(6);
                }
            },
            updated: json!(6),
            field: |pl| {
                pl.spec
                    .as_ref()?
                    .limited
                    .as_ref()?
                    .nominal_concurrency_shares
                    .map(|n| json!(n))
            },
            status_condition: Some(json!({"type": "PatchStatusFailed", "status": "False", "reason": "e2e"})),
        },
        "example-e2e-pl-label",
    )
    .await
}

/// Runs upstream's operations for `shape`, then deletes whatever is left with the case's label
/// (the objects are cluster-scoped: the namespace teardown does not remove them).
pub(super) async fn api_operations<K>(f: &Framework, shape: Shape<K>, label_key: &str) -> CaseResult
where
    K: Resource<Scope = ClusterResourceScope> + Clone + Debug + Serialize + DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    let selector = format!("{label_key}={}", f.ns());
    let api: Api<K> = f.api_all();
    let result = operations(f, &api, &shape, &selector).await;
    if let Err(e) = api
        .delete_collection(&DeleteParams::default(), &ListParams::default().labels(&selector))
        .await
    {
        tracing::warn!(selector, error = %e, "deleting the case's {} failed", shape.plural);
    }
    result
}

/// Upstream: the group and version in `/apis` and `/apis/{group}`, the resource (and its
/// status, when it has one) in `/apis/{group}/v1`.
async fn discover(f: &Framework, group: &str, plural: &str, status: bool) -> CaseResult {
    let groups: APIGroupList = f.get_path("/apis").await?;
    let listed = groups
        .groups
        .iter()
        .any(|g| g.name == group && g.versions.iter().any(|v| v.version == "v1"));
    ensure!(listed, "/apis does not list {group}/v1");
    let group_doc: APIGroup = f.get_path(&format!("/apis/{group}")).await?;
    ensure!(
        group_doc.versions.iter().any(|v| v.version == "v1"),
        "/apis/{group} does not list version v1"
    );
    let resources: APIResourceList = f.get_path(&format!("/apis/{group}/v1")).await?;
    let mut names = vec![plural.to_string()];
    if status {
        names.push(format!("{plural}/status"));
    }
    for name in names {
        if !resources.resources.iter().any(|r| r.name == name) {
            let names: Vec<&str> = resources.resources.iter().map(|r| r.name.as_str()).collect();
            fail!("/apis/{group}/v1 does not list {name}: {names:?}");
        }
    }
    Ok(())
}

/// Whether `obj`'s `status.conditions` holds one of type `type_`.
fn has_condition<K: Serialize>(obj: &K, type_: &str) -> bool {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v["status"]["conditions"].as_array().cloned())
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == type_))
}

async fn operations<K>(f: &Framework, api: &Api<K>, shape: &Shape<K>, selector: &str) -> CaseResult
where
    K: Resource<Scope = ClusterResourceScope> + Clone + Debug + Serialize + DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    let plural = shape.plural;
    discover(f, shape.group, plural, shape.status_condition.is_some()).await?;

    f.step(format!("creating three {plural}"));
    let mut created = Vec::new();
    for i in 0..3 {
        // Upstream's template has a generateName; a create whose answer is lost cannot be sent
        // again (a second object would be made), so each gets the name the server would have
        // generated from it, unique to the case, and a lost answer is read back.
        let mut obj = shape.template.clone();
        let meta = obj.meta_mut();
        if let Some(prefix) = meta.generate_name.take() {
            meta.name = Some(format!("{prefix}{}-{i}", f.ns()));
        }
        created.push(api.create(&PostParams::default(), &obj).await?);
    }
    let target = created.pop().expect("three were created");
    let name = target.name_any();
    let read = api.get(&name).await?;
    ensure!(
        read.uid() == target.uid() && read.resource_version().is_some_and(|rv| !rv.is_empty()),
        "{plural} {name} read back with uid {:?} and resourceVersion {:?}, created with uid {:?}",
        read.uid(),
        read.resource_version(),
        target.uid()
    );
    let listed = api.list(&ListParams::default().labels(selector)).await?;
    ensure!(
        listed.items.len() == 3,
        "listing {plural} with labels {selector} found {}, expected 3",
        listed.items.len()
    );
    let from = listed.metadata.resource_version.clone().unwrap_or_default();
    let mut watch = f.watch_events(api, selector, Some(&from), Resume::Relist).await?;

    f.step(format!("patching {plural} {name}"));
    let body = json!({"metadata": {"annotations": {"patched": "true"}}, "spec": shape.patch_spec});
    let patched = api.patch(&name, &PatchParams::default(), &Patch::Merge(&body)).await?;
    ensure!(
        patched.annotations().get("patched").map(String::as_str) == Some("true")
            && (shape.field)(&patched).as_ref() == Some(&shape.patched),
        "{plural} {name} after the patch has annotations {:?} and field {:?}, expected patched=true and {}",
        patched.annotations(),
        (shape.field)(&patched),
        shape.patched
    );
    let newer = |a: &K, b: &K| {
        let rv = |o: &K| o.resource_version().and_then(|v| v.parse::<u64>().ok());
        rv(b) > rv(a)
    };
    ensure!(
        newer(&target, &patched),
        "{plural} {name}: the patch's resourceVersion {:?} is not larger than the create's {:?}",
        patched.resource_version(),
        target.resource_version()
    );

    f.step(format!("updating {plural} {name}"));
    let update = shape.update;
    let updated = replace_retrying(api, &name, |o: &mut K| {
        o.annotations_mut().insert("updated".into(), "true".into());
        update(o);
    })
    .await?;
    ensure!(
        updated.annotations().get("updated").map(String::as_str) == Some("true")
            && (shape.field)(&updated).as_ref() == Some(&shape.updated),
        "{plural} {name} after the update has annotations {:?} and field {:?}, expected updated=true and {}",
        updated.annotations(),
        (shape.field)(&updated),
        shape.updated
    );
    let target_name = name.clone();
    watch
        .expect(
            EventType::Modified,
            "the patched annotation",
            move |o: &K| {
                o.name_any() == target_name && o.annotations().get("patched").map(String::as_str) == Some("true")
            },
            f.remaining(),
        )
        .await?;

    if let Some(condition) = &shape.status_condition {
        status_operations(f, api, plural, &name, &target, condition).await?;
    }

    f.step(format!("deleting {plural} {name}"));
    api.delete(&name, &DeleteParams::default()).await?;
    if api.get_opt(&name).await?.is_some() {
        fail!("{plural} {name} can still be read after its deletion");
    }
    let left = api.list(&ListParams::default().labels(selector)).await?;
    ensure!(
        left.items.len() == 2,
        "after deleting {name}, {} {plural} carry labels {selector}, expected 2",
        left.items.len()
    );
    f.step(format!("deleting the collection of {plural} with labels {selector}"));
    api.delete_collection(&DeleteParams::default(), &ListParams::default().labels(selector))
        .await?;
    let left = api.list(&ListParams::default().labels(selector)).await?;
    ensure!(
        left.items.is_empty(),
        "after the DELETE of the collection, {} {plural} carry labels {selector}, expected none",
        left.items.len()
    );
    Ok(())
}

/// Upstream: `/status` read (kind and uid as created), patched with `condition` (of type
/// `PatchStatusFailed`), and updated with condition `StatusUpdateFailed`.
async fn status_operations<K>(
    f: &Framework,
    api: &Api<K>,
    plural: &str,
    name: &str,
    created: &K,
    condition: &Value,
) -> CaseResult
where
    K: Resource<Scope = ClusterResourceScope> + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    let read = api.get_status(name).await?;
    ensure!(
        read.uid() == created.uid(),
        "{plural} {name} read from /status has uid {:?}, created with {:?}",
        read.uid(),
        created.uid()
    );
    f.step(format!("patching the /status of {plural} {name}"));
    let body = json!({"status": {"conditions": [condition]}});
    let patched = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    ensure!(
        has_condition(&patched, "PatchStatusFailed"),
        "{plural} {name} after the /status patch has no condition PatchStatusFailed"
    );

    f.step(format!("updating the /status of {plural} {name}"));
    let mut attempt = 1;
    let updated = loop {
        let current = api.get(name).await?;
        let mut v = serde_json::to_value(&current).map_err(|e| CaseError::failed(e.to_string()))?;
        let condition = json!({"type": "StatusUpdateFailed", "status": "False", "reason": "E2E",
            "message": "Set from an e2e test", "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string()});
        match v["status"]["conditions"].as_array_mut() {
            Some(cs) => cs.push(condition),
            None => v["status"]["conditions"] = json!([condition]),
        }
        let obj: K = serde_json::from_value(v).map_err(|e| CaseError::failed(e.to_string()))?;
        match api.replace_status(name, &PostParams::default(), &obj).await {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 5 => attempt += 1,
            other => break other?,
        }
    };
    ensure!(
        has_condition(&updated, "StatusUpdateFailed"),
        "{plural} {name} after the /status update has no condition StatusUpdateFailed"
    );
    Ok(())
}
