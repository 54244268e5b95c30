//! Services backed by pods of the target OS: NodePort on every node IP of both OSes, ClusterIP,
//! headless, ExternalName, service environment variables, session affinity, and one Service
//! whose endpoints span Linux and Windows pods.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::network::{Endpoint, create_endpoints, netexec_ready};
use crate::catalog::{Case, Kind};
use crate::cluster::NodeInfo;
use crate::framework::netexec::{MAX_DIAL_TRIES, netexec_pod};
use crate::framework::services::{
    self, POLL_INTERVAL, SERVICE_HTTP_PORT, SERVICE_UDP_PORT, ServiceBuilder, UPSTREAM_STABILITY, WARM_UP, parse_env,
};
use crate::framework::workloads::print_env_script;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, Protocol, pod_node};
use crate::os::Os;

/// Upstream windows/service.go: a Windows pod reaches a NodePort Service of Windows pods.
pub const NODEPORT_WINDOWS: &str =
    "[sig-windows] Services should be able to create a functioning NodePort service for Windows";
/// Beyond upstream: the NodePort answers on every node IP of both OSes, from pods of both OSes.
pub const NODEPORT_EVERY_NODE: &str = "[sig-windows] Services should serve a NodePort service on every Linux and Windows node IP to Linux and Windows pods";
/// Beyond upstream: the NodePort answers the test runner on every node IP.
pub const NODEPORT_RUNNER: &str =
    "[sig-windows] Services should serve a NodePort service on every node IP to the test runner";
/// ClusterIP over TCP and UDP, every backend answering.
pub const CLUSTER_IP: &str =
    "[sig-windows] Services should serve TCP and UDP through a ClusterIP service from every backend pod";
/// Headless: the name resolves to exactly the ready pods' IPs.
pub const HEADLESS: &str = "[sig-windows] Services should resolve a headless service to the IPs of its ready pods";
/// ExternalName: the name is a CNAME for its target.
pub const EXTERNAL_NAME: &str = "[sig-windows] Services should resolve an ExternalName service to its target";
/// Service environment variables in pods created after the Service.
pub const ENV_VARS: &str =
    "[sig-windows] Services should give new pods the service's host and port as environment variables";
/// Session affinity ClientIP.
pub const SESSION_AFFINITY: &str =
    "[sig-windows] Services should send every request of a client to one backend with session affinity ClientIP";
/// One Service with a Linux and a Windows endpoint.
pub const MIXED_ENDPOINTS: &str =
    "[sig-windows] Services should reach both the Linux and the Windows endpoints of one service";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(NODEPORT_WINDOWS, Kind::WindowsSpecific, nodeport_windows),
        crate::case!(NODEPORT_EVERY_NODE, Kind::WindowsSpecific, nodeport_every_node).hybrid(),
        crate::case!(NODEPORT_RUNNER, Kind::Substitute, nodeport_runner),
        crate::case!(CLUSTER_IP, Kind::Substitute, cluster_ip),
        crate::case!(HEADLESS, Kind::Substitute, headless),
        crate::case!(EXTERNAL_NAME, Kind::Substitute, external_name),
        crate::case!(ENV_VARS, Kind::Substitute, env_vars),
        crate::case!(SESSION_AFFINITY, Kind::Substitute, session_affinity),
        crate::case!(MIXED_ENDPOINTS, Kind::WindowsSpecific, mixed_endpoints).hybrid(),
    ]
}

fn port_u16(p: i32) -> u16 {
    u16::try_from(p).unwrap_or_default()
}

/// Creates `n` netexec backends labelled `app=<app>` on `os`, spread over `nodes` round-robin,
/// and waits for them to be ready.
async fn backends(f: &Framework, app: &str, os: Os, nodes: &[NodeInfo], n: usize) -> Result<Vec<Endpoint>, CaseError> {
    crate::ensure!(!nodes.is_empty(), "no {os} nodes to place {app} backends on");
    let builders: Vec<PodBuilder> = (0..n)
        .map(|i| {
            netexec_pod(&format!("{app}-{i}"), os)
                .label("app", app)
                .on_node(&nodes[i % nodes.len()].name)
        })
        .collect();
    create_endpoints(f, &builders).await
}

/// Creates `svc` on the netexec ports selecting `app=<its name>`, `n` [`backends`] for it on
/// `os` (over `nodes`), and waits until they are its ready endpoints; returns the Service as
/// created and the backends.
///
/// Every Service case of this module with netexec backends starts this way.
async fn service_with_backends(
    f: &Framework,
    svc: ServiceBuilder,
    os: Os,
    nodes: &[NodeInfo],
    n: usize,
) -> Result<(Service, Vec<Endpoint>), CaseError> {
    let app = svc.name().to_string();
    let created = f.create_service(&svc.selector("app", &app).netexec_ports()).await?;
    let eps = backends(f, &app, os, nodes, n).await?;
    f.wait_ready_endpoints(&app, eps.len()).await?;
    Ok((created, eps))
}

