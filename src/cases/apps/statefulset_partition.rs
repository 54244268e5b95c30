//! `[sig-apps] StatefulSet` "should perform canary updates and phased rolling updates of
//! template modifications" (upstream test/e2e/apps/statefulset.go): a RollingUpdate set whose
//! `rollingUpdate.partition` holds ordinals below it on the current revision.
//!
//! Upstream's flow: three httpd pods with an HTTP readiness probe; a partition of 3 (above the
//! replica count) keeps a template change from touching any pod; a partition of 2 updates ss2-2
//! alone (the canary); pods deleted then come back on the revision their side of the partition
//! names; lowering the partition to 1 and then 0 rolls the rest, after which the update revision
//! is current. Each pod's revision is its `controller-revision-hash` label.
//!
//! Where upstream compares the pods it listed before the template change (a check that cannot see
//! a change), this lists them again; where it waits for three Running and Ready pods after the
//! deletions, this also requires that the deleted pods were replaced (new uids), so a pod still
//! terminating is not taken for its replacement.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{Container, HTTPGetAction, Pod, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::DeleteParams;
use kube::runtime::wait::Condition;
use kube::{Api, ResourceExt};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::services::ServiceBuilder;
use crate::framework::update::replace_retrying;
use crate::framework::wait::conditions as wc;
use crate::framework::workloads::{is_ready, stateful_set, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};
use crate::{ensure, fail};

/// Upstream "should perform canary updates and phased rolling updates of template modifications".
pub(crate) const STS_CANARY: &str = "[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] \
     should perform canary updates and phased rolling updates of template modifications [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(STS_CANARY, Kind::Adapted, sts_canary)]
}

/// The set's name, replica count and the label a stateful pod carries with its revision.
const NAME: &str = "ss2";
const REPLICAS: i32 = 3;
const REVISION_LABEL: &str = "controller-revision-hash";
/// How long the pods may take to reach a state the case waits for.
const WAIT: Duration = Duration::from_secs(120);

/// Upstream `setHTTPProbe`: ready while the web server answers `/index.html` on port 80.
fn http_probe() -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/index.html".into()),
            port: IntOrString::Int(80),
            ..Default::default()
        }),
        period_seconds: Some(1),
        success_threshold: Some(1),
        failure_threshold: Some(1),
        ..Default::default()
    }
}

/// The ordinal of pod `ss2-<n>`.
fn ordinal(pod: &Pod) -> Option<i32> {
    pod.name_any().strip_prefix(NAME)?.strip_prefix('-')?.parse().ok()
}

fn revision_of(pod: &Pod) -> String {
    pod.labels().get(REVISION_LABEL).cloned().unwrap_or_default()
}

fn image_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// The set's (currentRevision, updateRevision).
fn revisions(set: &StatefulSet) -> (String, String) {
    let st = set.status.clone().unwrap_or_default();
    (
        st.current_revision.unwrap_or_default(),
        st.update_revision.unwrap_or_default(),
    )
}

/// The two sides of the roll-out: what pods below the partition must keep (`old`, `current`)
/// and what pods at or above it must have (`new`, `update`).
struct Rollout {
    old_image: String,
    new_image: String,
    current: String,
    update: String,
}

impl Rollout {
    /// Upstream's per-pod checks after each partition step: every live pod of the set, by
    /// ordinal, on the side of `partition` it belongs to; a pod missing from the list fails too.
    fn check(&self, pods: &[Pod], partition: i32, step: &str) -> CaseResult {
        let mut wrong = Vec::new();
        let mut seen = BTreeSet::new();
        for pod in pods {
            let Some(o) = ordinal(pod) else { continue };
            seen.insert(o);
            let (image, revision) = (image_of(pod), revision_of(pod));
            let (want_image, want_revision, side) = if o < partition {
                (&self.old_image, &self.current, "current")
            } else {
                (&self.new_image, &self.update, "update")
            };
            if image != *want_image || revision != *want_revision {
                wrong.push(format!(
                    "pod {} has image {image} and revision {revision}, expected the {side} image {want_image} \
                     and revision {want_revision}",
                    pod.name_any()
                ));
            }
        }
        for o in (0..REPLICAS).filter(|o| !seen.contains(o)) {
            wrong.push(format!("pod {NAME}-{o} is missing"));
        }
        if !wrong.is_empty() {
            fail!(
                "{step} (partition {partition}): {}; ordinals below the partition stay on the current revision",
                wrong.join("; ")
            );
        }
        Ok(())
    }
}

