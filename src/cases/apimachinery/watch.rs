//! `[sig-api-machinery] Watchers` (upstream test/e2e/apimachinery/watch.go): label-selected
//! watches of ConfigMaps deliver exactly the ADDED, MODIFIED and DELETED notifications of the
//! objects that match, from the resourceVersion asked for, in the same order on every watch.
//!
//! Only API calls, so one body serves both OSes. The watches resume after the server ends them
//! ([`EventWatch`]), so a watch cut mid-case does not lose or invent a notification.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::watch_events::{EventType, EventWatch, Resume};
use crate::framework::workloads::config_map;
use crate::framework::{CaseError, CaseResult, Framework};

/// Upstream watch.go "should observe add, update, and delete watch notifications on configmaps".
pub(crate) const WATCH_MULTIPLE: &str = "[sig-api-machinery] Watchers should observe add, update, and delete watch notifications on configmaps [Conformance]";
/// Upstream watch.go "should be able to start watching from a specific resource version".
pub(crate) const WATCH_FROM_RV: &str =
    "[sig-api-machinery] Watchers should be able to start watching from a specific resource version [Conformance]";
/// Upstream watch.go "should be able to restart watching from the last resource version observed
/// by the previous watch".
pub(crate) const WATCH_RESTART: &str = "[sig-api-machinery] Watchers should be able to restart watching from the last resource version observed by the previous watch [Conformance]";
/// Upstream watch.go "should observe an object deletion if it stops meeting the requirements of
/// the selector".
pub(crate) const WATCH_LABEL_CHANGED: &str = "[sig-api-machinery] Watchers should observe an object deletion if it stops meeting the requirements of the selector [Conformance]";
/// Upstream watch.go "should receive events on concurrent watches in same order".
pub(crate) const WATCH_ORDER: &str =
    "[sig-api-machinery] Watchers should receive events on concurrent watches in same order [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(WATCH_MULTIPLE, Kind::Adapted, watch_multiple),
        case!(WATCH_FROM_RV, Kind::Adapted, watch_from_rv),
        case!(WATCH_RESTART, Kind::Adapted, watch_restart),
        case!(WATCH_LABEL_CHANGED, Kind::Adapted, watch_label_changed),
        case!(WATCH_ORDER, Kind::Adapted, watch_order),
    ]
}

/// Upstream `watchConfigMapLabelKey`.
const LABEL: &str = "watch-this-configmap";
/// Upstream `expectEvent`'s bound.
const EXPECT: Duration = Duration::from_secs(60);
/// How long a watch must stay silent for `expectNoEvent`. Upstream waits 10 s; the notification
/// it must not see would arrive with the one the other watches already delivered, so a shorter
/// window checks the same thing.
const SILENCE: Duration = Duration::from_secs(3);

/// Label selector `watch-this-configmap in (values)`, as upstream's `watchConfigMaps` builds.
fn selector(values: &[&str]) -> String {
    format!("{LABEL} in ({})", values.join(","))
}

/// A ConfigMap labelled `watch-this-configmap=value`.
fn labelled(name: &str, value: &str) -> ConfigMap {
    let mut cm = config_map(name, &[]);
    cm.data = None;
    cm.metadata.labels = Some(BTreeMap::from([(LABEL.to_string(), value.to_string())]));
    cm
}

/// Sets `data.mutation` of ConfigMap `name` (upstream's `setConfigMapData(cm, "mutation", n)`)
/// and returns the updated object.
async fn mutate(f: &Framework, name: &str, n: &str) -> Result<ConfigMap, CaseError> {
    f.step(format!("setting data mutation={n} on ConfigMap {name}"));
    patch(f, name, json!({"data": {"mutation": n}})).await
}

/// Sets label `watch-this-configmap` of ConfigMap `name` to `value`.
async fn relabel(f: &Framework, name: &str, value: &str) -> Result<ConfigMap, CaseError> {
    f.step(format!("setting label {LABEL}={value} on ConfigMap {name}"));
    patch(f, name, json!({"metadata": {"labels": {LABEL: value}}})).await
}