/// The schedulable nodes of both OSes, Linux first.
async fn every_node(f: &Framework) -> Result<Vec<NodeInfo>, CaseError> {
    let mut all_nodes = f.schedulable_nodes(Os::Linux).await?;
    all_nodes.extend(f.schedulable_nodes(Os::Windows).await?);
    Ok(all_nodes)
}

fn names(eps: &[Endpoint]) -> BTreeSet<String> {
    eps.iter().map(|e| e.name.clone()).collect()
}

/// Upstream windows/service.go "should be able to create a functioning NodePort service for
/// Windows": a NodePort Service of Windows netexec pods, reached from a Windows pod at
/// `nodeIP:nodePort`, within 30 s and then consistently for 10 s.
async fn nodeport_windows(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let (svc, eps) = service_with_backends(f, ServiceBuilder::node_port("nodeport-test"), os, &nodes, 1).await?;
    let port = services::node_port(&svc, "http")?;
    let client = netexec_ready(f, "client", os, None).await?;
    let node = &nodes[0];
    let ip = node
        .internal_ip
        .clone()
        .ok_or_else(|| CaseError::failed(format!("node {} has no InternalIP", node.name)))?;
    f.dial_stable(
        &client.name,
        Protocol::Http,
        &ip,
        port,
        &names(&eps),
        UPSTREAM_STABILITY,
    )
    .await
    .map_err(|e| {
        e.context(format!(
            "NodePort {port} on node {} from pod {} on node {}",
            node.name, client.name, client.node
        ))
    })?;
    Ok(())
}

/// NodePort on every node IP of both OSes, TCP and UDP, from a Linux and a Windows pod.
async fn nodeport_every_node(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let target_nodes = f.require_nodes(os, 1).await?;
    f.require_nodes(os.other(), 1).await?;
    let (svc, eps) = service_with_backends(f, ServiceBuilder::node_port("nodeport-all"), os, &target_nodes, 1).await?;
    let ports = [
        (Protocol::Http, services::node_port(&svc, "http")?),
        (Protocol::Udp, services::node_port(&svc, "udp")?),
    ];
    let expected = names(&eps);
    let all_nodes = every_node(f).await?;
    let mut failed = Vec::new();
    let mut checked = 0;
    for client_os in Os::ALL {
        let client = netexec_ready(f, &format!("client-{}", client_os.as_str()), client_os, None).await?;
        for node in &all_nodes {
            let Some(ip) = node.internal_ip.clone() else {
                failed.push(format!("node {} has no InternalIP", node.name));
                continue;
            };
            for (protocol, port) in ports {
                checked += 1;
                if let Err(e) = f
                    .dial_expect(&client.name, protocol, &ip, port, &expected, MAX_DIAL_TRIES)
                    .await
                {
                    failed.push(format!(
                        "{} pod {} -> {} node {} {ip}:{port}/{}: {e}",
                        client_os.title(),
                        client.name,
                        node.os.map(Os::title).unwrap_or("?"),
                        node.name,
                        protocol.as_str()
                    ));
                }
            }
        }
    }
    crate::ensure!(checked > 0, "no node IPs to check");
    crate::ensure!(
        failed.is_empty(),
        "{} out of {checked} NodePort paths failed: {}",
        failed.len(),
        failed.join("; ")
    );
    Ok(())
}

/// `GET http://addr/path` from the runner with a plain HTTP/1.0 request; the body.
async fn runner_get(addr: &str, path: &str) -> Result<String, String> {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&buf).into_owned())
    };
    let text = tokio::time::timeout(Duration::from_secs(10), io)
        .await
        .map_err(|_| "timed out after 10s".to_string())?
        .map_err(|e| e.to_string())?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let ok = head.starts_with("HTTP/1.") && head.split_whitespace().nth(1) == Some("200");
    if !ok {
        return Err(format!("unexpected response {:?}", head.lines().next().unwrap_or("")));
    }
    Ok(body.trim().to_string())
}

