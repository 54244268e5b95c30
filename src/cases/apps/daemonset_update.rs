//! `[sig-apps] Daemon set [Serial]` update cases of upstream test/e2e/apps/daemon_set.go: a
//! RollingUpdate DaemonSet rolls its pods to a new image one node at a time, writing a second
//! ControllerRevision whose hash the new pods carry; a rollout to an image that cannot be pulled,
//! rolled back before it completes, leaves the pods it never reached running (not restarted);
//! a DaemonSet whose nodeSelector matches no node runs nowhere, follows a node label onto its
//! node and off it again, and back after its nodeSelector and update strategy are patched.
//!
//! The daemon pods run on every schedulable node of the target OS. Upstream waits up to
//! `dsRetryTimeout` (5 minutes) for revisions to appear; here the wait is 30 s, as the
//! controller writes the revision before it creates the pods the case has already seen ready.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetUpdateStrategy};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::controllers::wait_daemon_cover;
use crate::case;
use crate::cases::scheduling::{set_node_label, with_labels};
use crate::catalog::{Case, Kind};
use crate::framework::update::replace_retrying;
use crate::framework::wait::conditions as wc;
use crate::framework::workloads::{daemon_set, is_controlled_by, is_ready, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, pod_node};
use crate::{ensure, fail};

/// Upstream "should update pod when spec was updated and update strategy is RollingUpdate".
pub(crate) const DS_ROLLING_UPDATE: &str = "[sig-apps] Daemon set [Serial] should update pod when spec was updated \
     and update strategy is RollingUpdate [Conformance]";
/// Upstream "should rollback without unnecessary restarts".
pub(crate) const DS_ROLLBACK: &str =
    "[sig-apps] Daemon set [Serial] should rollback without unnecessary restarts [Conformance]";

/// Upstream "should run and stop complex daemon".
pub(crate) const DS_COMPLEX: &str = "[sig-apps] Daemon set [Serial] should run and stop complex daemon [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(DS_ROLLING_UPDATE, Kind::Adapted, ds_rolling_update),
        case!(DS_ROLLBACK, Kind::Adapted, ds_rollback),
        case!(DS_COMPLEX, Kind::Adapted, ds_complex),
    ]
}

/// Upstream's node label the complex daemon selects on.
const COLOR_LABEL: &str = "daemonset-color";
/// How long daemon pods may take to follow a node label.
const FOLLOW_TIMEOUT: Duration = Duration::from_secs(60);

/// The label every daemon pod and revision carries with its revision's hash.
const HASH_LABEL: &str = "controller-revision-hash";
/// How long the revisions may take to show (see the module doc).
const HISTORY_TIMEOUT: Duration = Duration::from_secs(30);
/// Upstream `dsRetryTimeout`'s share per rollout, before the 30 s per node it adds.
const ROLLOUT_BASE: Duration = Duration::from_secs(60);

/// A RollingUpdate DaemonSet `name` (label `daemonset-name=<name>`) of one `image` container.
fn rolling_daemon_set(f: &Framework, name: &str, image: &str) -> Result<DaemonSet, CaseError> {
    let pod = f
        .pod(name)
        .label("daemonset-name", name)
        .container(ContainerBuilder::new("app", image).port(80, "TCP"));
    let mut ds = daemon_set(name, template_of(pod.build(f)?));
    if let Some(spec) = ds.spec.as_mut() {
        spec.update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: None,
        });
    }
    Ok(ds)
}

/// The image of the first container of `pod`.
fn image_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// Upstream `daemon.Match`: whether `rev`'s data restores `template` (the template under
/// `spec.template`, with `$patch: replace`).
fn restores(rev: &ControllerRevision, template: &PodTemplateSpec) -> bool {
    let Some(data) = rev.data.as_ref() else { return false };
    let mut stored = data.0.pointer("/spec/template").cloned().unwrap_or(Value::Null);
    if let Some(o) = stored.as_object_mut() {
        o.remove("$patch");
    }
    serde_json::to_value(template).is_ok_and(|t| t == stored)
}

