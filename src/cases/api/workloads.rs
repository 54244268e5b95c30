//! `[sig-apps]` workload API-operation cases (upstream test/e2e/apps/replica_set.go, rc.go,
//! statefulset.go, deployment.go): objects created, patched (spec and template), updated,
//! listed across namespaces, their `/status` read, updated and patched, and deleted by
//! collection, each change seen through a watch.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{PodTemplateSpec, ReplicationController};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::ops::{status_conditions_round_trip, update_retrying};
use super::{delete_collection_and_check, find_in_all_namespaces};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::services::ServiceBuilder;
use crate::framework::workloads::{
    conditions as wl, deployment, replica_set, replication_controller, stateful_set, template_of,
};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};

/// Upstream replica_set.go "Replace and Patch tests".
pub(crate) const RS_REPLACE_PATCH: &str = "[sig-apps] ReplicaSet Replace and Patch tests [Conformance]";
/// Upstream rc.go "should test the lifecycle of a ReplicationController".
pub(crate) const RC_LIFECYCLE: &str =
    "[sig-apps] ReplicationController should test the lifecycle of a ReplicationController [Conformance]";
/// Upstream statefulset.go "should list, patch and delete a collection of StatefulSets".
pub(crate) const STS_COLLECTION: &str = "[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] \
     should list, patch and delete a collection of StatefulSets [Conformance]";
/// Upstream statefulset.go "should validate Statefulset Status endpoints".
pub(crate) const STS_STATUS: &str = "[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] \
     should validate Statefulset Status endpoints [Conformance]";
/// Upstream deployment.go "should run the lifecycle of a Deployment".
pub(crate) const DEPLOYMENT_LIFECYCLE: &str =
    "[sig-apps] Deployment should run the lifecycle of a Deployment [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(RS_REPLACE_PATCH, Kind::Adapted, rs_replace_patch),
        case!(RC_LIFECYCLE, Kind::Adapted, rc_lifecycle),
        case!(STS_COLLECTION, Kind::Adapted, sts_collection),
        case!(STS_STATUS, Kind::Adapted, sts_status),
        case!(DEPLOYMENT_LIFECYCLE, Kind::Adapted, deployment_lifecycle),
    ]
}

/// A pod template labelled `labels` with one container `container` of `image` (agnhost runs
/// `pause`; other images their default server), with `grace` seconds of termination grace.
fn template(
    f: &Framework,
    labels: &[(&str, &str)],
    container: &str,
    image: &str,
    grace: i64,
) -> Result<PodTemplateSpec, CaseError> {
    let mut c = ContainerBuilder::new(container, image);
    if image == "agnhost" {
        c = c.args(["pause"]);
    }
    let pod = labels
        .iter()
        .fold(f.pod(container), |p, (k, v)| p.label(k, v))
        .grace_period(grace)
        .container(c);
    Ok(template_of(pod.build(f)?))
}

/// A strategic-merge patch of the pod template: container `container` runs `image`, with
/// `grace` seconds of termination grace (upstream's patches of replicas and template).
fn template_patch(f: &Framework, container: &str, image: &str, grace: i64) -> Result<serde_json::Value, CaseError> {
    let image = f.image(image, f.target_os())?;
    Ok(json!({"spec": {"template": {"spec": {
        "terminationGracePeriodSeconds": grace,
        "containers": [{"name": container, "image": image}]
    }}}}))
}

/// The image of a workload template's first container.
fn first_image(t: Option<&PodTemplateSpec>) -> Option<&str> {
    t?.spec.as_ref()?.containers.first()?.image.as_deref()
}

/// Adds label `key=value` to an object's metadata labels.
fn with_label<K: kube::Resource>(mut obj: K, key: &str, value: &str) -> K {
    obj.meta_mut()
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
    obj
}

