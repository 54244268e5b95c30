//! The upstream `[sig-network] DNS` conformance cases (test/e2e/network/dns.go), run from pods
//! of the target OS.
//!
//! Upstream probes with `dig` loops in a Linux pod and reads result files back; here a lookup
//! pod of the target OS runs `nslookup` (Windows has no `dig`), through the lookups of
//! [`super::dns`]. Upstream's SRV queries have no `nslookup` counterpart both OSes share, so
//! these cases check the A and CNAME answers upstream checks alongside them.

use k8s_openapi::api::core::v1::{PodDNSConfig, PodDNSConfigOption, Service};
use kube::api::{Patch, PatchParams};

use super::dns::{self, Dns, expect_resolves, kubernetes_ip, lookup_pod, read_dns_config};
use crate::catalog::{Case, Kind};
use crate::framework::services::{self, ServiceBuilder, service_fqdn};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, pod_ip, pod_node};
use crate::os::Os;

/// Upstream dns.go "should provide DNS for the cluster".
pub const FOR_CLUSTER: &str = "[sig-network] DNS should provide DNS for the cluster [Conformance]";
/// Upstream dns.go "should provide DNS for services".
pub const FOR_SERVICES: &str = "[sig-network] DNS should provide DNS for services [Conformance]";
/// Upstream dns.go "should provide DNS for ExternalName services".
pub const FOR_EXTERNAL_NAME: &str = "[sig-network] DNS should provide DNS for ExternalName services [Conformance]";
/// Upstream dns.go "should provide DNS for pods for Hostname".
pub const FOR_POD_HOSTNAME: &str = "[sig-network] DNS should provide DNS for pods for Hostname [Conformance]";
/// Upstream dns.go "should provide DNS for pods for Subdomain".
pub const FOR_POD_SUBDOMAIN: &str = "[sig-network] DNS should provide DNS for pods for Subdomain [Conformance]";
/// Upstream dns.go "should provide /etc/hosts entries for the cluster".
pub const ETC_HOSTS: &str = "[sig-network] DNS should provide /etc/hosts entries for the cluster [Conformance]";
/// Upstream dns.go "should support configurable pod DNS nameservers".
pub const CONFIGURABLE_NAMESERVERS: &str =
    "[sig-network] DNS should support configurable pod DNS nameservers [Conformance]";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(FOR_SERVICES, Kind::Adapted, for_services),
        crate::case!(FOR_CLUSTER, Kind::Adapted, for_cluster),
        crate::case!(FOR_EXTERNAL_NAME, Kind::Adapted, for_external_name),
        crate::case!(FOR_POD_HOSTNAME, Kind::Adapted, dns::hostname_subdomain),
        crate::case!(FOR_POD_SUBDOMAIN, Kind::Adapted, for_pod_subdomain),
        crate::case!(ETC_HOSTS, Kind::Adapted, etc_hosts),
        crate::case!(CONFIGURABLE_NAMESERVERS, Kind::Adapted, configurable_nameservers),
    ]
}

/// The lookup pod every case of this module asks from.
const QUERIER: &str = "dns-querier";

/// Creates the ClusterFirst lookup pod [`QUERIER`]; returns "pod dns-querier on node N" for
/// failure messages.
async fn querier(f: &Framework, os: Os) -> Result<String, CaseError> {
    let node = lookup_pod(f, QUERIER, os, &Dns::policy("ClusterFirst")).await?;
    Ok(format!("pod {QUERIER} on node {node}"))
}

/// Checks from [`QUERIER`] that `name` resolves to `want`; `what` names the record.
async fn expect_from_querier(f: &Framework, os: Os, who: &str, name: &str, want: &str, what: &str) -> CaseResult {
    expect_resolves(
        f,
        QUERIER,
        os,
        name,
        want,
        format!("{who}: expected {name} ({what}) to resolve to {want}"),
    )
    .await
}

