//! `[sig-apps] StatefulSet` update and burst cases of upstream test/e2e/apps/statefulset.go:
//! a template change rolls the pods in reverse ordinal order to the new revision (and a
//! rollback to the old revision reuses its name), held while a pod is unhealthy; a Parallel set
//! scales up and down with unhealthy pods.
//!
//! Upstream makes pods unhealthy by moving away the page their HTTP readiness probe reads; here
//! their exec readiness probe reads a file in an emptyDir ([`ReadyFile`]), which a new pod does
//! not have: the case writes it into each pod the controller (re)creates, which also shows the
//! order in which the controller replaces them. Where upstream polls 10 s to see a scale not
//! halt (`confirmStatefulPodCount`), this waits for the pods it expects.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::Condition;
use kube::{Api, ResourceExt};

use super::ReadyFile;
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::services::ServiceBuilder;
use crate::framework::update::replace_retrying;
use crate::framework::wait::conditions as wc;
use crate::framework::workloads::{conditions as wl, empty_dir_volume, is_ready, stateful_set, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};
use crate::{ensure, fail};

/// Upstream "should perform rolling updates and roll backs of template modifications".
pub(crate) const STS_ROLLBACK: &str = "[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] \
     should perform rolling updates and roll backs of template modifications [Conformance]";
/// Upstream "Burst scaling should run to completion even with unhealthy pods".
pub(crate) const STS_BURST: &str = "[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] \
     Burst scaling should run to completion even with unhealthy pods [Slow] [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(STS_ROLLBACK, Kind::Adapted, sts_rollback),
        case!(STS_BURST, Kind::Adapted, sts_burst),
    ]
}

/// The label a stateful pod carries with its revision's name.
const REVISION_LABEL: &str = "controller-revision-hash";
/// How long one pod may take to be (re)created and run.
const POD_TIMEOUT: Duration = Duration::from_secs(60);

/// Creates headless Service `svc` and StatefulSet `name` (label `name=<name>`) of `replicas`
/// httpd pods whose readiness probe reads `gate`'s file.
async fn create_set(
    f: &Framework,
    gate: &ReadyFile,
    name: &str,
    svc: &str,
    replicas: i32,
    parallel: bool,
) -> Result<StatefulSet, CaseError> {
    let probe = gate.probe();
    let pod = f
        .pod(name)
        .label("name", name)
        .volume(empty_dir_volume("ready"))
        .container(
            ContainerBuilder::new("webserver", "httpd")
                .port(80, "TCP")
                .mount("ready", &gate.dir, false)
                .with(move |c: &mut Container| c.readiness_probe = Some(probe.clone())),
        );
    f.create(
        &ServiceBuilder::headless(svc)
            .selector("name", name)
            .port("http", 80, 80, "TCP")
            .build(f.ns(), &f.run().run_id),
    )
    .await?;
    let mut set = stateful_set(name, svc, replicas, template_of(pod.build(f)?));
    if parallel && let Some(spec) = set.spec.as_mut() {
        spec.pod_management_policy = Some("Parallel".into());
    }
    f.create(&set).await
}

/// The revision `pod` carries.
fn revision_of(pod: &Pod) -> String {
    pod.labels().get(REVISION_LABEL).cloned().unwrap_or_default()
}

/// Waits until pod `name` runs with `revision` (any, when empty), writes its readiness file and
/// waits until it is ready.
async fn make_ready(f: &Framework, gate: &ReadyFile, name: &str, revision: &str) -> Result<Pod, CaseError> {
    let why = if revision.is_empty() {
        "to run".to_owned()
    } else {
        format!("to run with revision {revision}")
    };
    f.wait_for_within(
        &f.api::<Pod>(),
        name,
        |p: Option<&Pod>| {
            p.is_some_and(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && (revision.is_empty() || revision_of(p) == revision)
                    && wc::is_pod_phase("Running").matches_object(Some(p))
            })
        },
        &why,
        POD_TIMEOUT,
    )
    .await?;
    gate.write(f, name).await?;
    f.wait_pod_ready(name).await
}

