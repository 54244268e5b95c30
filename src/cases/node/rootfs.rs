//! A container's root filesystem under `readOnlyRootFilesystem` (upstream
//! `test/e2e/common/node/security_context.go`, context "When creating a pod with
//! readOnlyRootFilesystem"): with the field false, a write into the root filesystem works and
//! the run-once pod succeeds.

use k8s_openapi::api::core::v1::SecurityContext;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::fail;
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_node};
use crate::os::Os;

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(WRITABLE_ROOTFS, Kind::Adapted, writable_rootfs)]
}

/// Upstream security_context.go "should run the container with writable rootfs when readOnlyRootFilesystem=false".
pub(crate) const WRITABLE_ROOTFS: &str = "[sig-node] Security Context When creating a pod with readOnlyRootFilesystem \
     should run the container with writable rootfs when readOnlyRootFilesystem=false [NodeConformance] [Conformance]";

/// A busybox container writes `checkfile` into its working directory (on the root filesystem)
/// and must end Succeeded. On Windows the field is left unset: the API refuses
/// `readOnlyRootFilesystem` in a pod with `spec.os.name: windows`, and unset is false.
async fn writable_rootfs(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let name = "busybox-readonly-false";
    let mut container = ContainerBuilder::new(name, "busybox").command(os.shell(&os.write_file("checkfile", "ok")));
    if os == Os::Linux {
        container = container.with(|c| {
            c.security_context = Some(SecurityContext {
                read_only_root_filesystem: Some(false),
                ..Default::default()
            });
        });
    }
    let builder = f.pod(name).restart_policy("Never").container(container);
    let done = f.run_pod_to_completion(&builder).await?;
    let status = done.status.clone().unwrap_or_default();
    let phase = status.phase.unwrap_or_default();
    let why = status
        .container_statuses
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.state.and_then(|s| s.terminated))
        .map(|t| format!("exit {} {}", t.exit_code, t.message.unwrap_or_default()))
        .collect::<Vec<_>>()
        .join("; ");
    if phase != "Succeeded" {
        let logs = match f.logs(name, Some(name)).await {
            Ok(l) => l.trim().to_string(),
            Err(e) => format!("(unreadable: {e})"),
        };
        fail!(
            "pod {name} on node {} writing checkfile into its root filesystem (readOnlyRootFilesystem=false): expected Succeeded, got {phase} ({why}); logs {logs:?}",
            pod_node(&done)
        );
    }
    Ok(())
}
