//! "optional updates should be reflected in volume" for ConfigMap, Secret and their projected
//! forms (upstream `configmap_volume.go`, `secrets_volume.go`, `projected_configmap.go`,
//! `projected_secret.go`): three optional volumes in one running pod, whose sources are then
//! deleted, updated and created; the kubelet must reflect all three changes.

use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Volume};
use kube::api::{DeleteParams, Patch, PatchParams};

use crate::case;
use crate::cases::config::{VOLUME_UPDATE_WITHIN, file_path, mount_path, pause};
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{Projection, config_map, config_map_volume, projected_volume, secret, secret_volume};
use crate::framework::{CaseError, CaseResult, Framework};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(CM_OPTIONAL, Kind::Adapted, cm_optional),
        case!(PROJECTED_CM_OPTIONAL, Kind::Adapted, projected_cm_optional),
        case!(SECRET_OPTIONAL, Kind::Adapted, secret_optional),
        case!(PROJECTED_SECRET_OPTIONAL, Kind::Adapted, projected_secret_optional),
    ]
}

/// Which object kind a case drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind2 {
    ConfigMap,
    Secret,
}

/// How the object reaches the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mount {
    Plain,
    Projected,
}

/// An optional volume `volume` of `object`.
fn optional_volume(kind: Kind2, mount: Mount, volume: &str, object: &str) -> Volume {
    let mut v = match (kind, mount) {
        (Kind2::ConfigMap, Mount::Plain) => config_map_volume(volume, object, &[]),
        (Kind2::Secret, Mount::Plain) => secret_volume(volume, object, &[]),
        (Kind2::ConfigMap, Mount::Projected) => {
            projected_volume(volume, &[Projection::ConfigMap(object.into(), vec![])])
        }
        (Kind2::Secret, Mount::Projected) => projected_volume(volume, &[Projection::Secret(object.into(), vec![])]),
    };
    if let Some(cm) = v.config_map.as_mut() {
        cm.optional = Some(true);
    }
    if let Some(s) = v.secret.as_mut() {
        s.optional = Some(true);
    }
    for source in v.projected.iter_mut().flat_map(|p| p.sources.iter_mut().flatten()) {
        if let Some(cm) = source.config_map.as_mut() {
            cm.optional = Some(true);
        }
        if let Some(s) = source.secret.as_mut() {
            s.optional = Some(true);
        }
    }
    v
}

async fn create_object(f: &Framework, kind: Kind2, name: &str) -> CaseResult {
    match kind {
        Kind2::ConfigMap => f.create(&config_map(name, &[("data-1", "value-1")])).await.map(|_| ()),
        Kind2::Secret => f.create(&secret(name, &[("data-1", "value-1")])).await.map(|_| ()),
    }
}

/// Re-reads `path` in `container` of `pod` once a second until reading it fails (the key or
/// object is gone from the volume), at most `within`.
async fn eventually_missing(f: &Framework, pod: &str, container: &str, path: &str, within: Duration) -> CaseResult {
    let os = f.target_os();
    let deadline = Instant::now() + within.min(f.remaining().saturating_sub(Duration::from_secs(3)));
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let out = f.exec_shell(pod, Some(container), os, &os.cat(path)).await?;
        if out.exit_code != 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(CaseError::failed(format!(
                "file {path} in container {container} of pod {pod} should be gone within {within:?}; it still reads {:?}",
                out.out()
            )));
        }
    }
}

