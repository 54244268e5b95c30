//! The first case of each further volume kind (upstream `common/storage/downwardapi_volume.go`,
//! `empty_dir.go`, `projected_combined.go`, `projected_configmap.go`, `projected_secret.go`,
//! `projected_downwardapi.go`): a downward API volume, an emptyDir shared by two containers,
//! and projected volumes of each source, read back through the OS profile's paths.

use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Patch, PatchParams};

use crate::case;
use crate::cases::config::{
    VOLUME_UPDATE_WITHIN, expect_output, expect_volume_reads, file_path, mount_path, pause, reader,
};
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::workloads::{
    DownwardItem, Projection, config_map, downward_volume, empty_dir_volume, projected_volume, secret,
};
use crate::framework::{CaseResult, Framework, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(DOWNWARD_VOLUME_PODNAME, Kind::Adapted, downward_volume_podname),
        case!(DOWNWARD_VOLUME_CPU_LIMIT, Kind::Adapted, downward_volume_cpu_limit),
        case!(DOWNWARD_VOLUME_LABELS, Kind::Adapted, downward_volume_labels),
        case!(EMPTYDIR_SHARED, Kind::Adapted, emptydir_shared),
        case!(PROJECTED_COMBINED, Kind::Adapted, projected_combined),
        case!(PROJECTED_CM, Kind::Adapted, projected_cm),
        case!(PROJECTED_SECRET, Kind::Adapted, projected_secret),
        case!(PROJECTED_DOWNWARD_PODNAME, Kind::Adapted, projected_downward_podname),
    ]
}

// --- downward API volumes --------------------------------------------------------------------

/// Upstream common/storage/downwardapi_volume.go "should provide podname only".
pub(crate) const DOWNWARD_VOLUME_PODNAME: &str =
    "[sig-storage] Downward API volume should provide podname only [NodeConformance] [Conformance]";

/// Upstream downwardapi_volume.go: file `podname` holds the pod's name.
async fn downward_volume_podname(f: &Framework) -> CaseResult {
    expect_volume_reads(
        f,
        "downwardapi-volume-podname",
        "client-container",
        false,
        vec![downward_volume(
            "podinfo",
            &[DownwardItem::field("podname", "metadata.name")],
        )],
        "podname",
        &["downwardapi-volume-podname"],
    )
    .await
}

/// Upstream downwardapi_volume.go "should provide container's cpu limit".
pub(crate) const DOWNWARD_VOLUME_CPU_LIMIT: &str =
    "[sig-storage] Downward API volume should provide container's cpu limit [NodeConformance] [Conformance]";

/// Upstream downwardapi_volume.go: a 1250m CPU limit reads back as `2` (whole cores, rounded up).
async fn downward_volume_cpu_limit(f: &Framework) -> CaseResult {
    let mount = mount_path(f, "podinfo");
    let pod = f
        .pod("downwardapi-volume-cpu-limit")
        .volume(downward_volume(
            "podinfo",
            &[DownwardItem::resource("cpu_limit", "client-container", "limits.cpu")],
        ))
        .container(
            reader(f, "client-container", &[file_path(f, &mount, "cpu_limit")])
                .mount("podinfo", &mount, false)
                .with(|c: &mut Container| {
                    c.resources = Some(ResourceRequirements {
                        limits: Some([("cpu".to_string(), Quantity("1250m".into()))].into()),
                        requests: Some([("cpu".to_string(), Quantity("250m".into()))].into()),
                        ..Default::default()
                    });
                }),
        );
    expect_output(f, &pod, "client-container", &["2"]).await
}

/// Upstream downwardapi_volume.go "should update labels on modification".
pub(crate) const DOWNWARD_VOLUME_LABELS: &str =
    "[sig-storage] Downward API volume should update labels on modification [NodeConformance] [Conformance]";