async fn patch(f: &Framework, name: &str, body: serde_json::Value) -> Result<ConfigMap, CaseError> {
    Ok(f.api::<ConfigMap>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?)
}

async fn delete(f: &Framework, name: &str) -> CaseResult {
    f.step(format!("deleting ConfigMap {name}"));
    f.api::<ConfigMap>().delete(name, &DeleteParams::default()).await?;
    Ok(())
}

/// A matcher for the object `cm` as it was written: same name and resourceVersion (upstream
/// compares the whole object; the resourceVersion names exactly one state of it).
fn is(cm: &ConfigMap) -> impl Fn(&ConfigMap) -> bool + use<> {
    let (name, rv) = (cm.name_any(), cm.resource_version());
    move |o: &ConfigMap| o.name_any() == name && o.resource_version() == rv
}

/// A matcher for any state of the object named `name`.
fn named(name: &str) -> impl Fn(&ConfigMap) -> bool + use<> {
    let name = name.to_string();
    move |o: &ConfigMap| o.name_any() == name
}

/// `expect` on each of `yes` and `expect_none` on each of `no`, for one change.
async fn observe(
    yes: &mut [&mut EventWatch<ConfigMap>],
    no: &mut [&mut EventWatch<ConfigMap>],
    kind: EventType,
    what: &str,
    matches: impl Fn(&ConfigMap) -> bool + Copy,
) -> CaseResult {
    for w in yes.iter_mut() {
        w.expect(kind, what, matches, EXPECT).await?;
    }
    for w in no.iter_mut() {
        w.expect_none(kind, what, matches, SILENCE).await?;
    }
    Ok(())
}

/// Watches for label A, label B and either; creates, updates twice and deletes a ConfigMap with
/// label A, then creates and deletes one with label B; each watch sees exactly its own.
async fn watch_multiple(f: &Framework) -> CaseResult {
    let api = f.api::<ConfigMap>();
    let (a, b) = ("multiple-watchers-A", "multiple-watchers-B");
    let mut wa = f.watch_events(&api, &selector(&[a]), None, Resume::Relist).await?;
    let mut wb = f.watch_events(&api, &selector(&[b]), None, Resume::Relist).await?;
    let mut wab = f.watch_events(&api, &selector(&[a, b]), None, Resume::Relist).await?;
    let (name_a, name_b) = ("e2e-watch-test-configmap-a", "e2e-watch-test-configmap-b");

    let created = f.create(&labelled(name_a, a)).await?;
    observe(
        &mut [&mut wa, &mut wab],
        &mut [&mut wb],
        EventType::Added,
        name_a,
        &is(&created),
    )
    .await?;
    for n in ["1", "2"] {
        let updated = mutate(f, name_a, n).await?;
        observe(
            &mut [&mut wa, &mut wab],
            &mut [&mut wb],
            EventType::Modified,
            name_a,
            &is(&updated),
        )
        .await?;
    }
    delete(f, name_a).await?;
    observe(
        &mut [&mut wa, &mut wab],
        &mut [&mut wb],
        EventType::Deleted,
        name_a,
        &named(name_a),
    )
    .await?;

    let created = f.create(&labelled(name_b, b)).await?;
    observe(
        &mut [&mut wb, &mut wab],
        &mut [&mut wa],
        EventType::Added,
        name_b,
        &is(&created),
    )
    .await?;
    delete(f, name_b).await?;
    observe(
        &mut [&mut wb, &mut wab],
        &mut [&mut wa],
        EventType::Deleted,
        name_b,
        &named(name_b),
    )
    .await
}

/// Creates, updates twice and deletes a ConfigMap, then watches from the first update's
/// resourceVersion: the second update and the deletion are delivered.
async fn watch_from_rv(f: &Framework) -> CaseResult {
    let api = f.api::<ConfigMap>();
    let (name, value) = ("e2e-watch-test-resource-version", "from-resource-version");
    f.create(&labelled(name, value)).await?;
    let first = mutate(f, name, "1").await?;
    let second = mutate(f, name, "2").await?;
    delete(f, name).await?;
    let from = first.resource_version().unwrap_or_default();
    let mut w = f
        .watch_events(&api, &selector(&[value]), Some(&from), Resume::Exact)
        .await?;
    w.expect(EventType::Modified, "the second update", is(&second), EXPECT)
        .await?;
    w.expect(EventType::Deleted, "the deletion", named(name), EXPECT)
        .await?;
    Ok(())
}