/// Upstream `waitForHistoryCreated` then `curHistory`: waits for `n` revisions labelled
/// `selector`, finds the single one matching the DaemonSet's current template, checks its number
/// and that every daemon pod carries its hash.
async fn expect_current_revision(f: &Framework, name: &str, selector: &str, n: usize, number: i64) -> CaseResult {
    let revs = f
        .wait_list_within(
            &f.api::<ControllerRevision>(),
            selector,
            |r: &[ControllerRevision]| r.len() == n,
            &format!("{n} ControllerRevision(s) of DaemonSet {name} labelled {selector}"),
            HISTORY_TIMEOUT,
        )
        .await?;
    let ds = f.api::<DaemonSet>().get(name).await?;
    let template = ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let current: Vec<&ControllerRevision> = revs.iter().filter(|r| restores(r, &template)).collect();
    let [cur] = current.as_slice() else {
        fail!(
            "{} of the ControllerRevisions {:?} of DaemonSet {name} match its current template, expected exactly 1",
            current.len(),
            revs.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
        );
    };
    ensure!(
        cur.revision == number,
        "the current ControllerRevision {} of DaemonSet {name} is revision {}, expected {number}",
        cur.name_any(),
        cur.revision
    );
    let hash = cur.labels().get(HASH_LABEL).cloned().unwrap_or_default();
    ensure!(
        !hash.is_empty(),
        "the current ControllerRevision {} of DaemonSet {name} has no {HASH_LABEL} label",
        cur.name_any()
    );
    let pods = f.pods_matching(selector).await?;
    let wrong: Vec<(String, Option<String>)> = pods
        .iter()
        .filter(|p| p.labels().get(HASH_LABEL) != Some(&hash))
        .map(|p| (p.name_any(), p.labels().get(HASH_LABEL).cloned()))
        .collect();
    ensure!(
        !pods.is_empty() && wrong.is_empty(),
        "daemon pods of DaemonSet {name} without {HASH_LABEL}={hash} of the current revision {}: {wrong:?} \
         (of {} pods)",
        cur.name_any(),
        pods.len()
    );
    Ok(())
}

/// Upstream `checkDaemonPodsImageAndAvailability` with maxUnavailable 1: waits until every
/// schedulable node of the target OS runs a daemon pod of `image`, failing at once when more
/// than one daemon pod is unavailable on the way.
async fn wait_image_rolled(f: &Framework, ds: &DaemonSet, image: &str) -> CaseResult {
    let name = ds.name_any();
    let uid = ds.uid().unwrap_or_default();
    let nodes: BTreeSet<String> = f
        .require_nodes(f.target_os(), 1)
        .await?
        .into_iter()
        .map(|n| n.name)
        .collect();
    let within = ROLLOUT_BASE + Duration::from_secs(30) * u32::try_from(nodes.len()).unwrap_or(u32::MAX);
    let too_many = Mutex::new(None::<Vec<String>>);
    let done = |pods: &[Pod]| {
        let live: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && is_controlled_by(p, &uid))
            .collect();
        let unavailable: Vec<String> = live.iter().filter(|p| !is_ready(p)).map(|p| p.name_any()).collect();
        if unavailable.len() > 1 {
            too_many.lock().expect("lock").get_or_insert(unavailable);
            return true;
        }
        let updated: BTreeSet<String> = live
            .iter()
            .filter(|p| image_of(p) == image)
            .map(|p| pod_node(p))
            .collect();
        nodes.iter().all(|n| updated.contains(n))
    };
    f.wait_list_within(
        &f.api::<Pod>(),
        &format!("daemonset-name={name}"),
        done,
        &format!("a daemon pod of image {image} on each of {nodes:?}"),
        within,
    )
    .await?;
    if let Some(pods) = too_many.into_inner().expect("lock") {
        fail!(
            "{} daemon pods of DaemonSet {name} were unavailable at once, more than maxUnavailable 1: {pods:?}",
            pods.len()
        );
    }
    Ok(())
}

