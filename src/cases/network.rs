//! Pod networking: upstream's granular checks and the Windows connectivity matrix.
//!
//! The granular checks follow upstream `test/e2e/common/network/networking.go`: one netexec
//! endpoint pod per schedulable node, a test pod, and `/dial` from the test pod to every
//! endpoint. The matrix follows the Windows node support documents' connectivity table, one case
//! per row, each from a pod of the target OS (Windows-specific cases run on a Windows target).

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{HTTPGetAction, Pod, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::catalog::{Case, Kind};
use crate::cluster::NodeInfo;
use crate::framework::netexec::{HTTP_PORT, MAX_DIAL_TRIES, netexec_pod, ping_once_script};
use crate::framework::services::{self, SERVICE_HTTP_PORT, SERVICE_UDP_PORT, ServiceBuilder, service_fqdn};
use crate::framework::{CaseError, CaseResult, Framework, PodBuilder, Protocol, pod_ip, pod_node};
use crate::os::Os;

/// Upstream networking.go: every node's netexec pod answers HTTP `/dial` from a test pod.
pub const INTRA_POD_HTTP: &str = "[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http [NodeConformance] [Conformance]";
/// Upstream networking.go: every node's netexec pod answers UDP `/dial` from a test pod.
pub const INTRA_POD_UDP: &str = "[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: udp [NodeConformance] [Conformance]";
/// Upstream networking.go: every node's netexec pod answers HTTP from a hostNetwork pod.
pub const NODE_POD_HTTP: &str = "[sig-network] Networking Granular Checks: Pods should function for node-pod communication: http [LinuxOnly] [NodeConformance] [Conformance]";
/// Upstream networking.go: every node's netexec pod answers UDP from a hostNetwork pod.
pub const NODE_POD_UDP: &str = "[sig-network] Networking Granular Checks: Pods should function for node-pod communication: udp [LinuxOnly] [NodeConformance] [Conformance]";

/// Matrix row: pod to pod by IP, TCP.
pub const POD_IP_TCP: &str =
    "[sig-windows] [sig-network] Windows pod networking Pod to Pod should connect by pod IP over TCP";
/// Matrix row: pod to pod by IP, UDP.
pub const POD_IP_UDP: &str =
    "[sig-windows] [sig-network] Windows pod networking Pod to Pod should connect by pod IP over UDP";
/// Matrix row: pod to pod by a headless Service's name, TCP.
pub const POD_HEADLESS_TCP: &str = "[sig-windows] [sig-network] Windows pod networking Pod to Pod should connect by name through a headless service over TCP";
/// Matrix row: pod to pod by a headless Service's name, UDP.
pub const POD_HEADLESS_UDP: &str = "[sig-windows] [sig-network] Windows pod networking Pod to Pod should connect by name through a headless service over UDP";
/// Matrix row: pod to pod by hostname and subdomain, TCP.
pub const POD_HOSTNAME_TCP: &str = "[sig-windows] [sig-network] Windows pod networking Pod to Pod should connect by hostname and subdomain FQDN over TCP";
/// Matrix row: pod to pod by hostname and subdomain, UDP.
pub const POD_HOSTNAME_UDP: &str = "[sig-windows] [sig-network] Windows pod networking Pod to Pod should connect by hostname and subdomain FQDN over UDP";
/// Matrix row: pod to Service by ClusterIP, TCP.
pub const SVC_IP_TCP: &str =
    "[sig-windows] [sig-network] Windows pod networking Pod to Service should connect by ClusterIP over TCP";
/// Matrix row: pod to Service by ClusterIP, UDP.
pub const SVC_IP_UDP: &str =
    "[sig-windows] [sig-network] Windows pod networking Pod to Service should connect by ClusterIP over UDP";
/// Matrix row: pod to Service by short name, TCP.
pub const SVC_SHORT_TCP: &str =
    "[sig-windows] [sig-network] Windows pod networking Pod to Service should connect by short name over TCP";
/// Matrix row: pod to Service by short name, UDP.
pub const SVC_SHORT_UDP: &str =
    "[sig-windows] [sig-network] Windows pod networking Pod to Service should connect by short name over UDP";
/// Matrix row: pod to Service by FQDN, TCP.
pub const SVC_FQDN_TCP: &str = "[sig-windows] [sig-network] Windows pod networking Pod to Service should connect by svc.ns.svc.cluster.local over TCP";
/// Matrix row: pod to Service by FQDN, UDP.
pub const SVC_FQDN_UDP: &str = "[sig-windows] [sig-network] Windows pod networking Pod to Service should connect by svc.ns.svc.cluster.local over UDP";
/// Matrix row: pod to the outside world by IP, TCP.
pub const EXTERNAL_IP_TCP: &str =
    "[sig-windows] [sig-network] Windows pod networking Pod to External should connect by IP over TCP";
/// Matrix row: pod to the outside world by IP, UDP.
pub const EXTERNAL_IP_UDP: &str =
    "[sig-windows] [sig-network] Windows pod networking Pod to External should connect by IP over UDP";
/// Matrix row: pod to the outside world by name, TCP.
pub const EXTERNAL_NAME_TCP: &str =
    "[sig-windows] [sig-network] Windows pod networking Pod to External should connect by name over TCP";
/// ICMP to the outside world: no echo reply from a Windows pod (the Windows networking
/// documents' ICMP limitation), while TCP to the same address works.
pub const EXTERNAL_ICMP: &str = "[sig-windows] [sig-network] Windows pod networking Pod to External should get no reply to ping outside the cluster while TCP to the same address works";
/// Matrix row: node to pod (the node's kubelet probing the pod).
pub const NODE_TO_POD: &str = "[sig-windows] [sig-network] Windows pod networking Node to Pod should reach the pod from its node's kubelet over TCP";
/// Matrix row: pod to node (every node's kubelet port).
pub const POD_TO_NODE: &str =
    "[sig-windows] [sig-network] Windows pod networking Pod to Node should reach every node's kubelet port over TCP";
/// The negative row: `svc.ns` resolves only where dotted names get search suffixes.
pub const SVC_DOTTED: &str = "[sig-windows] [sig-network] Pod networking Pod to Service by partially qualified name svc.ns should resolve only where the DNS client appends search suffixes to dotted names";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(INTRA_POD_HTTP, Kind::Substitute, intra_pod_http),
        crate::case!(INTRA_POD_UDP, Kind::Substitute, intra_pod_udp),
        crate::case!(NODE_POD_HTTP, Kind::Substitute, node_pod_http),
        crate::case!(NODE_POD_UDP, Kind::Substitute, node_pod_udp),
        crate::case!(POD_IP_TCP, Kind::WindowsSpecific, pod_ip_tcp),
        crate::case!(POD_IP_UDP, Kind::WindowsSpecific, pod_ip_udp),
        crate::case!(POD_HEADLESS_TCP, Kind::WindowsSpecific, pod_headless_tcp),
        crate::case!(POD_HEADLESS_UDP, Kind::WindowsSpecific, pod_headless_udp),
        crate::case!(POD_HOSTNAME_TCP, Kind::WindowsSpecific, pod_hostname_tcp),
        crate::case!(POD_HOSTNAME_UDP, Kind::WindowsSpecific, pod_hostname_udp),
        crate::case!(SVC_IP_TCP, Kind::WindowsSpecific, svc_ip_tcp),
        crate::case!(SVC_IP_UDP, Kind::WindowsSpecific, svc_ip_udp),
        crate::case!(SVC_SHORT_TCP, Kind::WindowsSpecific, svc_short_tcp),
        crate::case!(SVC_SHORT_UDP, Kind::WindowsSpecific, svc_short_udp),
        crate::case!(SVC_FQDN_TCP, Kind::WindowsSpecific, svc_fqdn_tcp),
        crate::case!(SVC_FQDN_UDP, Kind::WindowsSpecific, svc_fqdn_udp),
        crate::case!(EXTERNAL_IP_TCP, Kind::WindowsSpecific, external_ip_tcp),
        crate::case!(EXTERNAL_IP_UDP, Kind::WindowsSpecific, external_ip_udp),
        crate::case!(EXTERNAL_NAME_TCP, Kind::WindowsSpecific, external_name_tcp),
        crate::case!(EXTERNAL_ICMP, Kind::WindowsSpecific, external_icmp),
        crate::case!(NODE_TO_POD, Kind::WindowsSpecific, node_to_pod),
        crate::case!(POD_TO_NODE, Kind::WindowsSpecific, pod_to_node),
        crate::case!(SVC_DOTTED, Kind::Substitute, svc_dotted),
    ]
}