/// Upstream replica_set.go `testRSLifeCycle`: a one-replica ReplicaSet is scaled to two by an
/// update, then patched (a label, three replicas, the pause image, no grace); a watch must see
/// it labelled, with three ready and available replicas of the new template.
async fn rs_replace_patch(f: &Framework) -> CaseResult {
    let name = "test-rs";
    let labels = [("name", "sample-pod"), ("pod", "agnhost")];
    let created = f
        .create(&replica_set(name, 1, template(f, &labels, name, "agnhost", 30)?))
        .await?;
    let api = f.api::<ReplicaSet>();
    f.wait_for(&api, name, wl::replica_set_ready(1), "to have 1 ready replica")
        .await?;

    f.step("scaling the ReplicaSet to 2 with an update");
    update_retrying(&api, name, |rs: &mut ReplicaSet| {
        if let Some(s) = rs.spec.as_mut() {
            s.replicas = Some(2);
        }
    })
    .await?;

    f.step("patching the ReplicaSet's label, replicas and template");
    let mut patch = template_patch(f, name, "pause", 0)?;
    patch["metadata"] = json!({"labels": {"test-rs": "patched"}});
    patch["spec"]["replicas"] = json!(3);
    let patched = api
        .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let replicas = patched.spec.as_ref().and_then(|s| s.replicas);
    ensure!(
        patched.resource_version() != created.resource_version()
            && patched.labels().get("test-rs").map(String::as_str) == Some("patched")
            && replicas == Some(3),
        "the patch of ReplicaSet {name} answered resourceVersion {:?} (created at {:?}), labels {:?} and \
         {replicas:?} replicas; expected a newer resourceVersion, test-rs=patched and 3 replicas",
        patched.resource_version(),
        created.resource_version(),
        patched.labels()
    );
    let pause = f.image("pause", f.target_os())?;
    f.wait_for(
        &api,
        name,
        move |rs: Option<&ReplicaSet>| {
            rs.is_some_and(|rs| {
                let spec = rs.spec.as_ref();
                let status = rs.status.as_ref();
                rs.labels().get("test-rs").map(String::as_str) == Some("patched")
                    && status.and_then(|s| s.ready_replicas) == Some(3)
                    && status.and_then(|s| s.available_replicas) == Some(3)
                    && first_image(spec.and_then(|s| s.template.as_ref())) == Some(pause.as_str())
                    && spec.and_then(|s| s.template.as_ref()?.spec.as_ref()?.termination_grace_period_seconds)
                        == Some(0)
            })
        },
        "to be labelled test-rs=patched with 3 ready and available replicas of the pause image",
    )
    .await?;
    Ok(())
}

/// Upstream rc.go: a ReplicationController is created and becomes ready, is patched (a label),
/// its `/status` patched and read, scaled to two through `/scale`, its status updated, listed
/// across namespaces and deleted by collection; a watch sees each step.
async fn rc_lifecycle(f: &Framework) -> CaseResult {
    let name = "rc-test";
    let rc = with_label(
        replication_controller(name, 1, template(f, &[("test-rc-static", "true")], name, "nginx", 30)?),
        "test-rc-static",
        "true",
    );
    f.create(&rc).await?;
    let api = f.api::<ReplicationController>();
    f.wait_for(
        &api,
        name,
        wl::replication_controller_ready(1),
        "to have 1 ready replica",
    )
    .await?;

    f.step("patching the ReplicationController's labels");
    let patched = api
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"test-rc": "patched"}}})),
        )
        .await?;
    ensure!(
        patched.labels().get("test-rc").map(String::as_str) == Some("patched"),
        "the patch of ReplicationController {name} answered labels {:?}, without test-rc=patched",
        patched.labels()
    );

    f.step("patching the ReplicationController's status");
    let status = api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"readyReplicas": 0, "availableReplicas": 0}})),
        )
        .await?;
    let ready = status.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
    ensure!(
        ready == 0,
        "the patch of ReplicationController {name}'s /status to 0 ready replicas answered {ready}"
    );
    let read = api.get_status(name).await?;
    let replicas = read.status.as_ref().map_or(-1, |s| s.replicas);
    ensure!(
        replicas == 1,
        "ReplicationController {name} read through /status: expected 1 replica, got {replicas}"
    );

    f.step("scaling the ReplicationController to 2 through /scale");
    api.patch_scale(
        name,
        &PatchParams::default(),
        &Patch::Strategic(json!({"spec": {"replicas": 2}})),
    )
    .await?;
    f.wait_for(
        &api,
        name,
        wl::replication_controller_ready(2),
        "to have 2 ready replicas",
    )
    .await?;

    f.step("updating the ReplicationController's status");
    super::ops::update_status_retrying(&api, name, |rc: &mut ReplicationController| {
        if let Some(s) = rc.status.as_mut() {
            s.available_replicas = Some(1);
            s.ready_replicas = Some(1);
        }
    })
    .await?;
    let listed = find_in_all_namespaces::<ReplicationController>(f, "test-rc-static=true", f.ns(), name).await?;
    ensure!(
        listed.labels().get("test-rc").map(String::as_str) == Some("patched"),
        "ReplicationController {name} as listed in all namespaces lost label test-rc=patched: {:?}",
        listed.labels()
    );
    delete_collection_and_check::<ReplicationController>(f, "test-rc-static=true", &[name.to_string()]).await
}