/// Live pods of the set, by ordinal.
async fn set_pods(f: &Framework) -> Result<Vec<Pod>, CaseError> {
    let mut pods = f.pods_matching("foo=bar,baz=blah").await?;
    pods.sort_by_key(ordinal);
    Ok(pods)
}

/// Upstream `WaitForRunningAndReady`: `REPLICAS` live pods, each Running and Ready, none of
/// them one of `gone` (pods deleted before the wait).
async fn wait_running_and_ready(f: &Framework, gone: &[String], why: &str) -> Result<Vec<Pod>, CaseError> {
    let running = wc::is_pod_phase("Running");
    let mut pods = f
        .wait_list_within(
            &f.api::<Pod>(),
            "foo=bar,baz=blah",
            |pods: &[Pod]| {
                let live: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect();
                live.len() == REPLICAS as usize
                    && live.iter().all(|p| {
                        running.matches_object(Some(p))
                            && is_ready(p)
                            && !gone.contains(&p.metadata.uid.clone().unwrap_or_default())
                    })
            },
            why,
            WAIT,
        )
        .await?;
    pods.retain(|p| p.metadata.deletion_timestamp.is_none());
    pods.sort_by_key(ordinal);
    Ok(pods)
}

/// Upstream `waitForStatus`: the status has caught up with the set's generation.
async fn wait_status(f: &Framework) -> Result<StatefulSet, CaseError> {
    f.wait_for_within(
        &f.api::<StatefulSet>(),
        NAME,
        |s: Option<&StatefulSet>| {
            s.is_some_and(|s| {
                let st = s.status.as_ref();
                st.and_then(|st| st.observed_generation) >= s.metadata.generation
                    && st.is_some_and(|st| st.update_revision.is_some())
            })
        },
        "to observe its current generation",
        WAIT,
    )
    .await?
    .ok_or_else(|| CaseError::failed(format!("StatefulSet {NAME} is gone")))
}

/// Sets `rollingUpdate.partition` to `partition`.
async fn set_partition(f: &Framework, partition: i32) -> Result<StatefulSet, CaseError> {
    f.step(format!("setting the partition of StatefulSet {NAME} to {partition}"));
    replace_retrying(&f.api::<StatefulSet>(), NAME, |s: &mut StatefulSet| {
        if let Some(spec) = s.spec.as_mut() {
            spec.update_strategy = Some(rolling_update(partition));
        }
    })
    .await
}

fn rolling_update(partition: i32) -> StatefulSetUpdateStrategy {
    StatefulSetUpdateStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateStatefulSetStrategy {
            partition: Some(partition),
            max_unavailable: None,
        }),
    }
}

/// Upstream `waitForPartitionedRollingUpdate`: all pods exist and those at or above `partition`
/// carry the update revision; at partition 0, the update revision is also current.
async fn wait_partitioned(f: &Framework, partition: i32, update: &str) -> Result<Vec<Pod>, CaseError> {
    f.wait_list_within(
        &f.api::<Pod>(),
        "foo=bar,baz=blah",
        |pods: &[Pod]| {
            let live: Vec<&Pod> = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            live.len() >= REPLICAS as usize
                && live
                    .iter()
                    .filter(|p| ordinal(p).is_some_and(|o| o >= partition))
                    .all(|p| revision_of(p) == update)
        },
        &format!("pods of StatefulSet {NAME} from ordinal {partition} up to carry the update revision {update}"),
        WAIT,
    )
    .await?;
    if partition <= 0 {
        f.wait_for_within(
            &f.api::<StatefulSet>(),
            NAME,
            |s: Option<&StatefulSet>| s.is_some_and(|s| revisions(s).0 == update),
            &format!("to report the update revision {update} as current once every pod carries it"),
            WAIT,
        )
        .await?;
    }
    set_pods(f).await
}

