//! The machine's power: a shutdown or restart scheduled from the host (`shutdown.exe /r /t N`
//! in a Windows HostProcess container, which runs on the host with its privileges), the
//! kubelet's graceful node shutdown, and the reboot.
//!
//! - **Graceful node shutdown** (Windows: `pkg/kubelet/nodeshutdown/nodeshutdown_manager_windows.go`,
//!   feature gate `WindowsGracefulNodeShutdown`, alpha and off in 1.33): with the gate on and
//!   `shutdownGracePeriod` set, the kubelet's preshutdown handler holds the shutdown while it
//!   posts Ready=False ("node is shutting down") and kills its pods by priority group
//!   (`nodeshutdown_manager.go` `groupByPriority`, `killPods`): the non-critical pods first
//!   within `shutdownGracePeriod - shutdownGracePeriodCriticalPods`, then the critical ones
//!   (priority at least `system-cluster-critical`, 2000000000) within
//!   `shutdownGracePeriodCriticalPods`, each pod with `min(its terminationGracePeriodSeconds,
//!   its group's period)`. A pod killed so is Failed with reason `Terminated` and message "Pod
//!   was terminated in response to imminent node shutdown." and a `DisruptionTarget`
//!   condition (reason `TerminationByKubelet`). The `graceful-shutdown-off` switch models a
//!   kubelet whose shutdown manager never registered (gate off in fact, or the preshutdown
//!   handler refused): the machine goes down with its pods running.
//! - **Reboot**: the kubelet and every container die at once; for [`REBOOT_DOWN`] the node
//!   posts nothing (no status, Lease or pod status); then the machine is up with a new boot ID,
//!   the kubelet records `Rebooted` ("Node NAME has been rebooted, boot id: ID") and restarts
//!   the containers of its pods that their restart policy restarts (a restart each: the
//!   restart count goes up by one), as a kubelet finding its sandboxes gone does.
//! - **Shutdown without restart** (`/s`): the machine stays off; the node is lost as under the
//!   `node-lost` switch.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use tracing::info;

use super::{Kubelet, PodRt};

/// How long a rebooting machine is down before its kubelet runs again.
pub const REBOOT_DOWN: Duration = Duration::from_secs(3);

/// The pod status message of a pod the shutdown manager killed (upstream
/// `nodeShutdownMessage`).
pub const SHUTDOWN_MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";
/// Its status reason (`nodeShutdownReason`).
pub const SHUTDOWN_REASON: &str = "Terminated";
/// The Ready condition's message while the node shuts down (`ShutdownStatus`).
pub const NOT_READY_MESSAGE: &str = "node is shutting down";

/// Priorities from this one up make a pod critical (`scheduling.SystemCriticalPriority`).
const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// The kubelet's graceful node shutdown settings (`KubeletConfiguration`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownConfig {
    /// `shutdownGracePeriod` (zero: not configured).
    pub grace: Duration,
    /// `shutdownGracePeriodCriticalPods`.
    pub critical: Duration,
    /// Whether the kubelet's feature gate for this OS's shutdown manager is on.
    pub gate: bool,
}

impl ShutdownConfig {
    /// Whether the kubelet runs a shutdown manager at all (`nodeshutdown.NewManager`: the gate
    /// on and a grace period set).
    pub fn enabled(&self) -> bool {
        self.gate && !self.grace.is_zero()
    }
}

/// Why a shutdown could not be scheduled or aborted, with the text and code shutdown.exe
/// prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PowerError {
    /// Already scheduled (`ERROR_SHUTDOWN_IN_PROGRESS`).
    #[error("A system shutdown has already been scheduled.(1190)")]
    AlreadyScheduled,
    /// `/a` with nothing scheduled (`ERROR_NO_SHUTDOWN_IN_PROGRESS`).
    #[error("Unable to abort the system shutdown because no shutdown was in progress.(1116)")]
    NothingScheduled,
}

