//! Projected ConfigMap and Secret volumes (upstream `common/storage/projected_configmap.go` and
//! `projected_secret.go`): key mappings, the same source in several volumes, and updates
//! reaching a running pod.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};

use crate::case;
use crate::cases::config::{VOLUME_UPDATE_WITHIN, expect_volume_reads, file_path, mount_path, pause};
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{Projection, config_map, projected_volume, secret};
use crate::framework::{CaseResult, Framework};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(CM_MAPPINGS, Kind::Adapted, cm_mappings),
        case!(CM_MULTIPLE_VOLUMES, Kind::Adapted, cm_multiple_volumes),
        case!(CM_UPDATES, Kind::Adapted, cm_updates),
        case!(SECRET_MAPPINGS, Kind::Adapted, secret_mappings),
        case!(SECRET_MULTIPLE_VOLUMES, Kind::Adapted, secret_multiple_volumes),
    ]
}

/// A projected ConfigMap source with key→path `items` (empty: every key).
pub(super) fn cm_source(name: &str, items: &[(&str, &str)]) -> Projection {
    Projection::ConfigMap(
        name.into(),
        items.iter().map(|(k, p)| (k.to_string(), p.to_string())).collect(),
    )
}

/// A projected Secret source with key→path `items` (empty: every key).
pub(super) fn secret_source(name: &str, items: &[(&str, &str)]) -> Projection {
    Projection::Secret(
        name.into(),
        items.iter().map(|(k, p)| (k.to_string(), p.to_string())).collect(),
    )
}

/// Upstream projected_configmap.go "should be consumable from pods in volume with mappings".
pub(crate) const CM_MAPPINGS: &str = "[sig-storage] Projected configMap should be consumable from pods in volume with mappings [NodeConformance] [Conformance]";

/// Key data-2 is projected to `path/to/data-2`, which reads `value-2`.
async fn cm_mappings(f: &Framework) -> CaseResult {
    let name = "projected-configmap-test-volume-map";
    f.create(&config_map(name, &[("data-1", "value-1"), ("data-2", "value-2")]))
        .await?;
    expect_volume_reads(
        f,
        "pod-projected-configmaps-map",
        "agnhost-container",
        false,
        vec![projected_volume(
            "projected-configmap-volume",
            &[cm_source(name, &[("data-2", "path/to/data-2")])],
        )],
        "path/to/data-2",
        &["value-2"],
    )
    .await
}

/// Upstream projected_configmap.go "should be consumable in multiple volumes in the same pod".
pub(crate) const CM_MULTIPLE_VOLUMES: &str = "[sig-storage] Projected configMap should be consumable in multiple \
     volumes in the same pod [NodeConformance] [Conformance]";

/// One ConfigMap projected into two volumes of one pod shows data-1 in both.
async fn cm_multiple_volumes(f: &Framework) -> CaseResult {
    let name = "projected-configmap-test-volume-multi";
    f.create(&config_map(name, &[("data-1", "value-1")])).await?;
    expect_volume_reads(
        f,
        "pod-projected-configmaps-multi",
        "agnhost-container",
        false,
        vec![
            projected_volume("projected-configmap-volume", &[cm_source(name, &[])]),
            projected_volume("projected-configmap-volume-2", &[cm_source(name, &[])]),
        ],
        "data-1",
        &["value-1", "value-1"],
    )
    .await
}

/// Upstream projected_configmap.go "updates should be reflected in volume".
pub(crate) const CM_UPDATES: &str =
    "[sig-storage] Projected configMap updates should be reflected in volume [NodeConformance] [Conformance]";

/// A running pod's projected file data-1 changes from value-1 to value-2 after the ConfigMap is
/// updated.
async fn cm_updates(f: &Framework) -> CaseResult {
    let name = "projected-configmap-test-upd";
    f.create(&config_map(name, &[("data-1", "value-1")])).await?;
    let mount = mount_path(f, "projected-configmap-volume");
    let path = file_path(f, &mount, "data-1");
    let pod = f
        .pod("pod-projected-configmaps-upd")
        .volume(projected_volume("projected-configmap-volume", &[cm_source(name, &[])]))
        .container(pause("agnhost-container").mount("projected-configmap-volume", &mount, false));
    f.create_pod_ready(&pod).await?;
    let os = f.target_os();
    f.eventually_file_reads(pod.name(), None, os, &path, "value-1", VOLUME_UPDATE_WITHIN)
        .await?;
    f.step("updating the ConfigMap");
    let patch = serde_json::json!({"data": {"data-1": "value-2"}});
    f.api::<ConfigMap>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    f.eventually_file_reads(pod.name(), None, os, &path, "value-2", VOLUME_UPDATE_WITHIN)
        .await
}

/// Upstream projected_secret.go "should be consumable from pods in volume with mappings".
pub(crate) const SECRET_MAPPINGS: &str = "[sig-storage] Projected secret should be consumable from pods in volume with mappings [NodeConformance] [Conformance]";

/// Key data-1 is projected to `new-path-data-1`, which reads `value-1`.
async fn secret_mappings(f: &Framework) -> CaseResult {
    let name = "projected-secret-test-map";
    f.create(&secret(name, &[("data-1", "value-1"), ("data-2", "value-2")]))
        .await?;
    expect_volume_reads(
        f,
        "pod-projected-secrets-map",
        "projected-secret-volume-test",
        true,
        vec![projected_volume(
            "projected-secret-volume",
            &[secret_source(name, &[("data-1", "new-path-data-1")])],
        )],
        "new-path-data-1",
        &["value-1"],
    )
    .await
}

/// Upstream projected_secret.go "should be consumable in multiple volumes in a pod".
pub(crate) const SECRET_MULTIPLE_VOLUMES: &str =
    "[sig-storage] Projected secret should be consumable in multiple volumes in a pod [NodeConformance] [Conformance]";

/// One Secret projected into two volumes of one pod shows data-1 in both.
async fn secret_multiple_volumes(f: &Framework) -> CaseResult {
    let name = "projected-secret-test-multi";
    f.create(&secret(name, &[("data-1", "value-1")])).await?;
    expect_volume_reads(
        f,
        "pod-projected-secrets-multi",
        "secret-volume-test",
        true,
        vec![
            projected_volume("projected-secret-volume", &[secret_source(name, &[])]),
            projected_volume("projected-secret-volume-2", &[secret_source(name, &[])]),
        ],
        "data-1",
        &["value-1", "value-1"],
    )
    .await
}
