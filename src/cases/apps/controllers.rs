//! ReplicaSet, ReplicationController, Deployment, StatefulSet and DaemonSet cases.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::Condition;
use kube::runtime::wait::conditions::is_deleted;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ReadyFile;
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::services::ServiceBuilder;
use crate::framework::wait::conditions as wc;
use crate::framework::workloads::{
    self, CONSISTENTLY, conditions as wl, deployment, empty_dir_volume, is_controlled_by, is_ready, names,
    recreate_deployment, replica_set, replication_controller, stateful_set, template_of,
};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, pod_node};
use crate::{ensure, fail};

pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(RS_SERVE_IMAGE, Kind::Adapted, rs_serve_image),
        case!(RC_SERVE_IMAGE, Kind::Adapted, rc_serve_image),
        case!(RS_ADOPT_RELEASE, Kind::Adapted, rs_adopt_release),
        case!(RC_ADOPT, Kind::Adapted, rc_adopt),
        case!(RC_RELEASE, Kind::Adapted, rc_release),
        case!(RS_SCALE, Kind::Adapted, rs_scale),
        case!(RC_SCALE, Kind::Adapted, rc_scale),
        case!(DEPLOY_ROLLING, Kind::Adapted, deploy_rolling),
        case!(DEPLOY_RECREATE, Kind::Adapted, deploy_recreate),
        case!(DEPLOY_HISTORY, Kind::Adapted, deploy_history),
        case!(DEPLOY_SCALE, Kind::Adapted, deploy_scale),
        case!(STS_SCALE, Kind::Adapted, sts_scale),
        case!(STS_ORDERED, Kind::Adapted, sts_ordered),
        case!(DS_SIMPLE, Kind::Adapted, ds_simple),
        case!(DS_RETRY_FAILED, Kind::Adapted, ds_retry_failed),
    ]
}

/// agnhost `serve-hostname`'s port.
const SERVE_HOSTNAME_PORT: u16 = 9376;

/// A pod template labelled `name=<app>` running `serve-hostname`.
fn serve_hostname(f: &Framework, app: &str) -> Result<k8s_openapi::api::core::v1::PodTemplateSpec, CaseError> {
    let pod = f.pod(app).label("name", app).container(
        ContainerBuilder::new(app, "agnhost")
            .args(["serve-hostname"])
            .port(i32::from(SERVE_HOSTNAME_PORT), "TCP"),
    );
    Ok(template_of(pod.build(f)?))
}

/// A pod template labelled `name=<app>` running `image`'s default server (httpd, nginx…).
fn web(f: &Framework, app: &str, image: &str) -> Result<k8s_openapi::api::core::v1::PodTemplateSpec, CaseError> {
    let pod = f
        .pod(app)
        .label("name", app)
        .container(ContainerBuilder::new("web", image).port(80, "TCP"));
    Ok(template_of(pod.build(f)?))
}

/// Waits until Deployment `name` has rolled out (`why` says what for, in the failure).
async fn wait_rolled_out(f: &Framework, name: &str, why: &str) -> CaseResult {
    f.wait_for(&f.api::<Deployment>(), name, wc::is_deployment_rolled_out(), why)
        .await?;
    Ok(())
}

/// Creates the headless Service `test` that governs the StatefulSet cases' pods (`name=ss`).
async fn create_sts_service(f: &Framework) -> CaseResult {
    f.create(
        &ServiceBuilder::headless("test")
            .selector("name", "ss")
            .port("http", 80, 80, "TCP")
            .build(f.ns(), &f.run().run_id),
    )
    .await?;
    Ok(())
}

/// Every pod answers its own name on the serve-hostname port (upstream `PodProxyResponseChecker`).
async fn expect_each_serves_its_name(f: &Framework, pods: &[Pod]) -> CaseResult {
    ensure!(!pods.is_empty(), "no pods to check");
    for pod in pods {
        let name = pod.name_any();
        let got = f.pod_proxy_get(&name, SERVE_HOSTNAME_PORT, "").await?;
        ensure!(
            got.trim() == name,
            "pod {name} on node {} answered {:?} on port {SERVE_HOSTNAME_PORT}, expected its own name",
            pod_node(pod),
            got.trim()
        );
    }
    Ok(())
}

