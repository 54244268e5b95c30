//! Adapted `[sig-network] Services` cases that change a Service's type between NodePort and
//! ExternalName (upstream test/e2e/network/service.go), with netexec backends and clients of
//! the target OS.

use k8s_openapi::api::core::v1::Service;
use kube::api::{Patch, PatchParams};

use super::services::{EXTERNAL_TARGET, backends_and_client, expect_external_name, expect_node_port_service};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::netexec::HTTP_PORT;
use crate::framework::services::{SERVICE_HTTP_PORT, ServiceBuilder, cluster_ip, service_fqdn};
use crate::framework::{CaseResult, Framework};

pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(EXTERNALNAME_TO_NODEPORT, Kind::Adapted, externalname_to_nodeport),
        case!(NODEPORT_TO_EXTERNALNAME, Kind::Adapted, nodeport_to_externalname),
    ]
}

/// Upstream network/service.go "should be able to change the type from ExternalName to NodePort".
pub(crate) const EXTERNALNAME_TO_NODEPORT: &str =
    "[sig-network] Services should be able to change the type from ExternalName to NodePort [Conformance]";

/// Upstream network/service.go "should be able to change the type from NodePort to ExternalName".
pub(crate) const NODEPORT_TO_EXTERNALNAME: &str =
    "[sig-network] Services should be able to change the type from NodePort to ExternalName [Conformance]";

/// Upstream service.go: an ExternalName Service has no cluster IP; changed to NodePort with a
/// selector it gets a cluster IP and a node port, and serves its backends by name, cluster IP
/// and every node's IP.
async fn externalname_to_nodeport(f: &Framework) -> CaseResult {
    let app = "externalname-service";
    let (backends, client) = backends_and_client(f, app, 2).await?;
    let svc = f
        .create(&ServiceBuilder::external_name(app, EXTERNAL_TARGET).build(f.ns(), &f.run().run_id))
        .await?;
    ensure!(
        cluster_ip(&svc).is_err(),
        "ExternalName service {app} was given cluster IP {:?}",
        svc.spec.as_ref().and_then(|s| s.cluster_ip.clone())
    );
    f.step("changing the service to type NodePort");
    let patch = serde_json::json!({"spec": {"type": "NodePort", "externalName": null, "selector": {"app": app},
        "ports": [{"name": "http", "port": SERVICE_HTTP_PORT, "targetPort": HTTP_PORT, "protocol": "TCP"}]}});
    let svc = f
        .api::<Service>()
        .patch(app, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    expect_node_port_service(f, &client, app, &svc, &backends).await
}

/// Upstream service.go: a NodePort Service changed to ExternalName for another Service's FQDN
/// loses its cluster IP and node ports, and a pod resolving its name gets that FQDN (CNAME).
async fn nodeport_to_externalname(f: &Framework) -> CaseResult {
    let app = "nodeport-service";
    let (_, client) = backends_and_client(f, app, 1).await?;
    f.create(
        &ServiceBuilder::cluster_ip("externalsvc")
            .selector("app", app)
            .netexec_ports()
            .build(f.ns(), &f.run().run_id),
    )
    .await?;
    let target = service_fqdn("externalsvc", f.ns());
    let svc = f
        .create(
            &ServiceBuilder::node_port(app)
                .selector("app", app)
                .netexec_ports()
                .build(f.ns(), &f.run().run_id),
        )
        .await?;
    cluster_ip(&svc)?;
    f.step(format!("changing the service to type ExternalName {target}"));
    let patch = serde_json::json!({"spec": {"type": "ExternalName", "externalName": target,
        "clusterIP": "", "clusterIPs": null, "selector": null}});
    let svc = f
        .api::<Service>()
        .patch(app, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let spec = svc.spec.clone().unwrap_or_default();
    let node_ports: Vec<i32> = spec.ports.iter().flatten().filter_map(|p| p.node_port).collect();
    ensure!(
        spec.type_.as_deref() == Some("ExternalName")
            && spec.cluster_ip.as_deref().unwrap_or("").is_empty()
            && node_ports.is_empty(),
        "service {app} after the change: type {:?}, cluster IP {:?}, node ports {node_ports:?}; expected ExternalName without a cluster IP or node ports",
        spec.type_,
        spec.cluster_ip
    );
    expect_external_name(f, &client, app, &target).await
}
