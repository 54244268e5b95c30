//! `[sig-storage]` API cases on the CSI and storage kinds: the lifecycles of a StorageClass
//! (upstream test/e2e/storage/storageclass.go), a CSINode (csinodes.go), a CSIDriver
//! (csi_inline.go) and a VolumeAttachment and its `/status` (volume_attachment.go), and the API
//! operations on CSIStorageCapacities (csistoragecapacity.go).

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::{
    CSIDriver, CSIDriverSpec, CSINode, CSINodeSpec, CSIStorageCapacity, StorageClass, VolumeAttachment,
    VolumeAttachmentSource, VolumeAttachmentSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::relabel::{confirm_deleted, label_lifecycle, patch_label, update_label};
use super::walk::Walk;
use super::{create_cluster_scoped, update_status};
use crate::case;
use crate::cases::api::find_in_all_namespaces;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseError, CaseResult, Framework};

/// Upstream storageclass.go "should run through the lifecycle of a StorageClass".
pub(crate) const STORAGECLASS_LIFECYCLE: &str =
    "[sig-storage] StorageClasses CSI Conformance should run through the lifecycle of a StorageClass [Conformance]";
/// Upstream csinodes.go "should run through the lifecycle of a csinode".
pub(crate) const CSINODE_LIFECYCLE: &str =
    "[sig-storage] CSINodes CSI Conformance should run through the lifecycle of a csinode [Conformance]";
/// Upstream csi_inline.go "should run through the lifecycle of a CSIDriver".
pub(crate) const CSIDRIVER_LIFECYCLE: &str =
    "[sig-storage] CSIInlineVolumes should run through the lifecycle of a CSIDriver [Conformance]";
/// Upstream volume_attachment.go "should run through the lifecycle of a VolumeAttachment".
pub(crate) const VA_LIFECYCLE: &str =
    "[sig-storage] VolumeAttachment Conformance should run through the lifecycle of a VolumeAttachment [Conformance]";
/// Upstream volume_attachment.go "should apply changes to a volumeattachment status".
pub(crate) const VA_STATUS: &str =
    "[sig-storage] VolumeAttachment Conformance should apply changes to a volumeattachment status [Conformance]";
/// Upstream csistoragecapacity.go "should support CSIStorageCapacities API operations".
pub(crate) const CAPACITY_API: &str =
    "[sig-storage] CSIStorageCapacity should support CSIStorageCapacities API operations [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(STORAGECLASS_LIFECYCLE, Kind::Adapted, storageclass_lifecycle),
        case!(CSINODE_LIFECYCLE, Kind::Adapted, csinode_lifecycle),
        case!(CSIDRIVER_LIFECYCLE, Kind::Adapted, csidriver_lifecycle),
        case!(VA_LIFECYCLE, Kind::Adapted, va_lifecycle),
        case!(VA_STATUS, Kind::Adapted, va_status),
        case!(CAPACITY_API, Kind::Adapted, capacity_api),
    ]
}

/// Metadata for a cluster-scoped object of this case: `<namespace>-<suffix>`, unique to the
/// case attempt and trial.
fn named(f: &Framework, suffix: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(format!("{}-{suffix}", f.ns())),
        ..Default::default()
    }
}

fn storage_class(f: &Framework, suffix: &str) -> StorageClass {
    StorageClass {
        metadata: named(f, suffix),
        provisioner: "e2e-fake-provisioner".into(),
        ..Default::default()
    }
}

/// The StorageClass label lifecycle (see [`label_lifecycle`]).
async fn storageclass_lifecycle(f: &Framework) -> CaseResult {
    label_lifecycle(f, storage_class(f, "sc"), vec![storage_class(f, "sc-v2")]).await
}

fn csi_node(f: &Framework, suffix: &str) -> CSINode {
    CSINode {
        metadata: named(f, suffix),
        spec: CSINodeSpec { drivers: Vec::new() },
    }
}

/// The CSINode label lifecycle (see [`label_lifecycle`]).
async fn csinode_lifecycle(f: &Framework) -> CaseResult {
    label_lifecycle(f, csi_node(f, "csinode"), vec![csi_node(f, "csinode-v2")]).await
}

/// A VolumeAttachment of PV `pv-<suffix>` to node `node` by upstream's fake attacher.
fn volume_attachment(f: &Framework, suffix: &str, node: &str) -> VolumeAttachment {
    VolumeAttachment {
        metadata: named(f, &format!("va-{suffix}")),
        spec: VolumeAttachmentSpec {
            attacher: "e2e-test.storage.k8s.io".into(),
            node_name: node.into(),
            source: VolumeAttachmentSource {
                persistent_volume_name: Some(format!("{}-pv-{suffix}", f.ns())),
                ..Default::default()
            },
        },
        status: None,
    }
}

/// A node of the target OS to attach to (upstream picks any node).
async fn some_node(f: &Framework) -> Result<String, CaseError> {
    let nodes = f.require_nodes(f.target_os(), 1).await?;
    Ok(nodes[0].name.clone())
}

/// The VolumeAttachment label lifecycle (see [`label_lifecycle`]), with two replacements as
/// upstream's.
async fn va_lifecycle(f: &Framework) -> CaseResult {
    let node = some_node(f).await?;
    let replacements = vec![volume_attachment(f, "2", &node), volume_attachment(f, "3", &node)];
    label_lifecycle(f, volume_attachment(f, "1", &node), replacements).await
}

/// Whether a VolumeAttachment's status says attached.
fn attached(va: &VolumeAttachment) -> bool {
    va.status.as_ref().is_some_and(|s| s.attached)
}

