//! Upstream `[sig-network] EndpointSlice` conformance cases (test/e2e/network/endpointslice.go):
//! the endpoints and endpointslice controllers publishing a selector Service's pods, and
//! removing what they published when the Service goes.
//!
//! Pods are pause pods of the target OS; only what the controllers write is checked, so both
//! OSes run one body.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::DeleteParams;

use crate::catalog::{Case, Kind};
use crate::framework::services::{SERVICE_NAME_LABEL, ServiceBuilder};
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_ip};

/// Upstream endpointslice.go "should create and delete Endpoints and EndpointSlices for a
/// Service with a selector specified".
pub const CREATE_AND_DELETE: &str = "[sig-network] EndpointSlice should create and delete Endpoints and EndpointSlices for a Service with a selector specified [Conformance]";
/// Upstream endpointslice.go "should create Endpoints and EndpointSlices for Pods matching a
/// Service".
pub const FOR_MATCHING_PODS: &str =
    "[sig-network] EndpointSlice should create Endpoints and EndpointSlices for Pods matching a Service [Conformance]";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(FOR_MATCHING_PODS, Kind::Adapted, for_matching_pods),
        crate::case!(CREATE_AND_DELETE, Kind::Adapted, create_and_delete),
    ]
}

/// The addresses an Endpoints object lists (ready or not).
fn endpoints_ips(eps: &Endpoints) -> BTreeSet<String> {
    eps.subsets
        .iter()
        .flatten()
        .flat_map(|s| {
            s.addresses
                .iter()
                .flatten()
                .chain(s.not_ready_addresses.iter().flatten())
        })
        .map(|a| a.ip.clone())
        .collect()
}

/// The addresses a set of EndpointSlices lists.
fn slices_ips(slices: &[EndpointSlice]) -> BTreeSet<String> {
    slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flat_map(|e| e.addresses.clone()))
        .collect()
}

/// Waits until Service `svc`'s Endpoints and its EndpointSlices (by label) both list exactly
/// `want` (an empty set: they exist and list nothing).
async fn wait_published(f: &Framework, svc: &str, want: &BTreeSet<String>) -> CaseResult {
    let want_eps = want.clone();
    f.wait_for(
        &f.api::<Endpoints>(),
        svc,
        move |e: Option<&Endpoints>| e.is_some_and(|e| endpoints_ips(e) == want_eps),
        &format!("to list exactly the addresses {want:?} of service {svc}'s pods"),
    )
    .await?;
    let want_slices = want.clone();
    f.wait_list(
        &f.api::<EndpointSlice>(),
        &format!("{SERVICE_NAME_LABEL}={svc}"),
        move |s: &[EndpointSlice]| !s.is_empty() && slices_ips(s) == want_slices,
        &format!("EndpointSlices of service {svc} listing exactly the addresses {want:?}"),
    )
    .await?;
    Ok(())
}

/// Upstream endpointslice.go "should create and delete Endpoints and EndpointSlices for a
/// Service with a selector specified": a Service whose selector matches nothing still gets an
/// (empty) Endpoints and EndpointSlice; deleting the Service removes both.
async fn create_and_delete(f: &Framework) -> CaseResult {
    let svc = "example-empty-selector";
    f.create_service(
        &ServiceBuilder::cluster_ip(svc)
            .selector("does-not-match-anything", "endpoints-and-endpoint-slices")
            .port("example", 80, 80, "TCP"),
    )
    .await?;
    wait_published(f, svc, &BTreeSet::new()).await?;
    f.step(format!("deleting service {svc}"));
    f.api::<Service>().delete(svc, &DeleteParams::default()).await?;
    f.wait_for(
        &f.api::<Endpoints>(),
        svc,
        |e: Option<&Endpoints>| e.is_none(),
        &format!("to be deleted with service {svc}"),
    )
    .await?;
    f.wait_list(
        &f.api::<EndpointSlice>(),
        &format!("{SERVICE_NAME_LABEL}={svc}"),
        |s: &[EndpointSlice]| s.is_empty(),
        &format!("the EndpointSlices of service {svc} to be deleted with it"),
    )
    .await?;
    Ok(())
}

/// Upstream endpointslice.go "should create Endpoints and EndpointSlices for Pods matching a
/// Service": two pods, one Service selecting both and one selecting the second only; each
/// Service's Endpoints and EndpointSlices list exactly its pods' IPs.
async fn for_matching_pods(f: &Framework) -> CaseResult {
    let mut ips = Vec::new();
    for name in ["pod1", "pod2"] {
        let b = f
            .pod(name)
            .label("endpointslice-test", "yes")
            .label("which", name)
            .container(
                ContainerBuilder::new("pause", "agnhost")
                    .args(["pause"])
                    .port(80, "TCP"),
            );
        ips.push(pod_ip(&f.create_pod_ready(&b).await?)?);
    }
    f.create_service(
        &ServiceBuilder::cluster_ip("example-int-port")
            .selector("endpointslice-test", "yes")
            .port("example", 80, 80, "TCP"),
    )
    .await?;
    f.create_service(
        &ServiceBuilder::cluster_ip("example-pod2")
            .selector("which", "pod2")
            .port("example", 80, 80, "TCP"),
    )
    .await?;
    wait_published(f, "example-int-port", &ips.iter().cloned().collect()).await?;
    wait_published(f, "example-pod2", &BTreeSet::from([ips[1].clone()])).await
}