// --- serve a basic image ---------------------------------------------------------------------

/// Creates `workload` (two serve-hostname replicas of `app`), waits until `ready` holds for it,
/// and checks that each of its two pods answers with its own name.
///
/// Upstream's ReplicaSet and ReplicationController "serve a basic image" cases are this flow over
/// the two kinds.
async fn expect_replicas_serve<K>(f: &Framework, app: &str, workload: &K, ready: impl Condition<K>) -> CaseResult
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + Send + Serialize + DeserializeOwned + 'static,
    <K as Resource>::DynamicType: Default,
{
    f.create(workload).await?;
    f.wait_for(&f.api::<K>(), app, ready, "to have 2 ready replicas")
        .await?;
    let pods = f.wait_pods_ready(&format!("name={app}"), 2).await?;
    expect_each_serves_its_name(f, &pods).await
}

/// Upstream apps/replica_set.go "should serve a basic image on each replica with a public image".
pub(crate) const RS_SERVE_IMAGE: &str =
    "[sig-apps] ReplicaSet should serve a basic image on each replica with a public image [Conformance]";

/// Upstream replica_set.go: every replica of a serve-hostname ReplicaSet runs and answers with
/// its own name.
async fn rs_serve_image(f: &Framework) -> CaseResult {
    let app = "my-hostname-basic";
    let rs = replica_set(app, 2, serve_hostname(f, app)?);
    expect_replicas_serve(f, app, &rs, wl::replica_set_ready(2)).await
}

/// Upstream apps/rc.go "should serve a basic image on each replica with a public image".
pub(crate) const RC_SERVE_IMAGE: &str =
    "[sig-apps] ReplicationController should serve a basic image on each replica with a public image [Conformance]";

/// Upstream rc.go: as for ReplicaSets, with a ReplicationController.
async fn rc_serve_image(f: &Framework) -> CaseResult {
    let app = "my-hostname-basic-rc";
    let rc = replication_controller(app, 2, serve_hostname(f, app)?);
    expect_replicas_serve(f, app, &rc, wl::replication_controller_ready(2)).await
}

// --- adopt and release -----------------------------------------------------------------------

/// Waits until pod `name` has (or, with `owned: false`, no longer has) a controller reference
/// to `uid`.
async fn wait_owner(f: &Framework, name: &str, uid: &str, owned: bool) -> Result<Pod, CaseError> {
    let uid_c = uid.to_string();
    let why = if owned {
        format!("to be adopted by {uid}")
    } else {
        format!("to be released by {uid}")
    };
    f.wait_for(
        &f.api::<Pod>(),
        name,
        move |p: Option<&Pod>| p.is_some_and(|p| is_controlled_by(p, &uid_c) == owned),
        &why,
    )
    .await?
    .ok_or_else(|| CaseError::failed(format!("pod {name} vanished while waiting for its owner")))
}

/// Creates an orphan pod labelled `name=<app>` and waits for it to run.
async fn orphan(f: &Framework, app: &str) -> CaseResult {
    let pod = f
        .pod(app)
        .label("name", app)
        .container(ContainerBuilder::new(app, "agnhost").args(["serve-hostname"]));
    f.create_pod_ready(&pod).await.map(|_| ())
}