/// A ready netexec pod.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) name: String,
    pub(crate) ip: String,
    pub(crate) node: String,
}

impl Endpoint {
    /// The endpoint that pod `name`, as the API returned it (`pod`), makes.
    pub(crate) fn of(name: &str, pod: &Pod) -> Result<Endpoint, CaseError> {
        Ok(Endpoint {
            name: name.into(),
            ip: pod_ip(pod)?,
            node: pod_node(pod),
        })
    }
}

/// Creates every pod of `builders` first, then waits for each to be ready (so they start side
/// by side); returns their endpoints in the same order.
///
/// The per-node endpoint pods here and the Service backends of `service.rs` are both made this
/// way; only the builders differ.
pub(crate) async fn create_endpoints(f: &Framework, builders: &[PodBuilder]) -> Result<Vec<Endpoint>, CaseError> {
    for b in builders {
        f.create_pod(b).await?;
    }
    let mut out = Vec::new();
    for b in builders {
        let pod = f.wait_pod_ready(b.name()).await?;
        out.push(Endpoint::of(b.name(), &pod)?);
    }
    Ok(out)
}

/// Creates one netexec pod named `<prefix>-<i>` on each of `nodes` (pinned, as upstream's
/// `setupCore` does), then waits for all of them to be ready.
pub(crate) async fn endpoint_per_node(
    f: &Framework,
    os: Os,
    nodes: &[NodeInfo],
    prefix: &str,
) -> Result<Vec<Endpoint>, CaseError> {
    let builders: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            netexec_pod(&format!("{prefix}-{i}"), os)
                .label("selector", prefix)
                .on_node(&n.name)
        })
        .collect();
    create_endpoints(f, &builders).await
}

