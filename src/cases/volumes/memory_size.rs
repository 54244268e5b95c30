//! Upstream common/storage/empty_dir.go "pod should support memory backed volumes of specified
//! size": an emptyDir of medium Memory with `sizeLimit: 10Mi` is a tmpfs of exactly that size,
//! read with `df` in the container.
//!
//! Windows has no tmpfs: the kubelet turns a Memory emptyDir into a plain directory
//! (mount_windows.go), so the size limit cannot be read there and the case skips on Windows
//! nodes with that reason, as the `/etc/hosts` case skips where the kubelet does not manage it.

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Volume};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::fail;
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_node};
use crate::os::Os;

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(EMPTYDIR_MEMORY_SIZE, Kind::Adapted, emptydir_memory_size)]
}

/// Upstream empty_dir.go "pod should support memory backed volumes of specified size".
pub(crate) const EMPTYDIR_MEMORY_SIZE: &str =
    "[sig-storage] EmptyDir volumes pod should support memory backed volumes of specified size [NodeConformance]";

/// Where upstream mounts the volume.
const MOUNT: &str = "/usr/share/volumeshare";

/// `sizeLimit: 10Mi` is 10240 1K-blocks in `df`.
const EXPECTED_BLOCKS: &str = "10240";

async fn emptydir_memory_size(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.skip_unless(
        os == Os::Linux,
        format!(
            "an emptyDir of medium Memory is a plain directory on {} nodes (no tmpfs, so no size limit to read)",
            os.title()
        ),
    )?;
    let volume = Volume {
        name: "shared-data".into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: Some(Quantity("10Mi".into())),
        }),
        ..Default::default()
    };
    let name = format!("pod-size-memory-volume-{}", uuid::Uuid::new_v4());
    let pod = f
        .pod(&name)
        .volume(volume)
        .container(
            ContainerBuilder::new("busybox-main-container", "busybox")
                .command(os.shell(os.idle_script()))
                .mount("shared-data", MOUNT, false),
        )
        .grace_period(0)
        .restart_policy("Never");
    let running = f.create_pod_ready(&pod).await?;
    f.step("reading the empty dir size");
    let script = format!("df | grep {MOUNT} | awk '{{print $2}}'");
    let out = f.exec_shell(&name, Some("busybox-main-container"), os, &script).await?;
    if out.exit_code == 0 && out.out() == EXPECTED_BLOCKS {
        return Ok(());
    }
    // What the container's whole mount table looked like, to tell a missing tmpfs from a
    // wrongly sized one.
    let table = f
        .exec_shell(&name, Some("busybox-main-container"), os, "df")
        .await
        .map_or_else(|e| format!("(df failed: {e})"), |d| d.out().to_string());
    fail!(
        "`{script}` in pod {name} on node {}: expected {EXPECTED_BLOCKS} (a 10Mi tmpfs), got {:?} (exit {}, stderr {:?}); df showed:\n{table}",
        pod_node(&running),
        out.out(),
        out.exit_code,
        out.stderr
    )
}
