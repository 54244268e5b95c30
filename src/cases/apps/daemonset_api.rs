//! `[sig-apps] Daemon set [Serial]` API cases of upstream test/e2e/apps/daemon_set.go: a
//! collection of DaemonSets listed by label and deleted at once, and the `/status` subresource
//! read, updated and patched.
//!
//! The daemon pods run on every schedulable node of the target OS (as in `controllers.rs`);
//! what the cases check is the API server's handling of DaemonSets, the same on both OSes.

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetCondition};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::controllers::{daemon_template, wait_daemon_cover};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::wait::conditions as wc;
use crate::framework::workloads::daemon_set;
use crate::framework::{CaseError, CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream "should list and delete a collection of DaemonSets".
pub(crate) const DS_COLLECTION: &str =
    "[sig-apps] Daemon set [Serial] should list and delete a collection of DaemonSets [Conformance]";
/// Upstream "should verify changes to a daemon set status".
pub(crate) const DS_STATUS: &str =
    "[sig-apps] Daemon set [Serial] should verify changes to a daemon set status [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(DS_COLLECTION, Kind::Adapted, ds_collection),
        case!(DS_STATUS, Kind::Adapted, ds_status),
    ]
}

/// Upstream's DaemonSet name.
pub(super) const DS_NAME: &str = "daemon-set";
/// Upstream `retry.DefaultRetry`'s attempts on a conflict.
const ATTEMPTS: u32 = 5;

/// Creates upstream's labelled DaemonSet (`newDaemonSetWithLabel`: the label on the DaemonSet
/// and its pods) and waits until a ready pod runs on every node of the target OS and the
/// status says so (upstream `CheckDaemonStatus`). The label value carries the case namespace,
/// so a list across namespaces finds this case's DaemonSet only.
pub(super) async fn create_ready(f: &Framework) -> Result<(DaemonSet, String), CaseError> {
    let mut ds = daemon_set(DS_NAME, daemon_template(f, DS_NAME)?);
    let value = format!("{DS_NAME}-{}", f.ns());
    for labels in [
        ds.metadata.labels.get_or_insert_with(Default::default),
        ds.spec
            .as_mut()
            .and_then(|s| s.template.metadata.as_mut())
            .and_then(|m| m.labels.as_mut())
            .ok_or_else(|| CaseError::failed("the daemon template has no labels"))?,
    ] {
        labels.insert("daemonset-name".into(), value.clone());
    }
    if let Some(sel) = ds.spec.as_mut().and_then(|s| s.selector.match_labels.as_mut()) {
        sel.insert("daemonset-name".into(), value.clone());
    }
    let created = f.create(&ds).await?;
    let selector = format!("daemonset-name={value}");
    wait_daemon_cover(f, &selector).await?;
    f.wait_for(
        &f.api::<DaemonSet>(),
        DS_NAME,
        wc::is_daemonset_ready(),
        "to report every daemon pod ready",
    )
    .await?;
    Ok((created, selector))
}

/// Upstream: the DaemonSet is found by its label across all namespaces, deleted with a
/// deletecollection by that label, and then no longer listed.
async fn ds_collection(f: &Framework) -> CaseResult {
    let (_, selector) = create_ready(f).await?;
    let all: Api<DaemonSet> = f.api_all::<DaemonSet>();
    let listed = all.list(&ListParams::default().labels(&selector)).await?;
    ensure!(
        listed.items.len() == 1,
        "listing DaemonSets by {selector} in all namespaces found {}, expected 1: {:?}",
        listed.items.len(),
        listed.items.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
    );
    f.step(format!("deleting the collection of DaemonSets {selector}"));
    let dp = DeleteParams {
        grace_period_seconds: Some(1),
        ..DeleteParams::default()
    };
    f.api::<DaemonSet>()
        .delete_collection(&dp, &ListParams::default().labels(&selector))
        .await?;
    let left = all.list(&ListParams::default().labels(&selector)).await?;
    ensure!(
        left.items.is_empty(),
        "after the DELETE of the collection {selector}, {} DaemonSet(s) are still listed: {:?}; expected none",
        left.items.len(),
        left.items.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
    );
    Ok(())
}

fn has_condition(ds: Option<&DaemonSet>, type_: &str, reason: Option<&str>, message: Option<&str>) -> bool {
    ds.and_then(|d| d.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == type_
                    && reason.is_none_or(|r| c.reason.as_deref() == Some(r))
                    && message.is_none_or(|m| c.message.as_deref() == Some(m))
            })
        })
}

/// Upstream: `/status` reads; an update of `/status` appending condition StatusUpdate and a
/// merge patch of `/status` with condition StatusPatched are each seen by a watch.
async fn ds_status(f: &Framework) -> CaseResult {
    create_ready(f).await?;
    let api = f.api::<DaemonSet>();
    let read = api.get_status(DS_NAME).await?;
    if read.status.is_none() {
        fail!("GET of the status of DaemonSet {DS_NAME} returned no status");
    }
    f.step("updating the DaemonSet status");
    let mut attempt = 1;
    let updated = loop {
        let mut ds = api.get(DS_NAME).await?;
        let status = ds.status.get_or_insert_with(Default::default);
        status.conditions.get_or_insert_with(Vec::new).push(DaemonSetCondition {
            type_: "StatusUpdate".into(),
            status: "True".into(),
            reason: Some("E2E".into()),
            message: Some("Set from e2e test".into()),
            last_transition_time: None,
        });
        match api.replace_status(DS_NAME, &PostParams::default(), &ds).await {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < ATTEMPTS => attempt += 1,
            other => break other?,
        }
    };
    ensure!(
        has_condition(Some(&updated), "StatusUpdate", Some("E2E"), Some("Set from e2e test")),
        "the answer to the status update of DaemonSet {DS_NAME} lacks condition StatusUpdate (reason E2E); conditions: {:?}",
        updated.status.as_ref().and_then(|s| s.conditions.as_ref())
    );
    f.wait_for(
        &api,
        DS_NAME,
        |d: Option<&DaemonSet>| has_condition(d, "StatusUpdate", Some("E2E"), Some("Set from e2e test")),
        "to show the StatusUpdate condition set through /status",
    )
    .await?;
    f.step("patching the DaemonSet status");
    let patch = json!({"status": {"conditions": [{"type": "StatusPatched", "status": "True"}]}});
    api.patch_status(DS_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    f.wait_for(
        &api,
        DS_NAME,
        |d: Option<&DaemonSet>| has_condition(d, "StatusPatched", None, None),
        "to show the StatusPatched condition patched through /status",
    )
    .await?;
    Ok(())
}