/// Upstream dns.go "should provide DNS for the cluster": the API server's Service resolves by
/// its FQDN (and by the partial names `kubernetes.default[.svc]` where the OS's resolver
/// expands dotted names; Windows treats them as fully qualified), and the querier's own pod A
/// record `<a-b-c-d>.<ns>.pod.cluster.local` resolves to its IP.
async fn for_cluster(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let who = querier(f, os).await?;
    let api_ip = kubernetes_ip(f).await?;
    let mut names = vec![service_fqdn("kubernetes", "default")];
    if os.expands_dotted_names() {
        names.extend(["kubernetes.default".to_string(), "kubernetes.default.svc".to_string()]);
    }
    for name in &names {
        expect_from_querier(f, os, &who, name, &api_ip, "the API server's Service").await?;
    }
    let ip = pod_ip(&f.api::<k8s_openapi::api::core::v1::Pod>().get(QUERIER).await?)?;
    let pod_record = format!("{}.{}.pod.{}", ip.replace('.', "-"), f.ns(), services::CLUSTER_DOMAIN);
    expect_from_querier(f, os, &who, &pod_record, &ip, "its own pod A record").await
}

/// Upstream dns.go "should provide DNS for services": a headless Service resolves to the IP of
/// the pod it selects and a ClusterIP Service to its cluster IP, by FQDN and by short name.
async fn for_services(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    f.create_service(
        &ServiceBuilder::headless("dns-test-service")
            .selector("dns-test", "true")
            .netexec_ports(),
    )
    .await?;
    let regular = f
        .create_service(
            &ServiceBuilder::cluster_ip("test-service-2")
                .selector("dns-test", "true")
                .netexec_ports(),
        )
        .await?;
    let cluster_ip = services::cluster_ip(&regular)?;
    let backend = PodBuilder::new("dns-backend", os)
        .label("dns-test", "true")
        .container(ContainerBuilder::new("c", "agnhost").args(["netexec"]));
    let backend = f.create_pod_ready(&backend).await?;
    let backend_ip = pod_ip(&backend)?;
    f.wait_ready_endpoints("dns-test-service", 1).await?;
    let who = querier(f, os).await?;
    let headless = format!(
        "headless service dns-test-service, pod dns-backend on node {}",
        pod_node(&backend)
    );
    for name in ["dns-test-service".to_string(), service_fqdn("dns-test-service", f.ns())] {
        expect_from_querier(f, os, &who, &name, &backend_ip, &headless).await?;
    }
    for name in ["test-service-2".to_string(), service_fqdn("test-service-2", f.ns())] {
        expect_from_querier(f, os, &who, &name, &cluster_ip, "service test-service-2's cluster IP").await?;
    }
    Ok(())
}

