//! `[sig-instrumentation] Events` (core/v1 events, upstream test/e2e/instrumentation/core_events.go)
//! and `Events API` (events.k8s.io/v1, upstream test/e2e/instrumentation/events.go): the lifecycle
//! of one event and the DELETE of a collection of them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSeries as CoreEventSeries, ObjectReference};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::{delete_collection_and_check, find_in_all_namespaces, names_in_ns};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseResult, Framework};

/// Upstream core_events.go "should manage the lifecycle of an event".
pub(crate) const CORE_LIFECYCLE: &str =
    "[sig-instrumentation] Events should manage the lifecycle of an event [Conformance]";
/// Upstream core_events.go "should delete a collection of events".
pub(crate) const CORE_COLLECTION: &str =
    "[sig-instrumentation] Events should delete a collection of events [Conformance]";
/// Upstream events.go "should ensure that an event can be fetched, patched, deleted, and listed".
pub(crate) const API_LIFECYCLE: &str = "[sig-instrumentation] Events API should ensure that an event can be fetched, \
     patched, deleted, and listed [Conformance]";
/// Upstream events.go "should delete a collection of events".
pub(crate) const API_COLLECTION: &str =
    "[sig-instrumentation] Events API should delete a collection of events [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(CORE_LIFECYCLE, Kind::Adapted, core_lifecycle),
        case!(CORE_COLLECTION, Kind::Adapted, core_collection),
        case!(API_LIFECYCLE, Kind::Adapted, api_lifecycle),
        case!(API_COLLECTION, Kind::Adapted, api_collection),
    ]
}

/// The label every event of a lifecycle case carries (upstream's `testevent-constant`).
const LIFECYCLE_LABEL: (&str, &str) = ("testevent-constant", "true");
/// The label the events of a collection case carry (upstream's `testevent-set`).
const SET_LABEL: (&str, &str) = ("testevent-set", "true");

fn meta(name: &str, label: (&str, &str)) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        labels: Some(BTreeMap::from([(label.0.to_string(), label.1.to_string())])),
        ..Default::default()
    }
}

fn selector(label: (&str, &str)) -> String {
    format!("{}={}", label.0, label.1)
}

