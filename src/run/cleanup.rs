//! Removing what runs created: every namespace labelled with a run id, waited on until gone.
//!
//! Upstream's known pain is an interrupted run leaving namespaces behind; every object a run
//! creates carries `crossconf.io/run-id`, so cleanup is one label selector away.

use std::fmt;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;

/// Errors of a cleanup.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Listing labelled namespaces failed.
    #[error("listing namespaces labelled {selector}")]
    List {
        /// The selector.
        selector: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Deleting a namespace (or a labelled cluster-scoped collection) failed.
    #[error("deleting {name}")]
    Delete {
        /// The namespace, or the kind and selector.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Namespaces were still there when the time ran out.
    #[error("namespaces still terminating after {waited:?}: {remaining:?}")]
    Timeout {
        /// How long we waited.
        waited: Duration,
        /// Their names.
        remaining: Vec<String>,
    },
}

/// What a cleanup removed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CleanupReport {
    /// Namespaces deleted (already terminating ones included).
    pub namespaces: Vec<String>,
    /// How long it took until they were gone.
    pub waited: Duration,
    /// Pods force-deleted because their node stopped answering (`namespace/pod on node`).
    pub forced: Vec<String>,
}

/// How long namespaces may take to go before pods on unreachable nodes are force-deleted.
pub const STRANDED_AFTER: Duration = Duration::from_secs(20);

impl fmt::Display for CleanupReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespaces.is_empty() {
            write!(f, "nothing to clean up")
        } else {
            write!(
                f,
                "deleted {} namespace(s) in {:.1?}: {}",
                self.namespaces.len(),
                self.waited,
                self.namespaces.join(", ")
            )?;
            if !self.forced.is_empty() {
                write!(
                    f,
                    "; force-deleted {} pod(s) stranded on unreachable nodes: {}",
                    self.forced.len(),
                    self.forced.join(", ")
                )?;
            }
            Ok(())
        }
    }
}

/// Deletes the cluster-scoped objects with the run-id label that cases create and remove
/// themselves (webhook configurations, CustomResourceDefinitions, PriorityClasses, and the
/// API-operations cases' IngressClasses, RuntimeClasses, CSRs and storage objects): a case cut
/// off by its timeout or an interrupt never reaches its own clean-up, and a webhook
/// configuration left behind would go on judging requests. A kind the cluster does not serve
/// (404) has nothing to delete.
async fn delete_cluster_scoped(client: &Client, selector: &str) -> Result<(), Error> {
    use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    async fn sweep<K>(client: &Client, selector: &str) -> Result<(), Error>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope> + Clone + fmt::Debug + serde::de::DeserializeOwned,
        K::DynamicType: Default,
    {
        let api: Api<K> = Api::all(client.clone());
        match api
            .delete_collection(&DeleteParams::default(), &ListParams::default().labels(selector))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => Err(Error::Delete {
                name: format!("{} labelled {selector}", K::plural(&Default::default())),
                source,
            }),
        }
    }
    sweep::<ValidatingWebhookConfiguration>(client, selector).await?;
    sweep::<MutatingWebhookConfiguration>(client, selector).await?;
    sweep::<CustomResourceDefinition>(client, selector).await?;
    sweep::<PriorityClass>(client, selector).await?;
    // The cluster-scoped kinds of the API-operations cases (`cases::apiops`).
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    use k8s_openapi::api::core::v1::PersistentVolume;
    use k8s_openapi::api::networking::v1::IngressClass;
    use k8s_openapi::api::node::v1::RuntimeClass;
    use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass, VolumeAttachment};
    sweep::<IngressClass>(client, selector).await?;
    sweep::<RuntimeClass>(client, selector).await?;
    sweep::<CertificateSigningRequest>(client, selector).await?;
    sweep::<StorageClass>(client, selector).await?;
    sweep::<CSIDriver>(client, selector).await?;
    sweep::<CSINode>(client, selector).await?;
    sweep::<VolumeAttachment>(client, selector).await?;
    // The fake node of `[sig-node] Node Lifecycle`.
    sweep::<Node>(client, selector).await?;
    sweep::<PersistentVolume>(client, selector).await
}

