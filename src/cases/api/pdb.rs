//! `[sig-apps] DisruptionController` cases (upstream test/e2e/apps/disruption.go):
//! PodDisruptionBudgets created, updated, patched and deleted, listed across namespaces and
//! deleted by collection, their `/status` written, the disruption controller's status seen,
//! and the eviction subresource blocked by a budget until it is relaxed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{EvictParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::ops::{update_retrying, update_status_retrying};
use super::{delete_collection_and_check, find_in_all_namespaces};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::workloads::{replica_set, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, delete_namespace, namespace_labels};

/// Upstream disruption.go "should list and delete a collection of PodDisruptionBudgets".
pub(crate) const PDB_COLLECTION: &str = "[sig-apps] DisruptionController Listing PodDisruptionBudgets for all \
     namespaces should list and delete a collection of PodDisruptionBudgets [Conformance]";
/// Upstream disruption.go "should create a PodDisruptionBudget".
pub(crate) const PDB_CREATE: &str = "[sig-apps] DisruptionController should create a PodDisruptionBudget [Conformance]";
/// Upstream disruption.go "should observe PodDisruptionBudget status updated".
pub(crate) const PDB_OBSERVE_STATUS: &str =
    "[sig-apps] DisruptionController should observe PodDisruptionBudget status updated [Conformance]";
/// Upstream disruption.go "should update/patch PodDisruptionBudget status".
pub(crate) const PDB_STATUS: &str =
    "[sig-apps] DisruptionController should update/patch PodDisruptionBudget status [Conformance]";
/// Upstream disruption.go "should block an eviction until the PDB is updated to allow it".
pub(crate) const PDB_BLOCK_EVICTION: &str =
    "[sig-apps] DisruptionController should block an eviction until the PDB is updated to allow it [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(PDB_COLLECTION, Kind::Adapted, pdb_collection),
        case!(PDB_CREATE, Kind::Adapted, pdb_create),
        case!(PDB_OBSERVE_STATUS, Kind::Adapted, pdb_observe_status),
        case!(PDB_STATUS, Kind::Adapted, pdb_status),
        case!(PDB_BLOCK_EVICTION, Kind::Adapted, pdb_block_eviction),
    ]
}

/// Upstream's `defaultName` and `defaultLabels`.
const NAME: &str = "foo";
const SELECTED: (&str, &str) = ("foo", "bar");

/// A budget of `min_available` over pods labelled `foo=bar`, labelled `labels`.
fn budget(name: &str, min_available: IntOrString, labels: &[(&str, &str)]) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(min_available),
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(SELECTED.0.into(), SELECTED.1.into())])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// Creates budget `name` and waits until the disruption controller has processed it
/// (upstream's `createPDBMinAvailableOrDie` waits for `observedGeneration`).
async fn create_budget(f: &Framework, pdb: &PodDisruptionBudget) -> CaseResult {
    let name = pdb.name_any();
    f.create(pdb).await?;
    wait_processed(f, &name).await
}

/// Waits until the controller's status of `name` covers its current generation.
async fn wait_processed(f: &Framework, name: &str) -> CaseResult {
    f.wait_for(
        &f.api::<PodDisruptionBudget>(),
        name,
        |p: Option<&PodDisruptionBudget>| {
            p.is_some_and(|p| {
                p.status.as_ref().and_then(|s| s.observed_generation) >= p.metadata.generation && p.status.is_some()
            })
        },
        "to be processed by the disruption controller (status.observedGeneration at its generation)",
    )
    .await?;
    Ok(())
}

/// Upstream's `createPodsOrDie` and `waitForPodsOrDie`: `n` pause pods `pod-<i>` labelled
/// `foo=bar`, all running and ready.
async fn ready_pods(f: &Framework, n: usize) -> Result<Vec<Pod>, CaseError> {
    for i in 0..n {
        let pod = f
            .pod(&format!("pod-{i}"))
            .label(SELECTED.0, SELECTED.1)
            .container(ContainerBuilder::new("donothing", "agnhost").args(["pause"]));
        f.create_pod(&pod).await?;
    }
    f.wait_pods_ready(&format!("{}={}", SELECTED.0, SELECTED.1), n).await
}

/// Upstream disruption.go: two budgets here and one in a second namespace, all labelled
/// `foo_pdb=bar_pdb`, are listed across namespaces (three) and in this one (two); this
/// namespace's are deleted by collection.
async fn pdb_collection(f: &Framework) -> CaseResult {
    let label = [("foo_pdb", "bar_pdb")];
    let selector = "foo_pdb=bar_pdb";
    create_budget(f, &budget(NAME, IntOrString::Int(2), &label)).await?;
    create_budget(f, &budget("foo2", IntOrString::String("1%".into()), &label)).await?;

    f.step("creating a second namespace");
    let namespaces: Api<Namespace> = f.api_all();
    let second = Namespace {
        metadata: ObjectMeta {
            // A fixed name, so a create whose answer was lost can be sent again.
            name: Some(format!("{}-2", f.ns())),
            labels: Some(namespace_labels(&f.run().run_id, f.case_name())),
            ..Default::default()
        },
        ..Default::default()
    };
    let second = namespaces
        .create(&PostParams::default(), &second)
        .await
        .map_err(|e| CaseError::from(e).context("creating the second namespace"))?
        .name_any();
    let outcome = collection_in(f, &second, &label, selector).await;
    if let Err(e) = delete_namespace(&f.client(), &second).await {
        tracing::warn!(namespace = %second, error = %e, "deleting the second namespace failed");
    }
    outcome
}

