//! The kubelet's eviction manager for memory (pkg/kubelet/eviction): every housekeeping period
//! it computes the node's `memory.available` (capacity minus the working set), from the same
//! figures its stats summary reports, as the real manager reads the summary provider, and
//! compares it with the hard threshold `evictionHard memory.available` (`/configz`).
//!
//! Below the threshold the node reports `MemoryPressure=True` (`KubeletHasInsufficientMemory`),
//! which the node lifecycle controller turns into the `node.kubernetes.io/memory-pressure`
//! NoSchedule taint, and the manager evicts one pod per pass: pods using more memory than they
//! request first, then by lower priority, then by how far usage exceeds the request
//! (`rankMemoryPressure`). The pod is killed at once (a hard threshold has no grace period),
//! ends `Failed` with reason `Evicted` and upstream's message, gets a `DisruptionTarget`
//! condition, and a Warning `Evicted` event. The condition stays True for the pressure
//! transition period after the last pass that saw the threshold met
//! (`evictionPressureTransitionPeriod`), so the taint outlives the eviction a while.
//!
//! The `eviction-manager-off` fault models a kubelet whose manager never runs;
//! `eviction-events-lost` one that evicts but records no `Evicted` event.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::{Kubelet, PodRt};
use crate::node::runtime::parse_quantity;

/// The kubelet's eviction reason (`eviction.Reason`).
pub const EVICTED_REASON: &str = "Evicted";

/// What the manager remembers between passes.
#[derive(Debug, Default)]
pub struct EvictionState {
    /// When a pass last saw the memory threshold met.
    last_met: Mutex<Option<Instant>>,
}

impl EvictionState {
    /// Whether the node reports memory pressure: the threshold was met within `transition`.
    pub fn memory_pressure(&self, transition: Duration) -> bool {
        self.last_met
            .lock()
            .expect("eviction lock")
            .is_some_and(|t| t.elapsed() < transition)
    }

    /// Records a pass that saw the threshold met; true when the node was not under pressure.
    fn met(&self, transition: Duration) -> bool {
        let mut last = self.last_met.lock().expect("eviction lock");
        let new = !last.is_some_and(|t| t.elapsed() < transition);
        *last = Some(Instant::now());
        new
    }
}

/// A pod's memory working set as the stats summary counts it (running containers' base
/// memory plus what their programs hold), in total and per container.
#[derive(Debug, Clone, Default)]
struct PodMemory {
    total: u64,
    containers: Vec<(String, u64)>,
}

/// Every pod's memory by uid, read from the runtime's counters as `/stats/summary` does (the
/// summary adds sampling noise; the manager needs none).
fn observe(kl: &Kubelet) -> HashMap<String, PodMemory> {
    let pods: Vec<Arc<PodRt>> = kl.pods.lock().expect("pods lock").values().cloned().collect();
    pods.into_iter()
        .map(|rt| {
            let st = rt.state.lock().expect("state lock");
            let mut m = PodMemory::default();
            for c in st.init.iter().chain(st.main.iter()) {
                if c.state.is_running() {
                    let ws = c.base_memory + c.usage.extra_memory_bytes.load(Ordering::Relaxed);
                    m.total += ws;
                    m.containers.push((c.name.clone(), ws));
                }
            }
            (rt.uid.clone(), m)
        })
        .collect()
}

/// A pod as the ranking sees it.
#[derive(Clone)]
struct Candidate {
    rt: Arc<PodRt>,
    priority: i32,
    /// Working set in bytes, from the summary.
    usage: u64,
    /// Summed container memory requests in bytes.
    request: u64,
}

