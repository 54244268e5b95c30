//! The resource quota controller: keeps `status.hard` and `status.used` of every ResourceQuota
//! up to date. Enforcement (refusing a create past `hard`) is the API server's admission; it
//! can share [`compute_usage`] so both count alike.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Pod, ReplicationController, ResourceQuota, Secret, Service,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::Result;
use super::informer::{Informer, Wake};
use super::plane::Ctx;
use super::predicates::parse_quantity_milli;
use super::writes::patch_status_at;

/// What one namespace holds, as quota usage is computed from it.
#[derive(Debug, Default, Clone)]
pub struct Usage<'a> {
    /// Pods of the namespace.
    pub pods: Vec<&'a Pod>,
    /// Services of the namespace.
    pub services: Vec<&'a Service>,
    /// PersistentVolumeClaims of the namespace.
    pub claims: Vec<&'a PersistentVolumeClaim>,
    /// Object counts by resource (`configmaps`, `secrets`, `deployments.apps`…), for the
    /// object-count quotas.
    pub counts: BTreeMap<String, usize>,
}

fn pod_counts(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn is_best_effort(pod: &Pod) -> bool {
    pod.spec.as_ref().is_none_or(|s| {
        s.containers.iter().chain(s.init_containers.iter().flatten()).all(|c| {
            c.resources.as_ref().is_none_or(|r| {
                r.requests.as_ref().is_none_or(BTreeMap::is_empty) && r.limits.as_ref().is_none_or(BTreeMap::is_empty)
            })
        })
    })
}

fn scope_matches(scopes: &[String], pod: &Pod) -> bool {
    scopes.iter().all(|s| match s.as_str() {
        "Terminating" => pod.spec.as_ref().and_then(|s| s.active_deadline_seconds).is_some(),
        "NotTerminating" => pod.spec.as_ref().and_then(|s| s.active_deadline_seconds).is_none(),
        "BestEffort" => is_best_effort(pod),
        "NotBestEffort" => !is_best_effort(pod),
        _ => true,
    })
}

/// A pod's total of `requests` or `limits` for `resource`, in milli-units (containers summed,
/// init containers by max, plus overhead), as quota counts it.
pub fn pod_amount(pod: &Pod, limits: bool, resource: &str) -> i128 {
    let Some(spec) = pod.spec.as_ref() else { return 0 };
    let get = |c: &k8s_openapi::api::core::v1::Container| -> i128 {
        c.resources
            .as_ref()
            .and_then(|r| if limits { r.limits.as_ref() } else { r.requests.as_ref() })
            .and_then(|m| m.get(resource))
            .and_then(|q| parse_quantity_milli(&q.0))
            .unwrap_or(0)
    };
    let sum: i128 = spec.containers.iter().map(get).sum();
    let init = spec.init_containers.iter().flatten().map(get).max().unwrap_or(0);
    let overhead = spec
        .overhead
        .as_ref()
        .and_then(|o| o.get(resource))
        .and_then(|q| parse_quantity_milli(&q.0))
        .unwrap_or(0);
    sum.max(init) + overhead
}

/// Renders milli-units as a quantity: whole numbers plainly (memory and storage in the largest
/// exact binary unit), fractions in `m`.
pub fn format_quantity(milli: i128, resource: &str) -> Quantity {
    if milli % 1000 != 0 {
        return Quantity(format!("{milli}m"));
    }
    let n = milli / 1000;
    if (resource.contains("memory") || resource.contains("storage")) && n != 0 {
        for (suffix, size) in [("Ti", 1i128 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
            if n % size == 0 {
                return Quantity(format!("{}{suffix}", n / size));
            }
        }
    }
    Quantity(n.to_string())
}

/// The usage of every resource named in `hard`, for a quota with `scopes`.
pub fn compute_usage(
    hard: &BTreeMap<String, Quantity>,
    scopes: &[String],
    usage: &Usage<'_>,
) -> BTreeMap<String, Quantity> {
    let pods: Vec<&Pod> = usage
        .pods
        .iter()
        .copied()
        .filter(|p| pod_counts(p) && scope_matches(scopes, p))
        .collect();
    let mut used = BTreeMap::new();
    for name in hard.keys() {
        let milli: i128 = match name.as_str() {
            "pods" | "count/pods" => pods.len() as i128 * 1000,
            "cpu" | "requests.cpu" => pods.iter().map(|p| pod_amount(p, false, "cpu")).sum(),
            "memory" | "requests.memory" => pods.iter().map(|p| pod_amount(p, false, "memory")).sum(),
            "ephemeral-storage" | "requests.ephemeral-storage" => {
                pods.iter().map(|p| pod_amount(p, false, "ephemeral-storage")).sum()
            }
            n if n.starts_with("limits.") => pods.iter().map(|p| pod_amount(p, true, &n["limits.".len()..])).sum(),
            n if n.starts_with("requests.") && n != "requests.storage" => {
                pods.iter().map(|p| pod_amount(p, false, &n["requests.".len()..])).sum()
            }
            "services" | "count/services" => usage.services.len() as i128 * 1000,
            "services.nodeports" => {
                usage
                    .services
                    .iter()
                    .filter_map(|s| s.spec.as_ref())
                    .filter(|s| matches!(s.type_.as_deref(), Some("NodePort" | "LoadBalancer")))
                    .map(|s| {
                        s.ports
                            .as_ref()
                            .map_or(0, |p| p.iter().filter(|p| p.node_port.is_some()).count())
                            as i128
                    })
                    .sum::<i128>()
                    * 1000
            }
            "services.loadbalancers" => {
                usage
                    .services
                    .iter()
                    .filter(|s| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer"))
                    .count() as i128
                    * 1000
            }
            "persistentvolumeclaims" | "count/persistentvolumeclaims" => usage.claims.len() as i128 * 1000,
            "requests.storage" => usage
                .claims
                .iter()
                .filter_map(|c| c.spec.as_ref()?.resources.as_ref()?.requests.as_ref()?.get("storage"))
                .filter_map(|q| parse_quantity_milli(&q.0))
                .sum(),
            n => {
                let key = n.strip_prefix("count/").unwrap_or(n);
                usage.counts.get(key).copied().unwrap_or(0) as i128 * 1000
            }
        };
        used.insert(name.clone(), format_quantity(milli, name));
    }
    used
}

struct Caches {
    pods: Informer<Pod>,
    services: Informer<Service>,
    claims: Informer<PersistentVolumeClaim>,
    quotas: Informer<ResourceQuota>,
    counted: Vec<(&'static str, Counter)>,
}

/// Counts the objects of one resource in a namespace.
type Counter = Box<dyn Fn(&str) -> usize + Send + Sync>;

fn counter<K: super::informer::Cached>(ctx: &Ctx) -> (Informer<K>, Counter) {
    let i = ctx.informers.get::<K>();
    let c = i.clone();
    (i, Box::new(move |ns: &str| c.in_namespace(ns).len()))
}

/// Runs the resource quota controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let quotas = ctx.informers.get::<ResourceQuota>();
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = quotas.ready() => r?,
    }
    let pods = ctx.informers.get::<Pod>();
    let services = ctx.informers.get::<Service>();
    let claims = ctx.informers.get::<PersistentVolumeClaim>();
    let mut receivers = vec![
        quotas.subscribe(),
        pods.subscribe(),
        services.subscribe(),
        claims.subscribe(),
    ];
    let mut counted: Vec<(&'static str, Counter)> = Vec::new();
    macro_rules! count {
        ($name:literal, $t:ty) => {{
            let (i, f) = counter::<$t>(&ctx);
            receivers.push(i.subscribe());
            counted.push(($name, f));
        }};
    }
    count!("configmaps", ConfigMap);
    count!("secrets", Secret);
    if ctx.informers.served::<ReplicationController>().await {
        count!("replicationcontrollers", ReplicationController);
    }
    count!("resourcequotas", ResourceQuota);
    count!("deployments.apps", Deployment);
    count!("replicasets.apps", ReplicaSet);
    count!("statefulsets.apps", StatefulSet);
    count!("daemonsets.apps", DaemonSet);
    count!("jobs.batch", Job);
    count!("cronjobs.batch", CronJob);
    let caches = Caches {
        pods,
        services,
        claims,
        quotas,
        counted,
    };
    let mut wake = Wake::new(receivers, ctx.cfg.resync);
    loop {
        let mut retry = None;
        for q in caches.quotas.list() {
            if let Err(e) = sync(&ctx, &caches, &q).await {
                if !e.is_not_found() && !e.is_conflict() {
                    tracing::warn!(quota = %q.name_any(), error = %super::error::chain(&e), "quota sync failed");
                }
                retry = Some(Duration::from_secs(1));
            }
        }
        if !wake.next(retry, &ctx.cancel).await {
            return Ok(());
        }
    }
}

async fn sync(ctx: &Ctx, caches: &Caches, q: &Arc<ResourceQuota>) -> Result<()> {
    let ns = q.namespace().unwrap_or_default();
    let hard = q.spec.as_ref().and_then(|s| s.hard.clone()).unwrap_or_default();
    let scopes = q.spec.as_ref().and_then(|s| s.scopes.clone()).unwrap_or_default();
    let pods = caches.pods.in_namespace(&ns);
    let services = caches.services.in_namespace(&ns);
    let claims = caches.claims.in_namespace(&ns);
    let usage = Usage {
        pods: pods.iter().map(AsRef::as_ref).collect(),
        services: services.iter().map(AsRef::as_ref).collect(),
        claims: claims.iter().map(AsRef::as_ref).collect(),
        counts: caches
            .counted
            .iter()
            .map(|(name, f)| ((*name).to_owned(), f(&ns)))
            .collect(),
    };
    let used = compute_usage(&hard, &scopes, &usage);
    let status = q.status.clone().unwrap_or_default();
    let same = |a: &Option<BTreeMap<String, Quantity>>, b: &BTreeMap<String, Quantity>| {
        let a = a.clone().unwrap_or_default();
        a.len() == b.len()
            && a.iter().all(|(k, v)| {
                b.get(k)
                    .is_some_and(|w| parse_quantity_milli(&v.0) == parse_quantity_milli(&w.0))
            })
    };
    if same(&status.hard, &hard) && same(&status.used, &used) {
        return Ok(());
    }
    let api: Api<ResourceQuota> = Api::namespaced(ctx.client.clone(), &ns);
    let name = q.name_any();
    // A merge patch keeps map keys it does not mention: a key that left spec.hard is set to null
    // so it goes. The patch is conditional on the resourceVersion the cache holds, as upstream's
    // UpdateStatus of the listed quota is: a pass computed before a client's own /status write
    // answers 409 and the next pass starts from what that client wrote.
    let with_removals = |stored: &Option<BTreeMap<String, Quantity>>, fresh: &BTreeMap<String, Quantity>| {
        let mut map = serde_json::Map::new();
        for key in stored.iter().flat_map(|m| m.keys()) {
            if !fresh.contains_key(key) {
                map.insert(key.clone(), serde_json::Value::Null);
            }
        }
        for (k, v) in fresh {
            map.insert(k.clone(), json!(v));
        }
        serde_json::Value::Object(map)
    };
    let status = json!({
        "hard": with_removals(&status.hard, &hard),
        "used": with_removals(&status.used, &used),
    });
    patch_status_at(&api, &name, q.metadata.resource_version.as_deref(), status, || {
        format!("resourcequota {ns}/{name}")
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn usage_counts_live_pods_requests_limits_and_objects() {
        let a = pod(json!({"spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}}}]}}));
        let b = pod(json!({"spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "750m", "memory": "64Mi"}}}]}}));
        let done = pod(json!({"spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "1"}}}]}, "status": {"phase": "Succeeded"}}));
        let svc: Service =
            serde_json::from_value(json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30001}]}}))
                .unwrap();
        let hard: BTreeMap<String, Quantity> = [
            "pods",
            "requests.cpu",
            "requests.memory",
            "limits.cpu",
            "limits.memory",
            "services",
            "services.nodeports",
            "configmaps",
            "count/deployments.apps",
        ]
        .into_iter()
        .map(|k| (k.to_owned(), Quantity("100".into())))
        .collect();
        let usage = Usage {
            pods: vec![&a, &b, &done],
            services: vec![&svc],
            claims: vec![],
            counts: [("configmaps".to_owned(), 2), ("deployments.apps".to_owned(), 1)]
                .into_iter()
                .collect(),
        };
        let used = compute_usage(&hard, &[], &usage);
        let get = |k: &str| used[k].0.clone();
        assert_eq!(get("pods"), "2");
        assert_eq!(get("requests.cpu"), "1");
        assert_eq!(get("requests.memory"), "128Mi");
        assert_eq!(get("limits.cpu"), "500m");
        assert_eq!(get("limits.memory"), "128Mi");
        assert_eq!(get("services"), "1");
        assert_eq!(get("services.nodeports"), "1");
        assert_eq!(get("configmaps"), "2");
        assert_eq!(get("count/deployments.apps"), "1");
        let best_effort = compute_usage(&hard, &["BestEffort".to_owned()], &usage);
        assert_eq!(best_effort["pods"].0, "0");
    }

    #[test]
    fn quantities_render_canonically() {
        assert_eq!(format_quantity(1500, "cpu").0, "1500m");
        assert_eq!(format_quantity(2000, "cpu").0, "2");
        assert_eq!(format_quantity(1024 * 1024 * 1000, "requests.memory").0, "1Mi");
        assert_eq!(format_quantity(0, "memory").0, "0");
    }
}
