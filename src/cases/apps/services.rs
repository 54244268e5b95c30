//! Adapted Service cases (`[sig-network] Services`, `LoadBalancers`): endpoints following pods
//! and their readiness, NodePort, type changes to and from ExternalName, and LoadBalancer where a
//! load-balancer controller exists.
//!
//! Backends and clients are netexec pods of the target OS; reachability is checked from inside
//! the cluster with netexec's `/dial`, like upstream's `execHostnameTest`.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, Patch, PatchParams};

use super::ReadyFile;
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::netexec::{HTTP_PORT, MAX_DIAL_TRIES, netexec_pod};
use crate::framework::services::{SERVICE_HTTP_PORT, SERVICE_NAME_LABEL, ServiceBuilder, cluster_ip, node_port};
use crate::framework::workloads::{CONSISTENTLY, empty_dir_volume};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, Protocol, pod_ip};
use crate::{ensure, fail};

pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(BASIC_ENDPOINT, Kind::Adapted, basic_endpoint),
        case!(MULTIPORT_ENDPOINTS, Kind::Adapted, multiport_endpoints),
        case!(NODEPORT, Kind::Adapted, nodeport),
        case!(EXTERNALNAME_TO_CLUSTERIP, Kind::Adapted, externalname_to_clusterip),
        case!(CLUSTERIP_TO_EXTERNALNAME, Kind::Adapted, clusterip_to_externalname),
        case!(UNREADY_ENDPOINTS, Kind::Adapted, unready_endpoints),
        // Upstream: SkipUnlessProviderIs("gce", "gke", "aws") — a cloud load balancer.
        case!(LOADBALANCER, Kind::Adapted, loadbalancer).only_on_providers(&["gce", "gke", "aws"]),
    ]
}

/// One endpoint as the EndpointSlices list it: pod name, port name, port, ready.
type EndpointRow = (String, String, i32, bool);

/// Every endpoint row of Service `svc`'s EndpointSlices.
fn endpoint_rows(slices: &[EndpointSlice]) -> BTreeSet<EndpointRow> {
    let mut rows = BTreeSet::new();
    for slice in slices {
        for port in slice.ports.iter().flatten() {
            for e in &slice.endpoints {
                let pod = e
                    .target_ref
                    .as_ref()
                    .and_then(|r| r.name.clone())
                    .unwrap_or_else(|| "?".into());
                let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false);
                rows.insert((
                    pod,
                    port.name.clone().unwrap_or_default(),
                    port.port.unwrap_or(0),
                    ready,
                ));
            }
        }
    }
    rows
}

/// Waits until the ready endpoints of `svc` are exactly `expected` (pod, port name, port).
async fn wait_endpoints(f: &Framework, svc: &str, expected: &[(&str, &str, i32)]) -> CaseResult {
    let want: BTreeSet<(String, String, i32)> = expected
        .iter()
        .map(|(p, n, port)| (p.to_string(), n.to_string(), *port))
        .collect();
    let ready = |slices: &[EndpointSlice]| -> BTreeSet<(String, String, i32)> {
        endpoint_rows(slices)
            .into_iter()
            .filter(|r| r.3)
            .map(|(p, n, port, _)| (p, n, port))
            .collect()
    };
    f.wait_list(
        &f.api::<EndpointSlice>(),
        &format!("{SERVICE_NAME_LABEL}={svc}"),
        |s: &[EndpointSlice]| ready(s) == want,
        &format!("service {svc} to have ready endpoints {want:?}"),
    )
    .await
    .map(|_| ())
}

/// A pause pod labelled `name=<app>` declaring `ports` as (name, containerPort).
fn port_pod(f: &Framework, name: &str, app: &str, ports: &[(&str, i32)]) -> crate::framework::PodBuilder {
    let ports: Vec<(String, i32)> = ports.iter().map(|(n, p)| (n.to_string(), *p)).collect();
    f.pod(name)
        .label("name", app)
        .container(
            ContainerBuilder::new("pause", "agnhost")
                .args(["pause"])
                .with(move |c: &mut Container| {
                    c.ports = Some(
                        ports
                            .iter()
                            .map(|(n, p)| k8s_openapi::api::core::v1::ContainerPort {
                                name: Some(n.clone()),
                                container_port: *p,
                                protocol: Some("TCP".into()),
                                ..Default::default()
                            })
                            .collect(),
                    );
                }),
        )
}

