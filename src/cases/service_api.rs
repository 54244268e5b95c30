//! Upstream `[sig-network]` conformance cases that exercise the Service, Endpoints and
//! EndpointSlice APIs rather than traffic (test/e2e/network/service.go, endpointslice.go).
//!
//! They create no pods, so Windows and Linux targets run the same body; both still run, as the
//! plan of each target lists them.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};

use crate::catalog::{Case, Kind};
use crate::framework::services::{SERVICE_NAME_LABEL, ServiceBuilder};
use crate::framework::{CaseError, CaseResult, Framework};

/// Upstream service.go "should provide secure master service".
pub const SECURE_MASTER: &str = "[sig-network] Services should provide secure master service [Conformance]";
/// Upstream service.go "should find a service from listing all namespaces".
pub const FIND_IN_ALL_NAMESPACES: &str =
    "[sig-network] Services should find a service from listing all namespaces [Conformance]";
/// Upstream service.go "should delete a collection of services".
pub const DELETE_COLLECTION: &str = "[sig-network] Services should delete a collection of services [Conformance]";
/// Upstream endpointslice.go "should have Endpoints and EndpointSlices pointing to API Server".
pub const API_SERVER_ENDPOINTS: &str =
    "[sig-network] EndpointSlice should have Endpoints and EndpointSlices pointing to API Server [Conformance]";

/// Upstream service.go "should test the lifecycle of an Endpoint".
pub const ENDPOINT_LIFECYCLE: &str = "[sig-network] Services should test the lifecycle of an Endpoint [Conformance]";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(DELETE_COLLECTION, Kind::Adapted, delete_collection),
        crate::case!(FIND_IN_ALL_NAMESPACES, Kind::Adapted, find_in_all_namespaces),
        crate::case!(SECURE_MASTER, Kind::Adapted, secure_master),
        crate::case!(API_SERVER_ENDPOINTS, Kind::Adapted, api_server_endpoints),
        crate::case!(ENDPOINT_LIFECYCLE, Kind::Adapted, endpoint_lifecycle),
    ]
}

/// The API server's own Service: `default/kubernetes`.
const MASTER: &str = "kubernetes";
/// Its namespace.
const DEFAULT_NS: &str = "default";

/// `default/kubernetes`, failing with what was asked when it is missing.
async fn master_service(f: &Framework) -> Result<Service, CaseError> {
    let api: Api<Service> = Api::namespaced(f.client(), DEFAULT_NS);
    api.get_opt(MASTER).await?.ok_or_else(|| {
        CaseError::failed(format!(
            "expected service {DEFAULT_NS}/{MASTER} (the API server's own Service), found none"
        ))
    })
}

/// Upstream service.go "should provide secure master service": `default/kubernetes` exists;
/// it also serves HTTPS, port 443 named `https`, as the API server's bootstrap controller
/// publishes it.
async fn secure_master(f: &Framework) -> CaseResult {
    let svc = master_service(f).await?;
    let ports: Vec<(Option<String>, i32)> = svc
        .spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .map(|p| (p.name.clone(), p.port))
        .collect();
    crate::ensure!(
        ports.iter().any(|(n, p)| n.as_deref() == Some("https") && *p == 443),
        "service {DEFAULT_NS}/{MASTER}: expected port https 443, got {ports:?}"
    );
    Ok(())
}

/// Upstream service.go "should find a service from listing all namespaces": a Service created in
/// the case namespace is in the list of Services of all namespaces.
async fn find_in_all_namespaces(f: &Framework) -> CaseResult {
    let name = "test-service-find";
    f.create_service(&ServiceBuilder::cluster_ip(name).port("http", 80, 80, "TCP"))
        .await?;
    let all: Api<Service> = f.api_all();
    let list = all.list(&ListParams::default()).await?;
    let found = list
        .items
        .iter()
        .any(|s| s.metadata.name.as_deref() == Some(name) && s.metadata.namespace.as_deref() == Some(f.ns()));
    crate::ensure!(
        found,
        "expected service {}/{name} in the list of services of all namespaces, got {} services: {:?}",
        f.ns(),
        list.items.len(),
        list.items
            .iter()
            .filter(|s| s.metadata.namespace.as_deref() == Some(f.ns()))
            .map(|s| s.metadata.name.clone().unwrap_or_default())
            .collect::<Vec<_>>()
    );
    Ok(())
}

/// The label the collection case selects its Services by.
const COLLECTION_LABEL: (&str, &str) = ("e2e-test-service", "delete");

/// Upstream service.go "should delete a collection of services": three labelled Services are
/// listed by their label, removed with one DeleteCollection, and the list comes back empty.
async fn delete_collection(f: &Framework) -> CaseResult {
    let selector = format!("{}={}", COLLECTION_LABEL.0, COLLECTION_LABEL.1);
    let names = ["e2e-svc-a", "e2e-svc-b", "e2e-svc-c"];
    for name in names {
        let mut svc = ServiceBuilder::cluster_ip(name)
            .port("http", 80, 80, "TCP")
            .build(f.ns(), &f.run().run_id);
        svc.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(COLLECTION_LABEL.0.into(), COLLECTION_LABEL.1.into());
        f.create(&svc).await?;
    }
    let api = f.api::<Service>();
    let listed: BTreeSet<String> = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    let want: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    crate::ensure!(
        listed == want,
        "expected services {want:?} listed by label {selector}, got {listed:?}"
    );
    f.step(format!("deleting the collection of services labelled {selector}"));
    api.delete_collection(&DeleteParams::default(), &ListParams::default().labels(&selector))
        .await?;
    f.wait_list(
        &api,
        &selector,
        |left: &[Service]| left.is_empty(),
        &format!("no services labelled {selector} after DeleteCollection"),
    )
    .await?;
    Ok(())
}

