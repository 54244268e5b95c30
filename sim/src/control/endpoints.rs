//! The endpoints and endpointslice controllers: for every Service with a selector, the
//! addresses of the pods it selects (ready and not-ready, from the pods' Ready condition), with
//! named target ports resolved against each pod's container ports. Services without a selector
//! are left to whoever manages their endpoints.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service, ServicePort,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort as SlicePort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{ApiContext, Result, is_not_found};
use super::informer::{Informer, Requeue, Wake};
use super::plane::Ctx;
use super::util::{is_ready, owner_ref, phase};

/// The label tying an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming who manages an EndpointSlice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY_LABEL`], upstream's.
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

/// Runs both controllers until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let services = ctx.informers.get::<Service>();
    let pods = ctx.informers.get::<Pod>();
    let endpoints = ctx.informers.get::<Endpoints>();
    let slices = ctx.informers.get::<EndpointSlice>();
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = async {
            services.ready().await?;
            pods.ready().await?;
            endpoints.ready().await?;
            slices.ready().await
        } => r?,
    }
    let mut wake = Wake::new(vec![services.subscribe(), pods.subscribe()], ctx.cfg.resync);
    let mut requeue = Requeue::default();
    // Every Service seen, whatever its type: upstream's controller deletes the Endpoints named
    // after a Service when that Service is deleted (syncService finds it gone), whether or not
    // it wrote them. Remembered before any write, since a write whose answer was lost may
    // still have landed. Gap: this loop is level-based, so a Service created and deleted
    // between two passes is never seen and user-made Endpoints of it stay (upstream's delete
    // event would reach them).
    let mut known: HashSet<(String, String)> = HashSet::new();
    loop {
        for svc in services.list() {
            known.insert((svc.namespace().unwrap_or_default(), svc.name_any()));
            if !has_selector(&svc) {
                continue;
            }
            // The `endpoints-emptied` fault: a broken controller that publishes no addresses,
            // so kube-proxy rejects and headless names resolve to nothing.
            let backends = if ctx.cfg.faults.is_on("endpoints-emptied") {
                Vec::new()
            } else {
                backends(&svc, &pods.in_namespace(&svc.namespace().unwrap_or_default()))
            };
            if let Err(e) = sync_endpoints(&ctx, &endpoints, &svc, &backends).await {
                tracing::warn!(service = %svc.name_any(), error = %super::error::chain(&e), "endpoints sync failed");
                requeue.after(Duration::from_secs(1));
            }
            if let Err(e) = sync_slices(&ctx, &slices, &svc, &backends).await {
                tracing::warn!(service = %svc.name_any(), error = %super::error::chain(&e), "endpointslice sync failed");
                requeue.after(Duration::from_secs(1));
            }
        }
        // The Endpoints of a Service that is gone are removed, as upstream does; a failed delete
        // is retried soon rather than at the next resync.
        let gone: Vec<(String, String)> = known
            .iter()
            .filter(|(ns, n)| services.get(Some(ns), n).is_none())
            .cloned()
            .collect();
        for (ns, n) in gone {
            let api: Api<Endpoints> = Api::namespaced(ctx.client.clone(), &ns);
            match api.delete(&n, &DeleteParams::default()).await {
                Ok(_) => {
                    known.remove(&(ns, n));
                }
                Err(e) if is_not_found(&e) => {
                    known.remove(&(ns, n));
                }
                Err(e) => {
                    tracing::warn!(endpoints = %n, error = %e, "failed to delete endpoints of a deleted service");
                    requeue.after(Duration::from_secs(1));
                }
            }
        }
        if !wake.next(requeue.take(), &ctx.cancel).await {
            return Ok(());
        }
    }
}

fn has_selector(svc: &Service) -> bool {
    svc.spec.as_ref().is_some_and(|s| {
        s.type_.as_deref() != Some("ExternalName") && s.selector.as_ref().is_some_and(|sel| !sel.is_empty())
    })
}

/// One selected pod with what the endpoints need of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Backend {
    /// The pod's IP.
    pub ip: String,
    /// Ready and not terminating (or published regardless, with publishNotReadyAddresses).
    pub ready: bool,
    /// Ready by its condition, terminating or not (EndpointSlice `serving`).
    pub serving: bool,
    /// Being deleted.
    pub terminating: bool,
    /// The node it runs on.
    pub node_name: Option<String>,
    /// A reference to the pod.
    pub target: ObjectReference,
    /// The pod's hostname when its subdomain is the Service (headless DNS identity).
    pub hostname: Option<String>,
    /// The Service's ports resolved for this pod: (name, port, protocol, appProtocol).
    pub ports: Vec<(Option<String>, i32, String, Option<String>)>,
}

