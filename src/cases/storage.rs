//! Volume mounts on Windows: read-only emptyDir and hostPath mounts (upstream
//! `test/e2e/windows/volumes.go`); emptyDir `medium: Memory` and subPath mounts, which the
//! Windows node documents list as unsupported but today's kubelet with containerd serves (a
//! plain directory; `subpath_windows.go`); and a host named pipe mapped into a Windows
//! container through a hostPath volume.

use k8s_openapi::api::core::v1::{Container, EmptyDirVolumeSource, HostPathVolumeSource, Volume};

use crate::catalog::{Case, Kind};
use crate::framework::{CaseResult, ContainerBuilder, Framework, PodBuilder};
use crate::os::Os;

/// Upstream volumes.go: read-only emptyDir.
pub const READ_ONLY_EMPTY_DIR: &str = "[sig-windows] [Feature:Windows] Windows volume mounts check volume mount permissions container should have readOnly permissions on emptyDir";
/// Upstream volumes.go: read-only hostPath.
pub const READ_ONLY_HOST_PATH: &str = "[sig-windows] [Feature:Windows] Windows volume mounts check volume mount permissions container should have readOnly permissions on hostMapPath";
/// emptyDir `medium: Memory`: one directory the pod's containers share, on both OSes.
pub const MEMORY_MEDIUM: &str = "[sig-windows] Volume support emptyDir with medium Memory should be one writable directory the pod's containers share";
/// subPath mounts: the container sees only its subdirectory of the volume.
pub const SUB_PATH: &str =
    "[sig-windows] Volume support a subPath mount should show the container only that subdirectory of the volume";

/// A host named pipe mapped into a Windows container by a hostPath volume.
pub const NAMED_PIPE: &str = "[sig-windows] [Feature:Windows] Windows volume mounts named pipe hostPath mounts should make the host's named pipe visible in the container and only there";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(READ_ONLY_EMPTY_DIR, Kind::WindowsSpecific, read_only_empty_dir),
        crate::case!(READ_ONLY_HOST_PATH, Kind::WindowsSpecific, read_only_host_path),
        crate::case!(MEMORY_MEDIUM, Kind::Substitute, memory_medium),
        crate::case!(SUB_PATH, Kind::Substitute, sub_path),
        crate::case!(NAMED_PIPE, Kind::WindowsSpecific, named_pipe),
    ]
}

const VOLUME: &str = "test-volume";
const CONTENT: &str = "windows-volume-test";

/// Upstream `doReadOnlyTest` + `doReadWriteReadOnlyTest`: one container mounts `volume`
/// read-only, another read-write at the same path. A write in the read-only container fails
/// with the OS's read-only error ("Access is denied." on Windows); the read-write container
/// writes a file the read-only container then reads.
async fn read_only(f: &Framework, volume: Volume) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let path = os.join(os.volume_root(), VOLUME);
    let file = os.join(&path, "file.txt");
    let b = PodBuilder::new("pod-volume-permissions", os)
        .volume(volume)
        .container(
            ContainerBuilder::new("test-container", "agnhost")
                .args(["pause"])
                .mount(VOLUME, &path, true),
        )
        .container(
            ContainerBuilder::new("test-container-rw", "agnhost")
                .args(["pause"])
                .mount(VOLUME, &path, false),
        );
    let pod = f.create_pod_ready(&b).await?;
    let node = crate::framework::pod_node(&pod);
    let denied = f
        .exec_shell(
            "pod-volume-permissions",
            Some("test-container"),
            os,
            &os.write_file(&file, CONTENT),
        )
        .await?;
    let said = format!("{}{}", denied.stdout, denied.stderr);
    crate::ensure!(
        denied.exit_code != 0 && said.contains(os.read_only_write_error()),
        "read-only mount {path} in container test-container on node {node}: expected the write to fail with {:?}, got exit {} and {:?}",
        os.read_only_write_error(),
        denied.exit_code,
        said.trim()
    );
    let wrote = f
        .exec_shell(
            "pod-volume-permissions",
            Some("test-container-rw"),
            os,
            &os.write_file(&file, CONTENT),
        )
        .await?;
    crate::ensure!(
        wrote.exit_code == 0,
        "read-write mount {path} in container test-container-rw on node {node}: write failed with exit {}: {}",
        wrote.exit_code,
        wrote.stderr.trim()
    );
    let read = f
        .exec_shell("pod-volume-permissions", Some("test-container"), os, &os.cat(&file))
        .await?;
    crate::ensure!(
        read.exit_code == 0 && read.out().contains(CONTENT),
        "read-only mount {path} in container test-container on node {node}: expected to read {CONTENT:?} written by test-container-rw, got exit {} and {:?}",
        read.exit_code,
        read.out()
    );
    Ok(())
}

