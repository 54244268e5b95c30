//! "Windows subpath cleanup" (upstream test/e2e/windows/subpath_cleanup.go): a Windows pod with
//! many volume mounts, several through `subPath` and nested hostPath mounts, is deleted and
//! goes away. Before the fix for kubernetes/kubernetes#112630, file handles leaked while
//! preparing subPaths kept the pod's emptyDir volumes from being cleaned up, and the pod stayed
//! Terminating.

use std::time::Duration;

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, HostPathVolumeSource, Pod, Volume, VolumeMount};
use kube::api::DeleteParams;

use crate::catalog::{Case, Kind};
use crate::framework::wait::conditions;
use crate::framework::workloads::{
    DownwardItem, Projection, config_map, config_map_volume, downward_volume, empty_dir_volume, projected_volume,
    secret, secret_volume,
};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder};
use crate::os::Os;

/// Upstream It("pod with multiple subPath mounts should terminate cleanly").
pub const TERMINATES: &str =
    "[sig-windows] [Feature:Windows] Windows subpath cleanup pod with multiple subPath mounts should terminate cleanly";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![crate::case!(TERMINATES, Kind::WindowsSpecific, terminates)]
}

/// Upstream's mounts: (volume, mountPath, subPath). The nested hostPath mounts are listed out
/// of order on purpose (a mount that contains one made before it).
const MOUNTS: [(&str, &str, &str); 15] = [
    ("config-volume", r"C:\etc\config\key1", "key1"),
    ("config-volume", r"C:\etc\config\key2", "key2"),
    ("config-volume", r"C:\etc\config\key3", "key3"),
    ("hostpath-outer", r"C:\data", ""),
    ("hostpath-inner", r"C:\data\nested\deep", ""),
    ("hostpath-middle", r"C:\data\nested", ""),
    ("emptydir-1", r"C:\scratch\dir1", ""),
    ("emptydir-2", r"C:\scratch\dir2", ""),
    ("emptydir-memory-1", r"C:\scratch\mem1", ""),
    ("emptydir-memory-2", r"C:\scratch\mem2", ""),
    ("secret-volume", r"C:\etc\secret\secret1", "secret1"),
    ("secret-volume", r"C:\etc\secret\secret2", "secret2"),
    ("projected-volume", r"C:\etc\projected\key1", "key1"),
    ("projected-volume", r"C:\etc\projected\secret1", "secret1"),
    ("downwardapi-volume", r"C:\etc\podinfo\labels", "labels"),
];

/// How long the pod gets to run with every mount set up.
const START_WITHIN: Duration = Duration::from_secs(180);

/// How long the deleted pod may take to go away (upstream's `WaitForPodNotFoundInNamespace`).
const GONE_WITHIN: Duration = Duration::from_secs(300);

fn host_path(name: &str, path: &str) -> Volume {
    Volume {
        name: name.into(),
        host_path: Some(HostPathVolumeSource {
            path: path.into(),
            type_: None,
        }),
        ..Default::default()
    }
}

fn memory_empty_dir(name: &str) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: None,
        }),
        ..Default::default()
    }
}

/// Upstream: the pod runs (every mount set up), is deleted with a 30 s grace period and is
/// gone within five minutes.
async fn terminates(f: &Framework) -> CaseResult {
    f.skip_unless(
        f.target_os() == Os::Windows,
        "subPath cleanup on Windows nodes is checked on a Windows target",
    )?;
    f.require_nodes(Os::Windows, 1).await?;
    f.create(&config_map(
        "subpath-cm",
        &[("key1", "value1"), ("key2", "value2"), ("key3", "value3")],
    ))
    .await?;
    f.create(&secret(
        "subpath-secret",
        &[("secret1", "secretvalue1"), ("secret2", "secretvalue2")],
    ))
    .await?;
    let mut mounts: Vec<VolumeMount> = MOUNTS
        .iter()
        .map(|(volume, path, sub)| VolumeMount {
            name: (*volume).into(),
            mount_path: (*path).into(),
            sub_path: (!sub.is_empty()).then(|| (*sub).to_string()),
            ..Default::default()
        })
        .collect();
    mounts.push(VolumeMount {
        name: "downwardapi-volume".into(),
        mount_path: r"C:\etc\podinfo\name".into(),
        sub_path: Some("name".into()),
        ..Default::default()
    });
    let pod = PodBuilder::new("subpath-cleanup", Os::Windows)
        .restart_policy("Never")
        .container(
            ContainerBuilder::new("test-container", "pause").with(move |c| c.volume_mounts = Some(mounts.clone())),
        )
        .volume(config_map_volume("config-volume", "subpath-cm", &[]))
        .volume(host_path("hostpath-outer", r"C:\var\hostpath\outer"))
        .volume(host_path("hostpath-middle", r"C:\var\hostpath\middle"))
        .volume(host_path("hostpath-inner", r"C:\var\hostpath\inner"))
        .volume(empty_dir_volume("emptydir-1"))
        .volume(empty_dir_volume("emptydir-2"))
        .volume(memory_empty_dir("emptydir-memory-1"))
        .volume(memory_empty_dir("emptydir-memory-2"))
        .volume(secret_volume("secret-volume", "subpath-secret", &[]))
        .volume(projected_volume(
            "projected-volume",
            &[
                Projection::ConfigMap("subpath-cm".into(), Vec::new()),
                Projection::Secret("subpath-secret".into(), Vec::new()),
            ],
        ))
        .volume(downward_volume(
            "downwardapi-volume",
            &[
                DownwardItem::field("labels", "metadata.labels"),
                DownwardItem::field("name", "metadata.name"),
            ],
        ));
    // Bounded below the case timeout, so a mount the node refuses ends in the wait's own
    // message (the pod's last state) rather than the case timing out.
    f.create_pod(&pod).await?;
    let running = f
        .wait_for_within(
            &f.api::<Pod>(),
            pod.name(),
            conditions::is_pod_ready(),
            "to be running and ready with every mount set up",
            START_WITHIN,
        )
        .await?
        .ok_or_else(|| CaseError::failed("pod subpath-cleanup vanished before it was ready"))?;
    f.step("deleting the pod with a 30 s grace period");
    f.delete_pod_and_wait(
        &running,
        &DeleteParams {
            grace_period_seconds: Some(30),
            ..Default::default()
        },
        GONE_WITHIN,
    )
    .await
}
