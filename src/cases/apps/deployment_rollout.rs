//! Upstream `[sig-apps] Deployment` conformance cases about rollouts that meet trouble
//! (test/e2e/apps/deployment.go): "deployment should support rollover" (a stuck rollout and an
//! adopted orphan ReplicaSet are both rolled over by the next template) and "deployment should
//! support proportional scaling" (scaling a Deployment mid-rollout spreads the change over its
//! ReplicaSets in proportion to their size).
//!
//! The rollout-constraint check upstream runs while waiting for completion
//! (`checkRollingUpdateStatus`: ReplicaSet sizes never above replicas + maxSurge, availability
//! never below replicas - maxUnavailable) is polled the same way here.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, RollingUpdateDeployment};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{conditions as wl, deployment, replica_set, selector_labels, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};
use crate::{ensure, fail};

pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(DEPLOY_ROLLOVER, Kind::Adapted, deploy_rollover),
        case!(DEPLOY_PROPORTIONAL, Kind::Adapted, deploy_proportional),
    ]
}

/// The revision annotation on Deployments and their ReplicaSets.
const REVISION: &str = "deployment.kubernetes.io/revision";
/// How long one ReplicaSet or Deployment state may take to be reached (upstream polls for up
/// to five minutes; the simulator and a healthy cluster reach each in seconds).
const STEP: Duration = Duration::from_secs(90);

fn rs_spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn rs_status_replicas(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().map_or(0, |s| s.replicas)
}

fn rs_available(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0)
}

fn rs_image(rs: &ReplicaSet) -> Option<String> {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
}

/// A RollingUpdate strategy with integer fenceposts.
fn rolling(d: &mut Deployment, max_surge: i32, max_unavailable: i32) {
    if let Some(spec) = d.spec.as_mut() {
        spec.strategy = Some(k8s_openapi::api::apps::v1::DeploymentStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDeployment {
                max_surge: Some(IntOrString::Int(max_surge)),
                max_unavailable: Some(IntOrString::Int(max_unavailable)),
            }),
        });
    }
}