/// Where the machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Up,
    ShuttingDown,
    Down,
}

#[derive(Debug)]
struct State {
    pending: Option<(Instant, bool)>,
    boot_id: String,
    boots: u32,
    shutting_since: Option<jiff::Timestamp>,
}

/// The machine's power, shared by the kubelet and the host's programs.
#[derive(Debug)]
pub struct Power {
    state: Mutex<State>,
    wake: Notify,
    phase: watch::Sender<Phase>,
}

impl Default for Power {
    fn default() -> Self {
        Power {
            state: Mutex::new(State {
                pending: None,
                boot_id: uuid::Uuid::new_v4().to_string(),
                boots: 0,
                shutting_since: None,
            }),
            wake: Notify::new(),
            phase: watch::channel(Phase::Up).0,
        }
    }
}

impl Power {
    /// Schedules a restart (`reboot`) or power-off `delay` from now.
    ///
    /// # Errors
    /// [`PowerError::AlreadyScheduled`] when one is pending or under way.
    pub fn schedule(&self, delay: Duration, reboot: bool) -> Result<(), PowerError> {
        let mut st = self.state.lock().expect("power lock");
        if st.pending.is_some() || *self.phase.borrow() != Phase::Up {
            return Err(PowerError::AlreadyScheduled);
        }
        st.pending = Some((Instant::now() + delay, reboot));
        drop(st);
        self.wake.notify_one();
        Ok(())
    }

    /// Cancels a scheduled shutdown that has not begun.
    ///
    /// # Errors
    /// [`PowerError::NothingScheduled`] when none is pending.
    pub fn abort(&self) -> Result<(), PowerError> {
        let mut st = self.state.lock().expect("power lock");
        st.pending.take().map(|_| ()).ok_or(PowerError::NothingScheduled)?;
        drop(st);
        self.wake.notify_one();
        Ok(())
    }

    /// The machine's current boot ID.
    pub fn boot_id(&self) -> String {
        self.state.lock().expect("power lock").boot_id.clone()
    }

    /// Whether the machine is down (the kubelet posts nothing).
    pub fn is_down(&self) -> bool {
        *self.phase.borrow() == Phase::Down
    }

    /// Since when the kubelet's shutdown manager has been shutting the node down, if it is.
    pub fn shutting_down_since(&self) -> Option<jiff::Timestamp> {
        (*self.phase.borrow() == Phase::ShuttingDown)
            .then(|| self.state.lock().expect("power lock").shutting_since)
            .flatten()
    }

    /// Returns once the machine is not down.
    pub async fn wait_up(&self) {
        let mut rx = self.phase.subscribe();
        let _ = rx.wait_for(|p| *p != Phase::Down).await;
    }

    fn set_phase(&self, p: Phase) {
        if p == Phase::ShuttingDown {
            self.state.lock().expect("power lock").shutting_since = Some(jiff::Timestamp::now());
        }
        self.phase.send_replace(p);
    }

    /// A new boot: a fresh boot ID; returns it.
    fn boot(&self) -> String {
        let mut st = self.state.lock().expect("power lock");
        st.boot_id = uuid::Uuid::new_v4().to_string();
        st.boots += 1;
        st.shutting_since = None;
        st.boot_id.clone()
    }

    /// Waits for the scheduled shutdown's time; returns whether it reboots.
    async fn next_shutdown(&self) -> bool {
        loop {
            let pending = self.state.lock().expect("power lock").pending;
            match pending {
                None => self.wake.notified().await,
                Some((at, reboot)) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at.into()) => {}
                        () = self.wake.notified() => continue,
                    }
                    let mut st = self.state.lock().expect("power lock");
                    if st.pending == Some((at, reboot)) {
                        st.pending = None;
                        return reboot;
                    }
                }
            }
        }
    }
}

