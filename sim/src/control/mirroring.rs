//! The EndpointSlice mirroring controller (upstream pkg/controller/endpointslicemirroring): an
//! Endpoints object a user manages for a Service without a selector is mirrored into
//! EndpointSlices labelled `endpointslice.kubernetes.io/managed-by:
//! endpointslicemirroring-controller.k8s.io`, kept in step with its updates and removed with it.
//!
//! One slice per distinct port set of the Endpoints' subsets; ready addresses become ready
//! endpoints and `notReadyAddresses` not-ready ones. Endpoints labelled
//! `endpointslice.kubernetes.io/skip-mirror: "true"` are left alone, as upstream does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{EndpointAddress, Endpoints, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::endpoints::{MANAGED_BY_LABEL, SERVICE_NAME_LABEL};
use super::error::{ApiContext, Result};
use super::informer::{Informer, Requeue, Wake};
use super::plane::Ctx;
use super::util::owner_ref;

/// This controller's value of [`MANAGED_BY_LABEL`], upstream's.
pub const MANAGED_BY: &str = "endpointslicemirroring-controller.k8s.io";
/// The label that opts an Endpoints object out of mirroring.
const SKIP_MIRROR_LABEL: &str = "endpointslice.kubernetes.io/skip-mirror";

/// Runs the controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let services = ctx.informers.get::<Service>();
    let endpoints = ctx.informers.get::<Endpoints>();
    let slices = ctx.informers.get::<EndpointSlice>();
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = async {
            services.ready().await?;
            endpoints.ready().await?;
            slices.ready().await
        } => r?,
    }
    let mut wake = Wake::new(
        vec![services.subscribe(), endpoints.subscribe(), slices.subscribe()],
        ctx.cfg.resync,
    );
    let mut requeue = Requeue::default();
    loop {
        // Every mirrored slice is checked against what its Endpoints now say; a slice whose
        // Endpoints went away (or stopped qualifying) gets no desired state and is deleted.
        let mut by_owner: BTreeMap<(String, String), Vec<Arc<EndpointSlice>>> = BTreeMap::new();
        for s in slices.list() {
            if owned_mirror(&s)
                && s.metadata.deletion_timestamp.is_none()
                && let Some(svc) = s.labels().get(SERVICE_NAME_LABEL)
            {
                by_owner
                    .entry((s.namespace().unwrap_or_default(), svc.clone()))
                    .or_default()
                    .push(s);
            }
        }
        for ep in endpoints.list() {
            let key = (ep.namespace().unwrap_or_default(), ep.name_any());
            by_owner.entry(key).or_default();
        }
        for ((ns, name), existing) in by_owner {
            let ep = endpoints.get(Some(&ns), &name).filter(|ep| mirrors(&services, ep));
            if let Err(e) = sync(&ctx, &slices, &ns, &name, ep.as_deref(), existing).await {
                tracing::warn!(endpoints = %name, error = %super::error::chain(&e), "endpointslice mirroring failed");
                requeue.after(Duration::from_secs(1));
            }
        }
        if !wake.next(requeue.take(), &ctx.cancel).await {
            return Ok(());
        }
    }
}

/// Whether `slice` is one this controller wrote: the managed-by label and an owner reference to
/// its Endpoints (the API server's own slice for `kubernetes` carries the label too, but no
/// owner, and is not this controller's to delete).
fn owned_mirror(slice: &EndpointSlice) -> bool {
    slice.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
        && slice
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "Endpoints" && o.controller == Some(true))
}

/// Whether `ep` is mirrored: its Service exists without a selector and it is not opted out.
fn mirrors(services: &Informer<Service>, ep: &Endpoints) -> bool {
    if ep.labels().get(SKIP_MIRROR_LABEL).map(String::as_str) == Some("true") {
        return false;
    }
    services
        .get(ep.namespace().as_deref(), &ep.name_any())
        .is_some_and(|svc| svc.spec.as_ref().is_none_or(|s| s.selector.is_none()))
}

