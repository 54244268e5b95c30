//! `[sig-node] PodTemplates` (upstream test/e2e/common/node/podtemplates.go): a PodTemplate
//! created, read, patched, replaced, listed across namespaces and deleted one by one or by
//! collection.
//!
//! The templates are never run; their pod spec is the target OS's (built by the framework's
//! pod builder), as a Windows job would store it.

use k8s_openapi::api::core::v1::PodTemplate;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::{delete_collection_and_check, find_in_all_namespaces};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::update::replace_retrying;
use crate::framework::workloads::template_of;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};

/// Upstream podtemplates.go "should run the lifecycle of PodTemplates".
pub(crate) const LIFECYCLE: &str = "[sig-node] PodTemplates should run the lifecycle of PodTemplates [Conformance]";
/// Upstream podtemplates.go "should delete a collection of pod templates".
pub(crate) const COLLECTION: &str = "[sig-node] PodTemplates should delete a collection of pod templates [Conformance]";
/// Upstream podtemplates.go "should replace a pod template".
pub(crate) const REPLACE: &str = "[sig-node] PodTemplates should replace a pod template [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(LIFECYCLE, Kind::Adapted, lifecycle),
        case!(COLLECTION, Kind::Adapted, collection),
        case!(REPLACE, Kind::Adapted, replace),
    ]
}

/// A PodTemplate `name` with `labels` whose pod runs agnhost on the target OS.
pub(crate) fn pod_template(f: &Framework, name: &str, labels: &[(&str, String)]) -> Result<PodTemplate, CaseError> {
    let pod = f
        .pod(name)
        .container(ContainerBuilder::new("e2e-test", "agnhost"))
        .build(f)?;
    Ok(PodTemplate {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()),
            ..Default::default()
        },
        template: Some(template_of(pod)),
    })
}

/// Upstream: create a labelled template, read it, patch a label in, read the label back, delete
/// it, and find no template with the label in any namespace.
async fn lifecycle(f: &Framework) -> CaseResult {
    // The label's value is the case namespace, so the cluster-wide lists see this case's only.
    let selector = format!("podtemplate-static={}", f.ns());
    let name = "nginx-pod-template";
    let listed = f
        .api_all::<PodTemplate>()
        .list(&ListParams::default().labels(&selector))
        .await?;
    ensure!(
        listed.items.is_empty(),
        "before the create, {} PodTemplates carry labels {selector}, expected none",
        listed.items.len()
    );
    f.create(&pod_template(f, name, &[("podtemplate-static", f.ns().to_string())])?)
        .await?;
    let read = f.api::<PodTemplate>().get(name).await?;
    ensure!(
        read.name_any() == name,
        "reading PodTemplate {name} returned {}",
        read.name_any()
    );

    f.step(format!("patching label podtemplate=patched into PodTemplate {name}"));
    let patch = json!({"metadata": {"labels": {"podtemplate": "patched"}}});
    f.api::<PodTemplate>()
        .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let read = f.api::<PodTemplate>().get(name).await?;
    let label = read.labels().get("podtemplate").cloned();
    ensure!(
        label.as_deref() == Some("patched"),
        "PodTemplate {}/{name} after the patch has label podtemplate={label:?}, expected \"patched\"",
        f.ns()
    );
    find_in_all_namespaces::<PodTemplate>(f, &format!("{selector},podtemplate=patched"), f.ns(), name).await?;

    f.step(format!("deleting PodTemplate {name}"));
    f.api::<PodTemplate>().delete(name, &DeleteParams::default()).await?;
    let left = f
        .api_all::<PodTemplate>()
        .list(&ListParams::default().labels(&selector))
        .await?;
    let left: Vec<String> = left.items.iter().map(ResourceExt::name_any).collect();
    ensure!(
        left.is_empty(),
        "after deleting PodTemplate {name}, the PodTemplates with labels {selector} are {left:?}, expected none"
    );
    Ok(())
}

/// Upstream: three templates labelled `podtemplate-set=true` are listed and deleted by
/// collection; none is left.
async fn collection(f: &Framework) -> CaseResult {
    let names: Vec<String> = (1..=3).map(|i| format!("test-podtemplate-{i}")).collect();
    for name in &names {
        f.create(&pod_template(f, name, &[("podtemplate-set", "true".into())])?)
            .await?;
    }
    delete_collection_and_check::<PodTemplate>(f, "podtemplate-set=true", &names).await
}

/// Upstream: a template read and written back with an annotation `updated=true` (a PUT of the
/// whole object) carries it in the answer and when read again.
async fn replace(f: &Framework) -> CaseResult {
    let name = "podtemplate-replace";
    f.create(&pod_template(f, name, &[])?).await?;
    let api = f.api::<PodTemplate>();
    f.step(format!("replacing PodTemplate {name} with annotation updated=true"));
    let replaced = replace_retrying(&api, name, |t: &mut PodTemplate| {
        t.annotations_mut().insert("updated".into(), "true".into());
    })
    .await?;
    let read = api.get(name).await?;
    for (seen, obj) in [("in the answer to the replace", &replaced), ("read back", &read)] {
        let value = obj.annotations().get("updated").cloned();
        ensure!(
            value.as_deref() == Some("true"),
            "PodTemplate {}/{name} {seen} has annotation updated={value:?}, expected \"true\"",
            f.ns()
        );
    }
    Ok(())
}