/// Creates a ready netexec pod `name` of `os` (optionally on `node`).
pub(crate) async fn netexec_ready(
    f: &Framework,
    name: &str,
    os: Os,
    node: Option<&str>,
) -> Result<Endpoint, CaseError> {
    let mut b = netexec_pod(name, os).label("role", name);
    if let Some(n) = node {
        b = b.on_node(n);
    }
    let pod = f.create_pod_ready(&b).await?;
    Endpoint::of(name, &pod)
}

/// Dials every endpoint from `client`, retrying each up to [`MAX_DIAL_TRIES`] times, and fails
/// with upstream's "N out of M connections failed" naming each failed endpoint and its node.
pub(crate) async fn dial_all(f: &Framework, client: &str, protocol: Protocol, endpoints: &[Endpoint]) -> CaseResult {
    crate::ensure!(!endpoints.is_empty(), "no endpoint pods to dial from {client}");
    let mut failed = Vec::new();
    for ep in endpoints {
        f.step(format!(
            "dialing {} {}:{} ({}) from {client}",
            protocol.as_str(),
            ep.ip,
            protocol.port(),
            ep.name
        ));
        let expected = BTreeSet::from([ep.name.clone()]);
        if let Err(e) = f
            .dial_expect(client, protocol, &ep.ip, protocol.port(), &expected, MAX_DIAL_TRIES)
            .await
        {
            failed.push(format!("{} ({}) on node {}: {e}", ep.name, ep.ip, ep.node));
        }
    }
    crate::ensure!(
        failed.is_empty(),
        "{} out of {} connections failed: {}",
        failed.len(),
        endpoints.len(),
        failed.join("; ")
    );
    Ok(())
}