/// NodePort reached by the runner itself on every node IP of both OSes.
async fn nodeport_runner(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let (svc, eps) = service_with_backends(f, ServiceBuilder::node_port("nodeport-runner"), os, &nodes, 1).await?;
    let port = services::node_port(&svc, "http")?;
    let all_nodes = every_node(f).await?;
    let mut failed = Vec::new();
    for node in &all_nodes {
        let Some(ip) = node.internal_ip.clone() else {
            failed.push(format!("node {} has no InternalIP", node.name));
            continue;
        };
        let addr = format!("{ip}:{port}");
        f.step(format!("GET http://{addr}/hostname from the runner"));
        let mut last = String::new();
        let mut ok = false;
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        // Every node gets at least one try; the warm-up shrinks so the report fits the case.
        let deadline = Instant::now() + WARM_UP.min(f.remaining().saturating_sub(Duration::from_secs(15)));
        loop {
            tick.tick().await;
            match runner_get(&addr, "/hostname").await {
                Ok(body) if body == eps[0].name => {
                    ok = true;
                    break;
                }
                Ok(body) => last = format!("answered {body:?}, expected {}", eps[0].name),
                Err(e) => last = e,
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        if !ok {
            failed.push(format!("node {} ({addr}): {last}", node.name));
        }
    }
    crate::ensure!(
        failed.is_empty(),
        "{} out of {} node IPs did not serve NodePort {port} to the runner: {}",
        failed.len(),
        all_nodes.len(),
        failed.join("; ")
    );
    Ok(())
}

/// ClusterIP: two backends (on two nodes when the pool has them) both answer through the
/// ClusterIP, over TCP and over UDP.
async fn cluster_ip(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let (svc, eps) = service_with_backends(f, ServiceBuilder::cluster_ip("clusterip"), os, &nodes, 2).await?;
    let ip = services::cluster_ip(&svc)?;
    let client = netexec_ready(f, "client", os, None).await?;
    let expected = names(&eps);
    for (protocol, port) in [(Protocol::Http, SERVICE_HTTP_PORT), (Protocol::Udp, SERVICE_UDP_PORT)] {
        f.dial_expect(&client.name, protocol, &ip, port_u16(port), &expected, MAX_DIAL_TRIES)
            .await
            .map_err(|e| {
                e.context(format!(
                    "ClusterIP service clusterip from pod {} on node {}",
                    client.name, client.node
                ))
            })?;
    }
    Ok(())
}

/// Headless: the Service name resolves to exactly the IPs of its two ready pods.
async fn headless(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let (_, eps) = service_with_backends(f, ServiceBuilder::headless("headless"), os, &nodes, 2).await?;
    let client = netexec_ready(f, "client", os, None).await?;
    let want: BTreeSet<String> = eps.iter().map(|e| e.ip.clone()).collect();
    // Keep time to report: a lookup no server answers takes seconds.
    let deadline = Instant::now() + Duration::from_secs(60).min(f.remaining().saturating_sub(Duration::from_secs(20)));
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    loop {
        tick.tick().await;
        let lookup = f.nslookup(&client.name, os, "headless").await?;
        let got: BTreeSet<String> = lookup.addresses.iter().cloned().collect();
        if got == want {
            return Ok(());
        }
        if Instant::now() >= deadline {
            crate::fail!(
                "headless service 'headless' from pod {} on node {}: expected exactly the pod IPs {want:?}, got {got:?}: {}",
                client.name,
                client.node,
                lookup.output
            );
        }
    }
}

/// ExternalName: `ext` resolves (through its CNAME) to the ClusterIP of `kubernetes.default`.
async fn external_name(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let target = services::service_fqdn("kubernetes", "default");
    f.create_service(&ServiceBuilder::external_name("ext", &target)).await?;
    let api: kube::Api<Service> = kube::Api::namespaced(f.client(), "default");
    let want = services::cluster_ip(&api.get("kubernetes").await?)?;
    let client = netexec_ready(f, "client", os, None).await?;
    let lookup = f
        .nslookup_eventually(&client.name, os, "ext", Duration::from_secs(60))
        .await?;
    crate::ensure!(
        lookup.addresses.contains(&want),
        "ExternalName service ext -> {target}: expected pod {} on node {} to resolve it to {want}, got {:?}: {}",
        client.name,
        client.node,
        lookup.addresses,
        lookup.output
    );
    Ok(())
}

/// Service environment variables: a pod created after Service `fooservice` sees
/// `FOOSERVICE_SERVICE_HOST` = its ClusterIP and `FOOSERVICE_SERVICE_PORT` = its first port.
async fn env_vars(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let since = std::time::Instant::now();
    let svc = f
        .create_service(
            &ServiceBuilder::cluster_ip("fooservice")
                .selector("app", "none")
                .netexec_ports(),
        )
        .await?;
    let ip = services::cluster_ip(&svc)?;
    let mut name = "env-reader";
    let (pod, env) = loop {
        let b = PodBuilder::new(name, os)
            .container(ContainerBuilder::new("c", "agnhost").command(os.shell(print_env_script(os))));
        let pod = f.run_pod_to_completion(&b).await?;
        let env = parse_env(&f.logs(name, None).await?);
        // The kubelet takes the variables from the services it has watched: after an API
        // server outage its watch may still be reconnecting. One more pod, once it had time.
        if env.contains_key("FOOSERVICE_SERVICE_HOST") || name != "env-reader" || !f.api_outage_since(since) {
            break (pod, env);
        }
        f.step(format!(
            "pod {name} has no FOOSERVICE_SERVICE_HOST and the API server was unreachable since the service was created; trying a second pod"
        ));
        f.settle_after_outage().await;
        name = "env-reader-2";
    };
    let node = pod_node(&pod);
    crate::ensure!(
        env.get("FOOSERVICE_SERVICE_HOST") == Some(&ip),
        "pod {name} on node {node}: expected FOOSERVICE_SERVICE_HOST={ip}, got {:?}",
        env.get("FOOSERVICE_SERVICE_HOST")
    );
    let port = SERVICE_HTTP_PORT.to_string();
    crate::ensure!(
        env.get("FOOSERVICE_SERVICE_PORT") == Some(&port),
        "pod {name} on node {node}: expected FOOSERVICE_SERVICE_PORT={port}, got {:?}",
        env.get("FOOSERVICE_SERVICE_PORT")
    );
    Ok(())
}

/// Session affinity ClientIP: with two ready backends, every request of one client reaches
/// the same backend, across separate dials.
async fn session_affinity(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let affinity = ServiceBuilder::cluster_ip("affinity").session_affinity_client_ip();
    let (svc, eps) = service_with_backends(f, affinity, os, &nodes, 2).await?;
    let ip = services::cluster_ip(&svc)?;
    let client = netexec_ready(f, "client", os, None).await?;
    // Upstream's checkAffinity polls until the service answers at all: kube-proxy may still
    // be catching up with the new endpoints. Affinity is then checked on a settled path.
    let port = port_u16(SERVICE_HTTP_PORT);
    f.dial_until_answered(&client.name, Protocol::Http, &ip, port, &names(&eps))
        .await?;
    let mut seen = BTreeSet::new();
    let mut answered = 0;
    for _ in 0..3 {
        let r = f.dial(&client.name, Protocol::Http, &ip, port, "hostname", 10).await?;
        answered += r.responses.len();
        seen.extend(r.distinct());
    }
    crate::ensure!(
        answered == 30,
        "session affinity: expected 30 answers from service affinity to pod {}, got {answered} ({seen:?})",
        client.name
    );
    crate::ensure!(
        seen.len() == 1 && seen.is_subset(&names(&eps)),
        "session affinity ClientIP: expected every request of pod {} on node {} to reach one of {:?}, got {seen:?}",
        client.name,
        client.node,
        names(&eps)
    );
    Ok(())
}

/// One Service, a Linux and a Windows endpoint: its EndpointSlices list both, and a client of
/// the target OS reaches both through the ClusterIP.
async fn mixed_endpoints(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let linux = f.require_nodes(Os::Linux, 1).await?;
    let windows = f.require_nodes(Os::Windows, 1).await?;
    let svc = f
        .create_service(
            &ServiceBuilder::cluster_ip("mixed")
                .selector("app", "mixed")
                .netexec_ports(),
        )
        .await?;
    let ip = services::cluster_ip(&svc)?;
    let mut eps = Vec::new();
    for (pod_os, nodes) in [(Os::Linux, &linux), (Os::Windows, &windows)] {
        let name = format!("mixed-{}", pod_os.as_str());
        let b = netexec_pod(&name, pod_os).label("app", "mixed").on_node(&nodes[0].name);
        let pod = f.create_pod_ready(&b).await?;
        eps.push(Endpoint::of(&name, &pod)?);
    }
    let ready = f.wait_ready_endpoints("mixed", 2).await?;
    for ep in &eps {
        crate::ensure!(
            ready.iter().any(|r| r.ip == ep.ip),
            "service mixed: expected endpoint {} ({}) on node {} in its EndpointSlices, got {ready:?}",
            ep.name,
            ep.ip,
            ep.node
        );
    }
    let client = netexec_ready(f, "client", os, None).await?;
    f.dial_expect(
        &client.name,
        Protocol::Http,
        &ip,
        port_u16(SERVICE_HTTP_PORT),
        &names(&eps),
        MAX_DIAL_TRIES,
    )
    .await
    .map_err(|e| {
        e.context(format!(
            "service mixed from {} pod {} on node {}",
            os.title(),
            client.name,
            client.node
        ))
    })?;
    Ok(())
}
