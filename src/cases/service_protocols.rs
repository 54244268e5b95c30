//! Upstream `[sig-network] Services` conformance case on one Service port number served over two
//! protocols (test/e2e/network/service.go "should serve endpoints on same port and different
//! protocols").

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Endpoints;

use super::network::netexec_ready;
use crate::catalog::{Case, Kind};
use crate::framework::netexec::MAX_DIAL_TRIES;
use crate::framework::services::{self, ServiceBuilder};
use crate::framework::{CaseResult, ContainerBuilder, Framework, PodBuilder, Protocol, pod_ip, pod_node};

/// Upstream service.go "should serve endpoints on same port and different protocols".
pub const SAME_PORT_DIFFERENT_PROTOCOLS: &str =
    "[sig-network] Services should serve endpoints on same port and different protocols [Conformance]";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![crate::case!(
        SAME_PORT_DIFFERENT_PROTOCOLS,
        Kind::Adapted,
        same_port_different_protocols
    )]
}

/// The one port number the backend listens on over TCP and UDP.
const BACKEND_PORT: i32 = 8080;
/// The one Service port number, over TCP and UDP.
const SERVICE_PORT: u16 = 80;

/// Upstream service.go "should serve endpoints on same port and different protocols": a
/// Service with port 80 over TCP and over UDP to a netexec pod listening on one port number for
/// both; the Endpoints list both ports, and a client pod gets the backend's hostname over each
/// protocol through the cluster IP.
async fn same_port_different_protocols(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let name = "multiprotocol-test";
    let svc = f
        .create_service(
            &ServiceBuilder::cluster_ip(name)
                .selector("app", name)
                .port("tcp-port", i32::from(SERVICE_PORT), BACKEND_PORT, "TCP")
                .port("udp-port", i32::from(SERVICE_PORT), BACKEND_PORT, "UDP"),
        )
        .await?;
    let ip = services::cluster_ip(&svc)?;
    let backend = PodBuilder::new("multiprotocol-backend", os)
        .label("app", name)
        .container(
            ContainerBuilder::new("webserver", "agnhost")
                .args([
                    "netexec".to_string(),
                    format!("--http-port={BACKEND_PORT}"),
                    format!("--udp-port={BACKEND_PORT}"),
                ])
                .port(BACKEND_PORT, "TCP")
                .port(BACKEND_PORT, "UDP"),
        );
    let backend = f.create_pod_ready(&backend).await?;
    let backend_ip = pod_ip(&backend)?;
    let want: BTreeSet<(String, String, i32)> = [("tcp-port", "TCP"), ("udp-port", "UDP")]
        .iter()
        .map(|(n, p)| (n.to_string(), p.to_string(), BACKEND_PORT))
        .collect();
    let want_ports = want.clone();
    let ip_for_wait = backend_ip.clone();
    f.wait_for(
        &f.api::<Endpoints>(),
        name,
        move |e: Option<&Endpoints>| {
            e.is_some_and(|e| {
                e.subsets.iter().flatten().any(|s| {
                    s.addresses.iter().flatten().any(|a| a.ip == ip_for_wait)
                        && s.ports
                            .iter()
                            .flatten()
                            .map(|p| {
                                (
                                    p.name.clone().unwrap_or_default(),
                                    p.protocol.clone().unwrap_or_default(),
                                    p.port,
                                )
                            })
                            .collect::<BTreeSet<_>>()
                            == want_ports
                })
            })
        },
        &format!("to list pod multiprotocol-backend ({backend_ip}) on ports {want:?}"),
    )
    .await?;
    let client = netexec_ready(f, "client", os, None).await?;
    let expected = BTreeSet::from(["multiprotocol-backend".to_string()]);
    for protocol in [Protocol::Http, Protocol::Udp] {
        f.dial_expect(&client.name, protocol, &ip, SERVICE_PORT, &expected, MAX_DIAL_TRIES)
            .await
            .map_err(|e| {
                e.context(format!(
                    "service {name} {ip}:{SERVICE_PORT}/{} from pod {} on node {} (backend on node {})",
                    protocol.as_str(),
                    client.name,
                    client.node,
                    pod_node(&backend)
                ))
            })?;
    }
    Ok(())
}
