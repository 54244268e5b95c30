//! `[sig-windows] [Feature:Windows] GracefulNodeShutdown` (upstream test/e2e/windows/
//! node_shutdown.go): a Windows node shut down from the host (a HostProcess pod running
//! `shutdown.exe /r`) lets its kubelet's shutdown manager stop the pods first, the
//! non-critical ones before the critical ones (`system-node-critical`, or a static pod), each
//! ending Failed with reason `Terminated` and message "Pod was terminated in response to
//! imminent node shutdown.", never Failed while still Ready.
//!
//! The case needs a Windows node running HostProcess containers whose kubelet runs the
//! shutdown manager: the kubelet feature gate `WindowsGracefulNodeShutdown` (alpha in 1.32
//! and 1.33) and `shutdownGracePeriod` set, as its `/configz` reports; it skips naming what is
//! missing otherwise.
//!
//! Departures from upstream: the shutdown is scheduled 5 s ahead (`/t 5`), not 60 s; the
//! periods the checks allow come from the node's own `shutdownGracePeriod` and
//! `shutdownGracePeriodCriticalPods` rather than upstream's job settings (20 s / 10 s); the
//! "ready to start" step checks the `PodReadyToStartContainers` condition by name and each
//! pod's `DisruptionTarget` condition too; and the case waits for the node to come back
//! (Ready, with a new boot ID) so the next serial case finds it usable.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use serde::Deserialize;

use super::hostprocess::{SYSTEM, expect_succeeded, host_process_node, host_process_pod};
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder};
use crate::os::Os;
use crate::{ensure, fail};

/// Upstream node_shutdown.go It("should be able to gracefully shutdown pods with various grace periods").
pub const GRACE_PERIODS: &str = "[sig-windows] [Feature:Windows] GracefulNodeShutdown [Serial] [Disruptive] [Slow] should be able to gracefully shutdown pods with various grace periods";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![crate::case!(GRACE_PERIODS, Kind::WindowsSpecific, grace_periods)]
}

/// The kubelet gate of the Windows shutdown manager.
const GATE: &str = "WindowsGracefulNodeShutdown";
/// Upstream `nodeShutdownReason` and `nodeShutdownMessage`.
const SHUTDOWN_REASON: &str = "Terminated";
const SHUTDOWN_MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";
/// How far ahead the HostProcess pod schedules the restart (`shutdown.exe /t`).
const SHUTDOWN_DELAY: Duration = Duration::from_secs(5);
/// Slack on every wait for the kubelet's status updates (upstream `podStatusUpdateTimeout`
/// is 90 s; ours is tighter and starts from the node's own periods).
const STATUS_SLACK: Duration = Duration::from_secs(45);
/// How long a rebooting node gets to come back.
const REBOOT_WITHIN: Duration = Duration::from_secs(180);

/// The part of `/configz` this case reads.
#[derive(Debug, Default, Deserialize)]
struct Configz {
    #[serde(default)]
    kubeletconfig: ShutdownConfig,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ShutdownConfig {
    #[serde(default)]
    shutdown_grace_period: Option<String>,
    #[serde(default)]
    shutdown_grace_period_critical_pods: Option<String>,
    #[serde(default)]
    feature_gates: BTreeMap<String, bool>,
}

/// A Go duration of whole seconds as configz prints it ("20s", "1m30s", "0s").
fn go_duration(s: &str) -> Option<Duration> {
    let mut total = 0u64;
    let mut num = String::new();
    for ch in s.chars() {
        if ch.is_ascii_digit() {
            num.push(ch);
            continue;
        }
        let n: u64 = num.parse().ok()?;
        num.clear();
        total += match ch {
            'h' => n * 3600,
            'm' => n * 60,
            's' => n,
            _ => return None,
        };
    }
    num.is_empty().then_some(Duration::from_secs(total))
}

/// The node's shutdown periods (total, critical pods); skips when its kubelet does not run
/// the Windows shutdown manager.
async fn shutdown_periods(f: &Framework, node: &str) -> Result<(Duration, Duration), CaseError> {
    let text = f.node_proxy_get(node, "configz").await?;
    let cfg: Configz = serde_json::from_str(&text)
        .map_err(|e| CaseError::failed(format!("node {node}: /configz is not a kubelet configuration ({e})")))?;
    let k = cfg.kubeletconfig;
    let parse = |v: &Option<String>| v.as_deref().map_or(Some(Duration::ZERO), go_duration);
    let (Some(total), Some(critical)) = (
        parse(&k.shutdown_grace_period),
        parse(&k.shutdown_grace_period_critical_pods),
    ) else {
        fail!(
            "node {node}: /configz has unparseable shutdown periods {:?} / {:?}",
            k.shutdown_grace_period,
            k.shutdown_grace_period_critical_pods
        );
    };
    let gate = k.feature_gates.get(GATE).copied().unwrap_or(false);
    if !gate || total.is_zero() {
        return Err(f.skip(format!(
            "needs a Windows kubelet running the graceful node shutdown manager: feature gate {GATE}=true \
             and shutdownGracePeriod set; node {node} has {GATE}={gate}, shutdownGracePeriod {}s",
            total.as_secs()
        )));
    }
    Ok((total, critical))
}

/// Upstream `getGracePeriodOverrideTestPod`: agnhost netexec ignoring SIGTERM for a long
/// time, with `grace` seconds to stop; critical pods are `system-node-critical` and carry the
/// static-pod annotation, as upstream's do.
fn grace_pod(name: &str, node: &str, grace: i64, critical: bool) -> PodBuilder {
    let mut b = PodBuilder::new(name, Os::Windows)
        .on_node(node)
        .grace_period(grace)
        .label("shutdown-test", "period")
        .container(ContainerBuilder::new(name, "agnhost").command(["/agnhost", "netexec", "--delay-shutdown", "9999"]));
    if critical {
        b = b
            .annotation("kubernetes.io/config.source", "file")
            .edit_spec(|s| s.priority_class_name = Some("system-node-critical".into()));
    }
    b
}

fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}