async fn delete_pod(f: &Framework, name: &str) -> CaseResult {
    f.step(format!("deleting pod {name}"));
    f.api::<Pod>()
        .delete(name, &DeleteParams::default().grace_period(0))
        .await?;
    Ok(())
}

/// Upstream network/service.go "should serve a basic endpoint from pods".
pub(crate) const BASIC_ENDPOINT: &str = "[sig-network] Services should serve a basic endpoint from pods [Conformance]";

/// Upstream service.go: the Service's endpoints follow its pods — none, pod1, pod1+pod2, pod2,
/// none.
async fn basic_endpoint(f: &Framework) -> CaseResult {
    let svc = "endpoint-test2";
    f.create(
        &ServiceBuilder::cluster_ip(svc)
            .selector("name", svc)
            .port("http", 80, 80, "TCP")
            .build(f.ns(), &f.run().run_id),
    )
    .await?;
    wait_endpoints(f, svc, &[]).await?;
    f.create_pod_ready(&port_pod(f, "pod1", svc, &[("http", 80)])).await?;
    wait_endpoints(f, svc, &[("pod1", "http", 80)]).await?;
    f.create_pod_ready(&port_pod(f, "pod2", svc, &[("http", 80)])).await?;
    wait_endpoints(f, svc, &[("pod1", "http", 80), ("pod2", "http", 80)]).await?;
    delete_pod(f, "pod1").await?;
    wait_endpoints(f, svc, &[("pod2", "http", 80)]).await?;
    delete_pod(f, "pod2").await?;
    wait_endpoints(f, svc, &[]).await
}

/// Upstream network/service.go "should serve multiport endpoints from pods".
pub(crate) const MULTIPORT_ENDPOINTS: &str =
    "[sig-network] Services should serve multiport endpoints from pods [Conformance]";

/// Upstream service.go: two Service ports with named target ports `svc1` and `svc2`; pod1 names
/// port 100 `svc1`, pod2 names port 101 `svc2`; each pod is an endpoint of its own port only.
async fn multiport_endpoints(f: &Framework) -> CaseResult {
    let svc = "multi-endpoint-test";
    let mut service = ServiceBuilder::cluster_ip(svc)
        .selector("name", svc)
        .port("portname1", 80, 100, "TCP")
        .port("portname2", 81, 101, "TCP")
        .build(f.ns(), &f.run().run_id);
    for (port, target) in service
        .spec
        .iter_mut()
        .flat_map(|s| s.ports.iter_mut().flatten())
        .zip(["svc1", "svc2"])
    {
        port.target_port = Some(IntOrString::String(target.into()));
    }
    f.create(&service).await?;
    wait_endpoints(f, svc, &[]).await?;
    f.create_pod_ready(&port_pod(f, "pod1", svc, &[("svc1", 100)])).await?;
    wait_endpoints(f, svc, &[("pod1", "portname1", 100)]).await?;
    f.create_pod_ready(&port_pod(f, "pod2", svc, &[("svc2", 101)])).await?;
    wait_endpoints(f, svc, &[("pod1", "portname1", 100), ("pod2", "portname2", 101)]).await?;
    delete_pod(f, "pod1").await?;
    wait_endpoints(f, svc, &[("pod2", "portname2", 101)]).await?;
    delete_pod(f, "pod2").await?;
    wait_endpoints(f, svc, &[]).await
}

/// Creates `n` netexec backends labelled `app=<app>` and a netexec client; returns the backend
/// names and the client's name.
pub(super) async fn backends_and_client(
    f: &Framework,
    app: &str,
    n: usize,
) -> Result<(BTreeSet<String>, String), CaseError> {
    let mut names = BTreeSet::new();
    for i in 0..n {
        let name = format!("{app}-{i}");
        f.create_pod(&netexec_pod(&name, f.target_os()).label("app", app))
            .await?;
        names.insert(name);
    }
    for name in &names {
        f.wait_pod_ready(name).await?;
    }
    let client = format!("{app}-client");
    f.create_pod_ready(&netexec_pod(&client, f.target_os()).label("role", "client"))
        .await?;
    Ok((names, client))
}

