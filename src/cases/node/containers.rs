//! The image's ENTRYPOINT and CMD against a container's `command` and `args` (upstream
//! `test/e2e/common/node/containers.go`): the agnhost image's entrypoint is `/agnhost` with CMD
//! `pause`, and agnhost's `entrypoint-tester` prints its whole command line, so each case reads
//! back exactly which parts the runtime used. The image carries a second name `/agnhost-2` for
//! the cases that replace the entrypoint.

use std::time::Duration;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use k8s_openapi::api::core::v1::Pod;

use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(IMAGE_DEFAULTS, Kind::Adapted, image_defaults),
        case!(OVERRIDE_ARGS, Kind::Adapted, override_args),
        case!(OVERRIDE_COMMAND, Kind::Adapted, override_command),
        case!(OVERRIDE_BOTH, Kind::Adapted, override_both),
    ]
}

/// Upstream's container name (`NewAgnhostPod`).
const CONTAINER: &str = "agnhost-container";

/// How long the defaults pod may take to leave Pending.
const START_WITHIN: Duration = Duration::from_secs(45);

/// Upstream polls the logs for 3 s once the pod runs; a little more here for a slow log read.
const LOGS_WITHIN: Duration = Duration::from_secs(10);

/// How container `CONTAINER` of `pod` ended, for a failure message: reason, exit code and the
/// runtime's message (a start error names the executable it could not run).
fn ended(pod: &Pod) -> String {
    let state = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == CONTAINER))
        .and_then(|c| c.state.clone());
    match state.as_ref().and_then(|s| s.terminated.as_ref()) {
        Some(t) => format!(
            "terminated {} (exit {}): {}",
            t.reason.as_deref().unwrap_or("?"),
            t.exit_code,
            t.message.as_deref().unwrap_or("")
        ),
        None => format!("state {state:?}"),
    }
}

/// Runs a run-once agnhost pod (grace period 1 s, as upstream) with `command` (empty: the
/// image's) and `args`, and checks it succeeds printing exactly `expected`.
async fn expect_command_line(f: &Framework, pod: &str, command: &[&str], args: &[&str], expected: &str) -> CaseResult {
    let mut c = ContainerBuilder::new(CONTAINER, "agnhost").args(args.iter().copied());
    if !command.is_empty() {
        c = c.command(command.iter().copied());
    }
    let builder = f.pod(pod).restart_policy("Never").grace_period(1).container(c);
    let done = f.run_pod_to_completion(&builder).await?;
    let phase = done.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    ensure!(
        phase == "Succeeded",
        "pod {pod} on node {} (command {command:?}, args {args:?}) ended {phase}, expected Succeeded printing {expected:?}; container {CONTAINER} {}",
        pod_node(&done),
        ended(&done)
    );
    let out = f.logs(pod, Some(CONTAINER)).await?;
    let printed = out.trim();
    ensure!(
        printed == expected,
        "pod {pod} (command {command:?}, args {args:?}): expected the runtime to run {expected:?}, the container printed {printed:?}"
    );
    Ok(())
}

/// Upstream containers.go "should use the image defaults if command and args are blank".
pub(crate) const IMAGE_DEFAULTS: &str =
    "[sig-node] Containers should use the image defaults if command and args are blank [NodeConformance] [Conformance]";

/// Neither `command` nor `args`: the image's `/agnhost pause` runs and logs `Paused`.
async fn image_defaults(f: &Framework) -> CaseResult {
    let pod = "client-containers-defaults";
    let builder = f
        .pod(pod)
        .restart_policy("Never")
        .grace_period(1)
        .container(ContainerBuilder::new(CONTAINER, "agnhost"));
    f.create_pod(&builder).await?;
    let seen = super::wait_pod(
        f,
        pod,
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|phase| phase != "Pending")
        },
        "running or finished",
        START_WITHIN,
    )
    .await?;
    let phase = seen.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    ensure!(
        phase == "Running",
        "pod {pod} on node {} without command and args: expected the image's `/agnhost pause` to keep it Running, got {phase}; container {CONTAINER} {}",
        pod_node(&seen),
        ended(&seen)
    );
    f.eventually_logs_contain(pod, Some(CONTAINER), "Paused", LOGS_WITHIN)
        .await
        .map(|_| ())
}

/// Upstream containers.go "should be able to override the image's default arguments (container cmd)".
pub(crate) const OVERRIDE_ARGS: &str = "[sig-node] Containers should be able to override the image's default \
     arguments (container cmd) [NodeConformance] [Conformance]";

/// `args` replace the image's CMD and keep its ENTRYPOINT.
async fn override_args(f: &Framework) -> CaseResult {
    expect_command_line(
        f,
        "client-containers-args",
        &[],
        &["entrypoint-tester", "override", "arguments"],
        "[/agnhost entrypoint-tester override arguments]",
    )
    .await
}

/// Upstream containers.go "should be able to override the image's default command (container entrypoint)".
pub(crate) const OVERRIDE_COMMAND: &str = "[sig-node] Containers should be able to override the image's default \
     command (container entrypoint) [NodeConformance] [Conformance]";

/// `command` replaces the image's ENTRYPOINT.
async fn override_command(f: &Framework) -> CaseResult {
    expect_command_line(
        f,
        "client-containers-command",
        &["/agnhost-2"],
        &["entrypoint-tester"],
        "[/agnhost-2 entrypoint-tester]",
    )
    .await
}

/// Upstream containers.go "should be able to override the image's default command and arguments".
pub(crate) const OVERRIDE_BOTH: &str = "[sig-node] Containers should be able to override the image's default \
     command and arguments [NodeConformance] [Conformance]";

/// `command` and `args` replace both ENTRYPOINT and CMD.
async fn override_both(f: &Framework) -> CaseResult {
    expect_command_line(
        f,
        "client-containers-both",
        &["/agnhost-2"],
        &["entrypoint-tester", "override", "arguments"],
        "[/agnhost-2 entrypoint-tester override arguments]",
    )
    .await
}