async fn granular(f: &Framework, protocol: Protocol, host_network: bool) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    f.step(format!(
        "creating a netexec endpoint pod on each of {} {os} node(s)",
        nodes.len()
    ));
    let endpoints = endpoint_per_node(f, os, &nodes, "netserver").await?;
    let client = if host_network {
        "host-test-container-pod"
    } else {
        "test-container-pod"
    };
    let mut b = netexec_pod(client, os).on_node(&nodes[0].name);
    if host_network {
        b = b.host_network();
    }
    f.create_pod_ready(&b).await?;
    dial_all(f, client, protocol, &endpoints).await
}

/// Upstream networking.go `should function for intra-pod communication: http`.
async fn intra_pod_http(f: &Framework) -> CaseResult {
    granular(f, Protocol::Http, false).await
}

/// Upstream networking.go `should function for intra-pod communication: udp`.
async fn intra_pod_udp(f: &Framework) -> CaseResult {
    granular(f, Protocol::Udp, false).await
}

/// Upstream networking.go `should function for node-pod communication: http` (hostNetwork client).
async fn node_pod_http(f: &Framework) -> CaseResult {
    granular(f, Protocol::Http, true).await
}

/// Upstream networking.go `should function for node-pod communication: udp` (hostNetwork client).
async fn node_pod_udp(f: &Framework) -> CaseResult {
    granular(f, Protocol::Udp, true).await
}

/// The matrix's fixture: a server pod behind a headless Service (`backends`, which is also its
/// subdomain) and a ClusterIP Service (`frontend`), and a client pod on another node when the
/// pool has one.
struct Matrix {
    os: Os,
    client: Endpoint,
    server: Endpoint,
    frontend_ip: String,
}

const HEADLESS: &str = "backends";
const FRONTEND: &str = "frontend";

async fn matrix(f: &Framework) -> Result<Matrix, CaseError> {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let server_node = &nodes[nodes.len() - 1].name;
    let client_node = &nodes[0].name;
    f.create_service(
        &ServiceBuilder::headless(HEADLESS)
            .selector("role", "server")
            .netexec_ports(),
    )
    .await?;
    let frontend = f
        .create_service(
            &ServiceBuilder::cluster_ip(FRONTEND)
                .selector("role", "server")
                .netexec_ports(),
        )
        .await?;
    let server = netexec_pod("server", os)
        .label("role", "server")
        .hostname("server", HEADLESS)
        .on_node(server_node);
    f.create_pod(&server).await?;
    let client = netexec_ready(f, "client", os, Some(client_node)).await?;
    let server_pod = f.wait_pod_ready("server").await?;
    f.wait_ready_endpoints(FRONTEND, 1).await?;
    f.wait_ready_endpoints(HEADLESS, 1).await?;
    Ok(Matrix {
        os,
        client,
        server: Endpoint::of("server", &server_pod)?,
        frontend_ip: services::cluster_ip(&frontend)?,
    })
}

/// Dials `host:port` from the matrix client and expects the server's hostname.
async fn matrix_dial(f: &Framework, m: &Matrix, protocol: Protocol, host: &str, port: u16) -> CaseResult {
    let expected = BTreeSet::from([m.server.name.clone()]);
    f.dial_expect(&m.client.name, protocol, host, port, &expected, MAX_DIAL_TRIES)
        .await
        .map(|_| ())
        .map_err(|e| {
            e.context(format!(
                "{} pod {} on node {} -> server {} ({}) on node {}",
                m.os.title(),
                m.client.name,
                m.client.node,
                m.server.name,
                m.server.ip,
                m.server.node
            ))
        })
}

fn service_port(protocol: Protocol) -> u16 {
    let port = match protocol {
        Protocol::Http => SERVICE_HTTP_PORT,
        Protocol::Udp => SERVICE_UDP_PORT,
    };
    u16::try_from(port).unwrap_or_default()
}

async fn row_pod_ip(f: &Framework, protocol: Protocol) -> CaseResult {
    let m = matrix(f).await?;
    let ip = m.server.ip.clone();
    matrix_dial(f, &m, protocol, &ip, protocol.port()).await
}

async fn row_headless(f: &Framework, protocol: Protocol) -> CaseResult {
    let m = matrix(f).await?;
    matrix_dial(f, &m, protocol, HEADLESS, protocol.port()).await
}