/// Upstream `isPodShutdown`: Failed, reason Terminated, the shutdown message, ContainersReady
/// False.
fn is_shut_down(pod: &Pod) -> bool {
    let s = pod.status.clone().unwrap_or_default();
    s.phase.as_deref() == Some("Failed")
        && s.reason.as_deref() == Some(SHUTDOWN_REASON)
        && s.message.as_deref() == Some(SHUTDOWN_MESSAGE)
        && condition(pod, "ContainersReady") == Some("False")
}

fn describe(pod: &Pod) -> String {
    let s = pod.status.clone().unwrap_or_default();
    let conditions: Vec<String> = s
        .conditions
        .iter()
        .flatten()
        .map(|c| format!("{}={}", c.type_, c.status))
        .collect();
    format!(
        "{}: phase {}, reason {:?}, message {:?}, conditions [{}]",
        pod.metadata.name.clone().unwrap_or_default(),
        s.phase.unwrap_or_default(),
        s.reason.unwrap_or_default(),
        s.message.unwrap_or_default(),
        conditions.join(", ")
    )
}

/// Polls the case's "period" pods every second until `check` accepts them all, at most
/// `within`; fails with the pods as last seen and `what`.
async fn until_pods(
    f: &Framework,
    node: &str,
    within: Duration,
    what: &str,
    check: impl Fn(&Pod) -> Result<(), String>,
) -> Result<Vec<Pod>, CaseError> {
    let lp = ListParams::default()
        .fields(&format!("spec.nodeName={node}"))
        .labels("shutdown-test=period");
    let until = Instant::now() + within.min(f.remaining());
    // Upstream's Eventually polls the list every second; so does this.
    let mut pace = tokio::time::interval(Duration::from_secs(1));
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        pace.tick().await;
        let why = match f.api::<Pod>().list(&lp).await {
            Ok(list) if list.items.len() != 4 => format!("{} period pods listed, expected 4", list.items.len()),
            Ok(list) => match list.items.iter().map(&check).find_map(Result::err) {
                None => return Ok(list.items),
                Some(why) => {
                    let seen: Vec<String> = list.items.iter().map(describe).collect();
                    format!("{why}; pods: {}", seen.join("; "))
                }
            },
            Err(e) => format!("listing pods: {e}"),
        };
        if Instant::now() >= until {
            fail!("{what}: not within {} s: {why}", within.as_secs());
        }
    }
}

fn critical(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.priority_class_name.as_deref()) == Some("system-node-critical")
}

