//! The taint eviction controller (kube-controller-manager's `taint-eviction-controller`,
//! upstream `pkg/controller/tainteviction/taint_eviction.go` and `timed_workers.go`, 1.33): it
//! deletes pods bound to a node with a `NoExecute` taint they do not tolerate, or tolerate for
//! a limited time.
//!
//! Upstream is edge-triggered, and so is this loop, although it wakes like the others: a pass
//! compares the caches with what the previous pass saw and handles only what changed, node
//! updates first (upstream's workers drain the node queue before a pod update):
//! - a node whose NoExecute taints changed (or that appeared) is remembered with them
//!   (`taintedNodes`) and every pod bound to it is processed; a node without NoExecute taints
//!   any more cancels the scheduled eviction of each of its pods;
//! - a pod that appeared, or whose tolerations or node changed, is processed if its node is
//!   tainted; a pod gone cancels its scheduled eviction.
//!
//! Processing a pod (`processPodOnNode`): a NoExecute taint no toleration matches schedules
//! its eviction now; otherwise the smallest `tolerationSeconds` of the tolerations used (the
//! first matching one per taint; 0 or less means now) schedules it then, unless an eviction
//! scheduled earlier is kept; no `tolerationSeconds` at all cancels. Cancelling a pending
//! eviction records `TaintManagerEviction` "Cancelling deletion of Pod NS/NAME".
//!
//! The queue is upstream's `TimedWorkerQueue`: an eviction that fired (or was due at once)
//! stays as an empty entry, so the same pod is not evicted twice until a cancel clears it; one
//! that failed five times is dropped. Firing records "Marking for deletion Pod NS/NAME", reads
//! the pod, adds the `DisruptionTarget` condition (reason `DeletionByTaintManager`, "Taint
//! manager: deleting due to NoExecute taint") and deletes it with its own grace period. Times
//! are the control plane's clock.
//!
//! Faults: `controller-stopped=taint-eviction` leaves the loop out, as a kube-controller-manager
//! started with `--controllers=-taint-eviction-controller` does;
//! `taint-eviction-ignores=toleration-seconds` reads every `tolerationSeconds` as 0 (a tolerated
//! taint evicts at once) and `taint-eviction-ignores=removal` keeps scheduled evictions when a
//! node's NoExecute taints go away.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, PodCondition, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::Result;
use super::events::{EventType, Recorder};
use super::informer::{Informer, Requeue, Wake};
use super::plane::{Component, Ctx};
use super::predicates::tolerates;
use super::util::set_condition;

/// Upstream's event reason for scheduling and cancelling an eviction.
const REASON: &str = "TaintManagerEviction";
/// Upstream `retries`: attempts at marking and deleting a pod before the eviction is dropped.
const RETRIES: usize = 5;
/// The fault switch that breaks parts of this controller.
const FAULT: &str = "taint-eviction-ignores";

/// What the taints of a pod's node mean for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every NoExecute taint is tolerated forever (or there is none).
    Stay,
    /// A NoExecute taint is not tolerated.
    EvictNow,
    /// Every NoExecute taint is tolerated, the shortest for this long.
    EvictAfter(SignedDuration),
}

/// Upstream `GetMatchingTolerations` + `getMinTolerationTime` for the NoExecute taints.
pub(crate) fn verdict(taints: &[Taint], tolerations: &[Toleration]) -> Verdict {
    let mut used = Vec::new();
    let mut any = false;
    for taint in taints.iter().filter(|t| t.effect == "NoExecute") {
        any = true;
        match tolerations.iter().find(|tol| tolerates(tol, taint)) {
            Some(tol) => used.push(tol),
            None => return Verdict::EvictNow,
        }
    }
    if !any {
        return Verdict::Stay;
    }
    let mut min: Option<i64> = None;
    for tol in used {
        if let Some(s) = tol.toleration_seconds {
            if s <= 0 {
                return Verdict::EvictAfter(SignedDuration::ZERO);
            }
            min = Some(min.map_or(s, |m| m.min(s)));
        }
    }
    min.map_or(Verdict::Stay, |s| Verdict::EvictAfter(SignedDuration::from_secs(s)))
}

/// A pending eviction (upstream's `TimedWorker`).
#[derive(Debug, Clone, Copy)]
struct Worker {
    created: Timestamp,
    fire: Timestamp,
}

/// What a pass remembers of a pod, to notice the changes upstream's `PodUpdated` reacts to.
#[derive(Debug, Clone, PartialEq)]
struct PodSeen {
    node: String,
    tolerations: Vec<Toleration>,
}

struct Controller {
    ctx: Ctx,
    nodes: Informer<Node>,
    pods: Informer<Pod>,
    recorder: Recorder,
    /// NoExecute taints by node, as last seen (every node, tainted or not).
    node_taints: HashMap<String, Vec<Taint>>,
    /// Pods by `namespace/name`, as last seen.
    pods_seen: HashMap<String, PodSeen>,
    /// The eviction queue by `namespace/name`: `None` is upstream's nil worker, an eviction
    /// that fired or was due at once.
    queue: HashMap<String, Option<Worker>>,
}