/// Upstream network/service.go "should be able to create a functioning NodePort service".
pub(crate) const NODEPORT: &str =
    "[sig-network] Services should be able to create a functioning NodePort service [Conformance]";

/// Upstream service.go: a client pod reaches a NodePort Service by name and cluster IP on the
/// service port, and on every target-OS node's internal IP on the node port; every backend
/// answers.
async fn nodeport(f: &Framework) -> CaseResult {
    let app = "nodeport-test";
    let (backends, client) = backends_and_client(f, app, 2).await?;
    let svc = f
        .create(
            &ServiceBuilder::node_port(app)
                .selector("app", app)
                .netexec_ports()
                .build(f.ns(), &f.run().run_id),
        )
        .await?;
    expect_node_port_service(f, &client, app, &svc, &backends).await
}

/// Checks from netexec pod `client` that NodePort Service `svc` (named `app`) serves
/// `backends` by name and cluster IP on the service port, and on every target-OS node's
/// internal IP on its node port (upstream `CheckServiceReachability` for a NodePort).
pub(super) async fn expect_node_port_service(
    f: &Framework,
    client: &str,
    app: &str,
    svc: &Service,
    backends: &BTreeSet<String>,
) -> CaseResult {
    let (ip, np) = (cluster_ip(svc)?, node_port(svc, "http")?);
    let port = u16::try_from(SERVICE_HTTP_PORT).unwrap_or(80);
    f.dial_expect(client, Protocol::Http, app, port, backends, MAX_DIAL_TRIES)
        .await?;
    f.dial_expect(client, Protocol::Http, &ip, port, backends, MAX_DIAL_TRIES)
        .await?;
    let nodes = f.require_nodes(f.target_os(), 1).await?;
    for node in &nodes {
        let Some(node_ip) = &node.internal_ip else {
            crate::fail!("node {} reports no internal IP to reach node port {np} on", node.name);
        };
        f.dial_expect(client, Protocol::Http, node_ip, np, backends, MAX_DIAL_TRIES)
            .await
            .map_err(|e| e.context(format!("node port {np} on node {}", node.name)))?;
    }
    Ok(())
}

/// Upstream network/service.go "should be able to change the type from ExternalName to ClusterIP".
pub(crate) const EXTERNALNAME_TO_CLUSTERIP: &str =
    "[sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance]";

/// A name every cluster resolves: the target of the ExternalName Services below (upstream uses
/// `foo.example.com`; an in-cluster name keeps the case off the outside network).
pub(super) const EXTERNAL_TARGET: &str = "kubernetes.default.svc.cluster.local";