/// Resolves a Service port's targetPort against a pod: a number is used as is, a name must
/// match one of the pod's container ports (with the same protocol).
pub fn resolve_target_port(port: &ServicePort, pod: &Pod) -> Option<i32> {
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    match &port.target_port {
        None => Some(port.port),
        Some(IntOrString::Int(i)) => Some(*i),
        Some(IntOrString::String(name)) => match name.parse::<i32>() {
            Ok(n) => Some(n),
            Err(_) => pod
                .spec
                .as_ref()?
                .containers
                .iter()
                .flat_map(|c| c.ports.iter().flatten())
                .find_map(|p| {
                    (p.name.as_deref() == Some(name.as_str()) && p.protocol.as_deref().unwrap_or("TCP") == protocol)
                        .then_some(p.container_port)
                }),
        },
    }
}

/// The pods a Service selects, as endpoint backends.
pub fn backends(svc: &Service, pods: &[Arc<Pod>]) -> Vec<Backend> {
    let Some(spec) = svc.spec.as_ref() else {
        return Vec::new();
    };
    let Some(selector) = spec.selector.as_ref() else {
        return Vec::new();
    };
    let publish_not_ready = spec.publish_not_ready_addresses == Some(true);
    let mut out: Vec<Backend> = pods
        .iter()
        .filter(|p| selector.iter().all(|(k, v)| p.labels().get(k) == Some(v)))
        .filter(|p| !matches!(phase(p), "Succeeded" | "Failed"))
        .filter_map(|p| {
            let ip = p.status.as_ref()?.pod_ip.clone().filter(|ip| !ip.is_empty())?;
            let pspec = p.spec.as_ref();
            let hostname = pspec
                .filter(|s| s.subdomain.as_deref() == svc.metadata.name.as_deref())
                .and_then(|s| s.hostname.clone());
            let ports = spec
                .ports
                .iter()
                .flatten()
                .filter_map(|sp| {
                    let port = resolve_target_port(sp, p)?;
                    Some((
                        sp.name.clone(),
                        port,
                        sp.protocol.clone().unwrap_or_else(|| "TCP".into()),
                        sp.app_protocol.clone(),
                    ))
                })
                .collect();
            Some(Backend {
                ip,
                ready: publish_not_ready || (is_ready(p) && p.metadata.deletion_timestamp.is_none()),
                serving: publish_not_ready || is_ready(p),
                terminating: p.metadata.deletion_timestamp.is_some(),
                node_name: pspec.and_then(|s| s.node_name.clone()),
                target: ObjectReference {
                    kind: Some("Pod".into()),
                    name: p.metadata.name.clone(),
                    namespace: p.metadata.namespace.clone(),
                    uid: p.metadata.uid.clone(),
                    ..ObjectReference::default()
                },
                hostname,
                ports,
            })
        })
        .collect();
    out.sort_by(|a, b| a.ip.cmp(&b.ip).then(a.target.name.cmp(&b.target.name)));
    out
}

/// Ports, ready and not-ready addresses of one subset under construction.
type SubsetParts = (Vec<EndpointPort>, Vec<EndpointAddress>, Vec<EndpointAddress>);