/// Upstream dns.go "should provide DNS for ExternalName services": an ExternalName Service is a
/// CNAME for its target, follows a change of `externalName`, and once changed to ClusterIP
/// resolves to its own cluster IP. The targets are names the cluster DNS answers (upstream's
/// `foo.example.com` would need the outside world's DNS).
async fn for_external_name(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let first = service_fqdn("kubernetes", "default");
    let first_ip = kubernetes_ip(f).await?;
    let second_svc = f
        .create_service(&ServiceBuilder::cluster_ip("dns-target").netexec_ports())
        .await?;
    let second = service_fqdn("dns-target", f.ns());
    let second_ip = services::cluster_ip(&second_svc)?;
    let name = "dns-test-service-3";
    f.create_service(&ServiceBuilder::external_name(name, &first)).await?;
    let fqdn = service_fqdn(name, f.ns());
    let who = querier(f, os).await?;
    expect_from_querier(f, os, &who, &fqdn, &first_ip, &format!("a CNAME for {first}")).await?;

    f.step(format!("changing externalName of {name} to {second}"));
    let patch = serde_json::json!({"spec": {"externalName": second}});
    f.api::<Service>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    expect_from_querier(
        f,
        os,
        &who,
        &fqdn,
        &second_ip,
        &format!("a CNAME for {second} after the change"),
    )
    .await?;

    f.step(format!("changing {name} to type ClusterIP"));
    let patch = serde_json::json!({"spec": {"type": "ClusterIP", "externalName": null,
        "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}]}});
    let svc = f
        .api::<Service>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let own_ip = services::cluster_ip(&svc)?;
    expect_from_querier(
        f,
        os,
        &who,
        &fqdn,
        &own_ip,
        "its own cluster IP after the change to ClusterIP",
    )
    .await
}

/// Upstream dns.go "should provide DNS for pods for Subdomain": a pod with `hostname` and
/// `subdomain` behind a headless Service of that name gets both the Service's record and its
/// own `<hostname>.<subdomain>` record, each resolving to the pod's IP.
async fn for_pod_subdomain(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let subdomain = "dns-test-service-3";
    f.create_service(
        &ServiceBuilder::headless(subdomain)
            .selector("dns-test", "subdomain")
            .port("http", 80, 80, "TCP"),
    )
    .await?;
    let named = PodBuilder::new("dns-named", os)
        .label("dns-test", "subdomain")
        .hostname("dns-querier-2", subdomain)
        .container(ContainerBuilder::new("c", "agnhost").args(["pause"]));
    let pod = f.create_pod_ready(&named).await?;
    let ip = pod_ip(&pod)?;
    f.wait_ready_endpoints(subdomain, 1).await?;
    let who = querier(f, os).await?;
    let what = format!("pod dns-named on node {}", pod_node(&pod));
    let service = service_fqdn(subdomain, f.ns());
    expect_from_querier(f, os, &who, &service, &ip, &format!("the subdomain's record, {what}")).await?;
    let host = format!("dns-querier-2.{service}");
    expect_from_querier(f, os, &who, &host, &ip, &format!("the hostname's record, {what}")).await
}

/// Upstream dns.go "should provide /etc/hosts entries for the cluster": the kubelet writes the
/// pod's own IP with its hostname (and FQDN when it has a subdomain) into `/etc/hosts`.
/// Windows nodes do not manage the hosts file, which the case gives as its skip reason.
async fn etc_hosts(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.skip_unless(
        os.manages_etc_hosts(),
        format!("the kubelet does not manage /etc/hosts on {} nodes", os.title()),
    )?;
    f.require_nodes(os, 1).await?;
    let b = PodBuilder::new("dns-etc-hosts", os)
        .hostname("dns-querier-1", "dns-test-service")
        .container(ContainerBuilder::new("hosts", "agnhost").args(["etc-hosts"]));
    let pod = f.run_pod_to_completion(&b).await?;
    let ip = pod_ip(&pod)?;
    let hosts = f.logs("dns-etc-hosts", Some("hosts")).await?;
    let fqdn = format!("dns-querier-1.{}", service_fqdn("dns-test-service", f.ns()));
    let entry = hosts.lines().find(|l| l.split_whitespace().next() == Some(ip.as_str()));
    let names: Vec<&str> = entry
        .map(|l| l.split_whitespace().skip(1).collect())
        .unwrap_or_default();
    crate::ensure!(
        names.contains(&"dns-querier-1") && names.contains(&fqdn.as_str()),
        "pod dns-etc-hosts on node {}: expected an /etc/hosts entry {ip} with dns-querier-1 and {fqdn}, got {entry:?} in:\n{hosts}",
        pod_node(&pod)
    );
    crate::ensure!(
        hosts.lines().any(|l| l.split_whitespace().next() == Some("127.0.0.1")
            && l.split_whitespace().any(|n| n == "localhost")),
        "pod dns-etc-hosts on node {}: expected a localhost entry in /etc/hosts:\n{hosts}",
        pod_node(&pod)
    );
    Ok(())
}

/// Upstream dns.go "should support configurable pod DNS nameservers": dnsPolicy None with
/// nameserver 1.1.1.1, search `resolv.conf.local` and `ndots: 2`; the pod's DNS servers are
/// exactly 1.1.1.1 (never dialled: the simulator models it) and its search list holds the
/// configured suffix.
async fn configurable_nameservers(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let dns = Dns {
        policy: "None",
        config: Some(PodDNSConfig {
            nameservers: Some(vec!["1.1.1.1".into()]),
            searches: Some(vec!["resolv.conf.local".into()]),
            options: Some(vec![PodDNSConfigOption {
                name: Some("ndots".into()),
                value: Some("2".into()),
            }]),
        }),
        host_network: false,
    };
    let (servers, suffixes) = read_dns_config(f, "e2e-configmap-dns-server", os, &dns).await?;
    crate::ensure!(
        servers == ["1.1.1.1"],
        "pod e2e-configmap-dns-server: expected exactly the configured DNS server [1.1.1.1], got {servers:?}"
    );
    crate::ensure!(
        suffixes.iter().any(|s| s == "resolv.conf.local"),
        "pod e2e-configmap-dns-server: expected search suffix resolv.conf.local from dnsConfig, got {suffixes:?}"
    );
    Ok(())
}