/// Upstream: a RollingUpdate DaemonSet has revision 1 whose hash its pods carry; after an image
/// patch every node runs a pod of the new image, and revision 2 is current, carried by every pod.
async fn ds_rolling_update(f: &Framework) -> CaseResult {
    let name = "daemon-set";
    let selector = format!("daemonset-name={name}");
    f.create(&rolling_daemon_set(f, name, "httpd")?).await?;
    wait_daemon_cover(f, &selector).await?;
    expect_current_revision(f, name, &selector, 1, 1).await?;

    let image = f.image("httpd-new", f.target_os())?;
    f.step(format!("updating the daemon pods' image to {image}"));
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
    let ds = f
        .api::<DaemonSet>()
        .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    wait_image_rolled(f, &ds, &image).await?;
    wait_daemon_cover(f, &selector).await?;
    expect_current_revision(f, name, &selector, 2, 2).await
}

/// Upstream: a rollout to an image that does not exist, caught with at least one new pod, is
/// rolled back; once every node runs the old image again, each pod that had the old image
/// during the rollout is still there (none was restarted).
async fn ds_rollback(f: &Framework) -> CaseResult {
    let name = "daemon-set-rollback";
    let selector = format!("daemonset-name={name}");
    let image = f.image("httpd", f.target_os())?;
    f.create(&rolling_daemon_set(f, name, "httpd")?).await?;
    wait_daemon_cover(f, &selector).await?;

    let bad = "foo:non-existent";
    f.step(format!(
        "updating the DaemonSet to image {bad} to start a rollout that cannot finish"
    ));
    let api: Api<DaemonSet> = f.api();
    let set_image = |to: String| {
        move |ds: &mut DaemonSet| {
            if let Some(c) = ds
                .spec
                .as_mut()
                .and_then(|s| s.template.spec.as_mut())
                .and_then(|s| s.containers.first_mut())
            {
                c.image = Some(to.clone());
            }
        }
    };
    replace_retrying(&api, name, set_image(bad.into())).await?;
    let pods = f
        .wait_list_within(
            &f.api::<Pod>(),
            &selector,
            |pods: &[Pod]| pods.iter().any(|p| image_of(p) == bad),
            &format!("at least one daemon pod of image {bad} (the rollout under way)"),
            ROLLOUT_BASE,
        )
        .await?;
    let mut by_image: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        by_image.entry(image_of(p)).or_default().push(p.name_any());
    }
    let existing = by_image.remove(&image).unwrap_or_default();
    let new = by_image.remove(bad).unwrap_or_default();
    ensure!(
        by_image.is_empty(),
        "daemon pods of an unexpected image during the rollout of DaemonSet {name}: {by_image:?}"
    );
    let nodes = f.schedulable_nodes(f.target_os()).await?;
    if nodes.len() < 2 {
        ensure!(
            existing.is_empty(),
            "with {} schedulable node(s), daemon pods of the old image {image} remain: {existing:?}",
            nodes.len()
        );
    } else {
        ensure!(
            !existing.is_empty(),
            "with {} schedulable nodes and maxUnavailable 1, no daemon pod of the old image {image} is left \
             mid-rollout; pods of {bad}: {new:?}",
            nodes.len()
        );
    }
    ensure!(!new.is_empty(), "no daemon pod of image {bad} is left mid-rollout");

    f.step(format!(
        "rolling DaemonSet {name} back to {image} before the rollout completes"
    ));
    let rolled_back = replace_retrying(&api, name, set_image(image.clone())).await?;
    wait_image_rolled(f, &rolled_back, &image).await?;
    let after: BTreeSet<String> = f
        .pods_matching(&selector)
        .await?
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    let restarted: Vec<&String> = existing.iter().filter(|p| !after.contains(*p)).collect();
    ensure!(
        restarted.is_empty(),
        "daemon pods {restarted:?} of the old image {image} were restarted by the rollback of DaemonSet {name} \
         (pods now: {after:?})"
    );
    Ok(())
}