/// The Endpoints subsets of a Service: backends grouped by their resolved port set.
/// Terminating pods are left out unless the Service publishes not-ready addresses.
pub fn subsets(svc: &Service, backends: &[Backend]) -> Vec<EndpointSubset> {
    let publish = svc.spec.as_ref().and_then(|s| s.publish_not_ready_addresses) == Some(true);
    let mut groups: BTreeMap<String, SubsetParts> = BTreeMap::new();
    for b in backends.iter().filter(|b| publish || !b.terminating) {
        let headless_ports = svc
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .is_none_or(Vec::is_empty);
        if b.ports.is_empty() && !headless_ports {
            continue;
        }
        let ports: Vec<EndpointPort> = b
            .ports
            .iter()
            .map(|(name, port, protocol, app)| EndpointPort {
                name: name.clone(),
                port: *port,
                protocol: Some(protocol.clone()),
                app_protocol: app.clone(),
            })
            .collect();
        let key = serde_json::to_string(&ports).unwrap_or_default();
        let addr = EndpointAddress {
            ip: b.ip.clone(),
            hostname: b.hostname.clone(),
            node_name: b.node_name.clone(),
            target_ref: Some(b.target.clone()),
        };
        let g = groups.entry(key).or_insert_with(|| (ports, Vec::new(), Vec::new()));
        if b.ready { g.1.push(addr) } else { g.2.push(addr) }
    }
    groups
        .into_values()
        .map(|(ports, ready, not_ready)| EndpointSubset {
            addresses: (!ready.is_empty()).then_some(ready),
            not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
            ports: (!ports.is_empty()).then_some(ports),
        })
        .collect()
}

fn headless_labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = svc.labels().clone();
    if svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None") {
        labels.insert("service.kubernetes.io/headless".into(), String::new());
    }
    labels
}

async fn sync_endpoints(ctx: &Ctx, cache: &Informer<Endpoints>, svc: &Service, backends: &[Backend]) -> Result<()> {
    let ns = svc.namespace().unwrap_or_default();
    let name = svc.name_any();
    let subsets = subsets(svc, backends);
    let labels = headless_labels(svc);
    let api: Api<Endpoints> = Api::namespaced(ctx.client.clone(), &ns);
    match cache.get(Some(&ns), &name) {
        Some(current) => {
            let have = current.subsets.clone().unwrap_or_default();
            if have == subsets && current.labels() == &labels {
                return Ok(());
            }
            let patch = json!({
                "metadata": {"labels": labels},
                "subsets": if subsets.is_empty() { serde_json::Value::Null } else { json!(subsets) },
            });
            let written = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .ctx("update", || format!("endpoints {ns}/{name}"))?;
            cache.wait_for_write(&written).await;
        }
        None => {
            let ep = Endpoints {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(ns.clone()),
                    labels: Some(labels),
                    ..ObjectMeta::default()
                },
                subsets: (!subsets.is_empty()).then_some(subsets),
            };
            match api.create(&PostParams::default(), &ep).await {
                Ok(written) => cache.wait_for_write(&written).await,
                Err(e) if super::error::is_conflict(&e) => {}
                Err(e) => return Err(e).ctx("create", || format!("endpoints {ns}/{name}")),
            }
        }
    }
    Ok(())
}

/// The desired slices of a Service: (ports, endpoints) per resolved port set, at least one.
pub fn desired_slices(backends: &[Backend]) -> Vec<(Vec<SlicePort>, Vec<Endpoint>)> {
    let mut groups: BTreeMap<String, (Vec<SlicePort>, Vec<Endpoint>)> = BTreeMap::new();
    for b in backends {
        let ports: Vec<SlicePort> = b
            .ports
            .iter()
            .map(|(name, port, protocol, app)| SlicePort {
                name: Some(name.clone().unwrap_or_default()),
                port: Some(*port),
                protocol: Some(protocol.clone()),
                app_protocol: app.clone(),
            })
            .collect();
        let key = serde_json::to_string(&ports).unwrap_or_default();
        let g = groups.entry(key).or_insert_with(|| (ports, Vec::new()));
        g.1.push(Endpoint {
            addresses: vec![b.ip.clone()],
            conditions: Some(EndpointConditions {
                ready: Some(b.ready && !b.terminating),
                serving: Some(b.serving),
                terminating: Some(b.terminating),
            }),
            hostname: b.hostname.clone(),
            node_name: b.node_name.clone(),
            target_ref: Some(b.target.clone()),
            ..Endpoint::default()
        });
    }
    if groups.is_empty() {
        groups.insert(String::new(), (Vec::new(), Vec::new()));
    }
    groups.into_values().collect()
}