/// Deletes every namespace matching `selector` and waits (on a watch) until all are gone.
///
/// # Errors
/// When listing or deleting fails, or namespaces remain after `timeout`.
pub async fn delete_labelled(client: &Client, selector: &str, timeout: Duration) -> Result<CleanupReport, Error> {
    let start = Instant::now();
    delete_cluster_scoped(client, selector).await?;
    let api: Api<Namespace> = Api::all(client.clone());
    let lp = ListParams::default().labels(selector);
    let list = api.list(&lp).await.map_err(|source| Error::List {
        selector: selector.into(),
        source,
    })?;
    let names: Vec<String> = list.items.iter().filter_map(|n| n.metadata.name.clone()).collect();
    for name in &names {
        if let Err(source) = crate::framework::delete_namespace(client, name).await {
            return Err(Error::Delete {
                name: format!("namespace {name}"),
                source,
            });
        }
    }
    if names.is_empty() {
        return Ok(CleanupReport::default());
    }
    let mut remaining: std::collections::BTreeSet<String> = names.iter().cloned().collect();
    let config = watcher::Config::default().labels(selector);
    let mut stream = watcher(api.clone(), config).default_backoff().boxed();
    let mut forced = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut stranded_check = Some(tokio::time::Instant::now() + STRANDED_AFTER.min(timeout));
    let mut initial: Option<std::collections::BTreeSet<String>> = None;
    loop {
        if remaining.is_empty() {
            break;
        }
        let wake = stranded_check.map_or(deadline, |t| t.min(deadline));
        let event = tokio::select! {
            e = stream.next() => e,
            () = tokio::time::sleep_until(wake) => {
                if tokio::time::Instant::now() >= deadline {
                    return Err(Error::Timeout {
                        waited: start.elapsed(),
                        remaining: remaining.into_iter().collect(),
                    });
                }
                // A namespace cannot finish while a pod on a node that stopped answering waits
                // for its kubelet to confirm the deletion, which never comes: force those.
                forced.extend(force_stranded(client, &remaining).await);
                stranded_check = None;
                continue;
            }
        };
        let Some(event) = event else { break };
        match event {
            Ok(watcher::Event::Delete(ns)) => {
                if let Some(n) = ns.metadata.name {
                    remaining.remove(&n);
                }
            }
            Ok(watcher::Event::Init) => initial = Some(Default::default()),
            Ok(watcher::Event::InitApply(ns)) => {
                if let (Some(set), Some(n)) = (initial.as_mut(), ns.metadata.name) {
                    set.insert(n);
                }
            }
            Ok(watcher::Event::InitDone) => {
                if let Some(set) = initial.take() {
                    remaining.retain(|n| set.contains(n));
                }
            }
            Ok(watcher::Event::Apply(_)) => {}
            Err(e) => {
                crate::cluster::retry::journal().record(crate::cluster::retry::Trouble::WatchRestart);
                tracing::debug!(error = %e, "namespace watch error during cleanup");
            }
        }
    }
    Ok(CleanupReport {
        namespaces: names,
        waited: start.elapsed(),
        forced,
    })
}

/// Force-deletes (grace period 0) the pods of `namespaces` whose node's Ready condition is
/// Unknown: the node lifecycle controller's verdict for a kubelet that stopped posting status.
/// Returns `namespace/pod on node` for each. Errors are logged: this is a best effort on the
/// way to the timeout that reports what is left.
async fn force_stranded(client: &Client, namespaces: &std::collections::BTreeSet<String>) -> Vec<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let unknown: std::collections::BTreeSet<String> = match nodes.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "Unknown"))
            })
            .filter_map(|n| n.metadata.name)
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot list nodes to find pods stranded on unreachable nodes");
            return Vec::new();
        }
    };
    let mut forced = Vec::new();
    if unknown.is_empty() {
        return forced;
    }
    for ns in namespaces {
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let list = match pods.list(&ListParams::default()).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(namespace = ns, error = %e, "cannot list pods of a terminating namespace");
                continue;
            }
        };
        for pod in list.items {
            let (Some(name), Some(node)) = (pod.metadata.name, pod.spec.and_then(|s| s.node_name)) else {
                continue;
            };
            if !unknown.contains(&node) {
                continue;
            }
            match pods.delete(&name, &DeleteParams::default().grace_period(0)).await {
                Ok(_) => forced.push(format!("{ns}/{name} on {node}")),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => tracing::warn!(namespace = ns, pod = name, error = %e, "force deletion failed"),
            }
        }
    }
    if !forced.is_empty() {
        tracing::info!(pods = ?forced, "force-deleted pods stranded on nodes whose Ready condition is Unknown");
    }
    forced
}
