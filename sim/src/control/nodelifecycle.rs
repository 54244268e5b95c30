//! The node lifecycle controller (kube-controller-manager's `node-lifecycle-controller`, whose
//! events say `node-controller`): it watches each node's signs of life, its Lease in
//! `kube-node-lease` and the heartbeat of its Ready condition, and acts when they stop or the
//! kubelet reports the node not ready.
//!
//! As upstream (`pkg/controller/nodelifecycle/node_lifecycle_controller.go`, 1.33):
//! - on every node change, the NoSchedule taints follow the node's conditions
//!   (`node.kubernetes.io/not-ready` for Ready=False, `node.kubernetes.io/unreachable` for
//!   Unknown, the pressure taints, `unschedulable` for a cordoned node);
//! - every `--node-monitor-period` (5 s) a monitor pass notes when each node last renewed its
//!   Lease or posted a new heartbeat (by this controller's own clock); a node silent for
//!   `--node-monitor-grace-period` (50 s in 1.33; 60 s `--node-startup-grace-period` for one
//!   that never posted Ready) gets every condition set to Unknown (`NodeStatusUnknown`,
//!   "Kubelet stopped posting node status."). The pass then puts the NoExecute taint matching
//!   the Ready status it observed on the node (not-ready or unreachable, swapped, never both;
//!   both removed once Ready). When the pass itself turns a Ready node Unknown it records
//!   `NodeNotReady` on the node and marks every pod there Ready=False (`MarkPodsNotReady`, a
//!   `NodeNotReady` warning on each pod), retrying failed nodes on the next pass. A node whose
//!   kubelet *posts* Ready=False gets the taints only: its pods stay Ready, because the kubelet
//!   is alive and owns their status (upstream's `currentReadyCondition != True &&
//!   observedReadyCondition == True` case; its unit test
//!   `TestMonitorNodeHealthMarkPodsNotReadyRetry` expects no pod update for a posted False);
//! - a pod newly bound to a node that is not Ready is marked not ready at once (`processPod`).
//!
//! Not modelled: the zone rate limiter and disruption modes of NoExecute tainting (one node is
//! tainted at once; upstream rate-limits to 0.1 node/s per zone and stops when every node of
//! every zone is down). Taint-based eviction (after the 300 s default tolerations) is the
//! taint eviction controller's, `super::tainteviction`. The kubelet brings pods back to Ready itself.
//! Times are the control plane's clock, so `--time-scale` shortens the grace periods too.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{ApiContext, Result, is_not_found};
use super::events::{EventType, Recorder};
use super::informer::{Informer, Requeue, Wake};
use super::plane::{Component, Ctx};

mod rules;

use rules::Readiness;

/// The namespace of the kubelets' heartbeat Leases.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// What the controller last saw of one node (upstream's `nodeHealthData`).
#[derive(Debug, Clone)]
struct Health {
    /// When this controller last saw a sign of life, by its own clock (`probeTimestamp`).
    probe: Timestamp,
    /// The Ready condition's `lastHeartbeatTime` when last seen.
    heartbeat: Option<Timestamp>,
    /// The Lease's `renewTime` when last seen.
    renewed: Option<Timestamp>,
}

/// The controller's state between passes.
struct Controller {
    ctx: Ctx,
    nodes: Informer<Node>,
    leases: Informer<Lease>,
    pods: Informer<Pod>,
    recorder: Recorder,
    health: HashMap<String, Health>,
    /// Nodes already announced with `RegisteredNode`.
    known: BTreeSet<String>,
    /// Nodes whose pods could not all be marked not ready (`nodesToRetry`).
    retry: BTreeSet<String>,
    /// The node each pod was bound to when last seen, so only newly bound pods are processed.
    bound: HashMap<String, String>,
}

/// Runs the node lifecycle controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let nodes = ctx.informers.get::<Node>();
    let leases = ctx.informers.get::<Lease>();
    let pods = ctx.informers.get::<Pod>();
    let caches = async {
        nodes.ready().await?;
        leases.ready().await?;
        pods.ready().await
    };
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = caches => r?,
    }
    let mut wake = Wake::new(
        vec![nodes.subscribe(), leases.subscribe(), pods.subscribe()],
        ctx.cfg.resync,
    );
    let period = ctx
        .cfg
        .clock
        .real_delay(SignedDuration::try_from(ctx.cfg.node_monitor_period).unwrap_or(SignedDuration::from_secs(5)));
    let mut nc = Controller {
        recorder: ctx.recorder(Component::NodeLifecycle),
        ctx,
        nodes,
        leases,
        pods,
        health: HashMap::new(),
        known: BTreeSet::new(),
        retry: BTreeSet::new(),
        bound: HashMap::new(),
    };
    let mut next_monitor = Instant::now();
    loop {
        let mut requeue = Requeue::default();
        nc.no_schedule_pass(&mut requeue).await;
        if Instant::now() >= next_monitor {
            nc.monitor(&mut requeue).await;
            next_monitor = Instant::now() + period;
        }
        nc.process_pods(&mut requeue).await;
        requeue.after(next_monitor.saturating_duration_since(Instant::now()));
        if !wake.next(requeue.take(), &nc.ctx.cancel).await {
            return Ok(());
        }
    }
}