/// Relabels pod `name` to `name=<value>`.
async fn relabel(f: &Framework, name: &str, value: &str) -> CaseResult {
    f.step(format!("relabelling pod {name} to name={value}"));
    let patch = serde_json::json!({"metadata": {"labels": {"name": value}}});
    f.api::<Pod>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Upstream apps/replica_set.go "should adopt matching pods on creation and release no longer
/// matching pods".
pub(crate) const RS_ADOPT_RELEASE: &str = "[sig-apps] ReplicaSet should adopt matching pods on creation and release \
     no longer matching pods [Conformance]";

/// Upstream replica_set.go: a ReplicaSet adopts a matching orphan instead of creating a pod;
/// once the pod's label changes it is released and replaced.
async fn rs_adopt_release(f: &Framework) -> CaseResult {
    let app = "pod-adoption-release";
    orphan(f, app).await?;
    let rs = f.create(&replica_set(app, 1, serve_hostname(f, app)?)).await?;
    let uid = rs.uid().unwrap_or_default();
    wait_owner(f, app, &uid, true).await?;
    let pods = f.wait_pods_ready(&format!("name={app}"), 1).await?;
    ensure!(
        pods[0].name_any() == app,
        "ReplicaSet {app} created {} instead of adopting the orphan",
        pods[0].name_any()
    );

    relabel(f, app, "not-matching-name").await?;
    wait_owner(f, app, &uid, false).await?;
    let replacement = f.wait_pods_ready(&format!("name={app}"), 1).await?;
    ensure!(
        replacement[0].name_any() != app,
        "ReplicaSet {app} did not replace the released pod"
    );
    Ok(())
}

/// Upstream apps/rc.go "should adopt matching pods on creation".
pub(crate) const RC_ADOPT: &str =
    "[sig-apps] ReplicationController should adopt matching pods on creation [Conformance]";

/// Upstream rc.go: a ReplicationController adopts a matching orphan pod.
async fn rc_adopt(f: &Framework) -> CaseResult {
    let app = "pod-adoption";
    orphan(f, app).await?;
    let rc = f
        .create(&replication_controller(app, 1, serve_hostname(f, app)?))
        .await?;
    wait_owner(f, app, &rc.uid().unwrap_or_default(), true).await?;
    let pods = f.wait_pods_ready(&format!("name={app}"), 1).await?;
    ensure!(
        pods[0].name_any() == app,
        "ReplicationController {app} runs {} instead of the adopted orphan",
        pods[0].name_any()
    );
    Ok(())
}

/// Upstream apps/rc.go "should release no longer matching pods".
pub(crate) const RC_RELEASE: &str =
    "[sig-apps] ReplicationController should release no longer matching pods [Conformance]";

/// Upstream rc.go: a pod whose label stops matching loses its controller reference.
async fn rc_release(f: &Framework) -> CaseResult {
    let app = "pod-release";
    let rc = f
        .create(&replication_controller(app, 1, serve_hostname(f, app)?))
        .await?;
    let uid = rc.uid().unwrap_or_default();
    let pods = f.wait_pods_ready(&format!("name={app}"), 1).await?;
    let name = pods[0].name_any();
    ensure!(
        is_controlled_by(&pods[0], &uid),
        "pod {name} is not controlled by ReplicationController {app}"
    );
    relabel(f, &name, "not-matching-name").await?;
    wait_owner(f, &name, &uid, false).await?;
    Ok(())
}

// --- scale subresources ----------------------------------------------------------------------

/// Reads the scale of `name`, sets it to `to`, and checks the read-back.
async fn scale_to<K>(f: &Framework, api: &Api<K>, name: &str, from: i32, to: i32) -> CaseResult
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let scale = api.get_scale(name).await?;
    let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(-1);
    ensure!(
        current == from,
        "scale subresource of {name} reports {current} replicas, expected {from}"
    );
    f.step(format!("scaling {name} to {to} through the scale subresource"));
    let patch = serde_json::json!({"spec": {"replicas": to}});
    let updated = api
        .patch_scale(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let now = updated.spec.as_ref().and_then(|s| s.replicas).unwrap_or(-1);
    ensure!(now == to, "after patching the scale of {name} to {to}, it reads {now}");
    Ok(())
}

/// Waits until workload `name` (just created with one replica) satisfies `at_one`, scales it to
/// two through the scale subresource, waits for `at_two`, and returns its two ready pods
/// (`name=<name>`). Each condition comes with the `why` its wait reports.
///
/// The ReplicaSet, Deployment and StatefulSet scale cases are this flow over three kinds.
async fn scale_one_to_two<K>(
    f: &Framework,
    name: &str,
    at_one: (impl Condition<K>, &str),
    at_two: (impl Condition<K>, &str),
) -> Result<Vec<Pod>, CaseError>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + Send + Serialize + DeserializeOwned + 'static,
    <K as Resource>::DynamicType: Default,
{
    let api = f.api::<K>();
    f.wait_for(&api, name, at_one.0, at_one.1).await?;
    scale_to(f, &api, name, 1, 2).await?;
    f.wait_for(&api, name, at_two.0, at_two.1).await?;
    f.wait_pods_ready(&format!("name={name}"), 2).await
}

/// Upstream apps/replica_set.go "Replicaset should have a working scale subresource".
pub(crate) const RS_SCALE: &str =
    "[sig-apps] ReplicaSet Replicaset should have a working scale subresource [Conformance]";

/// Upstream replica_set.go: the scale subresource reads 1, is set to 2, and 2 pods run.
async fn rs_scale(f: &Framework) -> CaseResult {
    let app = "test-rs-scale";
    f.create(&replica_set(app, 1, serve_hostname(f, app)?)).await?;
    scale_one_to_two(
        f,
        app,
        (wl::replica_set_ready(1), "to have 1 ready replica"),
        (wl::replica_set_ready(2), "to have 2 ready replicas"),
    )
    .await
    .map(|_| ())
}

/// Upstream apps/rc.go "should get and update a ReplicationController scale".
pub(crate) const RC_SCALE: &str =
    "[sig-apps] ReplicationController should get and update a ReplicationController scale [Conformance]";

/// Upstream rc.go: as for ReplicaSets, with a ReplicationController of the webserver image.
async fn rc_scale(f: &Framework) -> CaseResult {
    let app = "e2e-rc-scale";
    f.create(&replication_controller(app, 1, web(f, app, "httpd")?)).await?;
    scale_one_to_two(
        f,
        app,
        (wl::replication_controller_ready(1), "to have 1 ready replica"),
        (wl::replication_controller_ready(2), "to have 2 ready replicas"),
    )
    .await
    .map(|_| ())
}

/// Upstream apps/deployment.go "Deployment should have a working scale subresource".
pub(crate) const DEPLOY_SCALE: &str =
    "[sig-apps] Deployment Deployment should have a working scale subresource [Conformance]";

/// Upstream deployment.go: as for ReplicaSets, with a Deployment.
async fn deploy_scale(f: &Framework) -> CaseResult {
    let app = "test-new-deployment";
    f.create(&deployment(app, 1, web(f, app, "httpd")?)).await?;
    scale_one_to_two(
        f,
        app,
        (wc::is_deployment_rolled_out(), "to roll out"),
        (wc::is_deployment_rolled_out(), "to roll out 2 replicas"),
    )
    .await
    .map(|_| ())
}

/// Upstream apps/statefulset.go "should have a working scale subresource".
pub(crate) const STS_SCALE: &str = "[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] should \
     have a working scale subresource [Conformance]";

/// Upstream statefulset.go: a one-replica StatefulSet is scaled to two through the scale
/// subresource; the pods carry the stable names ss-0 and ss-1.
async fn sts_scale(f: &Framework) -> CaseResult {
    create_sts_service(f).await?;
    f.create(&stateful_set("ss", "test", 1, web(f, "ss", "httpd")?)).await?;
    let pods = scale_one_to_two(
        f,
        "ss",
        (wl::stateful_set_at(1), "to have 1 ready replica"),
        (wl::stateful_set_at(2), "to have 2 ready replicas"),
    )
    .await?;
    let got = names(&pods);
    ensure!(
        got == BTreeSet::from(["ss-0".to_string(), "ss-1".to_string()]),
        "StatefulSet ss runs {got:?}, expected ss-0 and ss-1"
    );
    Ok(())
}

/// Upstream apps/statefulset.go "Scaling should happen in predictable order and halt if any
/// stateful pod is unhealthy".
pub(crate) const STS_ORDERED: &str = "[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] \
     Scaling should happen in predictable order and halt if any stateful pod is unhealthy [Slow] [Conformance]";

/// Upstream statefulset.go flow, with readiness driven by a file the case writes: pods start
/// unready (the readiness probe reads a file in an emptyDir that does not exist yet). Scaling
/// to 3 must create ss-0 only and halt while it is unready; each pod becomes ready when the
/// case writes its file, and only then does the next ordinal appear. Scaling back to 0 removes
/// ss-2, ss-1, ss-0 in that order.
async fn sts_ordered(f: &Framework) -> CaseResult {
    let gate = ReadyFile::new(f.target_os());
    let probe = gate.probe();
    let pod = f
        .pod("ss")
        .label("name", "ss")
        .volume(empty_dir_volume("ready"))
        .container(
            ContainerBuilder::new("agnhost", "agnhost")
                .args(["pause"])
                .mount("ready", &gate.dir, false)
                .with(move |c: &mut Container| c.readiness_probe = Some(probe.clone())),
        );
    create_sts_service(f).await?;
    f.create(&stateful_set("ss", "test", 3, template_of(pod.build(f)?)))
        .await?;
    let pods = f.api::<Pod>();
    for i in 0..3 {
        let name = format!("ss-{i}");
        f.wait_for(&pods, &name, wc::is_pod_phase("Running"), "to run").await?;
        let next = format!("ss-{}", i + 1);
        if i < 2 {
            f.step(format!("checking that {next} is not created while {name} is unready"));
            f.consistently(&pods, &name, |p: &Pod| !is_ready(p), "unready", CONSISTENTLY)
                .await?;
            let early = f.api::<Pod>().get_opt(&next).await?;
            ensure!(
                early.is_none(),
                "StatefulSet ss created {next} while {name} was unready: scaling did not halt"
            );
        }
        gate.write(f, &name).await?;
        f.wait_pod_ready(&name).await?;
    }
    f.step("scaling ss down to 0");
    let order = std::sync::Mutex::new(Vec::<String>::new());
    let api = f.api::<StatefulSet>();
    api.patch_scale(
        "ss",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"replicas": 0}})),
    )
    .await?;
    f.wait_list(
        &pods,
        "name=ss",
        |live: &[Pod]| {
            let mut o = order.lock().expect("order");
            for gone in ["ss-2", "ss-1", "ss-0"] {
                let terminating = live
                    .iter()
                    .all(|p| p.name_any() != gone || p.metadata.deletion_timestamp.is_some());
                if terminating && !o.iter().any(|g| g == gone) {
                    o.push(gone.to_string());
                }
            }
            live.is_empty()
        },
        "every StatefulSet pod to be deleted",
    )
    .await?;
    let order = order.into_inner().expect("order");
    ensure!(
        order == ["ss-2", "ss-1", "ss-0"],
        "StatefulSet ss scaled down in order {order:?}, expected ss-2, ss-1, ss-0"
    );
    Ok(())
}

