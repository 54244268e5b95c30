//! `[sig-node] ConfigMap should run through a ConfigMap lifecycle` (upstream
//! test/e2e/common/node/configmap.go) and `[sig-scheduling] LimitRange should list, patch and
//! delete a LimitRange by collection` (upstream test/e2e/scheduling/limit_range.go): objects
//! listed across namespaces, patched, and deleted by collection.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, LimitRange, LimitRangeItem, LimitRangeSpec, Namespace};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::{delete_collection_and_check, find_in_all_namespaces};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseError, CaseResult, Framework, delete_namespace, namespace_labels};

/// Upstream configmap.go "should run through a ConfigMap lifecycle".
pub(crate) const CONFIGMAP_LIFECYCLE: &str =
    "[sig-node] ConfigMap should run through a ConfigMap lifecycle [Conformance]";
/// Upstream limit_range.go "should list, patch and delete a LimitRange by collection".
pub(crate) const LIMITRANGE_COLLECTION: &str =
    "[sig-scheduling] LimitRange should list, patch and delete a LimitRange by collection [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(CONFIGMAP_LIFECYCLE, Kind::Adapted, configmap_lifecycle),
        case!(LIMITRANGE_COLLECTION, Kind::Adapted, limitrange_collection),
    ]
}

/// Creates a labelled ConfigMap, finds it in all namespaces, patches a label and its data, finds
/// the patched form in all namespaces, and deletes it by collection.
async fn configmap_lifecycle(f: &Framework) -> CaseResult {
    let name = "e2e-configmap-lifecycle";
    let static_label = "test-configmap-static=true";
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("test-configmap-static".into(), "true".into())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("valueName".into(), "value".into())])),
        ..Default::default()
    };
    f.create(&cm).await?;
    find_in_all_namespaces::<ConfigMap>(f, static_label, f.ns(), name).await?;

    f.step("patching the ConfigMap's label and data");
    let patch = json!({
        "metadata": {"labels": {"test-configmap": "patched"}},
        "data": {"valueName": "value1"}
    });
    f.api::<ConfigMap>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let got = f.api::<ConfigMap>().get(name).await?;
    expect_patched_config_map(&got, "as read back")?;
    let listed = find_in_all_namespaces::<ConfigMap>(f, static_label, f.ns(), name).await?;
    expect_patched_config_map(&listed, "as listed in all namespaces")?;

    delete_collection_and_check::<ConfigMap>(f, static_label, &[name.to_string()]).await
}

/// Checks that ConfigMap `cm` carries the label and data the lifecycle case patched in.
fn expect_patched_config_map(cm: &ConfigMap, seen: &str) -> CaseResult {
    let label = cm.labels().get("test-configmap").map(String::as_str);
    let value = cm.data.as_ref().and_then(|d| d.get("valueName")).map(String::as_str);
    ensure!(
        label == Some("patched") && value == Some("value1"),
        "ConfigMap {}/{} {seen} after the patch: expected label test-configmap=patched and data \
         valueName=value1, got label {label:?} and data {value:?}",
        cm.namespace().unwrap_or_default(),
        cm.name_any()
    );
    Ok(())
}

/// A LimitRange for containers with `default_memory` as the default memory limit.
fn limit_range(name: &str, label: &BTreeMap<String, String>, default_memory: &str) -> LimitRange {
    let res = |cpu: &str, mem: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(mem.into())),
        ])
    };
    LimitRange {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(label.clone()),
            ..Default::default()
        },
        spec: Some(LimitRangeSpec {
            limits: vec![LimitRangeItem {
                type_: "Container".into(),
                min: Some(res("50m", "100Mi")),
                max: Some(res("500m", "500Mi")),
                default: Some(res("500m", default_memory)),
                default_request: Some(res("100m", "200Mi")),
                ..Default::default()
            }],
        }),
    }
}

/// The default memory limit of a LimitRange's first item.
fn default_memory(lr: &LimitRange) -> Option<String> {
    lr.spec
        .as_ref()?
        .limits
        .first()?
        .default
        .as_ref()?
        .get("memory")
        .map(|q| q.0.clone())
}

/// Creates a LimitRange in the case namespace and one in a second namespace, lists both across
/// namespaces, patches the first, deletes it by collection and checks the second survives.
async fn limitrange_collection(f: &Framework) -> CaseResult {
    let namespaces: Api<Namespace> = f.api_all();
    let second = Namespace {
        metadata: ObjectMeta {
            // Named here, not generated: a create whose answer a broken connection lost can be
            // sent again (409 then means it was stored).
            name: Some(format!("{}-second", f.ns())),
            labels: Some(namespace_labels(&f.run().run_id, f.case_name())),
            ..Default::default()
        },
        ..Default::default()
    };
    f.step("creating a second namespace");
    let second = namespaces
        .create(&PostParams::default(), &second)
        .await
        .map_err(|e| CaseError::from(e).context("creating the second namespace"))?
        .name_any();
    let result = limitrange_collection_in(f, &second).await;
    if let Err(e) = delete_namespace(&f.client(), &second).await {
        tracing::warn!(namespace = %second, error = %e, "deleting the second namespace failed");
    }
    result
}

async fn limitrange_collection_in(f: &Framework, second: &str) -> CaseResult {
    // The label value is the case namespace, so the cluster-wide list sees this case's objects only.
    let label = BTreeMap::from([("e2e-limitrange".to_string(), f.ns().to_string())]);
    let selector = format!("e2e-limitrange={}", f.ns());
    let name = "e2e-limitrange";
    f.create(&limit_range(name, &label, "500Mi")).await?;
    let mut other = limit_range(name, &label, "500Mi");
    other
        .labels_mut()
        .insert(crate::framework::RUN_ID_LABEL.into(), f.run().run_id.clone());
    f.step(format!("creating LimitRange {name} in {second}"));
    Api::<LimitRange>::namespaced(f.client(), second)
        .create(&PostParams::default(), &other)
        .await?;
    find_in_all_namespaces::<LimitRange>(f, &selector, f.ns(), name).await?;
    find_in_all_namespaces::<LimitRange>(f, &selector, second, name).await?;

    f.step(format!("patching LimitRange {name} in {}", f.ns()));
    let patch = json!({
        "metadata": {"labels": {"e2e-limitrange-patched": "true"}},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m", "memory": "300Mi"}}]}
    });
    f.api::<LimitRange>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let got = f.api::<LimitRange>().get(name).await?;
    let patched_label = got.labels().get("e2e-limitrange-patched").cloned();
    let memory = default_memory(&got);
    ensure!(
        patched_label.as_deref() == Some("true") && memory.as_deref() == Some("300Mi"),
        "LimitRange {}/{name} after the patch: expected label e2e-limitrange-patched=true and default \
         memory 300Mi, got label {patched_label:?} and default memory {memory:?}",
        f.ns()
    );

    let patched = format!("{selector},e2e-limitrange-patched=true");
    delete_collection_and_check::<LimitRange>(f, &patched, &[name.to_string()]).await?;
    let left = f
        .api_all::<LimitRange>()
        .list(&ListParams::default().labels(&selector))
        .await?;
    let left: Vec<String> = left
        .items
        .iter()
        .map(|o| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any()))
        .collect();
    ensure!(
        left == [format!("{second}/{name}")],
        "after deleting the collection in {}, expected only {second}/{name} left with labels {selector}, got {left:?}",
        f.ns()
    );
    Ok(())
}