async fn sync_slices(ctx: &Ctx, cache: &Informer<EndpointSlice>, svc: &Service, backends: &[Backend]) -> Result<()> {
    let ns = svc.namespace().unwrap_or_default();
    let name = svc.name_any();
    let api: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), &ns);
    let mut existing: Vec<Arc<EndpointSlice>> = cache
        .in_namespace(&ns)
        .into_iter()
        .filter(|s| {
            s.labels().get(SERVICE_NAME_LABEL) == Some(&name)
                && s.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
                && s.metadata.deletion_timestamp.is_none()
        })
        .collect();
    existing.sort_by_key(|s| s.metadata.creation_timestamp.clone());
    let mut labels = headless_labels(svc);
    labels.insert(SERVICE_NAME_LABEL.into(), name.clone());
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    for (ports, endpoints) in desired_slices(backends) {
        let ports_opt = (!ports.is_empty()).then_some(ports);
        // Reuse the slice with the same ports, else any slice not yet claimed this pass.
        let pos = existing
            .iter()
            .position(|s| s.ports == ports_opt)
            .or_else(|| (!existing.is_empty()).then_some(0));
        match pos.map(|i| existing.remove(i)) {
            Some(slice) => {
                if slice.endpoints == endpoints && slice.ports == ports_opt && slice.labels() == &labels {
                    continue;
                }
                let patch = json!({"metadata": {"labels": labels}, "endpoints": endpoints, "ports": ports_opt});
                let written = api
                    .patch(&slice.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .ctx("update", || format!("endpointslice {ns}/{}", slice.name_any()))?;
                cache.wait_for_write(&written).await;
            }
            None => {
                let slice = EndpointSlice {
                    metadata: ObjectMeta {
                        generate_name: Some(format!("{name}-")),
                        namespace: Some(ns.clone()),
                        labels: Some(labels.clone()),
                        owner_references: Some(vec![owner_ref(svc)]),
                        ..ObjectMeta::default()
                    },
                    address_type: "IPv4".into(),
                    endpoints,
                    ports: ports_opt,
                };
                let written = api
                    .create(&PostParams::default(), &slice)
                    .await
                    .ctx("create", || format!("endpointslice for service {ns}/{name}"))?;
                cache.wait_for_write(&written).await;
            }
        }
    }
    let extra: Vec<String> = existing.iter().map(|s| s.name_any()).collect();
    super::writes::delete_extra(&api, extra, |n| format!("endpointslice {ns}/{n}")).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(v: serde_json::Value) -> Service {
        serde_json::from_value(v).unwrap()
    }

    fn pod(name: &str, ip: &str, ready: bool, port_name: &str, port: i32) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "labels": {"app": "web"}},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x",
                    "ports": [{"name": port_name, "containerPort": port}]}]},
                "status": {"phase": "Running", "podIP": ip,
                    "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn ready_and_not_ready_addresses_with_named_ports() {
        let s = svc(
            json!({"metadata": {"name": "web", "namespace": "ns"}, "spec": {"selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}),
        );
        let pods = vec![
            pod("a", "127.1.16.2", true, "http", 8080),
            pod("b", "127.1.16.3", false, "http", 8080),
            pod("c", "127.1.16.4", true, "http", 9090),
            pod("d", "127.1.16.5", true, "other", 7070),
        ];
        let b = backends(&s, &pods);
        // d has no port named http, so it serves no port; it is left out of the subsets.
        let subs = subsets(&s, &b);
        assert_eq!(subs.len(), 2, "{subs:?}");
        let by_port: BTreeMap<i32, &EndpointSubset> =
            subs.iter().map(|s| (s.ports.as_ref().unwrap()[0].port, s)).collect();
        let s8080 = by_port[&8080];
        assert_eq!(s8080.addresses.as_ref().unwrap()[0].ip, "127.1.16.2");
        assert_eq!(s8080.not_ready_addresses.as_ref().unwrap()[0].ip, "127.1.16.3");
        assert_eq!(s8080.addresses.as_ref().unwrap()[0].node_name.as_deref(), Some("n1"));
        assert_eq!(
            by_port[&9090].addresses.as_ref().unwrap()[0]
                .target_ref
                .as_ref()
                .unwrap()
                .name
                .as_deref(),
            Some("c")
        );
        let slices = desired_slices(&b);
        assert_eq!(slices.iter().map(|(_, e)| e.len()).sum::<usize>(), 4);
    }

    #[test]
    fn empty_selection_keeps_one_empty_slice() {
        let slices = desired_slices(&[]);
        assert_eq!(slices.len(), 1);
        assert!(slices[0].1.is_empty());
        assert!(!has_selector(&svc(
            json!({"metadata": {"name": "x"}, "spec": {"ports": [{"port": 80}]}})
        )));
    }
}