/// Whether `pod` is critical to the shutdown manager (`kubelettypes.IsCriticalPod`: a static
/// or mirror pod, or priority at least `system-cluster-critical`).
pub(crate) fn is_critical(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    let source = annotations.and_then(|a| a.get("kubernetes.io/config.source"));
    let mirror = annotations.is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    source.is_some_and(|s| s != "api")
        || mirror
        || pod
            .spec
            .as_ref()
            .and_then(|s| s.priority)
            .is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}

/// The grace a pod gets in its shutdown group: `min(terminationGracePeriodSeconds, period)`.
pub(crate) fn pod_grace(pod: &k8s_openapi::api::core::v1::Pod, period: Duration) -> Duration {
    let own = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30)
        .max(0);
    Duration::from_secs(own as u64).min(period)
}

/// The kubelet's power loop: runs each scheduled shutdown.
pub(super) async fn power_loop(kl: Arc<Kubelet>) {
    loop {
        let reboot = tokio::select! {
            () = kl.cancel.cancelled() => return,
            r = kl.power.next_shutdown() => r,
        };
        info!(node = %kl.cfg.name, reboot, "machine shutting down");
        if kl.cfg.shutdown.enabled() && !kl.net.faults().is_on("graceful-shutdown-off") {
            graceful_shutdown(&kl).await;
        }
        kl.power.set_phase(Phase::Down);
        power_cut(&kl);
        if !reboot {
            info!(node = %kl.cfg.name, "machine powered off: the node is lost");
            kl.health.lost().cancel();
            kl.net.dialer().set_node_lost(&kl.cfg.name, true);
            return;
        }
        tokio::select! {
            () = kl.cancel.cancelled() => return,
            () = tokio::time::sleep(REBOOT_DOWN) => {}
        }
        let boot_id = kl.power.boot();
        kl.power.set_phase(Phase::Up);
        info!(node = %kl.cfg.name, %boot_id, "machine rebooted");
        kl.node_event("Normal", "Starting", "Starting kubelet.");
        kl.node_event(
            "Warning",
            "Rebooted",
            &format!("Node {} has been rebooted, boot id: {boot_id}", kl.cfg.name),
        );
        for rt in live_pods(&kl) {
            rt.touch();
        }
    }
}

/// The pods the kubelet still runs (not deleted, not failed by it).
fn live_pods(kl: &Kubelet) -> Vec<Arc<PodRt>> {
    kl.pods
        .lock()
        .expect("pods lock")
        .values()
        .filter(|rt| !rt.deleting.is_cancelled() && !rt.halted.is_cancelled())
        .cloned()
        .collect()
}

