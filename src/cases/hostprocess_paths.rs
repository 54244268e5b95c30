//! `[sig-windows] [Feature:WindowsHostProcessContainers] HostProcess containers container
//! command path validation` (upstream test/e2e/windows/host_process.go): the spellings of a
//! HostProcess container's command, arguments and working directory that containerd 1.6
//! resolves, each run as a container that must exit 0. The case is valid for containerd 1.6
//! only (1.7 changed how the process is started), so, as upstream, it skips where the runtime
//! is not containerd or is 1.7 or later.
//!
//! Departure from upstream, for heterogeneous clusters: upstream checks the first Windows node
//! and schedules by `kubernetes.io/os`; ours picks a Windows node running containerd 1.6 and
//! pins the pods to it, so a cluster mixing 1.6 and 1.7 nodes runs the case on the 1.6 one.

use crate::catalog::{Case, Kind};
use crate::cluster::NodeInfo;
use crate::fail;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};
use crate::os::Os;

use super::hostprocess::{busybox, containerd_version, host_process_pod, wait_or_sandbox_failure};

/// Upstream It("container command path validation").
pub const COMMAND_PATHS: &str =
    "[sig-windows] [Feature:WindowsHostProcessContainers] HostProcess containers container command path validation";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![crate::case!(COMMAND_PATHS, Kind::WindowsSpecific, command_paths)]
}

/// Upstream's `User_NTAuthorityLocalService`, the account these pods run as.
const LOCAL_SERVICE: &str = "NT AUTHORITY\\Local Service";

/// One container of upstream's table: command, args, working directory.
type Spelling = (&'static [&'static str], &'static [&'static str], &'static str);

/// Upstream's batches, one pod each, in upstream's order.
const BATCHES: &[&[Spelling]] = &[
    &[
        (&["cmd.exe", "/c", "ver"], &[], ""),
        (&["System32\\cmd.exe", "/c", "ver"], &[], "c:\\Windows"),
        (&["System32\\cmd.exe", "/c", "ver"], &[], "c:\\Windows\\"),
        (&["%CONTAINER_SANDBOX_MOUNT_POINT%\\bin\\uname.exe", "-o"], &[], ""),
    ],
    &[
        (&["%CONTAINER_SANDBOX_MOUNT_POINT%/bin/uname.exe", "-o"], &[], ""),
        (&["%CONTAINER_SANDBOX_MOUNT_POINT%\\bin/uname.exe", "-o"], &[], ""),
        (&["bin/uname.exe", "-o"], &[], ""),
        (&["bin/uname.exe", "-o"], &[], "%CONTAINER_SANDBOX_MOUNT_POINT%"),
    ],
    &[
        (&["bin\\uname.exe", "-o"], &[], "%CONTAINER_SANDBOX_MOUNT_POINT%"),
        (&["uname.exe", "-o"], &[], "%CONTAINER_SANDBOX_MOUNT_POINT%/bin"),
        (&["uname.exe", "-o"], &[], "%CONTAINER_SANDBOX_MOUNT_POINT%/bin/"),
        (&["uname.exe", "-o"], &[], "%CONTAINER_SANDBOX_MOUNT_POINT%\\bin\\"),
    ],
    &[
        (&["powershell", "cmd.exe", "/ver"], &[], ""),
        (&["powershell", "c:/Windows/System32/cmd.exe", "/c", "ver"], &[], ""),
        (&["powershell", "c:\\Windows\\System32/cmd.exe", "/c", "ver"], &[], ""),
        (
            &["powershell", "%CONTAINER_SANDBOX_MOUNT_POINT%\\bin\\uname.exe", "-o"],
            &[],
            "",
        ),
    ],
    &[
        (
            &["powershell", "$env:CONTAINER_SANDBOX_MOUNT_POINT\\bin\\uname.exe", "-o"],
            &[],
            "",
        ),
        (
            &["powershell", "%CONTAINER_SANDBOX_MOUNT_POINT%/bin/uname.exe", "-o"],
            &[],
            "",
        ),
        (
            &["powershell", "$env:CONTAINER_SANDBOX_MOUNT_POINT/bin/uname.exe", "-o"],
            &[],
            "",
        ),
        (
            &["powershell", "bin/uname.exe", "-o"],
            &[],
            "%CONTAINER_SANDBOX_MOUNT_POINT%",
        ),
    ],
    &[
        (
            &["powershell", "bin/uname.exe", "-o"],
            &[],
            "$env:CONTAINER_SANDBOX_MOUNT_POINT",
        ),
        (
            &["powershell", "bin\\uname.exe", "-o"],
            &[],
            "$env:CONTAINER_SANDBOX_MOUNT_POINT",
        ),
        (
            &["powershell", ".\\uname.exe", "-o"],
            &[],
            "%CONTAINER_SANDBOX_MOUNT_POINT%/bin",
        ),
        (
            &["powershell", "./uname.exe", "-o"],
            &[],
            "%CONTAINER_SANDBOX_MOUNT_POINT%/bin",
        ),
    ],
    &[
        (
            &["powershell", "./uname.exe", "-o"],
            &[],
            "$env:CONTAINER_SANDBOX_MOUNT_POINT\\bin\\",
        ),
        (&["%CONTAINER_SANDBOX_MOUNT_POINT%\\bin\\uname.exe"], &["-o"], ""),
        (&["bin\\uname.exe"], &["-o"], "%CONTAINER_SANDBOX_MOUNT_POINT%"),
        (&["uname.exe"], &["-o"], "%CONTAINER_SANDBOX_MOUNT_POINT%\\bin"),
    ],
    &[
        (
            &["cmd.exe"],
            &["/c", "dir", "%CONTAINER_SANDBOX_MOUNT_POINT%\\bin\\uname.exe"],
            "",
        ),
        (
            &["cmd.exe"],
            &["/c", "dir", "bin\\uname.exe"],
            "%CONTAINER_SANDBOX_MOUNT_POINT%",
        ),
        (
            &["powershell"],
            &[
                "Get-ChildItem",
                "-Path",
                "$env:CONTAINER_SANDBOX_MOUNT_POINT\\bin\\uname.exe",
            ],
            "",
        ),
        (
            &["powershell"],
            &["Get-ChildItem", "-Path", "bin\\uname.exe"],
            "$env:CONTAINER_SANDBOX_MOUNT_POINT",
        ),
    ],
    &[(
        &["powershell"],
        &["Get-ChildItem", "-Path", "uname.exe"],
        "$env:CONTAINER_SANDBOX_MOUNT_POINT/bin",
    )],
];