/// Creates the headless Service `test` that governs StatefulSet pods labelled `name=<app>`.
async fn governing_service(f: &Framework, app: &str) -> CaseResult {
    f.create(
        &ServiceBuilder::headless("test")
            .selector("name", app)
            .port("http", 80, 80, "TCP")
            .build(f.ns(), &f.run().run_id),
    )
    .await?;
    Ok(())
}

/// Upstream statefulset.go: a one-replica StatefulSet is patched (a label, two replicas, the
/// pause image), runs two ready pods of the new template, is found by its new label across
/// namespaces and deleted by collection.
async fn sts_collection(f: &Framework) -> CaseResult {
    let name = "test-ss";
    let labels = [("name", "sample-pod"), ("pod", "httpd")];
    governing_service(f, "sample-pod").await?;
    f.create(&stateful_set(name, "test", 1, template(f, &labels, name, "httpd", 30)?))
        .await?;
    let api = f.api::<StatefulSet>();
    f.wait_for(&api, name, wl::stateful_set_at(1), "to have 1 ready replica")
        .await?;

    f.step("patching the StatefulSet's label, replicas and template");
    let mut patch = template_patch(f, name, "pause", 1)?;
    patch["metadata"] = json!({"labels": {"test-ss": "patched"}});
    patch["spec"]["replicas"] = json!(2);
    api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let got = api.get(name).await?;
    let pause = f.image("pause", f.target_os())?;
    let spec = got.spec.as_ref();
    ensure!(
        spec.and_then(|s| s.replicas) == Some(2) && first_image(spec.map(|s| &s.template)) == Some(pause.as_str()),
        "StatefulSet {name} after the patch: expected 2 replicas of {pause}, got {:?} replicas of {:?}",
        spec.and_then(|s| s.replicas),
        first_image(spec.map(|s| &s.template))
    );
    f.wait_for(
        &api,
        name,
        wl::stateful_set_at(2),
        "to have 2 ready replicas of the patched template",
    )
    .await?;

    find_in_all_namespaces::<StatefulSet>(f, "test-ss=patched", f.ns(), name).await?;
    delete_collection_and_check::<StatefulSet>(f, "test-ss=patched", &[name.to_string()]).await
}

/// Upstream statefulset.go: a ready StatefulSet, labelled by a patch, has its `/status` read,
/// updated and patched.
async fn sts_status(f: &Framework) -> CaseResult {
    let name = "ss";
    governing_service(f, "ss").await?;
    f.create(&stateful_set(
        name,
        "test",
        1,
        template(f, &[("name", "ss")], name, "httpd", 30)?,
    ))
    .await?;
    let api = f.api::<StatefulSet>();
    f.wait_for(&api, name, wl::stateful_set_at(1), "to have 1 ready replica")
        .await?;
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Strategic(json!({"metadata": {"labels": {"e2e": "testing"}}})),
    )
    .await?;
    status_conditions_round_trip::<StatefulSet>(f, name).await
}

/// Whether Deployment `d` has `n` ready and updated replicas, none unavailable, of `image`.
fn deployment_settled(d: &Deployment, n: i32, image: &str) -> bool {
    let status = d.status.as_ref();
    status.and_then(|s| s.ready_replicas) == Some(n)
        && status.and_then(|s| s.updated_replicas) == Some(n)
        && status.and_then(|s| s.unavailable_replicas).unwrap_or(0) == 0
        && first_image(d.spec.as_ref().map(|s| &s.template)) == Some(image)
}