/// The slices `ep` mirrors into: one per distinct port set, with its endpoints.
pub fn desired(ep: &Endpoints) -> Vec<(Vec<EndpointPort>, Vec<Endpoint>)> {
    let mut out: Vec<(Vec<EndpointPort>, Vec<Endpoint>)> = Vec::new();
    let endpoint = |a: &EndpointAddress, ready: bool| Endpoint {
        addresses: vec![a.ip.clone()],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            ..Default::default()
        }),
        hostname: a.hostname.clone(),
        node_name: a.node_name.clone(),
        target_ref: a.target_ref.clone(),
        ..Default::default()
    };
    for subset in ep.subsets.iter().flatten() {
        let ports: Vec<EndpointPort> = subset
            .ports
            .iter()
            .flatten()
            .map(|p| EndpointPort {
                name: p.name.clone(),
                port: Some(p.port),
                protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: p.app_protocol.clone(),
            })
            .collect();
        let endpoints = subset
            .addresses
            .iter()
            .flatten()
            .map(|a| endpoint(a, true))
            .chain(subset.not_ready_addresses.iter().flatten().map(|a| endpoint(a, false)));
        match out.iter_mut().find(|(p, _)| *p == ports) {
            Some((_, eps)) => eps.extend(endpoints),
            None => out.push((ports, endpoints.collect())),
        }
    }
    out
}

/// Brings the mirrored slices of Endpoints `ns/name` to what `ep` says (none when `None`).
async fn sync(
    ctx: &Ctx,
    cache: &Informer<EndpointSlice>,
    ns: &str,
    name: &str,
    ep: Option<&Endpoints>,
    mut existing: Vec<Arc<EndpointSlice>>,
) -> Result<()> {
    let api: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), ns);
    let mut labels = ep.map(|e| e.labels().clone()).unwrap_or_default();
    labels.insert(SERVICE_NAME_LABEL.into(), name.into());
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    for (ports, endpoints) in ep.map(desired).unwrap_or_default() {
        let ports = Some(ports);
        let pos = existing.iter().position(|s| s.ports == ports);
        match pos.map(|i| existing.remove(i)) {
            Some(slice) if slice.endpoints == endpoints && slice.labels() == &labels => {}
            Some(slice) => {
                let patch = json!({"metadata": {"labels": labels}, "endpoints": endpoints});
                let written = api
                    .patch(&slice.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .ctx("update", || format!("mirrored endpointslice {ns}/{}", slice.name_any()))?;
                cache.wait_for_write(&written).await;
            }
            None => {
                let slice = EndpointSlice {
                    metadata: ObjectMeta {
                        generate_name: Some(format!("{name}-")),
                        namespace: Some(ns.into()),
                        labels: Some(labels.clone()),
                        owner_references: ep.map(|e| vec![owner_ref(e)]),
                        ..ObjectMeta::default()
                    },
                    address_type: "IPv4".into(),
                    endpoints,
                    ports,
                };
                let written = api
                    .create(&PostParams::default(), &slice)
                    .await
                    .ctx("create", || format!("mirrored endpointslice for endpoints {ns}/{name}"))?;
                cache.wait_for_write(&written).await;
            }
        }
    }
    let extra: Vec<String> = existing.iter().map(|s| s.name_any()).collect();
    super::writes::delete_extra(&api, extra, |n| format!("mirrored endpointslice {ns}/{n}")).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsets_with_the_same_ports_share_a_slice() {
        let ep: Endpoints = serde_json::from_value(json!({
            "metadata": {"name": "e"},
            "subsets": [
                {"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]},
                {"notReadyAddresses": [{"ip": "10.1.2.4"}], "ports": [{"port": 80}]},
                {"addresses": [{"ip": "10.1.2.5"}], "ports": [{"port": 81}]}
            ]
        }))
        .unwrap();
        let slices = desired(&ep);
        assert_eq!(slices.len(), 2);
        assert_eq!(slices[0].1.len(), 2);
        assert_eq!(slices[0].1[1].conditions.as_ref().unwrap().ready, Some(false));
        assert_eq!(slices[0].0[0].protocol.as_deref(), Some("TCP"));
    }
}