async fn row_hostname(f: &Framework, protocol: Protocol) -> CaseResult {
    let m = matrix(f).await?;
    let name = format!("server.{}", service_fqdn(HEADLESS, f.ns()));
    matrix_dial(f, &m, protocol, &name, protocol.port()).await
}

async fn row_svc_ip(f: &Framework, protocol: Protocol) -> CaseResult {
    let m = matrix(f).await?;
    let ip = m.frontend_ip.clone();
    matrix_dial(f, &m, protocol, &ip, service_port(protocol)).await
}

async fn row_svc_short(f: &Framework, protocol: Protocol) -> CaseResult {
    let m = matrix(f).await?;
    matrix_dial(f, &m, protocol, FRONTEND, service_port(protocol)).await
}

async fn row_svc_fqdn(f: &Framework, protocol: Protocol) -> CaseResult {
    let m = matrix(f).await?;
    let name = service_fqdn(FRONTEND, f.ns());
    matrix_dial(f, &m, protocol, &name, service_port(protocol)).await
}

/// Matrix: Pod→Pod by IP over TCP (Windows networking docs, connectivity table).
async fn pod_ip_tcp(f: &Framework) -> CaseResult {
    row_pod_ip(f, Protocol::Http).await
}
/// Matrix: Pod→Pod by IP over UDP.
async fn pod_ip_udp(f: &Framework) -> CaseResult {
    row_pod_ip(f, Protocol::Udp).await
}
/// Matrix: Pod→Pod by a headless Service name over TCP.
async fn pod_headless_tcp(f: &Framework) -> CaseResult {
    row_headless(f, Protocol::Http).await
}
/// Matrix: Pod→Pod by a headless Service name over UDP.
async fn pod_headless_udp(f: &Framework) -> CaseResult {
    row_headless(f, Protocol::Udp).await
}
/// Matrix: Pod→Pod by `hostname.subdomain.ns.svc.cluster.local` over TCP.
async fn pod_hostname_tcp(f: &Framework) -> CaseResult {
    row_hostname(f, Protocol::Http).await
}
/// Matrix: Pod→Pod by `hostname.subdomain.ns.svc.cluster.local` over UDP.
async fn pod_hostname_udp(f: &Framework) -> CaseResult {
    row_hostname(f, Protocol::Udp).await
}
/// Matrix: Pod→Service by ClusterIP over TCP.
async fn svc_ip_tcp(f: &Framework) -> CaseResult {
    row_svc_ip(f, Protocol::Http).await
}
/// Matrix: Pod→Service by ClusterIP over UDP.
async fn svc_ip_udp(f: &Framework) -> CaseResult {
    row_svc_ip(f, Protocol::Udp).await
}
/// Matrix: Pod→Service by short name (no dot) over TCP.
async fn svc_short_tcp(f: &Framework) -> CaseResult {
    row_svc_short(f, Protocol::Http).await
}
/// Matrix: Pod→Service by short name (no dot) over UDP.
async fn svc_short_udp(f: &Framework) -> CaseResult {
    row_svc_short(f, Protocol::Udp).await
}
/// Matrix: Pod→Service by `svc.ns.svc.cluster.local` over TCP.
async fn svc_fqdn_tcp(f: &Framework) -> CaseResult {
    row_svc_fqdn(f, Protocol::Http).await
}
/// Matrix: Pod→Service by `svc.ns.svc.cluster.local` over UDP.
async fn svc_fqdn_udp(f: &Framework) -> CaseResult {
    row_svc_fqdn(f, Protocol::Udp).await
}

/// `--external-endpoint HOST:PORT` split, or a skip saying it is needed.
pub(crate) fn external_endpoint(f: &Framework) -> Result<(String, u16), CaseError> {
    let Some(ep) = f.settings().external_endpoint.clone() else {
        return Err(f.skip("needs an endpoint outside the cluster network: pass --external-endpoint HOST:PORT"));
    };
    let (host, port) = ep
        .rsplit_once(':')
        .and_then(|(h, p)| {
            p.parse::<u16>()
                .ok()
                .map(|p| (h.trim_matches(['[', ']']).to_string(), p))
        })
        .ok_or_else(|| CaseError::failed(format!("--external-endpoint {ep:?} is not HOST:PORT")))?;
    Ok((host, port))
}