/// Upstream endpointslice.go "should have Endpoints and EndpointSlices pointing to API Server":
/// `default/kubernetes` has Endpoints with at least one subset and EndpointSlices (by label
/// `kubernetes.io/service-name`) holding the same addresses and ports.
async fn api_server_endpoints(f: &Framework) -> CaseResult {
    master_service(f).await?;
    let eps_api: Api<Endpoints> = Api::namespaced(f.client(), DEFAULT_NS);
    let eps = eps_api.get_opt(MASTER).await?.ok_or_else(|| {
        CaseError::failed(format!(
            "expected Endpoints {DEFAULT_NS}/{MASTER} listing the API servers, found none"
        ))
    })?;
    let subsets = eps.subsets.clone().unwrap_or_default();
    crate::ensure!(
        !subsets.is_empty(),
        "Endpoints {DEFAULT_NS}/{MASTER}: expected at least 1 subset, got none"
    );
    let slices_api: Api<EndpointSlice> = Api::namespaced(f.client(), DEFAULT_NS);
    let selector = format!("{SERVICE_NAME_LABEL}={MASTER}");
    let slices = slices_api.list(&ListParams::default().labels(&selector)).await?.items;
    crate::ensure!(
        !slices.is_empty(),
        "expected at least 1 EndpointSlice labelled {selector} in {DEFAULT_NS}, got none"
    );
    let from_endpoints: BTreeSet<(String, i32)> = subsets
        .iter()
        .flat_map(|s| {
            let ports: Vec<i32> = s.ports.iter().flatten().map(|p| p.port).collect();
            s.addresses
                .iter()
                .flatten()
                .flat_map(move |a| ports.clone().into_iter().map(move |p| (a.ip.clone(), p)))
        })
        .collect();
    let from_slices: BTreeSet<(String, i32)> = slices
        .iter()
        .flat_map(|s| {
            let ports: Vec<i32> = s.ports.iter().flatten().filter_map(|p| p.port).collect();
            s.endpoints
                .iter()
                .flat_map(|e| e.addresses.clone())
                .flat_map(move |a| ports.clone().into_iter().map(move |p| (a.clone(), p)))
        })
        .collect();
    crate::ensure!(
        !from_endpoints.is_empty() && from_endpoints == from_slices,
        "{DEFAULT_NS}/{MASTER}: expected the EndpointSlices to hold the Endpoints' addresses and ports {from_endpoints:?}, got {from_slices:?}"
    );
    Ok(())
}

/// The (address, port) pairs an Endpoints object lists.
fn endpoint_pairs(eps: &Endpoints) -> BTreeSet<(String, i32)> {
    eps.subsets
        .iter()
        .flatten()
        .flat_map(|s| {
            let ports: Vec<i32> = s.ports.iter().flatten().map(|p| p.port).collect();
            s.addresses
                .iter()
                .flatten()
                .flat_map(move |a| ports.clone().into_iter().map(move |p| (a.ip.clone(), p)))
        })
        .collect()
}

/// Upstream service.go "should test the lifecycle of an Endpoint": a labelled, selector-less
/// Endpoints object is created, found by its label across all namespaces, patched (a new label,
/// address and port) and read back patched, then deleted as a collection by label.
async fn endpoint_lifecycle(f: &Framework) -> CaseResult {
    let name = "testservice";
    let selector = "test-endpoint-static=true";
    let subset = |ip: &str, port: i32| EndpointSubset {
        addresses: Some(vec![EndpointAddress {
            ip: ip.into(),
            ..Default::default()
        }]),
        ports: Some(vec![EndpointPort {
            name: Some("http".into()),
            port,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let mut eps = Endpoints::default();
    eps.metadata.name = Some(name.into());
    eps.metadata.labels = Some([("test-endpoint-static".to_string(), "true".to_string())].into());
    eps.subsets = Some(vec![subset("10.0.0.24", 80)]);
    f.create(&eps).await?;
    let all: Api<Endpoints> = f.api_all();
    let listed = all.list(&ListParams::default().labels(selector)).await?.items;
    crate::ensure!(
        listed
            .iter()
            .any(|e| e.metadata.name.as_deref() == Some(name) && e.metadata.namespace.as_deref() == Some(f.ns())),
        "expected Endpoints {}/{name} among those labelled {selector} in all namespaces, got {:?}",
        f.ns(),
        listed
            .iter()
            .map(|e| format!(
                "{}/{}",
                e.metadata.namespace.clone().unwrap_or_default(),
                e.metadata.name.clone().unwrap_or_default()
            ))
            .collect::<Vec<_>>()
    );
    f.step(format!("patching Endpoints {name}"));
    let patch = serde_json::json!({"metadata": {"labels": {"test-service": "patched"}},
        "subsets": [{"addresses": [{"ip": "10.0.0.25"}], "ports": [{"name": "http-test", "port": 8080, "protocol": "TCP"}]}]});
    let api = f.api::<Endpoints>();
    api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let got = api.get(name).await?;
    let label = got
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("test-service"))
        .cloned();
    let pairs = endpoint_pairs(&got);
    let want = BTreeSet::from([("10.0.0.25".to_string(), 8080)]);
    crate::ensure!(
        label.as_deref() == Some("patched") && pairs == want,
        "Endpoints {name} after the patch: expected label test-service=patched and {want:?}, got label {label:?} and {pairs:?}"
    );
    f.step(format!("deleting the collection of Endpoints labelled {selector}"));
    api.delete_collection(&DeleteParams::default(), &ListParams::default().labels(selector))
        .await?;
    f.wait_list(
        &api,
        selector,
        |left: &[Endpoints]| left.is_empty(),
        &format!("no Endpoints labelled {selector} after DeleteCollection"),
    )
    .await?;
    Ok(())
}