impl Controller {
    /// `doNoScheduleTaintingPass` for every node (upstream runs it on each node update).
    async fn no_schedule_pass(&mut self, requeue: &mut Requeue) {
        let now = self.ctx.now();
        for node in self.nodes.list() {
            if let Some(taints) = rules::no_schedule_pass(&node, now)
                && let Err(e) = self.set_taints(&node, taints).await
            {
                tracing::debug!(node = %node.name_any(), error = %super::error::chain(&e), "NoSchedule taints not updated; retrying");
                requeue.after(Duration::from_millis(200));
            }
        }
    }

    /// `monitorNodeHealth`: one pass over every node.
    async fn monitor(&mut self, requeue: &mut Requeue) {
        let now = self.ctx.now();
        let nodes = self.nodes.list();
        let names: BTreeSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        self.health.retain(|n, _| names.contains(n));
        self.retry.retain(|n| names.contains(n));
        self.known.retain(|n| names.contains(n));
        for node in nodes {
            let name = node.name_any();
            if self.known.insert(name.clone()) {
                self.recorder
                    .record(
                        &*node,
                        EventType::Normal,
                        "RegisteredNode",
                        format!("Node {name} event: Registered Node {name} in Controller"),
                    )
                    .await;
            }
            let (observed, current, node) = match self.update_health(node, now).await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(node = %name, error = %super::error::chain(&e), "node health not updated");
                    requeue.after(Duration::from_secs(1));
                    continue;
                }
            };
            // A node that has not posted a Ready condition yet (and is still within its startup
            // grace period) is left alone: upstream acts only once `currentReadyCondition` exists.
            if rules::ready_condition(&node).is_none() {
                continue;
            }
            if let Some(taints) = rules::no_execute_pass(&node, observed, now)
                && let Err(e) = self.set_taints(&node, taints).await
            {
                tracing::debug!(node = %name, error = %super::error::chain(&e), "NoExecute taints not updated; retrying");
                requeue.after(Duration::from_millis(200));
            }
            let transition = current != Readiness::Ready && observed == Readiness::Ready;
            if transition {
                self.recorder
                    .record(
                        &*node,
                        EventType::Normal,
                        "NodeNotReady",
                        format!("Node {name} status is now: NodeNotReady"),
                    )
                    .await;
            }
            if transition || (self.retry.contains(&name) && observed != Readiness::Ready) {
                let pods: Vec<Arc<Pod>> = self
                    .pods
                    .list()
                    .into_iter()
                    .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str()))
                    .collect();
                if self.mark_pods_not_ready(&pods).await {
                    self.retry.remove(&name);
                } else {
                    self.retry.insert(name);
                    requeue.after(Duration::from_secs(1));
                }
            } else {
                self.retry.remove(&name);
            }
        }
    }

    /// `tryUpdateNodeHealth`: notes signs of life and, past the grace period, writes the node's
    /// conditions Unknown. Returns the Ready status observed before, the one now, and the node
    /// as it now stands (the written one after an update, so taint writes use its version).
    async fn update_health(&mut self, node: Arc<Node>, now: Timestamp) -> Result<(Readiness, Readiness, Arc<Node>)> {
        let name = node.name_any();
        let observed = rules::readiness(&node);
        let ready = rules::ready_condition(&node);
        let grace = if ready.is_some() {
            self.ctx.cfg.node_monitor_grace_period
        } else {
            self.ctx.cfg.node_startup_grace_period
        };
        let heartbeat = ready.and_then(|c| c.last_heartbeat_time.as_ref()).map(|t| t.0);
        let renewed = self
            .leases
            .get(Some(NODE_LEASE_NAMESPACE), &name)
            .and_then(|l| l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0));
        let health = self.health.entry(name.clone()).or_insert_with(|| Health {
            probe: now,
            heartbeat,
            renewed: None,
        });
        if health.heartbeat != heartbeat {
            health.heartbeat = heartbeat;
            health.probe = now;
        }
        // Always update the probe time when the Lease was renewed (the kubelet's cheap
        // heartbeat; it posts its full status far less often upstream).
        if let Some(r) = renewed
            && health.renewed.is_none_or(|seen| seen < r)
        {
            health.renewed = Some(r);
            health.probe = now;
        }
        let grace = SignedDuration::try_from(grace).unwrap_or(SignedDuration::from_secs(50));
        let silent = now.duration_since(health.probe) > grace;
        if !silent {
            return Ok((observed, observed, node));
        }
        let Some(conditions) = rules::conditions_unknown(&node, now) else {
            return Ok((observed, observed, node));
        };
        let mut updated = (*node).clone();
        if let Some(status) = updated.status.as_mut() {
            status.conditions = Some(conditions);
        }
        tracing::info!(node = %name, "node stopped posting status: conditions set to Unknown");
        let api: Api<Node> = Api::all(self.ctx.client.clone());
        let written = api
            .replace_status(&name, &PostParams::default(), &updated)
            .await
            .ctx("update status of", || format!("node {name}"))?;
        self.nodes.wait_for_write(&written).await;
        Ok((observed, Readiness::Unknown, Arc::new(written)))
    }

    /// `processPod` for pods bound since the last pass: one on a node whose Ready status is not
    /// True is marked not ready.
    async fn process_pods(&mut self, requeue: &mut Requeue) {
        let pods = self.pods.list();
        let present: BTreeSet<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
        self.bound.retain(|uid, _| present.contains(uid));
        for pod in pods {
            let (Some(uid), Some(node)) = (
                pod.metadata.uid.clone(),
                pod.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .filter(|n| !n.is_empty()),
            ) else {
                continue;
            };
            if self.bound.get(&uid) == Some(&node) {
                continue;
            }
            // Upstream consults the monitor pass's copy of the node's status, which can be a
            // pass (5 s) behind; the cached node is read instead, so a pod bound right after
            // its node became Ready is not marked from a stale NotReady.
            let Some(current) = self.nodes.get(None, &node) else {
                continue;
            };
            // A node not through a monitor pass yet is skipped for good, as upstream (its pods
            // are handled by the pass that finds the node failing).
            if self.health.contains_key(&node)
                && rules::readiness(&current) != Readiness::Ready
                && !self.mark_pods_not_ready(&[pod]).await
            {
                requeue.after(Duration::from_secs(1));
                continue;
            }
            self.bound.insert(uid, node);
        }
    }

    /// `MarkPodsNotReady`: every pod's Ready condition to False (an update with the cached
    /// resourceVersion, as upstream's UpdateStatus), each with a `NodeNotReady` warning; a pod
    /// already gone is skipped. Returns whether all were written.
    async fn mark_pods_not_ready(&self, pods: &[Arc<Pod>]) -> bool {
        let now = self.ctx.now();
        let mut ok = true;
        for pod in pods {
            let Some(marked) = rules::pod_not_ready(pod, now) else {
                continue;
            };
            let ns = pod.namespace().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &ns);
            match api
                .replace_status(&pod.name_any(), &PostParams::default(), &marked)
                .await
            {
                Ok(written) => {
                    self.pods.wait_for_write(&written).await;
                    self.recorder
                        .record(&written, EventType::Warning, "NodeNotReady", "Node is not ready")
                        .await;
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    tracing::debug!(pod = %pod.name_any(), namespace = %ns, error = %e, "pod not marked not ready; retrying");
                    ok = false;
                }
            }
        }
        ok
    }

    /// Writes the node's taints (a merge patch carrying the cached resourceVersion, so a
    /// concurrent change makes it fail and the next pass recomputes), then waits for the cache.
    async fn set_taints(&self, node: &Node, taints: Vec<Taint>) -> Result<()> {
        let name = node.name_any();
        let api: Api<Node> = Api::all(self.ctx.client.clone());
        let taints = if taints.is_empty() {
            serde_json::Value::Null
        } else {
            json!(taints)
        };
        let patch = json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": taints},
        });
        let written = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .ctx("patch taints of", || format!("node {name}"))?;
        tracing::debug!(node = %name, taints = ?written.spec.as_ref().and_then(|s| s.taints.as_ref()), "node taints updated");
        self.nodes.wait_for_write(&written).await;
        Ok(())
    }
}