/// The upstream flow (see the module documentation).
async fn sts_canary(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let old_image = f.image("httpd", os)?;
    let new_image = f.image("httpd-new", os)?;
    ensure!(
        old_image != new_image,
        "incorrect setup: the update must change the image, both are {old_image}"
    );
    f.create(
        &ServiceBuilder::headless("test")
            .selector("foo", "bar")
            .selector("baz", "blah")
            .port("http", 80, 80, "TCP")
            .build(f.ns(), &f.run().run_id),
    )
    .await?;
    let probe = http_probe();
    let pod = f.pod(NAME).label("foo", "bar").label("baz", "blah").container(
        ContainerBuilder::new("webserver", "httpd")
            .port(80, "TCP")
            .with(move |c: &mut Container| c.readiness_probe = Some(probe.clone())),
    );
    let mut set = stateful_set(NAME, "test", REPLICAS, template_of(pod.build(f)?));
    if let Some(spec) = set.spec.as_mut() {
        spec.update_strategy = Some(rolling_update(3));
    }
    f.create(&set).await?;
    let pods = wait_running_and_ready(f, &[], "3 running and ready pods of StatefulSet ss2").await?;
    let (current, update) = revisions(&wait_status(f).await?);
    ensure!(
        current == update,
        "StatefulSet {NAME} was created with update revision {update} not equal to current revision {current}"
    );
    if let Some(p) = pods.iter().find(|p| revision_of(p) != current) {
        fail!(
            "pod {} has revision {:?}, not the current revision {current}",
            p.name_any(),
            revision_of(p)
        );
    }

    f.step(format!(
        "updating the template of StatefulSet {NAME}: image {old_image} to {new_image}"
    ));
    replace_retrying(&f.api::<StatefulSet>(), NAME, |s: &mut StatefulSet| {
        if let Some(c) = s
            .spec
            .as_mut()
            .and_then(|s| s.template.spec.as_mut())
            .and_then(|p| p.containers.first_mut())
        {
            c.image = Some(new_image.clone());
        }
    })
    .await?;
    let (current, update) = revisions(&wait_status(f).await?);
    ensure!(
        current != update,
        "after the template change StatefulSet {NAME} reports currentRevision = updateRevision = {update}; \
         the current revision must not equal the update revision during a rolling update"
    );
    let rollout = Rollout {
        old_image,
        new_image,
        current,
        update: update.clone(),
    };
    f.step("no pod may be updated while the partition (3) is above the replica count");
    rollout.check(&set_pods(f).await?, REPLICAS, "a partition above the replica count")?;

    f.step("performing a canary update (partition 2)");
    set_partition(f, 2).await?;
    let pods = wait_partitioned(f, 2, &update).await?;
    rollout.check(&pods, 2, "the canary update")?;

    f.step("restoring pods to the correct revision when they are deleted (ss2-0 and ss2-2)");
    let api: Api<Pod> = f.api();
    let mut gone = Vec::new();
    for o in [0, 2] {
        let name = format!("{NAME}-{o}");
        let pod = api.get(&name).await?;
        gone.push(pod.metadata.uid.clone().unwrap_or_default());
        api.delete(&name, &DeleteParams::default()).await?;
    }
    let pods = wait_running_and_ready(f, &gone, "ss2-0 and ss2-2 to be recreated, running and ready").await?;
    rollout.check(&pods, 2, "after deleting ss2-0 and ss2-2")?;

    for partition in (0..2).rev() {
        f.step(format!("phased rolling update: partition {partition}"));
        set_partition(f, partition).await?;
        let pods = wait_partitioned(f, partition, &update).await?;
        rollout.check(&pods, partition, "the phased rolling update")?;
    }
    let set = f.api::<StatefulSet>().get(NAME).await?;
    let (current, _) = revisions(&set);
    ensure!(
        current == update,
        "StatefulSet {NAME} current revision {current} does not equal update revision {update} on update completion"
    );
    Ok(())
}