/// Upstream service.go: an ExternalName Service has no cluster IP; changed to ClusterIP with
/// port 80 → 8080 it gets one and serves its backends by name and by that IP.
async fn externalname_to_clusterip(f: &Framework) -> CaseResult {
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
    f.step("changing the service to type ClusterIP");
    let patch = serde_json::json!({"spec": {"type": "ClusterIP", "externalName": null, "selector": {"app": app},
        "ports": [{"name": "http", "port": 80, "targetPort": HTTP_PORT, "protocol": "TCP"}]}});
    let svc = f
        .api::<Service>()
        .patch(app, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let ip = cluster_ip(&svc)?;
    f.dial_expect(&client, Protocol::Http, app, 80, &backends, MAX_DIAL_TRIES)
        .await?;
    f.dial_expect(&client, Protocol::Http, &ip, 80, &backends, MAX_DIAL_TRIES)
        .await
        .map(|_| ())
}

/// Upstream network/service.go "should be able to change the type from ClusterIP to ExternalName".
pub(crate) const CLUSTERIP_TO_EXTERNALNAME: &str =
    "[sig-network] Services should be able to change the type from ClusterIP to ExternalName [Conformance]";

/// Upstream service.go: a ClusterIP Service changed to ExternalName loses its cluster IP, and a
/// pod resolving its name gets the external name back (CNAME).
async fn clusterip_to_externalname(f: &Framework) -> CaseResult {
    let app = "clusterip-service";
    let (_, client) = backends_and_client(f, app, 1).await?;
    let svc = f
        .create(
            &ServiceBuilder::cluster_ip(app)
                .selector("app", app)
                .netexec_ports()
                .build(f.ns(), &f.run().run_id),
        )
        .await?;
    cluster_ip(&svc)?;
    f.step("changing the service to type ExternalName");
    let patch = serde_json::json!({"spec": {"type": "ExternalName", "externalName": EXTERNAL_TARGET,
        "clusterIP": "", "clusterIPs": null, "selector": null}});
    let svc = f
        .api::<Service>()
        .patch(app, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let spec = svc.spec.clone().unwrap_or_default();
    ensure!(
        spec.type_.as_deref() == Some("ExternalName") && spec.cluster_ip.as_deref().unwrap_or("").is_empty(),
        "service {app} after the change: type {:?}, cluster IP {:?}; expected ExternalName without a cluster IP",
        spec.type_,
        spec.cluster_ip
    );
    expect_external_name(f, &client, app, EXTERNAL_TARGET).await
}

/// Checks from pod `client` that `nslookup` of Service `app`'s FQDN shows `target`, the
/// external name it is now a CNAME for.
pub(super) async fn expect_external_name(f: &Framework, client: &str, app: &str, target: &str) -> CaseResult {
    let fqdn = crate::framework::services::service_fqdn(app, f.ns());
    // Upstream polls the lookup (checkExternalServiceReachability): the cluster DNS serves the
    // change once its watch delivers it, and a lookup can meet a transient SERVFAIL.
    let mut pace = tokio::time::interval(Duration::from_secs(1));
    let mut last = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
        pace.tick().await;
        let out = f
            .exec_shell(client, None, f.target_os(), &format!("nslookup {fqdn}"))
            .await?;
        if out.stdout.contains(target) {
            return Ok(());
        }
        last = format!("{}{}", out.stdout, out.stderr);
    }
    fail!(
        "nslookup {fqdn} in pod {client} did not show the external name {target} in 30 tries a second apart; last output: {last:?}"
    )
}

/// Upstream network/service.go "should create endpoints for unready pods".
pub(crate) const UNREADY_ENDPOINTS: &str = "[sig-network] Services should create endpoints for unready pods";

/// Upstream service.go: a headless Service with `publishNotReadyAddresses` lists an unready pod,
/// while a normal Service selecting the same pod lists it as not ready until its readiness
/// probe passes; then both list it ready. Readiness follows a file the case writes.
async fn unready_endpoints(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let app = "unready-test";
    let gate = ReadyFile::new(os);
    let (probe, dir) = (gate.probe(), gate.dir.clone());
    let pod = netexec_pod(app, os)
        .label("app", app)
        .volume(empty_dir_volume("ready"))
        .edit_spec(move |spec| {
            for c in &mut spec.containers {
                c.readiness_probe = Some(probe.clone());
                c.volume_mounts
                    .get_or_insert_with(Vec::new)
                    .push(k8s_openapi::api::core::v1::VolumeMount {
                        name: "ready".into(),
                        mount_path: dir.clone(),
                        ..Default::default()
                    });
            }
        });
    let mut tolerant = ServiceBuilder::headless("tolerate-unready")
        .selector("app", app)
        .netexec_ports()
        .build(f.ns(), &f.run().run_id);
    if let Some(spec) = tolerant.spec.as_mut() {
        spec.publish_not_ready_addresses = Some(true);
    }
    f.create(&tolerant).await?;
    f.create(
        &ServiceBuilder::cluster_ip("normal")
            .selector("app", app)
            .netexec_ports()
            .build(f.ns(), &f.run().run_id),
    )
    .await?;
    f.create_pod(&pod).await?;
    f.wait_for(
        &f.api::<Pod>(),
        app,
        crate::framework::wait::conditions::is_pod_phase("Running"),
        "to run",
    )
    .await?;

    wait_endpoints(f, "tolerate-unready", &[(app, "http", 8080), (app, "udp", 8081)]).await?;
    let listed_unready = |s: &[EndpointSlice]| endpoint_rows(s).iter().any(|r| r.0 == app && !r.3);
    f.wait_list(
        &f.api::<EndpointSlice>(),
        &format!("{SERVICE_NAME_LABEL}=normal"),
        listed_unready,
        "service normal to list the pod as not ready",
    )
    .await?;
    let still = f.api::<Pod>().get(app).await?;
    ensure!(pod_ip(&still).is_ok(), "pod {app} has no IP although it runs");

    f.step("making the pod ready");
    gate.write(f, app).await?;
    f.wait_pod_ready(app).await?;
    wait_endpoints(f, "normal", &[(app, "http", 8080), (app, "udp", 8081)]).await
}

/// Upstream network/loadbalancer.go "should be able to change the type and ports of a TCP service".
pub(crate) const LOADBALANCER: &str =
    "[sig-network] LoadBalancers should be able to change the type and ports of a TCP service [Slow]";

/// How long a load-balancer controller gets to publish an ingress before the case concludes the
/// cluster has none (upstream waits up to `LoadBalancerCreateTimeoutDefault`, 15 minutes, on
/// clouds known to have one; a cluster without a controller never publishes).
const LB_WAIT: Duration = Duration::from_secs(120);

/// Upstream loadbalancer.go: a Service goes ClusterIP → NodePort → LoadBalancer, is reachable
/// on its ingress, then its port changes and it is reachable on the new port. Skips with a
/// reason when no load-balancer controller publishes an ingress.
async fn loadbalancer(f: &Framework) -> CaseResult {
    let app = "mutability-test";
    let (backends, client) = backends_and_client(f, app, 1).await?;
    let created = f
        .create(
            &ServiceBuilder::cluster_ip(app)
                .selector("app", app)
                .port("http", 80, i32::from(HTTP_PORT), "TCP")
                .build(f.ns(), &f.run().run_id),
        )
        .await?;
    cluster_ip(&created)?;
    let api = f.api::<Service>();
    let np = api
        .patch(
            app,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"spec": {"type": "NodePort"}})),
        )
        .await?;
    node_port(&np, "http")?;
    api.patch(
        app,
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"type": "LoadBalancer"}})),
    )
    .await?;
    let has_ingress = |s: Option<&Service>| {
        s.and_then(|s| s.status.as_ref())
            .and_then(|st| st.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .is_some_and(|i| i.iter().any(|x| x.ip.is_some() || x.hostname.is_some()))
    };
    let lb = match f
        .wait_for_within(&api, app, has_ingress, "to get a load-balancer ingress", LB_WAIT)
        .await
    {
        Ok(lb) => lb.unwrap_or_default(),
        Err(_) => {
            return Err(f.skip(format!(
                "no load-balancer controller: service {app} got no ingress within {LB_WAIT:?}"
            )));
        }
    };
    let ingress = lb
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|l| l.ingress)
        .and_then(|i| i.into_iter().next())
        .and_then(|i| i.ip.or(i.hostname))
        .unwrap_or_default();
    f.dial_expect(&client, Protocol::Http, &ingress, 80, &backends, MAX_DIAL_TRIES)
        .await?;
    f.step("changing the service port to 81");
    let patch = serde_json::json!({"spec": {"ports": [{"name": "http", "port": 81, "targetPort": HTTP_PORT, "protocol": "TCP"}]}});
    let moved = api.patch(app, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let ports: Vec<i32> = moved
        .spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .map(|p| p.port)
        .collect();
    ensure!(
        ports == [81],
        "service {app} ports after the change: {ports:?}, expected [81]"
    );
    f.consistently(
        &api,
        app,
        |s: &Service| has_ingress(Some(s)),
        "with an ingress",
        CONSISTENTLY,
    )
    .await?;
    f.dial_expect(&client, Protocol::Http, &ingress, 81, &backends, MAX_DIAL_TRIES)
        .await?;
    Ok(())
}
