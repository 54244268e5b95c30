//! ConfigMap volumes read by a non-root user (upstream `common/storage/configmap_volume.go` and
//! `projected_configmap.go`, the "as non-root" cases): the kubelet publishes the files so that
//! a container running as UID 1000 (Linux) or `ContainerUser` (Windows, where UIDs do not
//! apply) reads them, plain and through key mappings, in plain and projected volumes.

use k8s_openapi::api::core::v1::Volume;

use super::projected::cm_source;
use crate::case;
use crate::cases::config::expect_volume_reads_as;
use crate::cases::node::run_as;
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{config_map, config_map_volume, projected_volume};
use crate::framework::{CaseResult, Framework};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(CM_NON_ROOT, Kind::Adapted, cm_non_root),
        case!(CM_MAPPINGS_NON_ROOT, Kind::Adapted, cm_mappings_non_root),
        case!(PROJECTED_CM_NON_ROOT, Kind::Adapted, projected_cm_non_root),
        case!(
            PROJECTED_CM_MAPPINGS_NON_ROOT,
            Kind::Adapted,
            projected_cm_mappings_non_root
        ),
    ]
}

/// Upstream's key mapping: data-2 published at `path/to/data-2`.
const MAPPING: &[(&str, &str)] = &[("data-2", "path/to/data-2")];

/// Creates ConfigMap `cm` (data-1, data-2), mounts the volume `volume` builds from it into a
/// reader running as the non-root user, and checks the file `rel` reads `want`.
///
/// The four cases differ only in the volume kind and the mapping; this is what they share.
async fn expect_non_root_reads(
    f: &Framework,
    cm: &str,
    pod: &str,
    volume: Volume,
    rel: &str,
    want: &str,
) -> CaseResult {
    f.create(&config_map(cm, &[("data-1", "value-1"), ("data-2", "value-2")]))
        .await?;
    let user = run_as(f.target_os(), true);
    expect_volume_reads_as(
        f,
        pod,
        "agnhost-container",
        false,
        vec![volume],
        rel,
        &[want],
        Some(user),
    )
    .await
}

/// A projected volume of ConfigMap `cm` with `items`.
fn projected_cm(volume: &str, cm: &str, items: &[(&str, &str)]) -> Volume {
    projected_volume(volume, &[cm_source(cm, items)])
}

/// Upstream configmap_volume.go "should be consumable from pods in volume as non-root".
pub(crate) const CM_NON_ROOT: &str =
    "[sig-storage] ConfigMap should be consumable from pods in volume as non-root [NodeConformance] [Conformance]";

/// Every key is a file; the non-root reader sees data-1.
async fn cm_non_root(f: &Framework) -> CaseResult {
    let cm = "configmap-test-volume-nonroot";
    let volume = config_map_volume("configmap-volume", cm, &[]);
    expect_non_root_reads(f, cm, "pod-configmaps-nonroot", volume, "data-1", "value-1").await
}

/// Upstream configmap_volume.go "should be consumable from pods in volume with mappings as non-root".
pub(crate) const CM_MAPPINGS_NON_ROOT: &str = "[sig-storage] ConfigMap should be consumable from pods in volume with \
     mappings as non-root [NodeConformance] [Conformance]";

/// data-2 mapped to `path/to/data-2`; the non-root reader sees value-2 there.
async fn cm_mappings_non_root(f: &Framework) -> CaseResult {
    let cm = "configmap-test-volume-map-nonroot";
    let volume = config_map_volume("configmap-volume", cm, MAPPING);
    expect_non_root_reads(f, cm, "pod-configmaps-map-nonroot", volume, "path/to/data-2", "value-2").await
}

/// Upstream projected_configmap.go "should be consumable from pods in volume as non-root".
pub(crate) const PROJECTED_CM_NON_ROOT: &str = "[sig-storage] Projected configMap should be consumable from pods in \
     volume as non-root [NodeConformance] [Conformance]";

/// The projected form of [`cm_non_root`].
async fn projected_cm_non_root(f: &Framework) -> CaseResult {
    let cm = "projected-configmap-test-volume-nonroot";
    let volume = projected_cm("projected-configmap-volume", cm, &[]);
    expect_non_root_reads(f, cm, "pod-projected-configmaps-nonroot", volume, "data-1", "value-1").await
}

/// Upstream projected_configmap.go "should be consumable from pods in volume with mappings as non-root".
pub(crate) const PROJECTED_CM_MAPPINGS_NON_ROOT: &str = "[sig-storage] Projected configMap should be consumable from \
     pods in volume with mappings as non-root [NodeConformance] [Conformance]";

/// The projected form of [`cm_mappings_non_root`].
async fn projected_cm_mappings_non_root(f: &Framework) -> CaseResult {
    let cm = "projected-configmap-test-volume-map-nonroot";
    let volume = projected_cm("projected-configmap-volume", cm, MAPPING);
    expect_non_root_reads(
        f,
        cm,
        "pod-projected-configmaps-map-nonroot",
        volume,
        "path/to/data-2",
        "value-2",
    )
    .await
}