/// Records every pod seen Failed while its Ready condition is True (upstream's watch for
/// kubernetes/kubernetes#108594) until dropped.
struct FailedReadyWatch {
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FailedReadyWatch {
    fn start(f: &Framework) -> FailedReadyWatch {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut stream = watcher::watcher(f.api::<Pod>(), watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        let s = seen.clone();
        let task = tokio::spawn(async move {
            while let Some(ev) = stream.next().await {
                let Ok(pod) = ev else { continue };
                let failed = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed");
                if failed && condition(&pod, "Ready") == Some("True") {
                    s.lock().expect("watch lock").push(describe(&pod));
                }
            }
        });
        FailedReadyWatch { seen, task }
    }

    fn check(&self) -> CaseResult {
        let seen = self.seen.lock().expect("watch lock");
        ensure!(
            seen.is_empty(),
            "pods were reported Failed while Ready (kubernetes#108594): {}",
            seen.join("; ")
        );
        Ok(())
    }
}

impl Drop for FailedReadyWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn boot_id(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.clone())
        .unwrap_or_default()
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits until `node` is Ready with a boot ID other than `before`: it rebooted and is back.
pub(crate) async fn wait_rebooted(
    f: &Framework,
    node: &str,
    before: &str,
    within: Duration,
) -> Result<Node, CaseError> {
    let before = before.to_string();
    let back = f
        .wait_for_within(
            &f.api_all::<Node>(),
            node,
            move |n: Option<&Node>| n.is_some_and(|n| node_ready(n) && !boot_id(n).is_empty() && boot_id(n) != before),
            "to come back Ready with a new boot ID",
            within,
        )
        .await?;
    back.ok_or_else(|| CaseError::failed(format!("node {node} vanished while rebooting")))
}

/// The node's current boot ID; fails when the kubelet reports none (a reboot could not be
/// told).
pub(crate) async fn current_boot_id(f: &Framework, node: &str) -> Result<String, CaseError> {
    let id = boot_id(&f.api_all::<Node>().get(node).await?);
    ensure!(
        !id.is_empty(),
        "node {node} reports no boot ID (status.nodeInfo.bootID is empty): its reboot cannot be told"
    );
    Ok(id)
}

/// A HostProcess pod on `node` restarting the machine `delay` from now; requires it
/// Succeeded.
pub(crate) async fn schedule_restart(f: &Framework, name: &str, node: &str, delay: Duration) -> CaseResult {
    let script = format!("shutdown.exe -r -t {}", delay.as_secs());
    let pod = host_process_pod(name, node, SYSTEM).container(
        ContainerBuilder::new("reboot-computer-test", "agnhost").command([
            "powershell.exe",
            "-Command",
            script.as_str(),
        ]),
    );
    expect_succeeded(f, &pod, "restarting the node").await.map(|_| ())
}

async fn grace_periods(f: &Framework) -> CaseResult {
    let node = host_process_node(f, (1, 6)).await?;
    let (total, critical_period) = shutdown_periods(f, &node.name).await?;
    let node = node.name;
    f.property("shutdownGracePeriod", format!("{}s", total.as_secs()));
    f.property(
        "shutdownGracePeriodCriticalPods",
        format!("{}s", critical_period.as_secs()),
    );
    let pods = [
        ("period-20", 20, false),
        ("period-25", 25, false),
        ("period-critical-5", 5, true),
        ("period-critical-10", 10, true),
    ];
    for (name, grace, crit) in pods {
        f.create_pod(&grace_pod(name, &node, grace, crit)).await?;
    }
    for (name, _, _) in pods {
        f.wait_pod_ready(name).await?;
    }
    let watch = FailedReadyWatch::start(f);
    // Upstream's delay pod: a critical pod that keeps the node busy through the shutdown.
    let delay = grace_pod("delay-shutdown-20", &node, 20, true).label("shutdown-test", "delay");
    f.create_pod_ready(&delay).await?;
    let boot_before = current_boot_id(f, &node).await?;

    f.step("emitting the shutdown signal from a HostProcess pod");
    schedule_restart(f, "reboot-host-test-pod", &node, SHUTDOWN_DELAY).await?;

    f.step("verifying that the non-critical pods are shut down and the critical ones are not yet");
    let first = SHUTDOWN_DELAY + total.saturating_sub(critical_period) + STATUS_SLACK;
    until_pods(f, &node, first, "non-critical pods shut down first", |p| {
        match (critical(p), is_shut_down(p)) {
            (true, true) => Err(format!(
                "critical pod {} was shut down with the non-critical ones",
                describe(p)
            )),
            (false, false) => Err(format!("non-critical pod {} is not shut down", describe(p))),
            _ => Ok(()),
        }
    })
    .await?;

    f.step("verifying that all pods are shut down");
    until_pods(f, &node, critical_period + STATUS_SLACK, "all pods shut down", |p| {
        if is_shut_down(p) {
            Ok(())
        } else {
            Err(format!("pod {} is not shut down", describe(p)))
        }
    })
    .await?;

    f.step("verifying that every pod's PodReadyToStartContainers condition is False and DisruptionTarget True");
    until_pods(f, &node, STATUS_SLACK, "pods marked after termination", |p| {
        if condition(p, "PodReadyToStartContainers") != Some("False") {
            Err(format!(
                "pod {} still has PodReadyToStartContainers not False",
                describe(p)
            ))
        } else if condition(p, "DisruptionTarget") != Some("True") {
            Err(format!("pod {} has no DisruptionTarget=True condition", describe(p)))
        } else {
            Ok(())
        }
    })
    .await?;
    watch.check()?;

    f.step("waiting for the node to come back from its restart");
    wait_rebooted(f, &node, &boot_before, REBOOT_WITHIN).await?;
    watch.check()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_of_configz() {
        assert_eq!(go_duration("20s"), Some(Duration::from_secs(20)));
        assert_eq!(go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(go_duration("0s"), Some(Duration::ZERO));
        assert_eq!(go_duration("10"), None);
        assert_eq!(go_duration("1.5s"), None);
    }
}