/// Upstream's flow, for `kind` mounted as `mount`.
async fn optional_updates(f: &Framework, kind: Kind2, mount: Mount, prefix: &str, pod: &str) -> CaseResult {
    let os = f.target_os();
    let [del, upd, create] = ["del", "upd", "create"].map(|what| format!("{prefix}-test-opt-{what}"));
    create_object(f, kind, &del).await?;
    create_object(f, kind, &upd).await?;
    let root = mount_path(f, &format!("{prefix}-volumes"));
    let at = |dir: &str| os.join(&root, dir);
    let containers = [
        (
            format!("del{prefix}-volume-test"),
            format!("delete{prefix}-volume"),
            "delete",
            &del,
        ),
        (
            format!("upd{prefix}-volume-test"),
            format!("update{prefix}-volume"),
            "update",
            &upd,
        ),
        (
            format!("create{prefix}-volume-test"),
            format!("create{prefix}-volume"),
            "create",
            &create,
        ),
    ];
    let mut builder = f.pod(pod);
    for (container, volume, dir, object) in &containers {
        builder = builder
            .volume(optional_volume(kind, mount, volume, object))
            .container(pause(container).mount(volume, &at(dir), true));
    }
    f.create_pod_ready(&builder).await?;
    let [(del_c, ..), (upd_c, ..), (create_c, ..)] = &containers;
    let create_file = file_path(f, &at("create"), "data-1");
    let update_file = file_path(f, &at("update"), "data-3");
    let delete_file = file_path(f, &at("delete"), "data-1");
    eventually_missing(f, pod, create_c, &create_file, VOLUME_UPDATE_WITHIN).await?;
    eventually_missing(f, pod, upd_c, &update_file, VOLUME_UPDATE_WITHIN).await?;
    f.eventually_file_reads(pod, Some(del_c), os, &delete_file, "value-1", VOLUME_UPDATE_WITHIN)
        .await?;

    f.step(format!(
        "deleting {del}, updating {upd} (data-1 removed, data-3 added), creating {create}"
    ));
    match kind {
        Kind2::ConfigMap => {
            f.api::<ConfigMap>().delete(&del, &DeleteParams::default()).await?;
            let patch = serde_json::json!({"data": {"data-1": null, "data-3": "value-3"}});
            f.api::<ConfigMap>()
                .patch(&upd, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Kind2::Secret => {
            f.api::<Secret>().delete(&del, &DeleteParams::default()).await?;
            let value = serde_json::to_value(ByteString(b"value-3".to_vec()))
                .map_err(|e| CaseError::failed(format!("encoding value-3: {e}")))?;
            let patch = serde_json::json!({"data": {"data-1": null, "data-3": value}});
            f.api::<Secret>()
                .patch(&upd, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
    }
    create_object(f, kind, &create).await?;

    f.eventually_file_reads(pod, Some(create_c), os, &create_file, "value-1", VOLUME_UPDATE_WITHIN)
        .await?;
    f.eventually_file_reads(pod, Some(upd_c), os, &update_file, "value-3", VOLUME_UPDATE_WITHIN)
        .await?;
    eventually_missing(f, pod, del_c, &delete_file, VOLUME_UPDATE_WITHIN).await
}

/// Upstream configmap_volume.go "optional updates should be reflected in volume".
pub(crate) const CM_OPTIONAL: &str =
    "[sig-storage] ConfigMap optional updates should be reflected in volume [NodeConformance] [Conformance]";

async fn cm_optional(f: &Framework) -> CaseResult {
    optional_updates(f, Kind2::ConfigMap, Mount::Plain, "cm", "pod-configmaps-optional").await
}

/// Upstream projected_configmap.go "optional updates should be reflected in volume".
pub(crate) const PROJECTED_CM_OPTIONAL: &str =
    "[sig-storage] Projected configMap optional updates should be reflected in volume [NodeConformance] [Conformance]";

async fn projected_cm_optional(f: &Framework) -> CaseResult {
    optional_updates(
        f,
        Kind2::ConfigMap,
        Mount::Projected,
        "cm",
        "pod-projected-configmaps-optional",
    )
    .await
}

/// Upstream secrets_volume.go "optional updates should be reflected in volume".
pub(crate) const SECRET_OPTIONAL: &str =
    "[sig-storage] Secrets optional updates should be reflected in volume [NodeConformance] [Conformance]";

async fn secret_optional(f: &Framework) -> CaseResult {
    optional_updates(f, Kind2::Secret, Mount::Plain, "s", "pod-secrets-optional").await
}

/// Upstream projected_secret.go "optional updates should be reflected in volume".
pub(crate) const PROJECTED_SECRET_OPTIONAL: &str =
    "[sig-storage] Projected secret optional updates should be reflected in volume [NodeConformance] [Conformance]";

async fn projected_secret_optional(f: &Framework) -> CaseResult {
    optional_updates(
        f,
        Kind2::Secret,
        Mount::Projected,
        "s",
        "pod-projected-secrets-optional",
    )
    .await
}