/// Creates a VolumeAttachment, patches a label, reads `/status` (not attached), patches
/// `/status` to attached, updates it back, deletes it and confirms it is gone.
async fn va_status(f: &Framework) -> CaseResult {
    let node = some_node(f).await?;
    let api: Api<VolumeAttachment> = f.api_all();
    let created = create_cluster_scoped(f, &volume_attachment(f, "status", &node)).await?;
    let name = created.name_any();
    let patch = json!({"metadata": {"labels": {name.as_str(): "patched"}}});
    let patched = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    ensure!(
        patched.labels().get(&name).map(String::as_str) == Some("patched"),
        "VolumeAttachment {name} after the patch: expected label {name}=patched, got {:?}",
        patched.labels()
    );
    let status = api.get_status(&name).await?;
    ensure!(
        !attached(&status),
        "VolumeAttachment {name} read through /status: expected attached false, got {:?}",
        status.status
    );

    f.step(format!("patching /status of VolumeAttachment {name}"));
    let patch = json!({"status": {"attached": true}});
    let patched = api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    ensure!(
        attached(&patched),
        "VolumeAttachment {name} after the patch of /status: expected attached true, got {:?}",
        patched.status
    );
    let detached = |va: &VolumeAttachment| !attached(va);
    let updated = update_status(f, &api, &name, detached, |va: &mut VolumeAttachment| {
        va.status.get_or_insert_with(Default::default).attached = false;
        Ok(())
    })
    .await?;
    ensure!(
        detached(&updated),
        "VolumeAttachment {name} after the update of /status: expected attached false, got {:?}",
        updated.status
    );
    api.delete(&name, &DeleteParams::default()).await?;
    confirm_deleted(f, &api, &format!("{name}=patched")).await
}

/// A CSIDriver for the given volume lifecycle modes, labelled `e2e-test=<namespace>`.
fn csi_driver(f: &Framework, suffix: &str, modes: &[&str]) -> CSIDriver {
    let mut metadata = named(f, suffix);
    metadata.labels = Some(BTreeMap::from([("e2e-test".to_string(), f.ns().to_string())]));
    CSIDriver {
        metadata,
        spec: CSIDriverSpec {
            volume_lifecycle_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
            fs_group_policy: Some("ReadWriteOnceWithFSType".into()),
            ..Default::default()
        },
    }
}

/// Whether `name` is gone (404) or being deleted.
async fn gone_or_going(api: &Api<CSIDriver>, name: &str) -> CaseResult {
    if let Some(d) = api.get_opt(name).await? {
        ensure!(
            d.metadata.deletion_timestamp.is_some(),
            "CSIDriver {name} after its deletion: expected 404 Not Found or a deletion timestamp, got the object"
        );
    }
    Ok(())
}

/// Creates two CSIDrivers (ephemeral only; ephemeral and persistent), reads both back,
/// patches and updates a label of the second, lists both, deletes the first and then the
/// second by collection, confirming each is gone.
async fn csidriver_lifecycle(f: &Framework) -> CaseResult {
    let api: Api<CSIDriver> = f.api_all();
    let first = create_cluster_scoped(f, &csi_driver(f, "inline-driver-1", &["Ephemeral"])).await?;
    let second = create_cluster_scoped(f, &csi_driver(f, "inline-driver-2", &["Ephemeral", "Persistent"])).await?;
    for d in [&first, &second] {
        let got = api.get(&d.name_any()).await?;
        ensure!(
            got.uid() == d.uid(),
            "CSIDriver {} as read back: expected uid {:?}, got {:?}",
            d.name_any(),
            d.uid(),
            got.uid()
        );
    }
    let name = second.name_any();
    patch_label(f, &api, &second).await?;
    update_label(f, &api, &name, &name).await?;
    let selector = format!("e2e-test={}", f.ns());
    let listed = api.list(&ListParams::default().labels(&selector)).await?;
    ensure!(
        listed.items.len() == 2,
        "listing CSIDrivers with labels {selector}: expected 2, got {:?}",
        listed.items.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
    );
    api.delete(&first.name_any(), &DeleteParams::default()).await?;
    gone_or_going(&api, &first.name_any()).await?;
    f.step(format!(
        "deleting the collection of CSIDrivers with labels {name}=updated"
    ));
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(&format!("{name}=updated")),
    )
    .await?;
    gone_or_going(&api, &name)
        .await
        .map_err(|e| e.context("after the DELETE of the collection of CSIDrivers"))
}

/// A CSIStorageCapacity of upstream's fake storage class in the case namespace.
fn capacity(f: &Framework, i: usize) -> CSIStorageCapacity {
    CSIStorageCapacity {
        metadata: ObjectMeta {
            name: Some(format!("e2e-csistoragecapacity-{i}")),
            labels: Some(BTreeMap::from([("test".to_string(), f.ns().to_string())])),
            ..Default::default()
        },
        storage_class_name: "someclass".into(),
        capacity: Some(Quantity("1Gi".into())),
        ..Default::default()
    }
}

/// Walks CSIStorageCapacities through discovery, create, get, list (in the namespace and
/// across all), watch, patch, update, delete and delete a collection.
async fn capacity_api(f: &Framework) -> CaseResult {
    let selector = format!("test={}", f.ns());
    let walk = Walk::new(f.api::<CSIStorageCapacity>(), selector.clone());
    let first = walk
        .open(f, (1..=3).map(|i| capacity(f, i)).collect(), 0)
        .await?
        .name_any();
    find_in_all_namespaces::<CSIStorageCapacity>(f, &selector, f.ns(), &first).await?;
    walk.close(f, &first, 2).await
}