/// Watches, sees a ConfigMap created and updated, stops; while no watch is open the ConfigMap is
/// updated again; a new watch from the last resourceVersion seen delivers that update and the
/// deletion.
async fn watch_restart(f: &Framework) -> CaseResult {
    let api = f.api::<ConfigMap>();
    let (name, value) = ("e2e-watch-test-watch-closed", "watch-closed-and-restarted");
    let mut first = f.watch_events(&api, &selector(&[value]), None, Resume::Relist).await?;
    let created = f.create(&labelled(name, value)).await?;
    mutate(f, name, "1").await?;
    first
        .expect(EventType::Added, "the creation", is(&created), EXPECT)
        .await?;
    let last = first
        .expect(EventType::Modified, "the first update", named(name), EXPECT)
        .await?;
    drop(first);
    f.step("closed the first watch after two notifications");

    let second = mutate(f, name, "2").await?;
    let from = last.resource_version();
    let mut restarted = f
        .watch_events(&api, &selector(&[value]), Some(&from), Resume::Exact)
        .await?;
    delete(f, name).await?;
    restarted
        .expect(
            EventType::Modified,
            "the update made while no watch was open",
            is(&second),
            EXPECT,
        )
        .await?;
    restarted
        .expect(EventType::Deleted, "the deletion", named(name), EXPECT)
        .await?;
    Ok(())
}

/// A ConfigMap whose label stops matching is DELETED for the watch; its changes are not
/// delivered until the label matches again, when it is ADDED anew.
async fn watch_label_changed(f: &Framework) -> CaseResult {
    let api = f.api::<ConfigMap>();
    let (name, value) = ("e2e-watch-test-label-changed", "label-changed-and-restored");
    let mut w = f.watch_events(&api, &selector(&[value]), None, Resume::Relist).await?;
    let created = f.create(&labelled(name, value)).await?;
    let first = mutate(f, name, "1").await?;
    relabel(f, name, "wrong-value").await?;
    w.expect(EventType::Added, "the creation", is(&created), EXPECT).await?;
    w.expect(EventType::Modified, "the first update", is(&first), EXPECT)
        .await?;
    w.expect(
        EventType::Deleted,
        "the label change away from the selector",
        named(name),
        EXPECT,
    )
    .await?;

    let second = mutate(f, name, "2").await?;
    w.expect_none(
        EventType::Modified,
        "an update of an object the selector no longer matches",
        is(&second),
        SILENCE,
    )
    .await?;

    let restored = relabel(f, name, value).await?;
    let third = mutate(f, name, "3").await?;
    delete(f, name).await?;
    w.expect(EventType::Added, "the label restored", is(&restored), EXPECT)
        .await?;
    w.expect(EventType::Modified, "the third update", is(&third), EXPECT)
        .await?;
    w.expect(EventType::Deleted, "the deletion", named(name), EXPECT)
        .await?;
    Ok(())
}

/// Upstream's iteration count.
const ORDER_WATCHES: usize = 100;
/// How many times the comparison starts over after the server compacted a watch's history.
const ORDER_ATTEMPTS: usize = 3;
/// How long a watch may go without a notification while the writer runs. Upstream's
/// `waitForNextConfigMapEvent` allows 10 s on a healthy cluster; the writer here makes one request
/// at a time, and one request a transient fault holds up (a lost answer, then back-off and an API
/// server restart) can take longer than that without anything being wrong with the watches.
const NEXT_EVENT: Duration = Duration::from_secs(30);