/// Removes pod `name`'s readiness file and waits until it is unready.
async fn make_unready(f: &Framework, gate: &ReadyFile, name: &str) -> CaseResult {
    gate.remove(f, name).await?;
    f.wait_for_within(
        &f.api::<Pod>(),
        name,
        |p: Option<&Pod>| p.is_some_and(|p| !is_ready(p)),
        "to turn unready once its readiness file is gone",
        POD_TIMEOUT,
    )
    .await?;
    Ok(())
}

/// Upstream `waitForStatus`: the StatefulSet's status has caught up with its generation.
async fn wait_status(f: &Framework, name: &str) -> Result<StatefulSet, CaseError> {
    let set = f
        .wait_for_within(
            &f.api::<StatefulSet>(),
            name,
            |s: Option<&StatefulSet>| {
                s.is_some_and(|s| {
                    s.status.as_ref().and_then(|st| st.observed_generation) == s.metadata.generation
                        && s.status.as_ref().is_some_and(|st| st.update_revision.is_some())
                })
            },
            "to observe its current generation",
            POD_TIMEOUT,
        )
        .await?;
    set.ok_or_else(|| CaseError::failed(format!("StatefulSet {name} is gone")))
}

/// The set's (currentRevision, updateRevision).
fn revisions(set: &StatefulSet) -> (String, String) {
    let st = set.status.clone().unwrap_or_default();
    (
        st.current_revision.unwrap_or_default(),
        st.update_revision.unwrap_or_default(),
    )
}

/// The image of the first container of `pod`.
fn image_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// Changes the set's image to `image` (with pod 1 unhealthy), checks a new update revision,
/// then (pod 1 healthy again) waits for each pod, highest ordinal first, to come back with the
/// update revision; returns the update revision once it is current, every pod on `image`.
async fn roll(f: &Framework, gate: &ReadyFile, name: &str, image: &str) -> Result<String, CaseError> {
    let api: Api<StatefulSet> = f.api();
    let pod1 = format!("{name}-1");
    make_unready(f, gate, &pod1).await?;
    f.step(format!("updating the template of StatefulSet {name} to image {image}"));
    replace_retrying(&api, name, |s: &mut StatefulSet| {
        if let Some(c) = s
            .spec
            .as_mut()
            .and_then(|s| s.template.spec.as_mut())
            .and_then(|p| p.containers.first_mut())
        {
            c.image = Some(image.to_owned());
        }
    })
    .await?;
    let set = wait_status(f, name).await?;
    let (current, update) = revisions(&set);
    ensure!(
        current != update,
        "after the template change StatefulSet {name} reports currentRevision = updateRevision = {update}; \
         expected a new update revision"
    );
    gate.write(f, &pod1).await?;
    f.wait_pod_ready(&pod1).await?;
    f.step(format!(
        "pods of StatefulSet {name} must be updated in reverse ordinal order"
    ));
    for ordinal in (0..3).rev() {
        make_ready(f, gate, &format!("{name}-{ordinal}"), &update).await?;
    }
    f.wait_for_within(
        &api,
        name,
        |s: Option<&StatefulSet>| s.is_some_and(|s| revisions(s).0 == update),
        &format!("to report currentRevision {update} once every pod is updated"),
        POD_TIMEOUT,
    )
    .await?;
    let pods = f.pods_matching(&format!("name={name}")).await?;
    let wrong: Vec<(String, String, String)> = pods
        .iter()
        .filter(|p| image_of(p) != image || revision_of(p) != update)
        .map(|p| (p.name_any(), image_of(p), revision_of(p)))
        .collect();
    ensure!(
        pods.len() == 3 && wrong.is_empty(),
        "after the rolling update of StatefulSet {name}, pods not on image {image} with revision {update}: \
         {wrong:?} (of {} pods)",
        pods.len()
    );
    Ok(update)
}

