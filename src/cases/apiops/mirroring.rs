//! `[sig-network] EndpointSliceMirroring should mirror a custom Endpoints resource through
//! create update and delete` (upstream test/e2e/network/endpointslicemirroring.go): the
//! mirroring controller follows a user-managed Endpoints object of a selectorless Service.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::DeleteParams;

use super::walk::update_with;
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseResult, Framework};

/// Upstream endpointslicemirroring.go "should mirror a custom Endpoints resource through create
/// update and delete".
pub(crate) const MIRROR_ENDPOINTS: &str = "[sig-network] EndpointSliceMirroring should mirror a custom Endpoints \
     resource through create update and delete [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(MIRROR_ENDPOINTS, Kind::Adapted, mirror_endpoints)]
}

/// How long each mirroring step may take. Upstream polls for 12 s; the bound here also rides
/// out a watch cut and the controller's requeue after a failed write.
const MIRROR_WITHIN: Duration = Duration::from_secs(30);

/// Whether every slice has the single port 80 and a single endpoint with the single address
/// `ip`, as upstream checks each mirrored slice.
fn mirrors_address(slices: &[EndpointSlice], ip: &str) -> bool {
    !slices.is_empty()
        && slices.iter().all(|s| {
            let ports: Vec<Option<i32>> = s.ports.iter().flatten().map(|p| p.port).collect();
            ports == [Some(80)] && s.endpoints.len() == 1 && s.endpoints[0].addresses == [ip.to_string()]
        })
}

/// Creates a selectorless Service and an Endpoints object for it, and waits for the mirrored
/// EndpointSlice to carry its address; updates the address and waits for the slice to follow;
/// deletes the Endpoints and waits for the slices to go.
async fn mirror_endpoints(f: &Framework) -> CaseResult {
    let name = "example-custom-endpoints";
    f.create(&Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some("example".into()),
                port: 80,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    })
    .await?;
    let subset = |ip: &str| EndpointSubset {
        addresses: Some(vec![EndpointAddress {
            ip: ip.into(),
            ..Default::default()
        }]),
        ports: Some(vec![EndpointPort {
            port: 80,
            ..Default::default()
        }]),
        ..Default::default()
    };
    f.create(&Endpoints {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        subsets: Some(vec![subset("10.1.2.3")]),
    })
    .await?;
    let slices: Api<EndpointSlice> = f.api();
    let selector = format!("kubernetes.io/service-name={name}");
    f.wait_list_within(
        &slices,
        &selector,
        |s: &[EndpointSlice]| mirrors_address(s, "10.1.2.3"),
        "a mirrored EndpointSlice with port 80 and address 10.1.2.3",
        MIRROR_WITHIN,
    )
    .await?;

    let endpoints: Api<Endpoints> = f.api();
    let moved = |e: &Endpoints| e.subsets.as_deref() == Some(&[subset("10.2.3.4")][..]);
    update_with(f, &endpoints, name, moved, |e| {
        e.subsets = Some(vec![subset("10.2.3.4")]);
        Ok(())
    })
    .await?;
    f.wait_list_within(
        &slices,
        &selector,
        |s: &[EndpointSlice]| s.len() == 1 && mirrors_address(s, "10.2.3.4"),
        "the mirrored EndpointSlice to follow the update (one slice, address 10.2.3.4)",
        MIRROR_WITHIN,
    )
    .await?;

    f.step(format!("deleting Endpoints {name}"));
    endpoints.delete(name, &DeleteParams::default()).await?;
    f.wait_list_within(
        &slices,
        &selector,
        <[EndpointSlice]>::is_empty,
        "the mirrored EndpointSlices to be deleted with the Endpoints",
        MIRROR_WITHIN,
    )
    .await?;
    Ok(())
}