/// Writes ConfigMaps in the background while 100 watches are opened, each from the
/// resourceVersion of the first watch's latest notification; every watch delivers the same
/// resourceVersions in the same order.
async fn watch_order(f: &Framework) -> CaseResult {
    let api = f.api::<ConfigMap>();
    f.step("starting a background task that creates, updates and deletes ConfigMaps");
    let stop = tokio_util::sync::CancellationToken::new();
    let producer = tokio::spawn(produce(api.clone(), stop.clone()));
    let mut result = Ok(());
    for attempt in 1..=ORDER_ATTEMPTS {
        let start = api.list(&ListParams::default()).await?;
        let mut rv = start.metadata.resource_version.unwrap_or_default();
        let (outcome, expired) = compare_watches(f, &api, &mut rv).await;
        result = outcome;
        if !(expired && attempt < ORDER_ATTEMPTS) {
            break;
        }
        f.step("the server compacted the history a watch resumed from; comparing again from now");
    }
    stop.cancel();
    let produced = producer
        .await
        .map_err(|e| CaseError::failed(format!("the ConfigMap writer task failed: {e}")))?;
    result?;
    let produced = produced?;
    ensure!(
        produced >= ORDER_WATCHES,
        "the background writer made {produced} changes, fewer than the {ORDER_WATCHES} the watches compared"
    );
    Ok(())
}

/// Compares the watches once; also says whether it failed because a watch's history was
/// compacted (transient: the comparison can start over).
async fn compare_watches(f: &Framework, api: &Api<ConfigMap>, rv: &mut String) -> (CaseResult, bool) {
    let mut watches: Vec<EventWatch<ConfigMap>> = Vec::with_capacity(ORDER_WATCHES);
    let result = compare_into(f, api, rv, &mut watches).await;
    let expired = result.is_err() && watches.iter().any(EventWatch::history_lost);
    (result, expired)
}

async fn compare_into(
    f: &Framework,
    api: &Api<ConfigMap>,
    rv: &mut String,
    watches: &mut Vec<EventWatch<ConfigMap>>,
) -> CaseResult {
    for i in 0..ORDER_WATCHES {
        watches.push(f.watch_events(api, "", Some(rv), Resume::Exact).await?);
        let Some(lead) = watches[0].next(NEXT_EVENT).await? else {
            return Err(CaseError::failed(format!(
                "watch 0 delivered no notification within {NEXT_EVENT:?} at iteration {i}"
            )));
        };
        *rv = lead.resource_version();
        for (j, w) in watches.iter_mut().enumerate().skip(1) {
            let got = w.next(NEXT_EVENT).await?.map(|n| n.describe());
            ensure!(
                got.as_deref().is_some_and(|d| d == lead.describe()),
                "watch {j} disagrees with watch 0 at iteration {i}: watch 0 delivered {}, watch {j} delivered {got:?}",
                lead.describe()
            );
        }
    }
    Ok(())
}

/// Creates, updates and deletes ConfigMaps `cm-N` at about 200 changes a second until `stop`;
/// returns how many changes it made.
async fn produce(api: Api<ConfigMap>, stop: tokio_util::sync::CancellationToken) -> Result<usize, CaseError> {
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    let mut existing: Vec<usize> = Vec::new();
    let (mut next, mut changes) = (0usize, 0usize);
    // A fixed linear congruential sequence picks the operations: a mix, not a pattern to rely on.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    while !stop.is_cancelled() {
        tick.tick().await;
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let pick = usize::try_from(seed >> 33).unwrap_or(0);
        let op = if existing.is_empty() { 0 } else { pick % 3 };
        match op {
            0 => {
                let name = format!("cm-{next}");
                api.create(&PostParams::default(), &config_map(&name, &[]))
                    .await
                    .map_err(|e| CaseError::from(e).context(format!("creating ConfigMap {name}")))?;
                existing.push(next);
                next += 1;
            }
            1 => {
                let name = format!("cm-{}", existing[pick % existing.len()]);
                let body = json!({"data": {"change": changes.to_string()}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                    .map_err(|e| CaseError::from(e).context(format!("updating ConfigMap {name}")))?;
            }
            _ => {
                let name = format!("cm-{}", existing.remove(pick % existing.len()));
                api.delete(&name, &DeleteParams::default())
                    .await
                    .map_err(|e| CaseError::from(e).context(format!("deleting ConfigMap {name}")))?;
            }
        }
        changes += 1;
    }
    Ok(changes)
}