/// The ReplicaSets Deployment `uid` controls.
async fn owned_sets(f: &Framework, uid: &str) -> Result<Vec<ReplicaSet>, CaseError> {
    Ok(f.api::<ReplicaSet>()
        .list(&ListParams::default())
        .await
        .map_err(|e| CaseError::from(e).context("listing ReplicaSets"))?
        .items
        .into_iter()
        .filter(|rs| {
            rs.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .collect())
}

/// Waits (up to [`STEP`]) until Deployment `d` controls a ReplicaSet whose template runs
/// `image` and `accept` holds for it; returns it.
async fn wait_owned_set(
    f: &Framework,
    d: &Deployment,
    image: &str,
    accept: impl Fn(&ReplicaSet) -> bool,
    why: &str,
) -> Result<ReplicaSet, CaseError> {
    let uid = d.uid().unwrap_or_default();
    let until = tokio::time::Instant::now() + STEP;
    // Polled, as upstream polls (`wait.PollUntilContextTimeout`).
    let mut pace = tokio::time::interval(Duration::from_millis(500));
    loop {
        pace.tick().await;
        let sets = owned_sets(f, &uid).await?;
        let found = sets.iter().find(|rs| rs_image(rs).as_deref() == Some(image));
        if let Some(rs) = found
            && accept(rs)
        {
            return Ok(rs.clone());
        }
        if tokio::time::Instant::now() >= until {
            let seen: Vec<String> = sets
                .iter()
                .map(|rs| {
                    format!(
                        "{} image {:?} spec.replicas {} status.replicas {} available {} revision {:?}",
                        rs.name_any(),
                        rs_image(rs).unwrap_or_default(),
                        rs_spec_replicas(rs),
                        rs_status_replicas(rs),
                        rs_available(rs),
                        rs.annotations().get(REVISION)
                    )
                })
                .collect();
            fail!(
                "deployment {}: expected its ReplicaSet of image {image} {why} within {STEP:?}; its ReplicaSets: [{}]",
                d.name_any(),
                seen.join("; ")
            );
        }
    }
}

/// Waits until ReplicaSet `name` satisfies `accept` (upstream's
/// `waitForReplicaSetTargetSpecReplicas` and friends).
async fn wait_set(
    f: &Framework,
    name: &str,
    accept: impl Fn(&ReplicaSet) -> bool + Send + Sync + 'static,
    why: &str,
) -> CaseResult {
    f.wait_for_within(
        &f.api::<ReplicaSet>(),
        name,
        move |rs: Option<&ReplicaSet>| rs.is_some_and(&accept),
        why,
        STEP,
    )
    .await?;
    Ok(())
}

/// Waits until the controller has observed Deployment `name`'s latest generation.
async fn wait_observed(f: &Framework, name: &str) -> Result<Deployment, CaseError> {
    let d = f
        .wait_for_within(
            &f.api::<Deployment>(),
            name,
            |d: Option<&Deployment>| {
                d.is_some_and(|d| {
                    d.status
                        .as_ref()
                        .is_some_and(|s| s.observed_generation >= d.metadata.generation)
                })
            },
            "to observe its latest generation",
            STEP,
        )
        .await?;
    d.ok_or_else(|| CaseError::failed(format!("deployment {name} disappeared")))
}

/// Upstream apps/deployment.go "deployment should support rollover".
pub(crate) const DEPLOY_ROLLOVER: &str = "[sig-apps] Deployment deployment should support rollover [Conformance]";

/// Upstream deployment.go `testRolloverDeployment`: an orphan ReplicaSet (`pod=httpd`) serves
/// one pod; a Deployment selecting its pods adopts it and rolls to an image that does not
/// exist (maxUnavailable 0, maxSurge 1, minReadySeconds 10), so both ReplicaSets hold one
/// replica; rolling the template again to agnhost (revision 2) completes within the rolling
/// constraints and leaves both earlier ReplicaSets at zero.
async fn deploy_rollover(f: &Framework) -> CaseResult {
    let pod_name = "rollover-pod";
    let rs_name = "test-rollover-controller";
    let rs_pod = f
        .pod(pod_name)
        .label("name", pod_name)
        .label("pod", "httpd")
        .container(ContainerBuilder::new("httpd", "httpd").port(80, "TCP"));
    // Upstream's newRS labels the ReplicaSet itself with its pods' labels: the Deployment
    // claims ReplicaSets by their own labels.
    let template = template_of(rs_pod.build(f)?);
    let mut rs = replica_set(rs_name, 1, template.clone());
    rs.metadata.labels = Some(selector_labels(&template));
    f.create(&rs).await?;
    f.wait_pods_ready(&format!("name={pod_name}"), 1).await?;
    f.wait_for(
        &f.api::<ReplicaSet>(),
        rs_name,
        wl::replica_set_ready(1),
        "to be ready before the Deployment adopts it",
    )
    .await?;

    let name = "test-rollover-deployment";
    let missing = "gcr.io/google_samples/gb-redisslave:nonexistent";
    let pod = f
        .pod(pod_name)
        .label("name", pod_name)
        .container(ContainerBuilder::literal("redis-slave", missing));
    let mut d = deployment(name, 1, template_of(pod.build(f)?));
    rolling(&mut d, 1, 0);
    if let Some(spec) = d.spec.as_mut() {
        spec.min_ready_seconds = Some(10);
    }
    let d = f.create(&d).await?;
    f.wait_for_within(
        &f.api::<Deployment>(),
        name,
        |d: Option<&Deployment>| {
            d.and_then(|d| d.status.as_ref())
                .is_some_and(|s| s.updated_replicas.unwrap_or(0) >= 1)
        },
        "to start rolling out (updatedReplicas >= 1)",
        STEP,
    )
    .await?;
    let first_new = wait_owned_set(
        f,
        &d,
        missing,
        |rs| rs.annotations().get(REVISION).map(String::as_str) == Some("1"),
        "at revision 1",
    )
    .await?;
    let current = f.api::<Deployment>().get(name).await?;
    let revision = current.annotations().get(REVISION).cloned();
    ensure!(
        revision.as_deref() == Some("1"),
        "deployment {name}: expected revision \"1\" after its first rollout, got {revision:?}"
    );
    // Both ReplicaSets hold one created replica: the adopted one cannot go down (maxUnavailable
    // 0) while the new one's pod cannot become available.
    for rs_name in [rs_name.to_string(), first_new.name_any()] {
        wait_set(
            f,
            &rs_name,
            |rs| rs_spec_replicas(rs) == 1 && rs_status_replicas(rs) == 1,
            "to hold 1 created replica while the rollout is stuck",
        )
        .await?;
    }
    let adopted = f.api::<ReplicaSet>().get(rs_name).await?;
    ensure!(
        adopted
            .owner_references()
            .iter()
            .any(|o| Some(&o.uid) == d.metadata.uid.as_ref()),
        "ReplicaSet {rs_name}: expected the Deployment {name} to have adopted it, owners {:?}",
        adopted.owner_references()
    );

    let agnhost = f.image("agnhost", f.target_os())?;
    f.step(format!("rolling deployment {name} over to {agnhost}"));
    let mut containers = current
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    let Some(first) = containers.first_mut() else {
        fail!("deployment {name} has no container");
    };
    first.name = "agnhost".into();
    first.image = Some(agnhost.clone());
    let patch = serde_json::json!({"spec": {"template": {"spec": {"containers": containers}}}});
    f.api::<Deployment>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    wait_observed(f, name).await?;
    wait_owned_set(
        f,
        &d,
        &agnhost,
        |rs| rs.annotations().get(REVISION).map(String::as_str) == Some("2"),
        "at revision 2",
    )
    .await?;
    wait_complete_checking_rolling(f, name, 1, 0).await?;
    for rs_name in [rs_name.to_string(), first_new.name_any()] {
        wait_set(
            f,
            &rs_name,
            |rs| rs_spec_replicas(rs) == 0 && rs_status_replicas(rs) == 0,
            "to be rolled over to 0 replicas",
        )
        .await?;
    }
    Ok(())
}

/// Upstream `waitForDeploymentCompleteAndCheckRolling`: polls until the Deployment is complete
/// (every replica updated and available, its latest generation observed) and fails as soon as,
/// while it is not, its ReplicaSets ask for more than replicas + maxSurge pods or fewer than
/// replicas - maxUnavailable are available.
async fn wait_complete_checking_rolling(f: &Framework, name: &str, max_surge: i32, max_unavailable: i32) -> CaseResult {
    let api: Api<Deployment> = f.api();
    let until = tokio::time::Instant::now() + STEP;
    let mut pace = tokio::time::interval(Duration::from_millis(500));
    loop {
        pace.tick().await;
        let d = api.get(name).await?;
        let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let status = d.status.clone().unwrap_or_default();
        let updated = status.updated_replicas.unwrap_or(0);
        let available = status.available_replicas.unwrap_or(0);
        if updated < want {
            let created: i32 = owned_sets(f, &d.uid().unwrap_or_default())
                .await?
                .iter()
                .map(rs_spec_replicas)
                .sum();
            ensure!(
                created <= want + max_surge,
                "deployment {name} rolling update broken: total pods created: {created}, more than the max allowed: {}",
                want + max_surge
            );
            ensure!(
                available >= want - max_unavailable,
                "deployment {name} rolling update broken: total pods available: {available}, less than the min required: {}",
                want - max_unavailable
            );
        }
        let complete = updated == want
            && status.replicas.unwrap_or(0) == want
            && available == want
            && status.observed_generation >= d.metadata.generation;
        if complete {
            return Ok(());
        }
        if tokio::time::Instant::now() >= until {
            fail!("deployment {name}: expected it to complete its rollout within {STEP:?}; last status {status:?}");
        }
    }
}

/// Upstream apps/deployment.go "deployment should support proportional scaling".
pub(crate) const DEPLOY_PROPORTIONAL: &str =
    "[sig-apps] Deployment deployment should support proportional scaling [Conformance]";

/// Upstream deployment.go `testProportionalScalingDeployment`: 10 httpd replicas (maxSurge 3,
/// maxUnavailable 2) rolled to an image that does not exist stop at 8 old (all available) and
/// 5 new (none available); scaled to 30 mid-rollout, the old ReplicaSet goes to 20 and the new
/// one to 13 (8 + 20·8/13 and 5 + 20·5/13, rounded).
async fn deploy_proportional(f: &Framework) -> CaseResult {
    let name = "webserver-deployment";
    let label = "httpd";
    let pod = f
        .pod(label)
        .label("name", label)
        .container(ContainerBuilder::new("httpd", "httpd").port(80, "TCP"));
    let mut d = deployment(name, 10, template_of(pod.build(f)?));
    rolling(&mut d, 3, 2);
    let d = f.create(&d).await?;
    f.wait_for(
        &f.api::<Deployment>(),
        name,
        crate::framework::wait::conditions::is_deployment_rolled_out(),
        "to roll out its 10 replicas",
    )
    .await?;
    let httpd = f.image("httpd", f.target_os())?;
    let first = wait_owned_set(f, &d, &httpd, |rs| rs_available(rs) == 10, "with 10 available replicas").await?;

    let missing = "webserver:404";
    f.step(format!(
        "updating deployment {name} to the image {missing} that does not exist"
    ));
    let patch =
        serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "httpd", "image": missing}]}}}});
    f.api::<Deployment>()
        .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    wait_observed(f, name).await?;
    // replicas - maxUnavailable = 8 stay, all available.
    wait_set(
        f,
        &first.name_any(),
        |rs| rs_spec_replicas(rs) == 8 && rs_available(rs) == 8 && rs_status_replicas(rs) == 8,
        "first rollout's ReplicaSet to have .spec.replicas = 8, all available",
    )
    .await?;
    // replicas + maxSurge - 8 = 5 new, none available.
    let second = wait_owned_set(
        f,
        &d,
        missing,
        |rs| rs_spec_replicas(rs) == 5 && rs_status_replicas(rs) == 5,
        "(the second rollout's) to have .spec.replicas = 5 created",
    )
    .await?;
    ensure!(
        rs_available(&second) == 0,
        "ReplicaSet {} of the missing image {missing}: expected 0 available replicas, got {}",
        second.name_any(),
        rs_available(&second)
    );
    let current = f.api::<Deployment>().get(name).await?;
    let available = current.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0);
    ensure!(
        available >= 8,
        "deployment {name}: observed {available} available replicas, less than min required 8"
    );

    f.step(format!("scaling deployment {name} from 10 to 30 mid-rollout"));
    f.api::<Deployment>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 30}})),
        )
        .await?;
    wait_set(
        f,
        &first.name_any(),
        |rs| rs_spec_replicas(rs) == 20,
        "first rollout's ReplicaSet to have .spec.replicas = 20 (8 + 20*8/13, proportional scaling)",
    )
    .await?;
    wait_set(
        f,
        &second.name_any(),
        |rs| rs_spec_replicas(rs) == 13,
        "second rollout's ReplicaSet to have .spec.replicas = 13 (5 + 20*5/13, proportional scaling)",
    )
    .await?;
    Ok(())
}