/// The part of [`pdb_collection`] that needs the second namespace `second`.
async fn collection_in(f: &Framework, second: &str, label: &[(&str, &str)], selector: &str) -> CaseResult {
    let mut third = budget("foo3", IntOrString::Int(2), label);
    third
        .labels_mut()
        .insert(crate::framework::RUN_ID_LABEL.into(), f.run().run_id.clone());
    Api::<PodDisruptionBudget>::namespaced(f.client(), second)
        .create(&PostParams::default(), &third)
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating PodDisruptionBudget foo3 in {second}")))?;
    for (ns, name) in [(f.ns(), NAME), (f.ns(), "foo2"), (second, "foo3")] {
        find_in_all_namespaces::<PodDisruptionBudget>(f, selector, ns, name).await?;
    }
    delete_collection_and_check::<PodDisruptionBudget>(f, selector, &[NAME.to_string(), "foo2".to_string()]).await
}

/// The minAvailable of a budget, as a string (`2%`, `3`).
fn min_available(p: &PodDisruptionBudget) -> Option<String> {
    match p.spec.as_ref()?.min_available.as_ref()? {
        IntOrString::Int(i) => Some(i.to_string()),
        IntOrString::String(s) => Some(s.clone()),
    }
}

/// Upstream disruption.go: a budget is created, updated (minAvailable 2%), patched (3%) and
/// deleted.
async fn pdb_create(f: &Framework) -> CaseResult {
    create_budget(f, &budget(NAME, IntOrString::String("1%".into()), &[SELECTED])).await?;
    let api = f.api::<PodDisruptionBudget>();

    f.step("updating the budget to minAvailable 2%");
    let updated = update_retrying(&api, NAME, |p: &mut PodDisruptionBudget| {
        if let Some(s) = p.spec.as_mut() {
            s.min_available = Some(IntOrString::String("2%".into()));
        }
    })
    .await?;
    ensure!(
        min_available(&updated).as_deref() == Some("2%"),
        "the update of budget {NAME} to minAvailable 2% answered {:?}",
        min_available(&updated)
    );
    wait_processed(f, NAME).await?;

    f.step("patching the budget to minAvailable 3%");
    let patched = api
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minAvailable": "3%"}})),
        )
        .await?;
    ensure!(
        min_available(&patched).as_deref() == Some("3%"),
        "the patch of budget {NAME} to minAvailable 3% answered {:?}",
        min_available(&patched)
    );
    wait_processed(f, NAME).await?;

    f.step("deleting the budget");
    api.delete(NAME, &Default::default()).await?;
    f.wait_for(
        &api,
        NAME,
        kube::runtime::wait::conditions::is_deleted(&patched.uid().unwrap_or_default()),
        "to be deleted",
    )
    .await?;
    Ok(())
}

/// Upstream disruption.go: a budget of minAvailable 1 over three running pods comes to allow
/// disruptions.
async fn pdb_observe_status(f: &Framework) -> CaseResult {
    create_budget(f, &budget(NAME, IntOrString::Int(1), &[SELECTED])).await?;
    ready_pods(f, 3).await?;
    f.wait_for(
        &f.api::<PodDisruptionBudget>(),
        NAME,
        |p: Option<&PodDisruptionBudget>| {
            p.is_some_and(|p| p.status.as_ref().is_some_and(|s| s.disruptions_allowed > 0))
        },
        "to allow disruptions (status.disruptionsAllowed > 0) over 3 ready pods with minAvailable 1",
    )
    .await?;
    Ok(())
}