/// A Windows node running containerd 1.6, or upstream's skip: "container runtime is not
/// containerd" / "container runtime is >= 1.7.0" (with what each Windows node runs).
async fn containerd_1_6_node(f: &Framework) -> Result<NodeInfo, CaseError> {
    f.skip_unless(
        f.target_os() == Os::Windows,
        "HostProcess containers run on Windows nodes only",
    )?;
    let nodes = f.require_nodes(Os::Windows, 1).await?;
    let seen: Vec<String> = nodes
        .iter()
        .map(|n| format!("{} {}", n.name, n.container_runtime))
        .collect();
    let versions: Vec<Option<(u32, u32)>> = nodes.iter().map(|n| containerd_version(&n.container_runtime)).collect();
    if let Some(i) = versions.iter().position(|v| *v == Some((1, 6))) {
        return Ok(nodes[i].clone());
    }
    let why = if versions.iter().all(Option::is_none) {
        "container runtime is not containerd"
    } else {
        "container runtime is >= 1.7.0"
    };
    Err(f.skip(format!(
        "{why} (Windows nodes: {}); these command spellings are valid for containerd 1.6 only, whose job containers resolve the command line and working directory against the image's mount point",
        seen.join(", ")
    )))
}

/// Upstream: each batch is one pod of HostProcess containers (`Local Service`, hostNetwork),
/// run to its end one after the other; every pod must end Succeeded.
async fn command_paths(f: &Framework) -> CaseResult {
    let node = containerd_1_6_node(f).await?;
    for (pod_index, batch) in BATCHES.iter().enumerate() {
        let pod_name = format!("host-process-command-{pod_index}");
        let mut pod = host_process_pod(&pod_name, &node.name, LOCAL_SERVICE);
        for (container_index, (command, args, working_dir)) in batch.iter().enumerate() {
            let name = format!("host-process-command-{pod_index}-{container_index}");
            f.step(format!(
                "Adding a container '{name}' to pod '{pod_name}' with command: {}, args: {}, workingDir: {working_dir}",
                command.join(" "),
                args.join(" ")
            ));
            let mut c: ContainerBuilder = busybox(&name, command);
            if !args.is_empty() {
                c = c.args(args.iter().copied());
            }
            if !working_dir.is_empty() {
                let wd = working_dir.to_string();
                c = c.with(move |c| c.working_dir = Some(wd.clone()));
            }
            pod = pod.container(c);
        }
        f.step(format!("Waiting for pod '{pod_name}' to run"));
        let done = wait_or_sandbox_failure(f, &pod_name, f.run_pod_to_completion(&pod)).await?;
        let phase = done.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if phase != "Succeeded" {
            let events: Vec<String> = f
                .pod_events(&pod_name)
                .await?
                .iter()
                .map(crate::framework::services::describe_event)
                .collect();
            fail!(
                "Pod '{pod_name}' did failed: phase {phase}, expected Succeeded, on node {} ({}); containers: {}; events: {}",
                node.name,
                node.container_runtime,
                super::hostprocess::container_states(&done),
                events.join(" | ")
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_upstreams_nine_batches_of_thirty_three_spellings() {
        assert_eq!(BATCHES.len(), 9);
        assert_eq!(BATCHES.iter().map(|b| b.len()).sum::<usize>(), 33);
        assert!(COMMAND_PATHS.ends_with("HostProcess containers container command path validation"));
    }
}