/// Upstream volumes.go "container should have readOnly permissions on emptyDir".
async fn read_only_empty_dir(f: &Framework) -> CaseResult {
    read_only(
        f,
        Volume {
            name: VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
    )
    .await
}

/// Upstream volumes.go "container should have readOnly permissions on hostMapPath".
async fn read_only_host_path(f: &Framework) -> CaseResult {
    let os = f.target_os();
    read_only(
        f,
        Volume {
            name: VOLUME.into(),
            host_path: Some(HostPathVolumeSource {
                path: os.join(os.volume_root(), &format!("crossconf-{}", f.ns())),
                type_: Some("DirectoryOrCreate".into()),
            }),
            ..Default::default()
        },
    )
    .await
}

/// A pod of two agnhost containers on `os`, `writer` and `reader`, mounting volume `volume`
/// at `path`, the writer through `writer_sub` when given.
fn two_mounts(name: &str, os: Os, volume: Volume, path: &str, writer_sub: Option<&str>) -> PodBuilder {
    let sub = writer_sub.map(str::to_string);
    PodBuilder::new(name, os)
        .volume(volume)
        .container(
            ContainerBuilder::new("writer", "agnhost")
                .args(["pause"])
                .mount(VOLUME, path, false)
                .with(move |c: &mut Container| {
                    for m in c.volume_mounts.iter_mut().flatten() {
                        m.sub_path = sub.clone();
                    }
                }),
        )
        .container(
            ContainerBuilder::new("reader", "agnhost")
                .args(["pause"])
                .mount(VOLUME, path, false),
        )
}

/// Runs `script` in container `container` of pod `pod` and returns its output, failing on a
/// non-zero exit with what was run and where.
async fn run_in(
    f: &Framework,
    os: Os,
    pod: &str,
    container: &str,
    script: &str,
) -> Result<String, crate::framework::CaseError> {
    let out = f.exec_shell(pod, Some(container), os, script).await?;
    crate::ensure!(
        out.exit_code == 0,
        "pod {pod} container {container}: `{script}` exited {}: {:?}",
        out.exit_code,
        out.out().trim()
    );
    Ok(out.out())
}

/// emptyDir `medium: Memory` gives the pod's containers one shared writable directory on
/// both OSes: tmpfs on Linux, a plain directory on Windows (see [`Os::supports_hugepages`]).
async fn memory_medium(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let path = os.join(os.volume_root(), VOLUME);
    let volume = Volume {
        name: VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let name = "memory-medium";
    let pod = f.create_pod_ready(&two_mounts(name, os, volume, &path, None)).await?;
    let node = crate::framework::pod_node(&pod);
    let file = os.join(&path, "file.txt");
    run_in(f, os, name, "writer", &os.write_file(&file, CONTENT)).await?;
    let read = f.exec_shell(name, Some("reader"), os, &os.cat(&file)).await?;
    crate::ensure!(
        read.exit_code == 0 && read.out().contains(CONTENT),
        "pod {name} on node {node}: expected container reader to read {CONTENT:?} from {file}, written by container writer into the same medium Memory emptyDir, got exit {} and {:?}",
        read.exit_code,
        read.out().trim()
    );
    Ok(())
}

/// A subPath mount shows its container only that subdirectory: what the writer writes at the
/// root of its mount lands in `sub/` of the volume (as the reader, mounting the whole volume,
/// sees), and what the reader writes at the volume's root stays out of the writer's view.
async fn sub_path(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let path = os.join(os.volume_root(), VOLUME);
    let volume = Volume {
        name: VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    };
    let name = "sub-path";
    let pod = f
        .create_pod_ready(&two_mounts(name, os, volume, &path, Some("sub")))
        .await?;
    let node = crate::framework::pod_node(&pod);
    run_in(
        f,
        os,
        name,
        "writer",
        &os.write_file(&os.join(&path, "file.txt"), CONTENT),
    )
    .await?;
    let in_sub = os.join(&os.join(&path, "sub"), "file.txt");
    let read = f.exec_shell(name, Some("reader"), os, &os.cat(&in_sub)).await?;
    crate::ensure!(
        read.exit_code == 0 && read.out().contains(CONTENT),
        "pod {name} on node {node}: expected the file container writer wrote through subPath \"sub\" at {in_sub} in the whole volume, got exit {} and {:?}",
        read.exit_code,
        read.out().trim()
    );
    run_in(
        f,
        os,
        name,
        "reader",
        &os.write_file(&os.join(&path, "top.txt"), CONTENT),
    )
    .await?;
    let listed = run_in(f, os, name, "writer", &os.list_dir(&path)).await?;
    let names: Vec<&str> = listed.split_whitespace().collect();
    crate::ensure!(
        names == ["file.txt"],
        "pod {name} on node {node}: expected container writer's subPath mount {path} to list only file.txt (top.txt is at the volume's root), got {names:?}"
    );
    Ok(())
}

/// The host pipe the named-pipe case maps: containerd's CRI endpoint, present on every Windows
/// node that runs containerd (the only runtime the kubelet supports on Windows today), and the
/// pipe real DaemonSets mount to reach the runtime.
const HOST_PIPE: &str = "containerd-containerd";

/// A hostPath volume `\\.\pipe\containerd-containerd` mounted at the same pipe path in one
/// container of a pod and not in the other: the pipe must be in the first container's pipe
/// namespace (`dir /b \\.\pipe\`) and absent from the second's, which proves it came through
/// the mount rather than being there anyway. Both listings must be non-empty (a container always
/// has its own system pipes), so an empty answer never counts as "absent".
async fn named_pipe(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let Some(list) = os.list_named_pipes() else {
        return Err(f.skip(format!("{} containers have no named pipes", os.title())));
    };
    f.require_nodes(os, 1).await?;
    let pipe_path = format!(r"\\.\pipe\{HOST_PIPE}");
    let b = PodBuilder::new("pod-named-pipe", os)
        .volume(Volume {
            name: "runtime-pipe".into(),
            host_path: Some(HostPathVolumeSource {
                path: pipe_path.clone(),
                type_: None,
            }),
            ..Default::default()
        })
        .container(ContainerBuilder::new("with-pipe", "agnhost").args(["pause"]).mount(
            "runtime-pipe",
            &pipe_path,
            false,
        ))
        .container(ContainerBuilder::new("without-pipe", "agnhost").args(["pause"]));
    let pod = f.create_pod_ready(&b).await?;
    let node = crate::framework::pod_node(&pod);
    let mut seen = Vec::new();
    for container in ["with-pipe", "without-pipe"] {
        let out = f.exec_shell("pod-named-pipe", Some(container), os, list).await?;
        let names: Vec<String> = out
            .out()
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        crate::ensure!(
            out.exit_code == 0 && !names.is_empty(),
            "container {container} of pod-named-pipe on node {node}: expected `{list}` to list the container's named pipes, got exit {} and {:?}",
            out.exit_code,
            format!("{}{}", out.stdout, out.stderr).trim()
        );
        seen.push(names.iter().any(|n| n.eq_ignore_ascii_case(HOST_PIPE)));
        f.step(format!(
            "{container}: {} named pipes: {}",
            names.len(),
            names.join(", ")
        ));
        if container == "with-pipe" {
            crate::ensure!(
                seen[0],
                "host named pipe {pipe_path} mounted through hostPath into container with-pipe on node {node}: expected it among the container's named pipes, saw {names:?}"
            );
        } else {
            crate::ensure!(
                !seen[1],
                "container without-pipe on node {node} mounts no volume, yet lists the host's named pipe {pipe_path} ({names:?}): the pipe is not isolated per container"
            );
        }
    }
    Ok(())
}
