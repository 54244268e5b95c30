//! What outside a case can make it fail: a node that is not Ready, transient API trouble.
//!
//! A case that fails because its node went away, or while the API server was restarting, must
//! say so, or whoever reads the dashboard chases a product bug that is not there. These helpers
//! turn both into a clause appended to a failure message.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};

/// Appends what the API client met since `since` (an outage, retried answers), if anything, so
/// a timeout caused by a transient fault says so.
pub fn with_transient_note(mut message: String, since: Instant) -> String {
    if let Some(note) = crate::cluster::retry::journal().summary_since(since) {
        message.push_str(&format!("; meanwhile: {note}"));
    }
    message
}

/// How long after an API server outage the cluster's own watches (kubelets', controllers')
/// may still be reconnecting: client-go's reflector and kube-rs' watcher back off from 0.8 s,
/// doubling, so an outage of a few seconds can leave a watch down for about as long again.
pub const WATCHES_RESUME: std::time::Duration = std::time::Duration::from_secs(15);

impl super::Framework {
    /// Whether the API server was unreachable at some point since `since`, or shortly before
    /// it (within [`WATCHES_RESUME`]: the cluster's watches may still have been reconnecting
    /// when the case began). A check that depends on a component having *watched* a change (a
    /// kubelet's service list, which feeds the service environment variables of new pods) can
    /// miss it for reasons outside the product while the watches reconnect after an outage;
    /// such a case may try once more after [`Framework::settle_after_outage`], saying why.
    pub fn api_outage_since(&self, since: Instant) -> bool {
        let from = since.checked_sub(WATCHES_RESUME).unwrap_or(since);
        crate::cluster::retry::journal().outage_since(from).is_some()
    }

    /// Waits until [`WATCHES_RESUME`] has passed since the last API server outage ended (no
    /// wait when there was none or it is long over), within the case's time.
    #[expect(
        clippy::disallowed_methods,
        reason = "other components' watches cannot be watched from here: the wait is their backoff"
    )]
    pub async fn settle_after_outage(&self) {
        let from = Instant::now().checked_sub(WATCHES_RESUME).unwrap_or_else(Instant::now);
        let Some(end) = crate::cluster::retry::journal().outage_since(from) else {
            return;
        };
        let left = WATCHES_RESUME.saturating_sub(end.elapsed()).min(self.remaining());
        if !left.is_zero() {
            self.step(format!(
                "waiting {left:.1?} for the cluster's watches to reconnect after the API server outage"
            ));
            tokio::time::sleep(left).await;
        }
    }
}

/// Kubelets renew their Lease every 10 s (a quarter of its 40 s duration).
const LEASE_RENEW: std::time::Duration = std::time::Duration::from_secs(10);
/// A Lease this stale means the kubelet missed two renewals: the node is silent. The node
/// lifecycle controller only marks it Unknown after its grace period (50 s); a failure in
/// between is still the node's doing.
const LEASE_SILENT: std::time::Duration = std::time::Duration::from_secs(22);

/// `Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)` when node `name`'s
/// Ready condition is not True; `silent: Lease not renewed for 22 s` when its kubelet stopped
/// renewing its Lease; `None` when the node is Ready and renewing, or cannot be read.
///
/// With `watch_lease` false nothing is waited for: a Ready node whose Lease is already older
/// than [`LEASE_SILENT`] counts as silent, others as fine (for a message that must be written
/// before a deadline); with it true a Lease older than one renewal is watched for the next.
pub async fn node_not_ready(client: &kube::Client, name: &str, watch_lease: bool) -> Option<String> {
    let api: Api<Node> = Api::all(client.clone());
    let node = api.get_opt(name).await.ok()??;
    let ready = node.status?.conditions?.into_iter().find(|c| c.type_ == "Ready")?;
    if ready.status != "True" {
        return Some(format!(
            "Ready={} ({}: {})",
            ready.status,
            ready.reason.unwrap_or_default(),
            ready.message.unwrap_or_default()
        ));
    }
    if let Some(verdict) = cached(name) {
        return verdict;
    }
    if !watch_lease {
        return lease_snapshot(client, name).await;
    }
    let verdict = lease_verdict(client, name).await;
    remember(name, verdict.clone());
    verdict
}