// --- Deployments -----------------------------------------------------------------------------

/// The image of the first container of `pod`.
fn image_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// Rolls Deployment `name` to `image` and waits for the rollout; returns the pods afterwards.
async fn roll_to(f: &Framework, name: &str, image: &str) -> Result<Vec<Pod>, CaseError> {
    let reference = f.image(image, f.target_os())?;
    f.step(format!("rolling deployment {name} to {reference}"));
    let patch =
        serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": reference}]}}}});
    f.api::<Deployment>()
        .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    wait_rolled_out(f, name, "to roll out the new image").await?;
    f.wait_list(
        &f.api::<Pod>(),
        &format!("name={name}"),
        |pods: &[Pod]| {
            !pods.is_empty()
                && pods
                    .iter()
                    .all(|p| image_of(p) == reference && p.metadata.deletion_timestamp.is_none())
        },
        "only pods of the new image",
    )
    .await
}

/// Upstream apps/deployment.go "RollingUpdateDeployment should delete old pods and create new ones".
pub(crate) const DEPLOY_ROLLING: &str =
    "[sig-apps] Deployment RollingUpdateDeployment should delete old pods and create new ones [Conformance]";

/// Upstream deployment.go: rolling a Deployment to a new image replaces every old pod; the old
/// ReplicaSet is scaled to 0 and the new one holds all replicas.
async fn deploy_rolling(f: &Framework) -> CaseResult {
    let app = "test-rolling-update-deployment";
    let d = f.create(&deployment(app, 2, web(f, app, "httpd")?)).await?;
    wait_rolled_out(f, app, "to roll out").await?;
    let pods = roll_to(f, app, "httpd-new").await?;
    ensure!(
        pods.len() == 2,
        "deployment {app} runs {} pods after the rollout, expected 2",
        pods.len()
    );
    let uid = d.uid().unwrap_or_default();
    let sets: Vec<ReplicaSet> = f
        .api::<ReplicaSet>()
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|rs| rs.owner_references().iter().any(|o| o.uid == uid))
        .collect();
    let sizes: Vec<(String, i32)> = sets
        .iter()
        .map(|rs| (rs.name_any(), rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)))
        .collect();
    ensure!(
        sets.len() == 2 && sizes.iter().filter(|(_, n)| *n == 0).count() == 1 && sizes.iter().any(|(_, n)| *n == 2),
        "deployment {app}: expected an old ReplicaSet at 0 and a new one at 2, got {sizes:?}"
    );
    Ok(())
}