/// Runs the taint eviction controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let nodes = ctx.informers.get::<Node>();
    let pods = ctx.informers.get::<Pod>();
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = async { nodes.ready().await?; pods.ready().await } => r?,
    }
    let mut wake = Wake::new(vec![nodes.subscribe(), pods.subscribe()], ctx.cfg.resync);
    let mut c = Controller {
        recorder: ctx.recorder(Component::TaintEviction),
        ctx,
        nodes,
        pods,
        node_taints: HashMap::new(),
        pods_seen: HashMap::new(),
        queue: HashMap::new(),
    };
    loop {
        let mut requeue = Requeue::default();
        c.pass(&mut requeue).await;
        if !wake.next(requeue.take(), &c.ctx.cancel).await {
            return Ok(());
        }
    }
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

fn no_execute(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| t.iter().filter(|t| t.effect == "NoExecute").cloned().collect())
        .unwrap_or_default()
}

fn seen(pod: &Pod) -> PodSeen {
    let spec = pod.spec.as_ref();
    PodSeen {
        node: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        tolerations: spec.and_then(|s| s.tolerations.clone()).unwrap_or_default(),
    }
}

impl Controller {
    fn faulty(&self, what: &str) -> bool {
        self.ctx.cfg.faults.applies_to(FAULT, what)
    }

    async fn pass(&mut self, requeue: &mut Requeue) {
        let now = self.ctx.now();
        let pods = self.pods.list();
        // Node updates first, as upstream's workers do. A pod processed for its node is not
        // processed again for its own change in the same pass (upstream's second look, a moment
        // later, would keep the eviction it just scheduled).
        let mut processed = HashSet::new();
        let mut current_nodes = HashSet::new();
        for node in self.nodes.list() {
            let name = node.name_any();
            current_nodes.insert(name.clone());
            let taints = no_execute(&node);
            if self.node_taints.get(&name) == Some(&taints) {
                continue;
            }
            self.node_taints.insert(name.clone(), taints.clone());
            let on_node: Vec<&Pod> = pods
                .iter()
                .map(AsRef::as_ref)
                .filter(|p| seen(p).node == name)
                .collect();
            if taints.is_empty() {
                if !self.faulty("removal") {
                    for pod in on_node {
                        self.cancel_with_event(&key(pod)).await;
                    }
                }
                continue;
            }
            for pod in on_node {
                processed.insert(key(pod));
                self.process(pod, &taints, now).await;
            }
        }
        // A node gone is forgotten (upstream drops it from taintedNodes, cancelling nothing).
        self.node_taints.retain(|n, _| current_nodes.contains(n));
        // Then pod updates.
        let mut current_pods = HashSet::new();
        for pod in &pods {
            let k = key(pod);
            current_pods.insert(k.clone());
            let now_seen = seen(pod);
            if self.pods_seen.get(&k) == Some(&now_seen) {
                continue;
            }
            self.pods_seen.insert(k.clone(), now_seen.clone());
            if now_seen.node.is_empty() || processed.contains(&k) {
                continue;
            }
            let Some(taints) = self.node_taints.get(&now_seen.node).filter(|t| !t.is_empty()).cloned() else {
                continue;
            };
            self.process(pod, &taints, now).await;
        }
        let gone: Vec<String> = self
            .pods_seen
            .keys()
            .filter(|k| !current_pods.contains(*k))
            .cloned()
            .collect();
        for k in gone {
            self.pods_seen.remove(&k);
            self.cancel_with_event(&k).await;
        }
        self.fire_due(now, requeue).await;
    }

    /// Upstream `processPodOnNode` for a pod on a node with these (non-empty) NoExecute taints.
    async fn process(&mut self, pod: &Pod, taints: &[Taint], now: Timestamp) {
        let k = key(pod);
        let mut tolerations = seen(pod).tolerations;
        if self.faulty("toleration-seconds") {
            for t in &mut tolerations {
                if t.toleration_seconds.is_some() {
                    t.toleration_seconds = Some(0);
                }
            }
        }
        match verdict(taints, &tolerations) {
            Verdict::Stay => self.cancel_with_event(&k).await,
            Verdict::EvictNow => {
                // Cancelled (if scheduled) because the pod goes right away.
                self.cancel_with_event(&k).await;
                self.add_work(k, now, now);
            }
            Verdict::EvictAfter(d) => {
                let trigger = now.checked_add(d).unwrap_or(now);
                let mut start = now;
                if let Some(Some(w)) = self.queue.get(&k).copied() {
                    start = w.created;
                    if start.checked_add(d).unwrap_or(start) < trigger {
                        return;
                    }
                    self.cancel_with_event(&k).await;
                }
                self.add_work(k, start, trigger);
            }
        }
    }