/// Upstream disruption.go: `/status` of a budget is updated (one of its pods recorded as
/// disrupted) and read back, then patched (no disrupted pods).
async fn pdb_status(f: &Framework) -> CaseResult {
    create_budget(f, &budget(NAME, IntOrString::Int(1), &[SELECTED])).await?;
    let pods = ready_pods(f, 1).await?;
    let pod = pods[0].name_any();
    let api = f.api::<PodDisruptionBudget>();

    f.step(format!("recording pod {pod} as disrupted with an update of /status"));
    let now = Time(jiff::Timestamp::now());
    update_status_retrying(&api, NAME, |p: &mut PodDisruptionBudget| {
        if let Some(s) = p.status.as_mut() {
            s.disrupted_pods = Some(BTreeMap::from([(pod.clone(), now.clone())]));
        }
    })
    .await?;
    let read = api.get_status(NAME).await?;
    let disrupted = read
        .status
        .as_ref()
        .and_then(|s| s.disrupted_pods.clone())
        .unwrap_or_default();
    ensure!(
        disrupted.contains_key(&pod),
        "budget {NAME} read through /status after the update: expected disruptedPods to hold {pod}, got {:?}",
        disrupted.keys().collect::<Vec<_>>()
    );

    f.step("clearing disruptedPods with a patch of /status");
    let patched = api
        .patch_status(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"disruptedPods": null}})),
        )
        .await?;
    let left = patched.status.and_then(|s| s.disrupted_pods).unwrap_or_default();
    ensure!(
        left.is_empty(),
        "the patch of budget {NAME}'s /status clearing disruptedPods answered {:?}",
        left.keys().collect::<Vec<_>>()
    );
    Ok(())
}

/// How many times an eviction whose answer was lost (a 5xx, a cut connection) is sent again.
const EVICTION_TRIES: usize = 3;

/// Evicts `pod`; `Ok(None)` when the API refused with the `DisruptionBudget` cause, `Ok(Some(()))`
/// when it was evicted.
///
/// An eviction is not replayed by the retrying client (it is a POST of a subresource), so an
/// answer lost to a transient fault is sent again here: a pod that the first attempt evicted
/// then answers 404 (or is already terminating, which a budget no longer protects).
async fn evict(f: &Framework, pod: &str) -> Result<Option<()>, CaseError> {
    f.step(format!("evicting pod {pod}"));
    let mut tries = 0;
    loop {
        tries += 1;
        match f.api::<Pod>().evict(pod, &EvictParams::default()).await {
            Ok(_) => return Ok(Some(())),
            Err(kube::Error::Api(s)) if s.code == 429 && s.message.contains("disruption budget") => return Ok(None),
            Err(kube::Error::Api(s)) if s.code == 404 && tries > 1 => return Ok(Some(())),
            Err(kube::Error::Api(s)) if s.code >= 500 && tries < EVICTION_TRIES => {}
            Err(kube::Error::HyperError(_) | kube::Error::Service(_)) if tries < EVICTION_TRIES => {}
            Err(e) => return Err(CaseError::from(e).context(format!("evicting pod {pod}"))),
        }
        tracing::debug!(pod, tries, "eviction answer lost; sending it again");
    }
}

/// Upstream disruption.go: a budget of minAvailable 3 over a three-pod ReplicaSet refuses an
/// eviction; relaxed to 2 it allows it; patched to maxUnavailable 0 it refuses again.
async fn pdb_block_eviction(f: &Framework) -> CaseResult {
    create_budget(f, &budget(NAME, IntOrString::Int(3), &[SELECTED])).await?;
    let pod = f
        .pod("rs")
        .label(SELECTED.0, SELECTED.1)
        .container(ContainerBuilder::new("donothing", "agnhost").args(["pause"]));
    f.create(&replica_set("rs", 3, template_of(pod.build(f)?))).await?;
    let selector = format!("{}={}", SELECTED.0, SELECTED.1);
    let pods = f.wait_pods_ready(&selector, 3).await?;
    let victim = pods[0].name_any();
    ensure!(
        evict(f, &victim).await?.is_none(),
        "pod {victim} was evicted although budget {NAME} (minAvailable 3 over 3 pods) allows no disruption"
    );

    f.step("relaxing the budget to minAvailable 2");
    update_retrying(&f.api::<PodDisruptionBudget>(), NAME, |p: &mut PodDisruptionBudget| {
        if let Some(s) = p.spec.as_mut() {
            s.min_available = Some(IntOrString::Int(2));
        }
    })
    .await?;
    f.wait_pods_ready(&selector, 3).await?;
    f.wait_for(
        &f.api::<PodDisruptionBudget>(),
        NAME,
        |p: Option<&PodDisruptionBudget>| {
            p.is_some_and(|p| {
                p.status.as_ref().is_some_and(|s| {
                    s.current_healthy >= 3 && s.desired_healthy == 2 && s.observed_generation >= p.metadata.generation
                })
            })
        },
        "to see 3 healthy pods of 2 desired",
    )
    .await?;
    ensure!(
        evict(f, &victim).await?.is_some(),
        "the eviction of pod {victim} was refused although budget {NAME} was relaxed to minAvailable 2 over 3 healthy pods"
    );

    f.step("patching the budget to maxUnavailable 0");
    f.api::<PodDisruptionBudget>()
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minAvailable": null, "maxUnavailable": 0}})),
        )
        .await?;
    wait_processed(f, NAME).await?;
    let pods = f.wait_pods_ready(&selector, 3).await?;
    let next = pods[0].name_any();
    ensure!(
        evict(f, &next).await?.is_none(),
        "pod {next} was evicted although budget {NAME} (maxUnavailable 0) allows no disruption"
    );
    Ok(())
}