/// Upstream apps/deployment.go "RecreateDeployment should delete old pods and create new ones".
pub(crate) const DEPLOY_RECREATE: &str =
    "[sig-apps] Deployment RecreateDeployment should delete old pods and create new ones [Conformance]";

/// Upstream deployment.go: with strategy Recreate, no new pod exists while an old one is still
/// there; the rollout ends with new pods only.
async fn deploy_recreate(f: &Framework) -> CaseResult {
    let app = "test-recreate-deployment";
    f.create(&recreate_deployment(app, 2, web(f, app, "httpd")?)).await?;
    wait_rolled_out(f, app, "to roll out").await?;
    let old = f.image("httpd", f.target_os())?;
    let new = f.image("httpd-new", f.target_os())?;
    let overlap = std::sync::Mutex::new(None::<Vec<String>>);
    let (pods_api, selector) = (f.api::<Pod>(), format!("name={app}"));
    let watch = f.wait_list(
        &pods_api,
        &selector,
        |pods: &[Pod]| {
            let images: Vec<String> = pods.iter().map(image_of).collect();
            if images.contains(&old) && images.contains(&new) {
                overlap.lock().expect("overlap").get_or_insert(
                    pods.iter()
                        .map(|p| format!("{} {}", p.name_any(), image_of(p)))
                        .collect(),
                );
            }
            pods.len() == 2 && images.iter().all(|i| i == &new) && pods.iter().all(is_ready)
        },
        "only ready pods of the new image",
    );
    let roll = roll_to(f, app, "httpd-new");
    let (watched, rolled) = tokio::join!(watch, roll);
    watched?;
    rolled?;
    if let Some(seen) = overlap.into_inner().expect("overlap") {
        fail!("deployment {app} (Recreate) ran old and new pods at the same time: {seen:?}");
    }
    Ok(())
}