/// The silent verdict from the Lease as it is now, without waiting.
async fn lease_snapshot(client: &kube::Client, name: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let renewed = leases.get_opt(name).await.ok()??.spec?.renew_time?.0;
    let age = std::time::Duration::try_from(jiff::Timestamp::now().duration_since(renewed)).unwrap_or_default();
    (age > LEASE_SILENT).then(|| {
        format!(
            "silent: Lease not renewed for {:.0} s (kubelets renew every {} s)",
            age.as_secs_f64(),
            LEASE_RENEW.as_secs()
        )
    })
}

/// Whether node `name`'s kubelet still renews its Lease: watched until the next renewal is
/// due plus a missed one ([`LEASE_SILENT`] after the last), so a node that died seconds before
/// a failure is caught too. A healthy node answers within one renewal period (10 s at most).
async fn lease_verdict(client: &kube::Client, name: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let renewed = leases.get_opt(name).await.ok()??.spec?.renew_time?.0;
    let age = |at: jiff::Timestamp| {
        std::time::Duration::try_from(jiff::Timestamp::now().duration_since(at)).unwrap_or_default()
    };
    let renewed_since = move |l: Option<&Lease>| {
        l.and_then(|l| l.spec.as_ref())
            .and_then(|s| s.renew_time.as_ref())
            .is_some_and(|t| t.0 > renewed)
    };
    let within = LEASE_SILENT.saturating_sub(age(renewed));
    let mut stream = watcher::watch_object(leases, name).default_backoff().boxed();
    let renewed_again = tokio::time::timeout(within, async {
        while let Some(event) = stream.next().await {
            if let Ok(lease) = event
                && renewed_since(lease.as_ref())
            {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    (!renewed_again).then(|| {
        format!(
            "silent: Lease not renewed for {:.0} s (kubelets renew every {} s)",
            age(renewed).as_secs_f64(),
            LEASE_RENEW.as_secs()
        )
    })
}

/// Verdicts of the last [`LEASE_RENEW`], so that a wait's timeout and the runner's note on the
/// same failure watch a Lease once.
/// Node name to when it was judged and the verdict.
type Verdicts = Mutex<HashMap<String, (Instant, Option<String>)>>;

fn verdicts() -> &'static Verdicts {
    static V: OnceLock<Verdicts> = OnceLock::new();
    V.get_or_init(Default::default)
}

fn cached(node: &str) -> Option<Option<String>> {
    let map = verdicts().lock().unwrap_or_else(|p| p.into_inner());
    map.get(node)
        .filter(|(at, _)| at.elapsed() < LEASE_RENEW)
        .map(|(_, v)| v.clone())
}

fn remember(node: &str, verdict: Option<String>) {
    let mut map = verdicts().lock().unwrap_or_else(|p| p.into_inner());
    map.insert(node.to_string(), (Instant::now(), verdict));
}

/// `; pods on nodes in trouble: web-0 on win-2 (Ready=Unknown (…))` for the pods of
/// namespace `ns`, or an empty string when every node they run on is Ready.
pub async fn unready_nodes_note(client: &kube::Client, ns: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let Ok(list) = pods.list(&ListParams::default()).await else {
        return String::new();
    };
    let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pod in list.items {
        if let (Some(name), Some(node)) = (pod.metadata.name, pod.spec.and_then(|s| s.node_name)) {
            by_node.entry(node).or_default().push(name);
        }
    }
    // Every node is judged, not only those of the case's pods: a case that reaches every node
    // (NodePorts, DaemonSets) fails on a lost node it had no pod on. Judged concurrently, so a
    // failure waits one Lease renewal at most.
    let nodes: Api<Node> = Api::all(client.clone());
    if let Ok(all) = nodes.list(&ListParams::default()).await {
        for n in all.items {
            if let Some(name) = n.metadata.name {
                by_node.entry(name).or_default();
            }
        }
    }
    let verdicts = futures::future::join_all(
        by_node
            .keys()
            .map(|node| async move { (node.clone(), node_not_ready(client, node, true).await) }),
    )
    .await;
    let mut with_pods = Vec::new();
    let mut others = Vec::new();
    for (node, verdict) in verdicts {
        let Some(trouble) = verdict else { continue };
        match by_node.get(&node).filter(|p| !p.is_empty()) {
            Some(pods) => with_pods.push(format!("{} on {node} ({trouble})", pods.join(", "))),
            None => others.push(format!("{node} ({trouble})")),
        }
    }
    let mut note = String::new();
    if !with_pods.is_empty() {
        note.push_str(&format!("; pods on nodes in trouble: {}", with_pods.join("; ")));
    }
    if !others.is_empty() {
        note.push_str(&format!("; other nodes in trouble: {}", others.join("; ")));
    }
    note
}
