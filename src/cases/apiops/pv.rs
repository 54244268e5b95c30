//! `[sig-storage] PersistentVolumes CSI Conformance` API cases (upstream
//! test/e2e/storage/persistent_volumes.go): the lifecycle of a PV and a PVC, and changes to
//! their `/status`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimCondition,
    PersistentVolumeClaimSpec, PersistentVolumeSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::relabel::{confirm_deleted, patch_label, update_label};
use super::update_status;
use crate::case;
use crate::cases::api::find_in_all_namespaces;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseError, CaseResult, Framework, RUN_ID_LABEL};

/// Upstream persistent_volumes.go "should run through the lifecycle of a PV and a PVC".
pub(crate) const PV_LIFECYCLE: &str =
    "[sig-storage] PersistentVolumes CSI Conformance should run through the lifecycle of a PV and a PVC [Conformance]";
/// Upstream persistent_volumes.go "should apply changes to a pv/pvc status".
pub(crate) const PV_STATUS: &str =
    "[sig-storage] PersistentVolumes CSI Conformance should apply changes to a pv/pvc status [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(PV_LIFECYCLE, Kind::Adapted, pv_lifecycle),
        case!(PV_STATUS, Kind::Adapted, pv_status),
    ]
}

/// Upstream `e2epv.VolumeSelectorKey`: the label that ties the case's PVs to it.
const POOL_LABEL: &str = "e2e-pv-pool";

