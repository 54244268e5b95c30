//! The node's own health under the node fault switches, as its kubelet lives it.
//!
//! - `node-flap=NODE:DOWN/EVERY`: for DOWN every EVERY (the first episode EVERY/2 after the
//!   kubelet first saw the switch) the container runtime stops answering. As a real kubelet
//!   whose PLEG relist is stuck (`pkg/kubelet/pleg/generic.go` `Healthy`, folded into
//!   `runtimeErrors` as "PLEG is not healthy: ..."), it posts Ready=False with reason
//!   `KubeletNotReady` (`nodestatus.ReadyCondition`) and skips pod synchronisation ("Skipping
//!   pod synchronization" in `syncLoop`): pods bound or deleted meanwhile wait for the episode
//!   to end, while the pods already running carry on untouched. Then it posts Ready=True.
//! - `node-lost=NODE:AFTER`: AFTER after the kubelet first saw the switch the node is gone for
//!   good: no status, no Lease renewal, no pod started or stopped, no pod status or event, and
//!   its pods' traffic dropped (a machine cut off from the network; its programs keep running
//!   where nobody can reach them). Turning the switch off afterwards changes nothing.
//!
//! The heartbeat loop ([`super::node_status`]) evaluates the switches every [`HEALTH_TICK`], so a
//! switch turned on at run time takes effect from when that loop first saw it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::faults::Faults;
use crate::faults::values::{parse_duration, parse_schedule, split_node};

/// How often the kubelet looks at the node switches.
pub(super) const HEALTH_TICK: Duration = Duration::from_millis(200);

/// The PLEG's relist threshold (`relistThreshold`, 3 minutes): a stuck relist is reported once
/// it is older than this, so the message of an episode starts just past it.
const PLEG_THRESHOLD: Duration = Duration::from_secs(180);

/// What changed at one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing.
    None,
    /// A flap episode began: the runtime stopped answering.
    RuntimeDown,
    /// The episode ended: the runtime answers again.
    RuntimeUp,
    /// The node is lost, for good.
    Lost,
}

/// The Ready condition the kubelet posts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadyCondition {
    /// `True` or `False`.
    pub status: &'static str,
    /// `KubeletReady` or `KubeletNotReady`.
    pub reason: &'static str,
    /// The message.
    pub message: String,
    /// When the status last changed.
    pub since: jiff::Timestamp,
}

#[derive(Debug)]
struct State {
    /// The `node-flap` value naming this node and when the kubelet first saw it.
    flap: Option<(String, Instant)>,
    /// The `node-lost` value naming this node and when the kubelet first saw it.
    lost_timer: Option<(String, Instant)>,
    /// When the current episode began, while one is under way.
    down_since: Option<Instant>,
    /// When the Ready condition last changed.
    ready_since: jiff::Timestamp,
}

/// The node's health as the switches make it (one per kubelet).
#[derive(Debug)]
pub(crate) struct NodeHealth {
    state: Mutex<State>,
    runtime_up: watch::Sender<bool>,
    lost: CancellationToken,
}

impl NodeHealth {
    /// A healthy node, Ready since now.
    pub(crate) fn new() -> Self {
        NodeHealth {
            state: Mutex::new(State {
                flap: None,
                lost_timer: None,
                down_since: None,
                ready_since: jiff::Timestamp::now(),
            }),
            runtime_up: watch::Sender::new(true),
            lost: CancellationToken::new(),
        }
    }

    /// Whether the node is lost.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Cancelled when the node is lost.
    pub(crate) fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    /// Whether a flap episode is under way (the runtime does not answer).
    pub(crate) fn runtime_down(&self) -> bool {
        !*self.runtime_up.borrow()
    }

    /// Returns once the runtime answers (at once when it does).
    pub(crate) async fn wait_runtime_up(&self) {
        let mut rx = self.runtime_up.subscribe();
        let _ = rx.wait_for(|up| *up).await;
    }

    /// Evaluates the switches naming `node` at `now`.
    pub(crate) fn evaluate(&self, faults: &Faults, node: &str, now: Instant) -> Change {
        if self.is_lost() {
            return Change::None;
        }
        let mut st = self.state.lock().expect("health lock");
        let lost = value_for(faults, "node-lost", node).and_then(|(v, rest)| Some((v, parse_duration(&rest)?)));
        match lost {
            Some((value, after)) => {
                let since = first_seen(&mut st.lost_timer, value, now);
                if now.saturating_duration_since(since) >= after {
                    self.lost.cancel();
                    return Change::Lost;
                }
            }
            None => st.lost_timer = None,
        }
        let flap = value_for(faults, "node-flap", node).and_then(|(v, rest)| Some((v, parse_schedule(&rest)?)));
        let active = match flap {
            Some((value, schedule)) => {
                let since = first_seen(&mut st.flap, value, now);
                schedule.active_at(now.saturating_duration_since(since))
            }
            None => {
                st.flap = None;
                false
            }
        };
        match (active, st.down_since) {
            (true, None) => {
                st.down_since = Some(now);
                st.ready_since = jiff::Timestamp::now();
                self.runtime_up.send_replace(false);
                Change::RuntimeDown
            }
            (false, Some(_)) => {
                st.down_since = None;
                st.ready_since = jiff::Timestamp::now();
                self.runtime_up.send_replace(true);
                Change::RuntimeUp
            }
            _ => Change::None,
        }
    }