/// From a fresh netexec pod of the target OS, dials `host:port` and expects any answer (HTTP)
/// or the echo of a token (UDP `echo`).
pub(crate) async fn egress(f: &Framework, protocol: Protocol, host: &str, port: u16) -> CaseResult {
    egress_from(f, f.target_os(), protocol, host, port).await
}

/// Like [`egress`] from a pod of `os`.
pub(crate) async fn egress_from(f: &Framework, os: Os, protocol: Protocol, host: &str, port: u16) -> CaseResult {
    egress_client(f, os, protocol, host, port).await.map(|_| ())
}

/// Like [`egress_from`]; returns the client pod that got through.
async fn egress_client(
    f: &Framework,
    os: Os,
    protocol: Protocol,
    host: &str,
    port: u16,
) -> Result<Endpoint, CaseError> {
    f.require_nodes(os, 1).await?;
    let client = netexec_ready(f, "egress-client", os, None).await?;
    let token = "crossconf-egress";
    let request = match protocol {
        Protocol::Http => "hostname".to_string(),
        Protocol::Udp => format!("echo {token}"),
    };
    let mut last = None;
    for _ in 0..MAX_DIAL_TRIES {
        let answer = f.dial(&client.name, protocol, host, port, &request, 1).await?;
        let ok = match protocol {
            Protocol::Http => answer.responses.iter().any(|r| !r.trim().is_empty()),
            Protocol::Udp => answer.responses.iter().any(|r| r.trim() == token),
        };
        if ok {
            return Ok(client);
        }
        last = Some(answer);
    }
    crate::fail!(
        "{} pod {} on node {} could not reach {} {host}:{port} outside the cluster in {MAX_DIAL_TRIES} tries; last answer: {last:?}",
        os.title(),
        client.name,
        client.node,
        protocol.as_str()
    )
}

async fn external_by_ip(f: &Framework, protocol: Protocol) -> CaseResult {
    let (host, port) = external_endpoint(f)?;
    f.skip_unless(
        host.parse::<std::net::IpAddr>().is_ok(),
        format!("--external-endpoint host {host:?} is a name, not an IP address"),
    )?;
    egress(f, protocol, &host, port).await
}

/// Matrix: Pod→External by IP over TCP (`--external-endpoint`).
async fn external_ip_tcp(f: &Framework) -> CaseResult {
    external_by_ip(f, Protocol::Http).await
}
/// Matrix: Pod→External by IP over UDP (`--external-endpoint`, UDP echo on the same port).
async fn external_ip_udp(f: &Framework) -> CaseResult {
    external_by_ip(f, Protocol::Udp).await
}
/// Matrix: Pod→External by name over TCP (`--external-name`, port of `--external-endpoint`).
async fn external_name_tcp(f: &Framework) -> CaseResult {
    let (_, port) = external_endpoint(f)?;
    let Some(name) = f.settings().external_name.clone() else {
        return Err(f.skip("needs a name resolving outside the cluster: pass --external-name"));
    };
    egress(f, Protocol::Http, &name, port).await
}

/// ICMP leaves the cluster only where the OS lets it ([`Os::icmp_leaves_cluster`]: not from
/// Windows pods), while TCP to the same outside address works: the pod first reaches
/// `--external-endpoint` over TCP, then pings its host once.
async fn external_icmp(f: &Framework) -> CaseResult {
    let (host, port) = external_endpoint(f)?;
    let os = f.target_os();
    let client = egress_client(f, os, Protocol::Http, &host, port).await?;
    let out = f
        .exec_shell(&client.name, None, os, &ping_once_script(os, &host))
        .await?;
    let (replied, expected) = (out.exit_code == 0, os.icmp_leaves_cluster());
    crate::ensure!(
        replied == expected,
        "ping {host} from {} pod {} on node {} (TCP to {host}:{port} works): expected {}, got {} (exit {}): {}",
        os.title(),
        client.name,
        client.node,
        if expected { "an echo reply" } else { "no echo reply" },
        if replied { "a reply" } else { "no reply" },
        out.exit_code,
        format!("{}{}", out.stdout, out.stderr).trim()
    );
    Ok(())
}

