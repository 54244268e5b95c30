//! Termination messages read from a file (upstream `test/e2e/common/node/runtime.go`, "on
//! terminated container"): the kubelet reads `terminationMessagePath` when the container ends
//! and reports its contents as `state.terminated.message`, also for a non-root user at a
//! non-default path, and prefers the file over the logs under `FallbackToLogsOnError`.

use k8s_openapi::api::core::v1::{Container, Pod, SecurityContext, WindowsSecurityContextOptions};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_node};
use crate::os::Os;

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(MESSAGE_PATH, Kind::Adapted, message_path),
        case!(MESSAGE_NON_ROOT, Kind::Adapted, message_non_root),
        case!(MESSAGE_FILE_ON_SUCCESS, Kind::Adapted, message_file_on_success),
    ]
}

/// Upstream's container name.
const CONTAINER: &str = "termination-message-container";

/// The user upstream runs as: root / `ContainerAdministrator`, or a non-root user (UID 1000 on
/// Linux, `ContainerUser` on Windows, where UIDs do not apply).
pub(crate) fn run_as(os: Os, non_root: bool) -> SecurityContext {
    match os {
        Os::Linux => SecurityContext {
            run_as_user: Some(if non_root { 1000 } else { 0 }),
            ..Default::default()
        },
        Os::Windows => SecurityContext {
            windows_options: Some(WindowsSecurityContextOptions {
                run_as_user_name: Some(
                    if non_root {
                        "ContainerUser"
                    } else {
                        "ContainerAdministrator"
                    }
                    .into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        },
    }
}

/// Upstream `matchTerminationMessage`: a run-once busybox container runs `script` under
/// `/bin/sh -c` (busybox brings `sh` on both OSes) with `edit` applied; the pod must end
/// `phase` with termination message `expected`.
async fn expect_message(
    f: &Framework,
    pod: &str,
    script: &str,
    edit: impl Fn(&mut Container) + Clone + Send + Sync + 'static,
    phase: &str,
    expected: &str,
) -> CaseResult {
    let builder = f.pod(pod).restart_policy("Never").container(
        ContainerBuilder::new(CONTAINER, "busybox")
            .command(["/bin/sh", "-c"])
            .args([script])
            .with(edit),
    );
    let done = f.run_pod_to_completion(&builder).await?;
    let seen_phase = done.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    let terminated = terminated(&done);
    let message = terminated.as_ref().and_then(|t| t.message.clone());
    ensure!(
        seen_phase == phase && terminated.is_some() && message.as_deref().unwrap_or("") == expected,
        "pod {pod} on node {}: expected {phase} with termination message {expected:?}, got {seen_phase} with container {CONTAINER} terminated={} message {message:?}",
        pod_node(&done),
        terminated.is_some()
    );
    Ok(())
}

fn terminated(pod: &Pod) -> Option<k8s_openapi::api::core::v1::ContainerStateTerminated> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == CONTAINER)?
        .state
        .as_ref()?
        .terminated
        .clone()
}

/// Upstream runtime.go "should report termination message if TerminationMessagePath is set".
pub(crate) const MESSAGE_PATH: &str = "[sig-node] Container Runtime blackbox test on terminated container should \
     report termination message if TerminationMessagePath is set [NodeConformance]";

/// As root (`ContainerAdministrator`), `DONE` written to `/dev/termination-log` is the message.
async fn message_path(f: &Framework) -> CaseResult {
    let sc = run_as(f.target_os(), false);
    expect_message(
        f,
        "termination-message-path",
        "/bin/echo -n DONE > /dev/termination-log",
        move |c: &mut Container| {
            c.termination_message_path = Some("/dev/termination-log".into());
            c.security_context = Some(sc.clone());
        },
        "Succeeded",
        "DONE",
    )
    .await
}

/// Upstream runtime.go, non-root user and non-default path.
pub(crate) const MESSAGE_NON_ROOT: &str = "[sig-node] Container Runtime blackbox test on terminated container should \
     report termination message if TerminationMessagePath is set as non-root user and at a non-default path \
     [NodeConformance] [Conformance]";

/// As a non-root user, `DONE` written to `/dev/termination-custom-log` is the message.
async fn message_non_root(f: &Framework) -> CaseResult {
    let sc = run_as(f.target_os(), true);
    expect_message(
        f,
        "termination-message-non-root",
        "/bin/echo -n DONE > /dev/termination-custom-log",
        move |c: &mut Container| {
            c.termination_message_path = Some("/dev/termination-custom-log".into());
            c.security_context = Some(sc.clone());
        },
        "Succeeded",
        "DONE",
    )
    .await
}

/// Upstream runtime.go, message from file when the pod succeeds under FallbackToLogsOnError.
pub(crate) const MESSAGE_FILE_ON_SUCCESS: &str = "[sig-node] Container Runtime blackbox test on terminated container \
     should report termination message from file when pod succeeds and TerminationMessagePolicy \
     FallbackToLogsOnError is set [NodeConformance] [Conformance]";

/// The file's `OK`, not the logged `DONE`, is the message.
async fn message_file_on_success(f: &Framework) -> CaseResult {
    expect_message(
        f,
        "termination-message-file",
        "/bin/echo -n OK > /dev/termination-log; /bin/echo DONE; /bin/true",
        |c: &mut Container| {
            c.termination_message_path = Some("/dev/termination-log".into());
            c.termination_message_policy = Some("FallbackToLogsOnError".into());
        },
        "Succeeded",
        "OK",
    )
    .await
}