/// The shutdown manager's pass: Ready=False, then each priority group killed in turn.
async fn graceful_shutdown(kl: &Arc<Kubelet>) {
    kl.power.set_phase(Phase::ShuttingDown);
    kl.node_event("Normal", "Shutdown", "Shutdown manager detected shutdown event");
    let cfg = kl.cfg.shutdown;
    let groups = [(false, cfg.grace.saturating_sub(cfg.critical)), (true, cfg.critical)];
    for (critical, period) in groups {
        let pods: Vec<Arc<PodRt>> = live_pods(kl)
            .into_iter()
            .filter(|rt| is_critical(&rt.pod()) == critical)
            .collect();
        let kills = pods.into_iter().map(|rt| {
            let kl = kl.clone();
            tokio::spawn(async move {
                let grace = pod_grace(&rt.pod(), period);
                // The kill's status function adds the condition at once; the pod is Failed
                // once its containers have stopped, and its sandbox goes with them.
                {
                    let mut st = rt.state.lock().expect("state lock");
                    st.conditions.insert(
                        "DisruptionTarget",
                        (
                            true,
                            jiff::Timestamp::now(),
                            Some("TerminationByKubelet".into()),
                            Some(SHUTDOWN_MESSAGE.into()),
                        ),
                    );
                }
                rt.halted.cancel();
                rt.touch();
                super::termination::terminate_within(&kl, &rt, Some(grace)).await;
                {
                    let mut st = rt.state.lock().expect("state lock");
                    st.failed = Some((SHUTDOWN_REASON.into(), SHUTDOWN_MESSAGE.into()));
                    st.sandbox_ready = false;
                }
                rt.touch();
            })
        });
        let all = futures::future::join_all(kills);
        // The group's period bounds it, whatever its pods do.
        let _ = tokio::time::timeout(period + Duration::from_secs(1), all).await;
    }
    // Let the status manager post the last statuses before the machine goes.
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// The power goes: every running container is killed at once, without its stop signal or
/// grace period; its supervisor restarts it per the pod's restart policy once the machine is
/// up again.
fn power_cut(kl: &Kubelet) {
    for rt in kl.pods.lock().expect("pods lock").values() {
        let st = rt.state.lock().expect("state lock");
        for c in st.init.iter().chain(st.main.iter()) {
            if c.state.is_running() || c.run_stop.is_some() {
                // The stop token only releases what the process held (its listeners); the
                // kill ends it before it can act on it.
                for t in [&c.run_stop, &c.run_kill].into_iter().flatten() {
                    t.cancel();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{Pod, PodSpec};

    use super::*;

    fn pod(priority: Option<i32>, grace: Option<i64>, source: Option<&str>) -> Pod {
        let mut p = Pod {
            spec: Some(PodSpec {
                priority,
                termination_grace_period_seconds: grace,
                ..Default::default()
            }),
            ..Default::default()
        };
        if let Some(s) = source {
            p.metadata.annotations = Some(BTreeMap::from([("kubernetes.io/config.source".into(), s.into())]));
        }
        p
    }

    #[test]
    fn critical_pods_are_static_mirror_or_system_priority() {
        assert!(!is_critical(&pod(None, None, None)));
        assert!(!is_critical(&pod(Some(1_999_999_999), None, None)));
        assert!(
            is_critical(&pod(Some(2_000_001_000), None, None)),
            "system-node-critical"
        );
        assert!(
            is_critical(&pod(Some(2_000_000_000), None, None)),
            "system-cluster-critical"
        );
        assert!(is_critical(&pod(None, None, Some("file"))), "a static pod");
        assert!(!is_critical(&pod(None, None, Some("api"))));
    }

    #[test]
    fn a_pod_gets_the_shorter_of_its_grace_and_its_group_period() {
        assert_eq!(
            pod_grace(&pod(None, Some(25), None), Duration::from_secs(10)),
            Duration::from_secs(10)
        );
        assert_eq!(
            pod_grace(&pod(None, Some(5), None), Duration::from_secs(10)),
            Duration::from_secs(5)
        );
        assert_eq!(
            pod_grace(&pod(None, None, None), Duration::from_secs(60)),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn the_manager_runs_only_with_the_gate_and_a_grace_period() {
        let on = ShutdownConfig {
            grace: Duration::from_secs(10),
            critical: Duration::from_secs(5),
            gate: true,
        };
        assert!(on.enabled());
        assert!(!ShutdownConfig { gate: false, ..on }.enabled());
        assert!(
            !ShutdownConfig {
                grace: Duration::ZERO,
                ..on
            }
            .enabled()
        );
    }

    #[tokio::test]
    async fn a_scheduled_shutdown_fires_once_and_can_be_aborted() {
        let p = Power::default();
        assert_eq!(p.abort(), Err(PowerError::NothingScheduled));
        p.schedule(Duration::from_secs(3600), true).unwrap();
        assert_eq!(p.schedule(Duration::ZERO, true), Err(PowerError::AlreadyScheduled));
        p.abort().unwrap();
        p.schedule(Duration::from_millis(20), false).unwrap();
        let reboot = tokio::time::timeout(Duration::from_secs(5), p.next_shutdown())
            .await
            .unwrap();
        assert!(!reboot);
        let before = p.boot_id();
        assert_ne!(p.boot(), before, "a boot gets a new boot ID");
    }
}