/// Upstream apps/deployment.go "deployment should delete old replica sets".
pub(crate) const DEPLOY_HISTORY: &str = "[sig-apps] Deployment deployment should delete old replica sets [Conformance]";

/// Upstream deployment.go: with `revisionHistoryLimit: 0`, only the current ReplicaSet remains
/// after a rollout.
async fn deploy_history(f: &Framework) -> CaseResult {
    let app = "test-cleanup-deployment";
    let mut d = deployment(app, 1, web(f, app, "httpd")?);
    if let Some(spec) = d.spec.as_mut() {
        spec.revision_history_limit = Some(0);
    }
    let d = f.create(&d).await?;
    wait_rolled_out(f, app, "to roll out").await?;
    roll_to(f, app, "httpd-new").await?;
    let uid = d.uid().unwrap_or_default();
    let owned = |sets: &[ReplicaSet]| {
        sets.iter()
            .filter(|rs| rs.owner_references().iter().any(|o| o.uid == uid))
            .count()
    };
    f.wait_list(
        &f.api::<ReplicaSet>(),
        &format!("name={app}"),
        |sets: &[ReplicaSet]| owned(sets) == 1,
        "only the current ReplicaSet to remain",
    )
    .await?;
    Ok(())
}

// --- DaemonSets ------------------------------------------------------------------------------

