//! `[sig-windows] [Feature:Windows] ... RebootHost containers` (upstream test/e2e/windows/
//! reboot_node.go): a HostProcess pod restarts its Windows node with `shutdown.exe /r`; the
//! node comes back, the Windows pod on it is restarted once (its restart count goes up by
//! one), runs again, and a Linux pod reaches it again.
//!
//! Departures from upstream: the restart is scheduled 5 s ahead (`/t 5`, upstream 30 s); the
//! reboot is told by the node's `status.nodeInfo.bootID` changing (the kubelet reads it from
//! the machine) instead of a second HostProcess pod comparing WMI's `LastBootUpTime` with a
//! value stashed in a machine environment variable; the waits end on that evidence instead of
//! polling every 30 s for up to 10 minutes; the Windows pod serves netexec (upstream
//! agnhost `test-webserver`); and the checks of connectivity to the internet (8.8.8.8:53 from
//! Linux, www.google.com from Windows) are left to the hybrid network cases, which dial
//! `--external-endpoint`: nothing outside the cluster is assumed reachable here.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::hostprocess::host_process_node;
use super::node_shutdown::{current_boot_id, schedule_restart, wait_rebooted};
use crate::catalog::{Case, Kind};
use crate::framework::netexec::{HTTP_PORT, netexec_pod};
use crate::framework::{CaseError, CaseResult, Framework, Protocol, pod_ip};
use crate::os::Os;
use crate::{ensure, fail};

/// Upstream reboot_node.go It("should run as a reboot process on the host/node").
pub const REBOOT: &str = "[sig-windows] [Feature:Windows] [Excluded:WindowsDocker] [MinimumKubeletVersion:1.22] RebootHost containers [Serial] [Disruptive] [Slow] should run as a reboot process on the host/node";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![crate::case!(REBOOT, Kind::WindowsSpecific, reboot).hybrid()]
}

/// How far ahead the HostProcess pod schedules the restart.
const RESTART_DELAY: Duration = Duration::from_secs(5);
/// How long the node gets to restart and come back.
const REBOOT_WITHIN: Duration = Duration::from_secs(240);
/// How long the Windows pod gets to run again after the node is back.
const RESTART_WITHIN: Duration = Duration::from_secs(120);

fn restart_count(pod: &Pod, container: &str) -> Option<i32> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == container)
        .map(|c| c.restart_count)
}

fn running_ready(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.phase.as_deref() == Some("Running")
            && s.conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// From the Linux pod, dials the Windows pod's netexec and expects its hostname.
async fn linux_reaches(f: &Framework, client: &str, target: &Pod, hostname: &str, when: &str) -> CaseResult {
    let ip = pod_ip(target)?;
    let expected = BTreeSet::from([hostname.to_string()]);
    f.dial_expect(client, Protocol::Http, &ip, HTTP_PORT, &expected, 10)
        .await
        .map(|_| ())
        .map_err(|e| e.context(format!("Linux pod {client} to Windows pod {ip} {when}")))
}

async fn reboot(f: &Framework) -> CaseResult {
    let node = host_process_node(f, (1, 6)).await?.name;
    f.require_nodes(Os::Linux, 1).await?;

    f.step("creating a Windows pod and waiting for it to be running");
    let win = f
        .create_pod_ready(&netexec_pod("windows-webserver", Os::Windows).on_node(&node))
        .await?;
    let win_host = f.netexec_hostname("windows-webserver").await?;
    f.step("creating a Linux pod and waiting for it to be running");
    f.create_pod_ready(&netexec_pod("linux-client", Os::Linux)).await?;
    linux_reaches(f, "linux-client", &win, &win_host, "before the reboot").await?;
    let initial = restart_count(&win, "webserver")
        .ok_or_else(|| CaseError::failed("Windows pod windows-webserver reports no status for container webserver"))?;
    let boot_before = current_boot_id(f, &node).await?;

    f.step("scheduling a HostProcess pod that restarts the node");
    schedule_restart(f, "reboot-host-test-pod", &node, RESTART_DELAY).await?;

    f.step("waiting for the Windows node to reboot");
    let back = wait_rebooted(f, &node, &boot_before, REBOOT_WITHIN).await?;
    let boot_after = back
        .status
        .and_then(|s| s.node_info)
        .map(|i| i.boot_id)
        .unwrap_or_default();
    f.property("bootID", format!("{boot_before} -> {boot_after}"));

    f.step("checking that the Windows pod was restarted once and runs again");
    let api = f.api::<Pod>();
    let restarted = f
        .wait_for_within(
            &api,
            "windows-webserver",
            move |p: Option<&Pod>| {
                p.is_some_and(|p| restart_count(p, "webserver").is_some_and(|n| n > initial) && running_ready(p))
            },
            "to be restarted and ready again after the node's reboot",
            RESTART_WITHIN,
        )
        .await?
        .ok_or_else(|| CaseError::failed("Windows pod windows-webserver vanished during the node's reboot"))?;
    let after = restart_count(&restarted, "webserver").unwrap_or(initial);
    ensure!(
        after - initial == 1,
        "Windows pod windows-webserver restarted {} times over one reboot of node {node} (restart count {initial} -> {after}), expected once",
        after - initial
    );
    let phase = restarted
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    if phase != "Running" {
        fail!("Windows pod windows-webserver is {phase} after the reboot, expected Running");
    }
    linux_reaches(f, "linux-client", &restarted, &win_host, "after the reboot").await
}
