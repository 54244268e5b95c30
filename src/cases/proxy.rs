//! Upstream `[sig-network] Proxy version v1` conformance case (test/e2e/network/proxy.go): the
//! API server's pod and service proxies reach a pod of the target OS.

use std::time::Duration;

use crate::catalog::{Case, Kind};
use crate::framework::services::ServiceBuilder;
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_node};

/// Upstream proxy.go "should proxy through a service and a pod".
pub const THROUGH_SERVICE_AND_POD: &str =
    "[sig-network] Proxy version v1 should proxy through a service and a pod [Conformance]";

/// Upstream proxy.go "A set of valid responses are returned for both pod and service Proxy".
pub const VERBS_PROXY: &str =
    "[sig-network] Proxy version v1 A set of valid responses are returned for both pod and service Proxy [Conformance]";

/// Upstream proxy.go "A set of valid responses are returned for both pod and service ProxyWithPath".
pub const VERBS_PROXY_WITH_PATH: &str = "[sig-network] Proxy version v1 A set of valid responses are returned for \
                                         both pod and service ProxyWithPath [Conformance]";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    let mut cases = vec![crate::case!(
        THROUGH_SERVICE_AND_POD,
        Kind::Adapted,
        through_service_and_pod
    )];
    cases.extend(super::proxy_verbs::cases());
    cases
}

/// What the porter pod answers on each port: (container port, service port, body).
const PORTS: [(u16, u16, &str); 2] = [(160, 80, "foo"), (162, 81, "bar")];

/// How long the proxied requests may take to succeed after the pod is ready.
const PROPAGATION: Duration = Duration::from_secs(60);
/// How long one proxied request may take; the round is repeated within [`PROPAGATION`].
const ATTEMPT: Duration = Duration::from_secs(10);

/// Every proxied request of [`PORTS`] through the pod and the service proxy; one line per
/// request that did not return its body.
async fn proxied_failures(f: &Framework, svc: &str) -> Vec<String> {
    let mut failed = Vec::new();
    for (container_port, service_port, body) in PORTS {
        let via_pod = f
            .proxy_get_within("pods", "proxy-service-pod", container_port, "/", ATTEMPT)
            .await
            .map_err(|e| e.to_string());
        let via_service = f
            .proxy_get_within("services", svc, service_port, "/", ATTEMPT)
            .await
            .map_err(|e| e.to_string());
        for (how, got) in [
            (format!("pods/proxy-service-pod:{container_port}/proxy/"), via_pod),
            (format!("services/{svc}:{service_port}/proxy/"), via_service),
        ] {
            match got {
                Ok(text) if text.trim() == body => {}
                other => failed.push(format!("{how}: expected {body:?}, got {other:?}")),
            }
        }
    }
    failed
}

/// Upstream proxy.go "should proxy through a service and a pod": an `agnhost porter` pod serves
/// a fixed body per port behind a Service with one port per body; every body comes back through
/// the pod proxy (`pods/<pod>:<port>/proxy/`) and the service proxy
/// (`services/<svc>:<port>/proxy/`).
async fn through_service_and_pod(f: &Framework) -> CaseResult {
    f.require_nodes(f.target_os(), 1).await?;
    let svc = "proxy-service";
    let mut builder = ServiceBuilder::cluster_ip(svc).selector("app", svc);
    let mut porter = ContainerBuilder::new("porter", "agnhost").args(["porter"]);
    for (i, (container_port, service_port, body)) in PORTS.iter().enumerate() {
        builder = builder.port(
            &format!("portname{}", i + 1),
            i32::from(*service_port),
            i32::from(*container_port),
            "TCP",
        );
        porter = porter
            .env(&format!("SERVE_PORT_{container_port}"), body)
            .port(i32::from(*container_port), "TCP");
    }
    f.create_service(&builder).await?;
    let pod = f
        .create_pod_ready(&f.pod("proxy-service-pod").label("app", svc).container(porter))
        .await?;
    let node = pod_node(&pod);
    // Like upstream, the requests are retried while the Service's endpoints propagate.
    let mut pace = tokio::time::interval(Duration::from_secs(1));
    let until = tokio::time::Instant::now() + PROPAGATION;
    let failed = loop {
        pace.tick().await;
        let failed = proxied_failures(f, svc).await;
        if failed.is_empty() || tokio::time::Instant::now() >= until {
            break failed;
        }
    };
    crate::ensure!(
        failed.is_empty(),
        "{} of {} proxied requests to pod proxy-service-pod on node {node} failed: {}",
        failed.len(),
        PORTS.len() * 2,
        failed.join("; ")
    );
    Ok(())
}
