//! Hybrid Linux↔Windows connectivity (upstream `test/e2e/windows/hybrid_network.go`), plus
//! each direction through a Service.

use std::collections::BTreeSet;

use super::network::{Endpoint, netexec_ready};
use crate::catalog::{Case, Kind};
use crate::framework::netexec::{HTTP_PORT, netexec_pod};
use crate::framework::services::{self, SERVICE_HTTP_PORT, ServiceBuilder, UPSTREAM_STABILITY};
use crate::framework::{CaseResult, Framework, Protocol};
use crate::os::Os;

/// Upstream hybrid_network.go: Linux and Windows pods reach each other, stably.
pub const STABLE: &str = "[sig-windows] Hybrid cluster network for all supported CNIs should have stable networking for Linux and Windows pods";
/// A Linux pod reaches Windows pods through a Service.
pub const LINUX_TO_WINDOWS_SVC: &str = "[sig-windows] Hybrid cluster network for all supported CNIs should reach Windows pods from Linux pods through a service";
/// A Windows pod reaches Linux pods through a Service.
pub const WINDOWS_TO_LINUX_SVC: &str = "[sig-windows] Hybrid cluster network for all supported CNIs should reach Linux pods from Windows pods through a service";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(STABLE, Kind::WindowsSpecific, stable).hybrid(),
        crate::case!(LINUX_TO_WINDOWS_SVC, Kind::WindowsSpecific, linux_to_windows_svc).hybrid(),
        crate::case!(WINDOWS_TO_LINUX_SVC, Kind::WindowsSpecific, windows_to_linux_svc).hybrid(),
    ]
}

/// Upstream hybrid_network.go "should have stable networking for Linux and Windows pods": a
/// Linux and a Windows web pod; each reaches the other over TCP within 30 s, then on every
/// request for 10 s.
async fn stable(f: &Framework) -> CaseResult {
    f.require_nodes(Os::Linux, 1).await?;
    f.require_nodes(Os::Windows, 1).await?;
    let linux = netexec_ready(f, "linux-pod", Os::Linux, None).await?;
    let windows = netexec_ready(f, "windows-pod", Os::Windows, None).await?;
    for (from, to) in [(&linux, &windows), (&windows, &linux)] {
        f.dial_stable(
            &from.name,
            Protocol::Http,
            &to.ip,
            HTTP_PORT,
            &BTreeSet::from([to.name.clone()]),
            UPSTREAM_STABILITY,
        )
        .await
        .map_err(|e| {
            e.context(format!(
                "pod {} on node {} -> pod {} on node {}",
                from.name, from.node, to.name, to.node
            ))
        })?;
    }
    Ok(())
}

/// Backends of `backend_os` behind a ClusterIP Service, reached from a `client_os` pod within
/// 30 s, then on every request for 10 s.
async fn through_service(f: &Framework, client_os: Os, backend_os: Os) -> CaseResult {
    f.require_nodes(Os::Linux, 1).await?;
    f.require_nodes(Os::Windows, 1).await?;
    let svc = f
        .create_service(
            &ServiceBuilder::cluster_ip("hybrid")
                .selector("app", "hybrid")
                .netexec_ports(),
        )
        .await?;
    let ip = services::cluster_ip(&svc)?;
    let name = format!("backend-{}", backend_os.as_str());
    let pod = f
        .create_pod_ready(&netexec_pod(&name, backend_os).label("app", "hybrid"))
        .await?;
    let backend = Endpoint::of(&name, &pod)?;
    f.wait_ready_endpoints("hybrid", 1).await?;
    let client = netexec_ready(f, &format!("client-{}", client_os.as_str()), client_os, None).await?;
    let port = u16::try_from(SERVICE_HTTP_PORT).unwrap_or_default();
    f.dial_stable(
        &client.name,
        Protocol::Http,
        &ip,
        port,
        &BTreeSet::from([name]),
        UPSTREAM_STABILITY,
    )
    .await
    .map_err(|e| {
        e.context(format!(
            "{} pod {} on node {} -> service hybrid ({ip}) -> {} pod {} on node {}",
            client_os.title(),
            client.name,
            client.node,
            backend_os.title(),
            backend.name,
            backend.node
        ))
    })?;
    Ok(())
}

/// A Linux client reaches a Windows backend through a ClusterIP Service.
async fn linux_to_windows_svc(f: &Framework) -> CaseResult {
    through_service(f, Os::Linux, Os::Windows).await
}

/// A Windows client reaches a Linux backend through a ClusterIP Service.
async fn windows_to_linux_svc(f: &Framework) -> CaseResult {
    through_service(f, Os::Windows, Os::Linux).await
}