    /// Upstream `AddWork`: a key already queued (pending or fired) is left alone. Work due at
    /// once runs in this pass's [`Controller::fire_due`].
    fn add_work(&mut self, k: String, created: Timestamp, fire: Timestamp) {
        self.queue.entry(k).or_insert(Some(Worker { created, fire }));
    }

    /// Upstream `cancelWorkWithEvent`: drops the queue entry; a pending one is announced.
    async fn cancel_with_event(&mut self, k: &str) {
        if let Some(Some(_)) = self.queue.remove(k) {
            let (ns, name) = k.split_once('/').unwrap_or(("", k));
            self.recorder
                .record_ref(
                    pod_ref(ns, name),
                    EventType::Normal,
                    REASON,
                    format!("Cancelling deletion of Pod {k}"),
                )
                .await;
        }
    }

    /// Runs every eviction that is due, and asks for a pass when the next one is.
    async fn fire_due(&mut self, now: Timestamp, requeue: &mut Requeue) {
        let due: Vec<String> = self
            .queue
            .iter()
            .filter(|(_, w)| w.is_some_and(|w| w.fire <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            // Fired: the key stays, empty, so the pod is not queued again until a cancel.
            self.queue.insert(k.clone(), None);
            if !self.evict(&k).await {
                self.queue.remove(&k);
            }
        }
        if let Some(next) = self.queue.values().flatten().map(|w| w.fire).min() {
            let wait = self.ctx.cfg.clock.real_delay(next.duration_since(now));
            requeue.after(wait.max(Duration::from_millis(20)));
        }
    }

    /// Upstream `deletePodHandler`: announces the eviction, then tries `RETRIES` times to mark
    /// and delete the pod. Whether it succeeded.
    async fn evict(&self, k: &str) -> bool {
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        tracing::info!(pod = %k, "deleting pod for a NoExecute taint");
        self.recorder
            .record_ref(
                pod_ref(ns, name),
                EventType::Normal,
                REASON,
                format!("Marking for deletion Pod {k}"),
            )
            .await;
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), ns);
        let mut last = None;
        for _ in 0..RETRIES {
            match self.mark_and_delete(&api, name).await {
                Ok(()) => return true,
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            tracing::debug!(pod = %k, error = %super::error::chain(&e), "taint eviction failed");
        }
        false
    }

    /// Upstream `addConditionAndDeletePod`: reads the pod, adds the DisruptionTarget condition
    /// if it is not there already, and deletes the pod.
    async fn mark_and_delete(&self, api: &Api<Pod>, name: &str) -> std::result::Result<(), kube::Error> {
        let pod = api.get(name).await?;
        let mut conditions = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let updated = set_condition(
            &mut conditions,
            PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("DeletionByTaintManager".into()),
                message: Some("Taint manager: deleting due to NoExecute taint".into()),
                last_transition_time: Some(Time(self.ctx.now())),
                ..Default::default()
            },
            |c| &c.type_,
        );
        if updated {
            let patch = json!({"status": {"conditions": conditions}});
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        api.delete(name, &DeleteParams::default()).await?;
        Ok(())
    }
}

/// The reference upstream's events carry: kind, name and namespace, no UID.
fn pod_ref(ns: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.into()),
        namespace: Some(ns.into()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn tol(key: &str, value: &str, seconds: Option<i64>) -> Toleration {
        Toleration {
            key: Some(key.into()),
            value: Some(value.into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: seconds,
            ..Default::default()
        }
    }

    #[test]
    fn untolerated_no_execute_taints_evict_now() {
        let t = [taint("k", "v", "NoExecute")];
        assert_eq!(verdict(&t, &[]), Verdict::EvictNow);
        assert_eq!(verdict(&t, &[tol("k", "other", None)]), Verdict::EvictNow);
    }

    #[test]
    fn other_effects_and_no_taints_leave_pods_alone() {
        assert_eq!(verdict(&[], &[]), Verdict::Stay);
        assert_eq!(verdict(&[taint("k", "v", "NoSchedule")], &[]), Verdict::Stay);
        assert_eq!(
            verdict(&[taint("k", "v", "NoExecute")], &[tol("k", "v", None)]),
            Verdict::Stay
        );
    }

    #[test]
    fn the_shortest_toleration_used_wins() {
        let t = [taint("a", "1", "NoExecute"), taint("b", "2", "NoExecute")];
        let tols = [tol("a", "1", Some(25)), tol("b", "2", Some(5))];
        assert_eq!(verdict(&t, &tols), Verdict::EvictAfter(SignedDuration::from_secs(5)));
        let tols = [tol("a", "1", None), tol("b", "2", Some(0))];
        assert_eq!(verdict(&t, &tols), Verdict::EvictAfter(SignedDuration::ZERO));
        let tols = [tol("a", "1", Some(25)), tol("b", "2", None)];
        assert_eq!(verdict(&t, &tols), Verdict::EvictAfter(SignedDuration::from_secs(25)));
    }
}