/// A CSI PV `<ns>-<suffix>` of storage class `<ns>` in the case's pool, and a claim
/// `<ns>-<suffix>c` of that class, as upstream's `e2epv.CreatePVsPVCs` makes them.
fn pv_and_claim(f: &Framework, suffix: &str, driver: &str) -> (PersistentVolume, PersistentVolumeClaim) {
    let ns = f.ns();
    let storage = BTreeMap::from([("storage".to_string(), Quantity("2Gi".into()))]);
    let pv = PersistentVolume {
        metadata: ObjectMeta {
            name: Some(format!("{ns}-{suffix}")),
            labels: Some(BTreeMap::from([
                (POOL_LABEL.to_string(), ns.to_string()),
                (RUN_ID_LABEL.to_string(), f.run().run_id.clone()),
            ])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(storage.clone()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(ns.to_string()),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            csi: Some(CSIPersistentVolumeSource {
                driver: driver.into(),
                volume_handle: "e2e-conformance".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    };
    let claim = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(format!("{ns}-{suffix}c")),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(ns.to_string()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(storage),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    };
    (pv, claim)
}

/// Creates a PV and its claim; returns them as stored.
async fn create_pair(
    f: &Framework,
    suffix: &str,
    driver: &str,
) -> Result<(PersistentVolume, PersistentVolumeClaim), CaseError> {
    let (pv, claim) = pv_and_claim(f, suffix, driver);
    let pv = super::create_cluster_scoped(f, &pv).await?;
    let claim = f.create(&claim).await?;
    Ok((pv, claim))
}

/// Creates a PV and a claim, lists, patches and reads both, deletes the claim and then the PV
/// (confirming each is gone); then recreates them, updates a label on each, finds the claim in
/// all namespaces, and deletes both by collection.
async fn pv_lifecycle(f: &Framework) -> CaseResult {
    let ns = f.ns();
    let pvs: Api<PersistentVolume> = f.api_all();
    let claims: Api<PersistentVolumeClaim> = f.api();
    let pool = format!("{POOL_LABEL}={ns}");
    let (pv, claim) = create_pair(f, "pv", &format!("{ns}-inline-driver")).await?;
    let listed = pvs.list(&ListParams::default().labels(&pool)).await?;
    ensure!(
        listed.items.len() == 1,
        "listing PVs with labels {pool}: expected 1, got {}",
        listed.items.len()
    );
    let patched_pv = patch_label(f, &pvs, &pv).await?;
    let patched_claim = patch_label(f, &claims, &claim).await?;
    for (kind, uid, got) in [
        ("PV", patched_pv.uid(), pvs.get(&pv.name_any()).await?.uid()),
        ("PVC", patched_claim.uid(), claims.get(&claim.name_any()).await?.uid()),
    ] {
        ensure!(got == uid, "{kind} as read back: expected uid {uid:?}, got {got:?}");
    }
    f.step("deleting the PVC and then the PV");
    claims.delete(&claim.name_any(), &DeleteParams::default()).await?;
    confirm_deleted(f, &claims, &format!("{}=patched", claim.name_any())).await?;
    pvs.delete(&pv.name_any(), &DeleteParams::default()).await?;
    confirm_deleted(f, &pvs, &pool).await?;

    let (pv, claim) = create_pair(f, "pv2", &format!("{ns}-inline-driver")).await?;
    let (pv_name, claim_name) = (pv.name_any(), claim.name_any());
    update_label(f, &pvs, &pv_name, &pv_name).await?;
    update_label(f, &claims, &claim_name, &claim_name).await?;
    let claim_selector = format!("{claim_name}=updated");
    find_in_all_namespaces::<PersistentVolumeClaim>(f, &claim_selector, ns, &claim_name).await?;
    f.step("deleting the PVC and the PV by collection");
    claims
        .delete_collection(&DeleteParams::default(), &ListParams::default().labels(&claim_selector))
        .await?;
    confirm_deleted(f, &claims, &claim_selector).await?;
    let pv_selector = format!("{pv_name}=updated");
    pvs.delete_collection(&DeleteParams::default(), &ListParams::default().labels(&pv_selector))
        .await?;
    confirm_deleted(f, &pvs, &pv_selector)
        .await
        .map_err(|e| e.context("after the DELETE of the collection of PVs"))
}

/// A PVC condition of `type_` set by this case with `reason`.
fn claim_condition(type_: &str, reason: &str) -> PersistentVolumeClaimCondition {
    PersistentVolumeClaimCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some("Set from e2e test".into()),
        ..Default::default()
    }
}

/// Whether a claim's status has condition `type_` with `reason`.
fn has_claim_condition(claim: &PersistentVolumeClaim, type_: &str, reason: &str) -> bool {
    claim
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == type_ && c.reason.as_deref() == Some(reason))
}

/// The (reason, message) of a PV's status.
fn pv_reason(pv: &PersistentVolume) -> (Option<&str>, Option<&str>) {
    let s = pv.status.as_ref();
    (
        s.and_then(|s| s.reason.as_deref()),
        s.and_then(|s| s.message.as_deref()),
    )
}

/// Creates a PV and a claim, reads both through `/status` (a phase a new pair can have),
/// patches each `/status` (a claim condition; the PV's reason and message), then updates each
/// `/status`, checking every answer.
async fn pv_status(f: &Framework) -> CaseResult {
    let ns = f.ns();
    let pvs: Api<PersistentVolume> = f.api_all();
    let claims: Api<PersistentVolumeClaim> = f.api();
    let (pv, claim) = create_pair(f, "pvs", &format!("{ns}-e2e-driver")).await?;
    let (pv_name, claim_name) = (pv.name_any(), claim.name_any());

    let got = claims.get_status(&claim_name).await?;
    let phase = got.status.as_ref().and_then(|s| s.phase.clone());
    ensure!(
        matches!(phase.as_deref(), Some("Pending" | "Bound")),
        "PVC {claim_name} read through /status: expected phase Pending or Bound, got {phase:?}"
    );
    let got = pvs.get_status(&pv_name).await?;
    let phase = got.status.as_ref().and_then(|s| s.phase.clone());
    ensure!(
        matches!(phase.as_deref(), Some("Available" | "Bound" | "Pending")),
        "PV {pv_name} read through /status: expected phase Available, Bound or Pending, got {phase:?}"
    );

    f.step("patching the PVC and PV status");
    let patch = json!({"status": {"conditions": [claim_condition("StatusPatched", "E2E patchedStatus")]}});
    let patched = claims
        .patch_status(&claim_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    ensure!(
        has_claim_condition(&patched, "StatusPatched", "E2E patchedStatus"),
        "PVC {claim_name} after the patch of /status: expected condition StatusPatched (reason E2E patchedStatus), \
         got {:?}",
        patched.status.and_then(|s| s.conditions)
    );
    let patch = json!({"status": {"message": "StatusPatched", "reason": "E2E patchStatus"}});
    let patched = pvs
        .patch_status(&pv_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    ensure!(
        pv_reason(&patched) == (Some("E2E patchStatus"), Some("StatusPatched")),
        "PV {pv_name} after the patch of /status: expected reason \"E2E patchStatus\" and message StatusPatched, \
         got {:?}",
        pv_reason(&patched)
    );

    let claim_done = |c: &PersistentVolumeClaim| has_claim_condition(c, "StatusUpdated", "E2E updateStatus");
    let updated = update_status(f, &claims, &claim_name, claim_done, |c: &mut PersistentVolumeClaim| {
        c.status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(claim_condition("StatusUpdated", "E2E updateStatus"));
        Ok(())
    })
    .await?;
    ensure!(
        claim_done(&updated),
        "PVC {claim_name} after the update of /status: expected condition StatusUpdated (reason E2E updateStatus), \
         got {:?}",
        updated.status.and_then(|s| s.conditions)
    );
    let pv_done = |p: &PersistentVolume| pv_reason(p) == (Some("E2E updateStatus"), Some("StatusUpdated"));
    let updated = update_status(f, &pvs, &pv_name, pv_done, |p: &mut PersistentVolume| {
        let s = p.status.get_or_insert_with(Default::default);
        s.reason = Some("E2E updateStatus".into());
        s.message = Some("StatusUpdated".into());
        Ok(())
    })
    .await?;
    ensure!(
        pv_done(&updated),
        "PV {pv_name} after the update of /status: expected reason \"E2E updateStatus\" and message \
         StatusUpdated, got {:?}",
        pv_reason(&updated)
    );
    f.step("deleting the PVC and the PV");
    claims.delete(&claim_name, &DeleteParams::default()).await?;
    pvs.delete(&pv_name, &DeleteParams::default()).await?;
    Ok(())
}