/// Waits until Deployment `name` has settled at `n` replicas of logical image `image`.
async fn wait_deployment_settled(f: &Framework, name: &str, n: i32, image: &str) -> CaseResult {
    let resolved = f.image(image, f.target_os())?;
    let why = format!("to have {n} ready and updated replicas of {resolved}, none unavailable");
    let api = f.api::<Deployment>();
    let waited = f
        .wait_for(
            &api,
            name,
            move |d: Option<&Deployment>| d.is_some_and(|d| deployment_settled(d, n, &resolved)),
            &why,
        )
        .await;
    if let Err(e) = waited {
        let d = api.get(name).await?;
        let st = d.status.unwrap_or_default();
        let sets: Vec<String> = f
            .api::<ReplicaSet>()
            .list(&kube::api::ListParams::default())
            .await?
            .items
            .iter()
            .map(|rs| {
                format!(
                    "{} ({:?} of {:?}: {:?} ready)",
                    rs.name_any(),
                    rs.spec.as_ref().and_then(|s| s.replicas),
                    first_image(rs.spec.as_ref().and_then(|s| s.template.as_ref())),
                    rs.status.as_ref().and_then(|s| s.ready_replicas)
                )
            })
            .collect();
        return Err(e.context(format!(
            "Deployment {name} last had {:?} ready, {:?} updated, {:?} unavailable replicas of {:?}; \
             its ReplicaSets: {sets:?}",
            st.ready_replicas,
            st.updated_replicas,
            st.unavailable_replicas,
            first_image(d.spec.as_ref().map(|s| &s.template))
        )));
    }
    Ok(())
}

/// Upstream deployment.go: a two-replica Deployment is patched (a label, one replica, the pause
/// image), listed across namespaces, updated (two replicas of httpd), its `/status` patched to
/// no ready replicas (which the controller corrects) and read, and deleted by collection.
async fn deployment_lifecycle(f: &Framework) -> CaseResult {
    let name = "test-deployment";
    let static_label = "test-deployment-static=true";
    let d = with_label(
        deployment(
            name,
            2,
            template(f, &[("test-deployment-static", "true")], name, "agnhost", 1)?,
        ),
        "test-deployment-static",
        "true",
    );
    f.create(&d).await?;
    wait_deployment_settled(f, name, 2, "agnhost").await?;
    let api = f.api::<Deployment>();

    f.step("patching the Deployment's label, replicas and template");
    let mut patch = template_patch(f, name, "pause", 2)?;
    patch["metadata"] = json!({"labels": {"test-deployment": "patched"}});
    patch["spec"]["replicas"] = json!(1);
    let patched = api
        .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let replicas = patched.spec.as_ref().and_then(|s| s.replicas);
    ensure!(
        patched.labels().get("test-deployment").map(String::as_str) == Some("patched") && replicas == Some(1),
        "the patch of Deployment {name} answered labels {:?} and {replicas:?} replicas; expected \
         test-deployment=patched and 1 replica",
        patched.labels()
    );
    wait_deployment_settled(f, name, 1, "pause").await?;
    find_in_all_namespaces::<Deployment>(f, static_label, f.ns(), name).await?;

    f.step("updating the Deployment: 2 replicas of httpd");
    let httpd = f.image("httpd", f.target_os())?;
    update_retrying(&api, name, |d: &mut Deployment| {
        d.labels_mut().insert("test-deployment".into(), "updated".into());
        if let Some(s) = d.spec.as_mut() {
            s.replicas = Some(2);
            if let Some(c) = s.template.spec.as_mut().and_then(|p| p.containers.first_mut()) {
                c.image = Some(httpd.clone());
                // The agnhost `pause` argument would make httpd run `pause` instead of its server.
                c.args = None;
            }
        }
    })
    .await?;
    let read = api.get_status(name).await?;
    ensure!(
        first_image(read.spec.as_ref().map(|s| &s.template)) == Some(httpd.as_str())
            && read.labels().get("test-deployment").map(String::as_str) == Some("updated"),
        "Deployment {name} read through /status after the update: expected image {httpd} and label \
         test-deployment=updated, got image {:?} and labels {:?}",
        first_image(read.spec.as_ref().map(|s| &s.template)),
        read.labels()
    );
    wait_deployment_settled(f, name, 2, "httpd").await?;

    f.step("patching the Deployment's status to no ready replicas");
    let patched = api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"readyReplicas": 0, "availableReplicas": 0}})),
        )
        .await?;
    let ready = patched.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
    ensure!(
        ready == 0,
        "the patch of Deployment {name}'s /status to 0 ready replicas answered {ready}"
    );
    wait_deployment_settled(f, name, 2, "httpd").await?;
    delete_collection_and_check::<Deployment>(f, static_label, &[name.to_string()]).await
}