/// Waits until the DaemonSet's pods cover exactly the schedulable nodes of the target OS, one
/// pod each, all ready; returns them.
pub(super) async fn wait_daemon_cover(f: &Framework, selector: &str) -> Result<Vec<Pod>, CaseError> {
    let nodes: BTreeSet<String> = f
        .require_nodes(f.target_os(), 1)
        .await?
        .into_iter()
        .map(|n| n.name)
        .collect();
    let covered = |pods: &[Pod]| {
        let live: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let on: Vec<String> = live.iter().map(|p| pod_node(p)).collect();
        live.iter().all(|p| is_ready(p))
            && on.len() == nodes.len()
            && on.iter().cloned().collect::<BTreeSet<_>>() == nodes
    };
    let pods = f
        .wait_list(
            &f.api::<Pod>(),
            selector,
            covered,
            &format!("one ready daemon pod on each of {nodes:?} and nowhere else"),
        )
        .await?;
    Ok(pods
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

pub(super) fn daemon_template(
    f: &Framework,
    app: &str,
) -> Result<k8s_openapi::api::core::v1::PodTemplateSpec, CaseError> {
    let pod: PodBuilder = f.pod(app).label("daemonset-name", app).container(
        ContainerBuilder::new("app", "agnhost")
            .args(["serve-hostname"])
            .port(i32::from(SERVE_HOSTNAME_PORT), "TCP"),
    );
    Ok(template_of(pod.build(f)?))
}

/// Upstream apps/daemon_set.go "should run and stop simple daemon".
pub(crate) const DS_SIMPLE: &str = "[sig-apps] Daemon set [Serial] should run and stop simple daemon [Conformance]";

/// Upstream daemon_set.go: one daemon pod runs on every schedulable node of the target OS (and
/// none on the other OS's nodes); a deleted daemon pod is replaced; deleting the DaemonSet
/// removes its pods.
async fn ds_simple(f: &Framework) -> CaseResult {
    let app = "daemon-set";
    let selector = format!("daemonset-name={app}");
    let ds = f.create(&workloads::daemon_set(app, daemon_template(f, app)?)).await?;
    // Upstream's order: pods on every node first (its message names a stray or missing pod),
    // then the DaemonSet's status.
    let pods = wait_daemon_cover(f, &selector).await?;
    f.wait_for(&f.api::<DaemonSet>(), app, wc::is_daemonset_ready(), "to be ready")
        .await?;

    let victim = pods[0].name_any();
    f.step(format!("deleting daemon pod {victim}; it must be revived"));
    f.api::<Pod>().delete(&victim, &DeleteParams::default()).await?;
    let revived = wait_daemon_cover(f, &selector).await?;
    ensure!(
        revived.iter().all(|p| p.name_any() != victim),
        "daemon pod {victim} was not replaced"
    );

    f.step("deleting the DaemonSet");
    f.api::<DaemonSet>().delete(app, &DeleteParams::foreground()).await?;
    f.wait_for(
        &f.api::<DaemonSet>(),
        app,
        is_deleted(&ds.uid().unwrap_or_default()),
        "to be deleted",
    )
    .await?;
    f.wait_list(
        &f.api::<Pod>(),
        &selector,
        |p: &[Pod]| p.is_empty(),
        "every daemon pod to be gone",
    )
    .await?;
    Ok(())
}

/// Upstream apps/daemon_set.go "should retry creating failed daemon pods".
pub(crate) const DS_RETRY_FAILED: &str =
    "[sig-apps] Daemon set [Serial] should retry creating failed daemon pods [Conformance]";

/// Upstream daemon_set.go: a daemon pod whose phase is set to Failed is deleted and replaced by
/// the DaemonSet controller.
async fn ds_retry_failed(f: &Framework) -> CaseResult {
    let app = "daemon-set-retry";
    let selector = format!("daemonset-name={app}");
    f.create(&workloads::daemon_set(app, daemon_template(f, app)?)).await?;
    let pods = wait_daemon_cover(f, &selector).await?;
    let mut victim = pods[0].clone();
    let name = victim.name_any();
    f.step(format!("setting daemon pod {name} to phase Failed"));
    victim.status = Some(PodStatus {
        phase: Some("Failed".into()),
        ..victim.status.unwrap_or_default()
    });
    f.api::<Pod>()
        .replace_status(&name, &PostParams::default(), &victim)
        .await?;
    f.wait_for_within(
        &f.api::<Pod>(),
        &name,
        is_deleted(&victim.uid().unwrap_or_default()),
        "to be removed by the DaemonSet controller",
        Duration::from_secs(120),
    )
    .await?;
    wait_daemon_cover(f, &selector).await.map(|_| ())
}
