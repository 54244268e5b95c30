//! hostPath volumes shared by the containers of a pod (upstream `common/storage/host_path.go`):
//! what one container writes into the host directory, another reads, directly ("should
//! support r/w") or from outside the writer's subPath ("should support subPath").
//!
//! Upstream's two agnhost `mounttest` containers race, the reader retrying; here both idle and
//! the case writes through one with exec and then reads through the other, which checks the same
//! sharing without a race. The file name carries the case namespace, so a file an earlier run
//! left in the node's `/tmp` never passes for this run's write.

use k8s_openapi::api::core::v1::{Container, HostPathVolumeSource, Volume};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(HOST_PATH_RW, Kind::Adapted, host_path_rw),
        case!(HOST_PATH_SUBPATH, Kind::Adapted, host_path_subpath),
    ]
}

/// Upstream's volume, mount point and container names.
const VOLUME: &str = "test-volume";
const WRITER: &str = "test-container-1";
const READER: &str = "test-container-2";

/// What upstream's `mounttest --new_file_0644` writes.
const CONTENT: &str = "mount-tester new file";

/// Runs the two-container pod over hostPath `/tmp` (the writer mounting it through
/// `writer_sub_path` when given), writes [`CONTENT`] to `file` under the writer's mount and
/// checks the reader finds it at `read_rel` (relative to its mount of the whole directory).
async fn expect_shared(f: &Framework, writer_sub_path: Option<&str>, file: &str, read_rel: &str) -> CaseResult {
    let os = f.target_os();
    let at = os.join(os.volume_root(), VOLUME);
    let sub = writer_sub_path.map(str::to_string);
    let writer = ContainerBuilder::new(WRITER, "agnhost")
        .args(["pause"])
        .mount(VOLUME, &at, false)
        .with(move |c: &mut Container| {
            for m in c.volume_mounts.iter_mut().flatten() {
                m.sub_path.clone_from(&sub);
            }
        });
    let reader = ContainerBuilder::new(READER, "agnhost")
        .args(["pause"])
        .mount(VOLUME, &at, false);
    let builder = f
        .pod("pod-host-path-test")
        .volume(Volume {
            name: VOLUME.into(),
            host_path: Some(HostPathVolumeSource {
                path: "/tmp".into(),
                type_: None,
            }),
            ..Default::default()
        })
        .container(writer)
        .container(reader);
    let pod = f.create_pod_ready(&builder).await?;
    let node = pod_node(&pod);
    let written = os.join(&at, file);
    let wrote = f
        .exec_shell(builder.name(), Some(WRITER), os, &format!("echo {CONTENT}> {written}"))
        .await?;
    ensure!(
        wrote.exit_code == 0,
        "pod {} on node {node}: container {WRITER} expected to write {written} in hostPath /tmp{}, got exit {}: {}",
        builder.name(),
        writer_sub_path.map(|s| format!(" (subPath {s})")).unwrap_or_default(),
        wrote.exit_code,
        wrote.out()
    );
    let read_at = read_rel.split('/').fold(at.clone(), |dir, part| os.join(&dir, part));
    let read = f
        .exec_shell(builder.name(), Some(READER), os, &os.cat(&read_at))
        .await?;
    ensure!(
        read.exit_code == 0 && read.out().trim() == CONTENT,
        "pod {} on node {node}: container {READER} expected {read_at} to read {CONTENT:?} (written by {WRITER}), got exit {} and {:?}",
        builder.name(),
        read.exit_code,
        read.out().trim()
    );
    Ok(())
}

/// Upstream host_path.go "should support r/w".
pub(crate) const HOST_PATH_RW: &str = "[sig-storage] HostPath should support r/w [NodeConformance]";

/// One container writes a file into the host directory; the other reads it.
async fn host_path_rw(f: &Framework) -> CaseResult {
    let file = format!("test-file-{}", f.ns());
    expect_shared(f, None, &file, &file).await
}

/// Upstream host_path.go "should support subPath".
pub(crate) const HOST_PATH_SUBPATH: &str = "[sig-storage] HostPath should support subPath [NodeConformance]";

/// The writer mounts `sub-path` of the host directory; the file shows in that subdirectory for
/// the reader, which mounts the whole directory.
async fn host_path_subpath(f: &Framework) -> CaseResult {
    let file = format!("test-file-{}", f.ns());
    expect_shared(f, Some("sub-path"), &file, &format!("sub-path/{file}")).await
}