/// Matrix: Node→Pod. A Windows node cannot run a hostNetwork client, so the node's own kubelet
/// is the client: an HTTP readiness probe on netexec `/healthz` only passes when the node
/// reaches the pod's IP.
async fn node_to_pod(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let mut names = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let name = format!("probed-{i}");
        let b = netexec_pod(&name, os).on_node(&node.name).edit_spec(|spec| {
            for c in &mut spec.containers {
                c.readiness_probe = Some(Probe {
                    http_get: Some(HTTPGetAction {
                        path: Some("/healthz".into()),
                        port: IntOrString::Int(i32::from(HTTP_PORT)),
                        ..Default::default()
                    }),
                    period_seconds: Some(2),
                    ..Default::default()
                });
            }
        });
        f.create_pod(&b).await?;
        names.push((name, node.name.clone()));
    }
    for (name, node) in &names {
        f.wait_pod_ready(name)
            .await
            .map_err(|e| e.context(format!("kubelet of node {node} probing pod {name} over its pod IP")))?;
    }
    Ok(())
}

/// Matrix: Pod→Node. From a pod of the target OS, a TCP connection to every node's kubelet
/// port (10250) opens. The check is the path, not the kubelet's TLS or auth, so it uses
/// `agnhost connect` (a plain TCP dial, as upstream's network policy probes do), which works
/// the same in the Linux and the Windows agnhost image.
async fn pod_to_node(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let client = netexec_ready(f, "client", os, Some(&nodes[0].name)).await?;
    let mut failed = Vec::new();
    for node in &nodes {
        let Some(ip) = node.internal_ip.clone() else {
            failed.push(format!("node {} has no InternalIP", node.name));
            continue;
        };
        let target = format!("{ip}:{KUBELET_PORT}");
        let command = ["/agnhost", "connect", target.as_str(), "--timeout=5s", "--protocol=tcp"];
        let out = f
            .exec(&client.name, None, command.iter().map(ToString::to_string).collect())
            .await?;
        if out.exit_code != 0 {
            failed.push(format!(
                "node {} ({target}): agnhost connect exit {}: {}",
                node.name,
                out.exit_code,
                out.stderr.trim()
            ));
        }
    }
    crate::ensure!(
        failed.is_empty(),
        "{} out of {} nodes' kubelet ports unreachable over TCP from pod {} on node {}: {}",
        failed.len(),
        nodes.len(),
        client.name,
        client.node,
        failed.join("; ")
    );
    Ok(())
}

/// The kubelet's port on every node.
const KUBELET_PORT: u16 = 10250;

/// The negative row of the Windows connectivity table: `svc.ns` (a dot, not fully qualified)
/// resolves only where the DNS client appends search suffixes to dotted names
/// ([`Os::expands_dotted_names`]: Linux yes, Windows no), while the FQDN resolves everywhere.
async fn svc_dotted(f: &Framework) -> CaseResult {
    let m = matrix(f).await?;
    let fqdn = service_fqdn(FRONTEND, f.ns());
    let control = f
        .nslookup_eventually(&m.client.name, m.os, &fqdn, Duration::from_secs(60))
        .await?;
    crate::ensure!(
        control.addresses.contains(&m.frontend_ip),
        "control lookup of {fqdn} from pod {} on node {}: expected {}, got {:?}: {}",
        m.client.name,
        m.client.node,
        m.frontend_ip,
        control.addresses,
        control.output
    );
    let dotted = format!("{FRONTEND}.{}", f.ns());
    let expected = m.os.expands_dotted_names();
    let lookup = f.nslookup(&m.client.name, m.os, &dotted).await?;
    crate::ensure!(
        lookup.resolved() == expected,
        "lookup of {dotted} from {} pod {} on node {}: expected it to {}, but it {} ({:?}): {}",
        m.os.title(),
        m.client.name,
        m.client.node,
        if expected { "resolve" } else { "not resolve" },
        if lookup.resolved() {
            "resolved"
        } else {
            "did not resolve"
        },
        lookup.addresses,
        lookup.output
    );
    Ok(())
}