/// Upstream `rollbackTest`: all pods carry the one revision; an image change (pod 1 unhealthy)
/// makes a new update revision, rolled out in reverse ordinal order once pod 1 is healthy; a
/// change back (pod 1 unhealthy again) makes the prior revision the update revision again, and
/// it is rolled out the same way.
async fn sts_rollback(f: &Framework) -> CaseResult {
    let name = "ss2";
    let gate = ReadyFile::new(f.target_os());
    let old = f.image("httpd", f.target_os())?;
    let new = f.image("httpd-new", f.target_os())?;
    create_set(f, &gate, name, "test", 3, false).await?;
    for ordinal in 0..3 {
        make_ready(f, &gate, &format!("{name}-{ordinal}"), "").await?;
    }
    let set = wait_status(f, name).await?;
    let (current, update) = revisions(&set);
    ensure!(
        current == update,
        "StatefulSet {name} reports currentRevision {current:?} and updateRevision {update:?} before any \
         update; expected them equal"
    );
    let pods = f.pods_matching(&format!("name={name}")).await?;
    if let Some(p) = pods.iter().find(|p| revision_of(p) != current) {
        fail!(
            "pod {} of StatefulSet {name} carries revision {:?}, expected the current revision {current}",
            p.name_any(),
            revision_of(p)
        );
    }
    let updated = roll(f, &gate, name, &new).await?;
    ensure!(
        updated != current,
        "the update revision {updated} is the revision the pods had before the update"
    );
    f.step("rolling back to the previous revision");
    let back = roll(f, &gate, name, &old).await?;
    ensure!(
        back == current,
        "rolling StatefulSet {name} back to {old} made update revision {back}; expected the prior revision {current}"
    );
    Ok(())
}

/// Upstream: a Parallel StatefulSet of one replica, that replica unhealthy, scales to 3 (the
/// new pods are created without waiting for it); healthy again, all 3 are ready; all unhealthy,
/// it scales to 0.
async fn sts_burst(f: &Framework) -> CaseResult {
    let name = "ss";
    let gate = ReadyFile::new(f.target_os());
    create_set(f, &gate, name, "test", 1, true).await?;
    make_ready(f, &gate, "ss-0", "").await?;
    let api: Api<StatefulSet> = f.api();
    f.wait_for_within(
        &api,
        name,
        wl::stateful_set_at(1),
        "to have 1 ready replica",
        POD_TIMEOUT,
    )
    .await?;

    f.step("scale up must not halt with an unhealthy stateful pod");
    make_unready(f, &gate, "ss-0").await?;
    let ready_at = |n: i32| {
        move |s: Option<&StatefulSet>| {
            s.and_then(|s| s.status.as_ref())
                .is_some_and(|st| st.ready_replicas.unwrap_or(0) == n)
        }
    };
    f.wait_for_within(&api, name, ready_at(0), "to report 0 ready replicas", POD_TIMEOUT)
        .await?;
    let scale = |n: i32| serde_json::json!({"spec": {"replicas": n}});
    api.patch_scale(name, &PatchParams::default(), &Patch::Merge(&scale(3)))
        .await?;
    f.wait_list_within(
        &f.api::<Pod>(),
        &format!("name={name}"),
        |pods: &[Pod]| {
            let running = pods
                .iter()
                .filter(|p| {
                    p.metadata.deletion_timestamp.is_none() && wc::is_pod_phase("Running").matches_object(Some(p))
                })
                .count();
            running == 3
        },
        "3 running pods while ss-0 is unready (a Parallel set does not wait for it)",
        POD_TIMEOUT,
    )
    .await?;
    for ordinal in 0..3 {
        make_ready(f, &gate, &format!("{name}-{ordinal}"), "").await?;
    }
    f.wait_for_within(
        &api,
        name,
        wl::stateful_set_at(3),
        "to have 3 ready replicas",
        POD_TIMEOUT,
    )
    .await?;

    f.step("scale down must not halt with unhealthy stateful pods");
    for ordinal in 0..3 {
        make_unready(f, &gate, &format!("{name}-{ordinal}")).await?;
    }
    f.wait_for_within(&api, name, ready_at(0), "to report 0 ready replicas", POD_TIMEOUT)
        .await?;
    api.patch_scale(name, &PatchParams::default(), &Patch::Merge(&scale(0)))
        .await?;
    f.wait_list_within(
        &f.api::<Pod>(),
        &format!("name={name}"),
        |pods: &[Pod]| pods.is_empty(),
        "every pod of StatefulSet ss to be deleted although none is ready",
        POD_TIMEOUT,
    )
    .await?;
    f.wait_for_within(&api, name, ready_at(0), "to report 0 ready replicas", POD_TIMEOUT)
        .await?;
    Ok(())
}