/// Upstream downwardapi_volume.go: the `labels` file of a running pod gains a label added to
/// the pod.
async fn downward_volume_labels(f: &Framework) -> CaseResult {
    let mount = mount_path(f, "podinfo");
    let path = file_path(f, &mount, "labels");
    let pod = f
        .pod("labelsupdate")
        .label("key1", "value1")
        .label("key2", "value2")
        .volume(downward_volume(
            "podinfo",
            &[DownwardItem::field("labels", "metadata.labels")],
        ))
        .container(pause("client-container").mount("podinfo", &mount, false));
    f.create_pod_ready(&pod).await?;
    let os = f.target_os();
    let has =
        |want: &'static [&'static str]| move |text: &str| want.iter().all(|w| text.lines().any(|l| l.trim() == *w));
    f.eventually_file_matches(
        pod.name(),
        None,
        os,
        &path,
        has(&["key1=\"value1\"", "key2=\"value2\""]),
        "list key1 and key2",
        VOLUME_UPDATE_WITHIN,
    )
    .await?;
    f.step("adding label key3=value3");
    let patch = serde_json::json!({"metadata": {"labels": {"key3": "value3"}}});
    f.api::<k8s_openapi::api::core::v1::Pod>()
        .patch(pod.name(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    f.eventually_file_matches(
        pod.name(),
        None,
        os,
        &path,
        has(&["key3=\"value3\""]),
        "list key3=\"value3\"",
        VOLUME_UPDATE_WITHIN,
    )
    .await
    .map(|_| ())
}

// --- emptyDir and projected ------------------------------------------------------------------

/// Upstream common/storage/empty_dir.go "pod should support shared volumes between containers".
pub(crate) const EMPTYDIR_SHARED: &str =
    "[sig-storage] EmptyDir volumes pod should support shared volumes between containers [Conformance]";

/// Upstream empty_dir.go: a file written into the emptyDir by one container is read by the
/// other container of the pod.
async fn emptydir_shared(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let mount = mount_path(f, "shared-data");
    let file = file_path(f, &mount, "shareddata.txt");
    let pod = f
        .pod("pod-sharedvolume")
        .volume(empty_dir_volume("shared-data"))
        .container(pause("busybox-main-container").mount("shared-data", &mount, false))
        .container(pause("busybox-sub-container").mount("shared-data", &mount, false));
    let running = f.create_pod_ready(&pod).await?;
    let wrote = f
        .exec_shell(
            pod.name(),
            Some("busybox-sub-container"),
            os,
            &os.write_file(&file, "Hello-from-the-busy-box-sub-container"),
        )
        .await?;
    ensure!(
        wrote.exit_code == 0,
        "writing {file} in busybox-sub-container failed: exit {} {:?}",
        wrote.exit_code,
        wrote.stderr
    );
    let read = f
        .exec_shell(pod.name(), Some("busybox-main-container"), os, &os.cat(&file))
        .await?;
    ensure!(
        read.exit_code == 0 && read.out() == "Hello-from-the-busy-box-sub-container",
        "busybox-main-container of pod {} on node {} read {:?} (exit {}, stderr {:?}) from the shared emptyDir, expected the sub-container's text",
        pod.name(),
        pod_node(&running),
        read.out(),
        read.exit_code,
        read.stderr
    );
    Ok(())
}

/// Upstream common/storage/projected_combined.go.
pub(crate) const PROJECTED_COMBINED: &str = "[sig-storage] Projected combined should project all components that \
     make up the projection API [Projection] [NodeConformance] [Conformance]";

/// Upstream projected_combined.go: one projected volume shows a Secret key, a ConfigMap key,
/// the pod name and the container's CPU limit.
async fn projected_combined(f: &Framework) -> CaseResult {
    f.create(&config_map(
        "configmap-projected-all-test-volume",
        &[("configmap-data", "configmap-value-1")],
    ))
    .await?;
    f.create(&secret(
        "secret-projected-all-test-volume",
        &[("secret-data", "secret-value-1")],
    ))
    .await?;
    let mount = mount_path(f, "podinfo");
    let volume = projected_volume(
        "podinfo",
        &[
            Projection::Secret(
                "secret-projected-all-test-volume".into(),
                vec![("secret-data".into(), "secret-data".into())],
            ),
            Projection::ConfigMap(
                "configmap-projected-all-test-volume".into(),
                vec![("configmap-data".into(), "configmap-data".into())],
            ),
            Projection::Downward(vec![
                DownwardItem::field("podname", "metadata.name"),
                DownwardItem::resource("cpu_limit", "projected-all-volume-test", "limits.cpu"),
            ]),
        ],
    );
    let files = ["podname", "cpu_limit", "configmap-data", "secret-data"].map(|n| file_path(f, &mount, n));
    let pod = f.pod("projected-volume-combined").volume(volume).container(
        reader(f, "projected-all-volume-test", &files)
            .mount("podinfo", &mount, false)
            .with(|c: &mut Container| {
                c.resources = Some(ResourceRequirements {
                    limits: Some([("cpu".to_string(), Quantity("500m".into()))].into()),
                    ..Default::default()
                });
            }),
    );
    expect_output(
        f,
        &pod,
        "projected-all-volume-test",
        &["projected-volume-combined", "1", "configmap-value-1", "secret-value-1"],
    )
    .await
}

/// Upstream common/storage/projected_configmap.go "should be consumable from pods in volume".
pub(crate) const PROJECTED_CM: &str =
    "[sig-storage] Projected configMap should be consumable from pods in volume [NodeConformance] [Conformance]";

/// Upstream projected_configmap.go: a ConfigMap projected into a volume shows its keys.
async fn projected_cm(f: &Framework) -> CaseResult {
    f.create(&config_map("projected-configmap-test-volume", &[("data-1", "value-1")]))
        .await?;
    expect_volume_reads(
        f,
        "pod-projected-configmaps",
        "agnhost-container",
        false,
        vec![projected_volume(
            "projected-configmap-volume",
            &[Projection::ConfigMap("projected-configmap-test-volume".into(), vec![])],
        )],
        "data-1",
        &["value-1"],
    )
    .await
}

/// Upstream common/storage/projected_secret.go "should be consumable from pods in volume".
pub(crate) const PROJECTED_SECRET: &str =
    "[sig-storage] Projected secret should be consumable from pods in volume [NodeConformance] [Conformance]";

/// Upstream projected_secret.go: a Secret projected into a volume shows its decoded keys.
async fn projected_secret(f: &Framework) -> CaseResult {
    f.create(&secret("projected-secret-test", &[("data-1", "value-1")]))
        .await?;
    expect_volume_reads(
        f,
        "pod-projected-secrets",
        "projected-secret-volume-test",
        true,
        vec![projected_volume(
            "projected-secret-volume",
            &[Projection::Secret("projected-secret-test".into(), vec![])],
        )],
        "data-1",
        &["value-1"],
    )
    .await
}

/// Upstream common/storage/projected_downwardapi.go "should provide podname only".
pub(crate) const PROJECTED_DOWNWARD_PODNAME: &str =
    "[sig-storage] Projected downwardAPI should provide podname only [NodeConformance] [Conformance]";

/// Upstream projected_downwardapi.go: the projected downward API file `podname` holds the name.
async fn projected_downward_podname(f: &Framework) -> CaseResult {
    expect_volume_reads(
        f,
        "downwardapi-volume-projected-podname",
        "client-container",
        false,
        vec![projected_volume(
            "podinfo",
            &[Projection::Downward(vec![DownwardItem::field(
                "podname",
                "metadata.name",
            )])],
        )],
        "podname",
        &["downwardapi-volume-projected-podname"],
    )
    .await
}
