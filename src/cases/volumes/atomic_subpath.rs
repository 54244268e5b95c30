//! subPath into the kubelet's atomically written volumes (upstream `storage/subpath.go`,
//! context "Atomic writer volumes"): a container mounts one file of a Secret, ConfigMap,
//! downward API or projected volume through `subPath` and reads the value at its mount point,
//! also when that mount point is a file the image already has (`/etc/resolv.conf`).
//!
//! They run on Windows nodes too: upstream dropped their `[LinuxOnly]` once containerd mapped
//! single files into Windows containers (see [`crate::os::Os::supports_hugepages`] for the
//! profile's reasoning).

use k8s_openapi::api::core::v1::{Container, Volume};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::workloads::{
    DownwardItem, Projection, config_map, config_map_volume, downward_volume, projected_volume, secret, secret_volume,
};
use crate::framework::{CaseResult, ContainerBuilder, Framework};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(SUBPATH_SECRET, Kind::Adapted, subpath_secret),
        case!(SUBPATH_CONFIGMAP, Kind::Adapted, subpath_configmap),
        case!(SUBPATH_CONFIGMAP_FILE, Kind::Adapted, subpath_configmap_file),
        case!(SUBPATH_DOWNWARD, Kind::Adapted, subpath_downward),
        case!(SUBPATH_PROJECTED, Kind::Adapted, subpath_projected),
    ]
}

/// Upstream's objects (its BeforeEach makes both for every case).
const SECRET: &str = "my-secret";
const CONFIGMAP: &str = "my-configmap";

/// Upstream's mount point of the subPath (`volumePath`).
const VOLUME_PATH: &str = "/test-volume";

/// Upstream's container name in `SubpathTestPod`.
const CONTAINER: &str = "test-container-subpath";

/// Creates upstream's Secret and ConfigMap, mounts `volume` through `sub_path` at `at` and
/// checks the container reads `want` there.
async fn expect_subpath_reads(
    f: &Framework,
    kind: &str,
    volume: Volume,
    sub_path: &str,
    at: &str,
    want: &str,
) -> CaseResult {
    let os = f.target_os();
    f.create(&secret(SECRET, &[("secret-key", "secret-value")])).await?;
    f.create(&config_map(CONFIGMAP, &[("configmap-key", "configmap-value")]))
        .await?;
    let name = volume.name.clone();
    let sub = sub_path.to_string();
    let pod = format!("pod-subpath-test-{kind}");
    let builder = f
        .pod(&pod)
        .restart_policy("Never")
        .grace_period(1)
        .volume(volume)
        .container(
            ContainerBuilder::new(CONTAINER, "busybox")
                .command(os.shell(&os.cat(at)))
                .mount(&name, at, false)
                .with(move |c: &mut Container| {
                    for m in c.volume_mounts.iter_mut().flatten() {
                        m.sub_path = Some(sub.clone());
                    }
                }),
        );
    let out = f.container_output(&builder, CONTAINER).await?;
    ensure!(
        out.trim() == want,
        "pod {pod}: expected {at} (subPath {sub_path} of the {kind} volume) to read {want:?}, got {:?}",
        out.trim()
    );
    Ok(())
}

/// Upstream subpath.go "should support subpaths with secret pod".
pub(crate) const SUBPATH_SECRET: &str =
    "[sig-storage] Subpath Atomic writer volumes should support subpaths with secret pod [Conformance]";

/// Key secret-key of a Secret volume.
async fn subpath_secret(f: &Framework) -> CaseResult {
    let volume = secret_volume("test-volume", SECRET, &[]);
    expect_subpath_reads(f, "secret", volume, "secret-key", VOLUME_PATH, "secret-value").await
}

/// Upstream subpath.go "should support subpaths with configmap pod".
pub(crate) const SUBPATH_CONFIGMAP: &str =
    "[sig-storage] Subpath Atomic writer volumes should support subpaths with configmap pod [Conformance]";

/// Key configmap-key of a ConfigMap volume.
async fn subpath_configmap(f: &Framework) -> CaseResult {
    let volume = config_map_volume("test-volume", CONFIGMAP, &[]);
    expect_subpath_reads(f, "configmap", volume, "configmap-key", VOLUME_PATH, "configmap-value").await
}

/// Upstream subpath.go "should support subpaths with configmap pod with mountPath of existing file".
pub(crate) const SUBPATH_CONFIGMAP_FILE: &str = "[sig-storage] Subpath Atomic writer volumes should support subpaths \
     with configmap pod with mountPath of existing file [Conformance]";

/// The same key mounted over the image's `/etc/resolv.conf`.
async fn subpath_configmap_file(f: &Framework) -> CaseResult {
    let volume = config_map_volume("test-volume", CONFIGMAP, &[]);
    expect_subpath_reads(
        f,
        "configmap-file",
        volume,
        "configmap-key",
        "/etc/resolv.conf",
        "configmap-value",
    )
    .await
}

/// Upstream subpath.go "should support subpaths with downward pod".
pub(crate) const SUBPATH_DOWNWARD: &str =
    "[sig-storage] Subpath Atomic writer volumes should support subpaths with downward pod [Conformance]";

/// The downward API file `downward/podname` (the pod's name).
async fn subpath_downward(f: &Framework) -> CaseResult {
    let volume = downward_volume(
        "test-volume",
        &[DownwardItem::field("downward/podname", "metadata.name")],
    );
    expect_subpath_reads(
        f,
        "downward",
        volume,
        "downward/podname",
        VOLUME_PATH,
        "pod-subpath-test-downward",
    )
    .await
}

/// Upstream subpath.go "should support subpaths with projected pod".
pub(crate) const SUBPATH_PROJECTED: &str =
    "[sig-storage] Subpath Atomic writer volumes should support subpaths with projected pod [Conformance]";

/// configmap-key projected to `projected/configmap-key`.
async fn subpath_projected(f: &Framework) -> CaseResult {
    let items = vec![("configmap-key".to_string(), "projected/configmap-key".to_string())];
    let volume = projected_volume("test-volume", &[Projection::ConfigMap(CONFIGMAP.into(), items)]);
    expect_subpath_reads(
        f,
        "projected",
        volume,
        "projected/configmap-key",
        VOLUME_PATH,
        "configmap-value",
    )
    .await
}