/// Upstream `CheckDaemonPodOnNodes`: waits until exactly one available daemon pod of `ds` runs on
/// each of `nodes` and none elsewhere.
async fn wait_pods_on(f: &Framework, ds: &DaemonSet, nodes: &[String]) -> CaseResult {
    let name = ds.name_any();
    let uid = ds.uid().unwrap_or_default();
    let want: BTreeMap<String, usize> = nodes.iter().map(|n| (n.clone(), 1)).collect();
    f.wait_list_within(
        &f.api::<Pod>(),
        &format!("daemonset-name={name}"),
        |pods: &[Pod]| {
            let mut on: BTreeMap<String, usize> = BTreeMap::new();
            for p in pods {
                if is_controlled_by(p, &uid) && p.metadata.deletion_timestamp.is_none() && is_ready(p) {
                    *on.entry(pod_node(p)).or_default() += 1;
                }
            }
            on == want
        },
        &format!("one available daemon pod of DaemonSet {name} on each of {nodes:?} and on no other node"),
        FOLLOW_TIMEOUT,
    )
    .await?;
    Ok(())
}

/// Upstream: a DaemonSet selecting `daemonset-color=blue` runs on no node; labelling a node blue
/// brings a daemon pod there; relabelling it green removes the pod; patching the DaemonSet's
/// nodeSelector to green (and its strategy to RollingUpdate) brings the pod back.
async fn ds_complex(f: &Framework) -> CaseResult {
    let name = "daemon-set-complex";
    let mut ds = rolling_daemon_set(f, name, "agnhost")?;
    if let Some(spec) = ds.spec.as_mut() {
        spec.update_strategy = None;
        if let Some(pod) = spec.template.spec.as_mut() {
            pod.node_selector
                .get_or_insert_with(Default::default)
                .insert(COLOR_LABEL.into(), "blue".into());
        }
    }
    let ds = f.create(&ds).await?;
    f.step("initially, daemon pods must run on no node");
    wait_pods_on(f, &ds, &[]).await?;
    let node = f
        .require_nodes(f.target_os(), 1)
        .await?
        .into_iter()
        .next()
        .map(|n| n.name)
        .ok_or_else(|| CaseError::failed("no schedulable node"))?;
    let labelled = [(node.clone(), "blue".to_owned())];
    with_labels(f, &labelled, COLOR_LABEL, || async {
        wait_pods_on(f, &ds, std::slice::from_ref(&node)).await?;
        f.wait_for_within(
            &f.api::<DaemonSet>(),
            name,
            wc::is_daemonset_ready(),
            "to report its daemon pod ready",
            FOLLOW_TIMEOUT,
        )
        .await?;
        f.step(format!("relabelling node {node} green: the daemon pod must go"));
        set_node_label(f, &node, COLOR_LABEL, Some("green")).await?;
        wait_pods_on(f, &ds, &[]).await?;
        f.step("patching the DaemonSet's nodeSelector to green and its update strategy to RollingUpdate");
        let patch = json!({"spec": {"template": {"spec": {"nodeSelector": {COLOR_LABEL: "green"}}},
            "updateStrategy": {"type": "RollingUpdate"}}});
        let patched = f
            .api::<DaemonSet>()
            .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await?;
        wait_pods_on(f, &patched, std::slice::from_ref(&node)).await?;
        f.wait_for_within(
            &f.api::<DaemonSet>(),
            name,
            wc::is_daemonset_ready(),
            "to report its daemon pod on the green node ready",
            FOLLOW_TIMEOUT,
        )
        .await?;
        Ok(())
    })
    .await
}