/// The manager's loop: one pass per housekeeping period (the node status period).
pub(super) async fn eviction_loop(kl: Arc<Kubelet>) {
    let mut tick = tokio::time::interval(kl.cfg.profile.node_status());
    loop {
        tokio::select! {
            _ = kl.cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        if kl.net.faults().is_on("eviction-manager-off") || kl.power.is_down() {
            continue;
        }
        synchronize(&kl).await;
    }
}

/// One pass: observe, report pressure, evict at most one pod.
async fn synchronize(kl: &Arc<Kubelet>) {
    let threshold = kl.cfg.reserved.eviction_memory_bytes;
    if threshold == 0 {
        return;
    }
    let summary = observe(kl);
    let available =
        kl.cfg.capacity.memory_bytes.saturating_sub(
            crate::node::stats::system_memory(kl.cfg.os) + summary.values().map(|p| p.total).sum::<u64>(),
        );
    if available >= threshold {
        return;
    }
    let transition = kl.cfg.profile.pressure_transition();
    if kl.eviction.met(transition) {
        kl.node_event(
            "Normal",
            "NodeHasInsufficientMemory",
            &format!("Node {} status is now: NodeHasInsufficientMemory", kl.cfg.name),
        );
    }
    kl.node_event("Warning", "EvictionThresholdMet", "Attempting to reclaim memory");
    let mut candidates = candidates(kl, &summary);
    candidates.sort_by(|a, b| {
        let exceeds = |c: &Candidate| c.usage > c.request;
        exceeds(b)
            .cmp(&exceeds(a))
            .then(a.priority.cmp(&b.priority))
            .then((b.usage as i128 - b.request as i128).cmp(&(a.usage as i128 - a.request as i128)))
    });
    let Some(victim) = candidates.into_iter().next() else {
        return;
    };
    let usage = summary.get(&victim.rt.uid).cloned().unwrap_or_default();
    let message = eviction_message(&victim.rt.pod(), &usage, threshold, available);
    evict(kl, &victim.rt, &message).await;
}

/// The pods the manager may evict, with their usage from `summary`.
fn candidates(kl: &Kubelet, summary: &HashMap<String, PodMemory>) -> Vec<Candidate> {
    let pods: Vec<Arc<PodRt>> = kl
        .pods
        .lock()
        .expect("pods lock")
        .values()
        .filter(|rt| !rt.deleting.is_cancelled() && !rt.halted.is_cancelled())
        .cloned()
        .collect();
    pods.into_iter()
        .filter_map(|rt| {
            let usage = summary.get(&rt.uid)?.total;
            let pod = rt.pod();
            let spec = pod.spec.clone().unwrap_or_default();
            // Static and mirror pods, and system-critical ones, are never evicted for
            // pressure (`evictionapi` `IsCriticalPod`).
            if super::power::is_critical(&pod) {
                return None;
            }
            let request = spec.containers.iter().map(memory_request).sum();
            Some(Candidate {
                priority: spec.priority.unwrap_or(0),
                rt,
                usage,
                request,
            })
        })
        .collect()
}

/// A container's memory request in bytes (0 without one).
fn memory_request(c: &k8s_openapi::api::core::v1::Container) -> u64 {
    c.resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"))
        .and_then(|q| parse_quantity(&q.0))
        .map_or(0, |b| b as u64)
}

/// Upstream's `evictionMessage` for memory: the node, the threshold and what was available,
/// then each container using more than it requests.
fn eviction_message(pod: &Pod, usage: &PodMemory, threshold: u64, available: u64) -> String {
    let mut message = format!(
        "The node was low on resource: memory. Threshold quantity: {}, available: {}. ",
        binary_si(threshold),
        binary_si(available)
    );
    let containers = pod.spec.as_ref().map(|s| s.containers.clone()).unwrap_or_default();
    for c in &containers {
        let Some(used) = usage.containers.iter().find(|(n, _)| *n == c.name).map(|(_, ws)| *ws) else {
            continue;
        };
        let request = memory_request(c);
        if used > request {
            message.push_str(&format!(
                "Container {} was using {}, request is {}, has larger consumption of memory. ",
                c.name,
                binary_si(used),
                binary_si(request)
            ));
        }
    }
    message
}

/// A byte count as `resource.NewQuantity(n, BinarySI).String()` prints it: the largest binary
/// suffix that divides it exactly, else plain.
fn binary_si(n: u64) -> String {
    if n == 0 {
        return "0".into();
    }
    for (shift, suffix) in [(60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")] {
        if n.is_multiple_of(1u64 << shift) {
            return format!("{}{suffix}", n >> shift);
        }
    }
    n.to_string()
}

/// Kills `rt` at once and records it Failed/Evicted, as `killPodFunc` with the status function
/// the manager passes does.
async fn evict(kl: &Arc<Kubelet>, rt: &Arc<PodRt>, message: &str) {
    tracing::info!(pod = %rt.label(), %message, "evicting pod for memory pressure");
    // The `eviction-events-lost` fault: a kubelet whose event recorder drops the eviction's
    // event (the pod still ends Evicted).
    if !kl.net.faults().is_on("eviction-events-lost") {
        kl.pod_event(rt, None, "Warning", EVICTED_REASON, message);
    }
    {
        let mut st = rt.state.lock().expect("state lock");
        st.conditions.insert(
            "DisruptionTarget",
            (
                true,
                jiff::Timestamp::now(),
                Some("TerminationByKubelet".into()),
                Some(message.to_string()),
            ),
        );
    }
    rt.halted.cancel();
    rt.touch();
    super::termination::terminate_within(kl, rt, Some(Duration::ZERO)).await;
    {
        let mut st = rt.state.lock().expect("state lock");
        st.failed = Some((EVICTED_REASON.into(), message.to_string()));
        st.sandbox_ready = false;
    }
    rt.touch();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_print_as_binary_si() {
        assert_eq!(binary_si(100 << 20), "100Mi");
        assert_eq!(binary_si(3 << 30), "3Gi");
        assert_eq!(binary_si(1536), "1536");
        assert_eq!(binary_si(2048), "2Ki");
        assert_eq!(binary_si(0), "0");
    }

    #[test]
    fn pressure_lasts_the_transition_period() {
        let s = EvictionState::default();
        let t = Duration::from_secs(60);
        assert!(!s.memory_pressure(t));
        assert!(s.met(t));
        assert!(!s.met(t), "a second pass within the period is not a new transition");
        assert!(s.memory_pressure(t));
        assert!(!s.memory_pressure(Duration::ZERO));
    }

    #[test]
    fn the_message_names_containers_above_their_request() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "spec": {"containers": [
                {"name": "pod2"},
                {"name": "small", "resources": {"requests": {"memory": "500Mi"}}}
            ]}
        }))
        .unwrap();
        let usage = PodMemory {
            total: (3 << 30) + (100 << 20),
            containers: vec![("pod2".into(), 3 << 30), ("small".into(), 100 << 20)],
        };
        let m = eviction_message(&pod, &usage, 100 << 20, 50 << 20);
        assert_eq!(
            m,
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. \
             Container pod2 was using 3Gi, request is 0, has larger consumption of memory. "
        );
    }
}