    /// The Ready condition to post at `now`: `KubeletNotReady` with the PLEG message real
    /// kubelets post while an episode is under way (the relist age grows with it), else
    /// `KubeletReady`.
    pub(crate) fn ready_condition(&self, now: Instant) -> ReadyCondition {
        let st = self.state.lock().expect("health lock");
        match st.down_since {
            Some(since) => ReadyCondition {
                status: "False",
                reason: "KubeletNotReady",
                message: format!(
                    "PLEG is not healthy: pleg was last seen active {} ago; threshold is {}",
                    go_duration(PLEG_THRESHOLD + now.saturating_duration_since(since)),
                    go_duration(PLEG_THRESHOLD)
                ),
                since: st.ready_since,
            },
            None => ReadyCondition {
                status: "True",
                reason: "KubeletReady",
                message: "kubelet is posting ready status".into(),
                since: st.ready_since,
            },
        }
    }
}

/// The first value of `switch` that names `node`, with the rest after `NODE:`.
fn value_for(faults: &Faults, switch: &str, node: &str) -> Option<(String, String)> {
    faults.values(switch).into_iter().find_map(|v| {
        let (n, rest) = split_node(&v)?;
        (n == node).then(|| (v.clone(), rest.to_string()))
    })
}

/// When `value` was first seen: kept while the value stays, restarted when it changes.
fn first_seen(slot: &mut Option<(String, Instant)>, value: String, now: Instant) -> Instant {
    match slot {
        Some((v, since)) if *v == value => *since,
        _ => {
            *slot = Some((value, now));
            now
        }
    }
}

/// A duration as Go's `time.Duration.String` prints one of a second or more: `3m0s`,
/// `3m5.25s`, `1h0m2s`.
fn go_duration(d: Duration) -> String {
    let total = d.as_nanos();
    let (hours, rest) = (total / 3_600_000_000_000, total % 3_600_000_000_000);
    let (minutes, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let (seconds, nanos) = (rest / 1_000_000_000, rest % 1_000_000_000);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&seconds.to_string());
    if nanos > 0 {
        out.push('.');
        out.push_str(format!("{nanos:09}").trim_end_matches('0'));
    }
    out.push('s');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(180)), "3m0s");
        assert_eq!(go_duration(Duration::from_millis(185_250)), "3m5.25s");
        assert_eq!(go_duration(Duration::from_secs(3602)), "1h0m2s");
        assert_eq!(go_duration(Duration::from_nanos(180_000_000_001)), "3m0.000000001s");
    }

    #[test]
    fn flap_episodes_follow_the_schedule_from_first_sight() {
        let faults = Faults::parse("node-flap=win-1:4s/20s,node-flap=win-2:1s/2s").unwrap();
        let h = NodeHealth::new();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(h.evaluate(&faults, "win-1", at(0)), Change::None);
        assert_eq!(h.evaluate(&faults, "win-1", at(9)), Change::None);
        assert!(!h.runtime_down());
        assert_eq!(h.evaluate(&faults, "win-1", at(10)), Change::RuntimeDown);
        assert!(h.runtime_down());
        let c = h.ready_condition(at(12));
        assert_eq!((c.status, c.reason), ("False", "KubeletNotReady"));
        assert_eq!(
            c.message,
            "PLEG is not healthy: pleg was last seen active 3m2s ago; threshold is 3m0s"
        );
        assert_eq!(h.evaluate(&faults, "win-1", at(13)), Change::None);
        assert_eq!(h.evaluate(&faults, "win-1", at(14)), Change::RuntimeUp);
        assert_eq!(h.ready_condition(at(14)).status, "True");
        // Switching it off ends an episode at once; on again, the schedule starts afresh.
        assert_eq!(h.evaluate(&faults, "win-1", at(30)), Change::RuntimeDown);
        faults.set("node-flap", "win-1:4s/20s", false);
        assert_eq!(h.evaluate(&faults, "win-1", at(31)), Change::RuntimeUp);
        faults.set("node-flap", "win-1:4s/20s", true);
        assert_eq!(h.evaluate(&faults, "win-1", at(32)), Change::None);
        assert_eq!(h.evaluate(&faults, "win-1", at(42)), Change::RuntimeDown);
        // Another node's value is not ours.
        assert_eq!(NodeHealth::new().evaluate(&faults, "linux-1", at(42)), Change::None);
    }

    #[test]
    fn a_lost_node_stays_lost() {
        let faults = Faults::parse("node-lost=win-2:3s").unwrap();
        let h = NodeHealth::new();
        let t0 = Instant::now();
        assert_eq!(h.evaluate(&faults, "win-2", t0), Change::None);
        assert_eq!(h.evaluate(&faults, "win-2", t0 + Duration::from_secs(2)), Change::None);
        assert!(!h.is_lost());
        assert_eq!(h.evaluate(&faults, "win-2", t0 + Duration::from_secs(3)), Change::Lost);
        assert!(h.is_lost() && h.lost().is_cancelled());
        faults.set("node-lost", "win-2:3s", false);
        assert_eq!(h.evaluate(&faults, "win-2", t0 + Duration::from_secs(9)), Change::None);
        assert!(h.is_lost());
    }
}