/// A core/v1 event about the case namespace, as upstream's tests build them.
fn core_event(f: &Framework, name: &str, label: (&str, &str)) -> CoreEvent {
    CoreEvent {
        metadata: meta(name, label),
        message: Some("This is a test event".into()),
        reason: Some("Test".into()),
        type_: Some("Normal".into()),
        count: Some(1),
        involved_object: ObjectReference {
            namespace: Some(f.ns().to_string()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// An events.k8s.io/v1 event about the case namespace, with the fields that API requires.
fn api_event(f: &Framework, name: &str, label: (&str, &str)) -> Event {
    Event {
        metadata: meta(name, label),
        event_time: Some(MicroTime(jiff::Timestamp::now())),
        note: Some("This is a test event".into()),
        action: Some("Do".into()),
        reason: Some("Test".into()),
        type_: Some("Normal".into()),
        reporting_controller: Some("test-controller".into()),
        reporting_instance: Some("test-node".into()),
        regarding: Some(ObjectReference {
            kind: Some("Namespace".into()),
            name: Some(f.ns().to_string()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Creates a core/v1 event, finds it listed in all namespaces, patches its message, updates its
/// series, deletes it, and checks every step through a fresh read.
async fn core_lifecycle(f: &Framework) -> CaseResult {
    let api = f.api::<CoreEvent>();
    let name = "event-test";
    f.create(&core_event(f, name, LIFECYCLE_LABEL)).await?;
    let sel = selector(LIFECYCLE_LABEL);
    find_in_all_namespaces::<CoreEvent>(f, &sel, f.ns(), name).await?;

    f.step("patching the message of the test event");
    let patched_message = "This is a test event - patched";
    let patch = json!({"message": patched_message});
    api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let got = api.get(name).await?;
    ensure!(
        got.message.as_deref() == Some(patched_message),
        "event {}/{name} after the patch: expected message {patched_message:?}, got {:?}",
        f.ns(),
        got.message
    );

    f.step("updating the series of the test event");
    let mut updated = got;
    updated.series = Some(CoreEventSeries {
        count: Some(100),
        last_observed_time: Some(MicroTime(jiff::Timestamp::now())),
    });
    api.replace(name, &PostParams::default(), &updated).await?;
    let got = api.get(name).await?;
    let count = got.series.as_ref().and_then(|s| s.count);
    ensure!(
        count == Some(100),
        "event {}/{name} after the update: expected series count 100, got {count:?} (series {:?})",
        f.ns(),
        got.series
    );

    f.step("deleting the test event");
    api.delete(name, &Default::default()).await?;
    let left = names_in_ns::<CoreEvent>(f, &sel).await?;
    ensure!(
        !left.iter().any(|n| n == name),
        "event {}/{name} is still listed after its DELETE: {left:?}",
        f.ns()
    );
    Ok(())
}

/// Creates three core/v1 events with one label and deletes them as a collection.
async fn core_collection(f: &Framework) -> CaseResult {
    let names: Vec<String> = (1..=3).map(|i| format!("event-test-{i}")).collect();
    for name in &names {
        f.create(&core_event(f, name, SET_LABEL)).await?;
    }
    delete_collection_and_check::<CoreEvent>(f, &selector(SET_LABEL), &names).await
}

/// Creates an events.k8s.io/v1 event, finds it in all namespaces, fetches it, patches its note,
/// updates its series, deletes it and checks it is gone.
async fn api_lifecycle(f: &Framework) -> CaseResult {
    let api = f.api::<Event>();
    let name = "event-test";
    f.create(&api_event(f, name, LIFECYCLE_LABEL)).await?;
    let sel = selector(LIFECYCLE_LABEL);
    find_in_all_namespaces::<Event>(f, &sel, f.ns(), name).await?;

    f.step("fetching the test event");
    let got = api.get(name).await?;
    ensure!(
        got.note.as_deref() == Some("This is a test event"),
        "event {}/{name} as fetched: expected note \"This is a test event\", got {:?}",
        f.ns(),
        got.note
    );

    f.step("patching the note of the test event");
    let patched_note = "This is a test event - patched";
    let patch = json!({"note": patched_note});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let got = api.get(name).await?;
    ensure!(
        got.note.as_deref() == Some(patched_note),
        "event {}/{name} after the patch: expected note {patched_note:?}, got {:?}",
        f.ns(),
        got.note
    );

    f.step("updating the series of the test event");
    let mut updated = got;
    updated.series = Some(EventSeries {
        count: 100,
        last_observed_time: MicroTime(jiff::Timestamp::now()),
    });
    api.replace(name, &PostParams::default(), &updated).await?;
    let got = api.get(name).await?;
    let count = got.series.as_ref().map(|s| s.count);
    ensure!(
        count == Some(100),
        "event {}/{name} after the update: expected series count 100, got {count:?}",
        f.ns()
    );

    f.step("deleting the test event");
    api.delete(name, &Default::default()).await?;
    let left = names_in_ns::<Event>(f, &sel).await?;
    ensure!(
        !left.iter().any(|n| n == name),
        "event {}/{name} is still listed after its DELETE: {left:?}",
        f.ns()
    );
    Ok(())
}

/// Creates three events.k8s.io/v1 events with one label and deletes them as a collection.
async fn api_collection(f: &Framework) -> CaseResult {
    let names: Vec<String> = (1..=3).map(|i| format!("event-test-{i}")).collect();
    for name in &names {
        f.create(&api_event(f, name, SET_LABEL)).await?;
    }
    delete_collection_and_check::<Event>(f, &selector(SET_LABEL), &names).await
}
