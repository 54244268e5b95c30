//! DNS from pods of the target OS: dnsPolicy ClusterFirst, Default, None with dnsConfig,
//! hostname and subdomain records, and ClusterFirstWithHostNet.
//!
//! Windows has no `/etc/resolv.conf`: the pod's DNS servers and search suffixes are read with
//! agnhost `dns-server-list` and `dns-suffix` (as upstream `test/e2e/windows/dns.go` does), and
//! names are resolved with `nslookup` inside the pod.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PodDNSConfig, PodDNSConfigOption, Service};

use crate::catalog::{Case, Kind};
use crate::framework::services::{self, Lookup, ServiceBuilder, service_fqdn};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, pod_ip, pod_node};
use crate::os::Os;

/// Upstream windows/dns.go: dnsPolicy None with a custom server list and search path.
pub const CONFIGURABLE_DNS: &str = "[sig-windows] [Feature:Windows] DNS should support configurable pod DNS servers";
/// ClusterFirst: service names resolve through the cluster DNS.
pub const CLUSTER_FIRST: &str =
    "[sig-windows] [sig-network] DNS with dnsPolicy ClusterFirst should resolve service names through the cluster DNS";
/// Default: the pod inherits its node's resolver.
pub const DEFAULT_POLICY: &str = "[sig-windows] [sig-network] DNS with dnsPolicy Default should resolve through the node's resolver, not the cluster DNS";
/// None + dnsConfig: exactly the configured servers and searches reach the pod.
pub const NONE_POLICY: &str = "[sig-windows] [sig-network] DNS with dnsPolicy None should give the pod exactly the nameservers and searches of its dnsConfig";
/// hostname + subdomain: the pod's FQDN resolves through a headless Service.
pub const HOSTNAME_SUBDOMAIN: &str =
    "[sig-windows] [sig-network] DNS should resolve a pod's hostname and subdomain through a headless service";
/// ClusterFirstWithHostNet: cluster names resolve from a hostNetwork pod (unsupported on Windows).
pub const CLUSTER_FIRST_HOST_NET: &str = "[sig-windows] [sig-network] DNS with dnsPolicy ClusterFirstWithHostNet should resolve cluster names from a hostNetwork pod";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(CONFIGURABLE_DNS, Kind::WindowsSpecific, configurable_dns),
        crate::case!(CLUSTER_FIRST, Kind::Substitute, cluster_first),
        crate::case!(DEFAULT_POLICY, Kind::Substitute, default_policy),
        crate::case!(NONE_POLICY, Kind::Substitute, none_policy),
        crate::case!(HOSTNAME_SUBDOMAIN, Kind::Substitute, hostname_subdomain),
        crate::case!(CLUSTER_FIRST_HOST_NET, Kind::Substitute, cluster_first_host_net),
    ]
}

/// How long DNS records may take to follow a new Service or pod (upstream DNS cases poll for
/// up to 2 minutes; one minute is plenty for records of an existing Service).
pub(super) const DNS_PROPAGATION: Duration = Duration::from_secs(60);

/// A DNS setting for a pod: the policy and an optional dnsConfig.
#[derive(Clone, Debug)]
pub(super) struct Dns {
    pub(super) policy: &'static str,
    pub(super) config: Option<PodDNSConfig>,
    pub(super) host_network: bool,
}

impl Dns {
    pub(super) fn policy(policy: &'static str) -> Dns {
        Dns {
            policy,
            config: None,
            host_network: false,
        }
    }

    fn apply(&self, b: PodBuilder) -> PodBuilder {
        let policy = self.policy.to_string();
        let config = self.config.clone();
        let b = if self.host_network { b.host_network() } else { b };
        b.edit_spec(move |spec| {
            spec.dns_policy = Some(policy.clone());
            spec.dns_config = config.clone();
        })
    }
}

/// Splits agnhost `dns-server-list` / `dns-suffix` output (comma or whitespace separated).
pub(crate) fn split_list(output: &str) -> Vec<String> {
    output
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Runs a pod with `dns` whose two containers print its DNS servers and search suffixes;
/// returns (servers, suffixes).
pub(super) async fn read_dns_config(
    f: &Framework,
    name: &str,
    os: Os,
    dns: &Dns,
) -> Result<(Vec<String>, Vec<String>), CaseError> {
    let b = dns.apply(
        PodBuilder::new(name, os)
            .container(ContainerBuilder::new("servers", "agnhost").args(["dns-server-list"]))
            .container(ContainerBuilder::new("suffixes", "agnhost").args(["dns-suffix"])),
    );
    let pod = f.run_pod_to_completion(&b).await?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    crate::ensure!(
        phase == "Succeeded",
        "pod {name} printing its DNS configuration ended {phase} on node {}",
        pod_node(&pod)
    );
    let servers = split_list(&f.logs(name, Some("servers")).await?);
    let suffixes = split_list(&f.logs(name, Some("suffixes")).await?);
    f.step(format!(
        "pod {name}: DNS servers {servers:?}, search suffixes {suffixes:?}"
    ));
    Ok((servers, suffixes))
}

/// Creates a long-running agnhost pod with `dns` to run `nslookup` in; returns its node.
pub(super) async fn lookup_pod(f: &Framework, name: &str, os: Os, dns: &Dns) -> Result<String, CaseError> {
    let b = dns.apply(PodBuilder::new(name, os).container(ContainerBuilder::new("c", "agnhost").args(["pause"])));
    let pod = f.create_pod_ready(&b).await?;
    Ok(pod_node(&pod))
}

/// Looks `name` up from pod `pod` until it resolves (records may still be propagating, for up
/// to [`DNS_PROPAGATION`]) and checks that `want` is among the addresses; the failure reads
/// "`what`, got <addresses>: <nslookup output>".
///
/// Every lookup of this module that expects a given address is this wait and this check; only
/// the wording of what was expected differs.
pub(super) async fn expect_resolves(
    f: &Framework,
    pod: &str,
    os: Os,
    name: &str,
    want: &str,
    what: String,
) -> CaseResult {
    let has = |l: &Lookup| l.addresses.iter().any(|a| a == want);
    let lookup = f.nslookup_until(pod, os, name, DNS_PROPAGATION, has).await?;
    crate::ensure!(
        lookup.addresses.iter().any(|a| a == want),
        "{what}, got {:?}: {}",
        lookup.addresses,
        lookup.output
    );
    Ok(())
}

/// Checks from pod `dns-utils` (on `node`) that the short name `dns-target` resolves to
/// `svc_ip`, the Service's ClusterIP, through the pod's search path; `how` ends the expectation
/// in the failure message. The ClusterFirst and None cases both check this.
async fn expect_dns_target(f: &Framework, os: Os, node: &str, svc_ip: &str, how: &str) -> CaseResult {
    expect_resolves(
        f,
        "dns-utils",
        os,
        "dns-target",
        svc_ip,
        format!("pod dns-utils on node {node}: expected dns-target to resolve to {svc_ip}{how}"),
    )
    .await
}

/// Checks from pod `dns-utils` that `kubernetes.default.svc.cluster.local` resolves to the
/// ClusterIP of `default/kubernetes`; `who` (the pod and its node) starts the failure. The cases
/// whose policy reaches the cluster DNS all end with this lookup.
async fn expect_kubernetes_resolves(f: &Framework, os: Os, who: &str) -> CaseResult {
    let want = kubernetes_ip(f).await?;
    let fqdn = service_fqdn("kubernetes", "default");
    expect_resolves(
        f,
        "dns-utils",
        os,
        &fqdn,
        &want,
        format!("{who}: expected {fqdn} to resolve to {want}"),
    )
    .await
}

/// Creates Service `dns-target` (ClusterIP, no backends: only its record matters) for the
/// by-name lookups of the dnsPolicy cases; returns its ClusterIP.
async fn dns_target(f: &Framework) -> Result<String, CaseError> {
    let svc = f
        .create_service(&ServiceBuilder::cluster_ip("dns-target").netexec_ports())
        .await?;
    services::cluster_ip(&svc)
}

/// The ClusterIP of `default/kubernetes`.
pub(super) async fn kubernetes_ip(f: &Framework) -> Result<String, CaseError> {
    let api: kube::Api<Service> = kube::Api::namespaced(f.client(), "default");
    let svc = api.get("kubernetes").await?;
    services::cluster_ip(&svc)
}

/// Upstream windows/dns.go "should support configurable pod DNS servers": dnsPolicy None with
/// nameservers [cluster DNS, 1.1.1.1] and search `default.svc.cluster.local`; the pod lists
/// 1.1.1.1, a bogus name fails, and `kubernetes` resolves through the search path.
async fn configurable_dns(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let dns_ip = f.cluster_dns_ip().await?;
    let dns = Dns {
        policy: "None",
        config: Some(PodDNSConfig {
            nameservers: Some(vec![dns_ip.clone(), "1.1.1.1".into()]),
            searches: Some(vec!["default.svc.cluster.local".into()]),
            options: None,
        }),
        host_network: false,
    };
    let (servers, _) = read_dns_config(f, "e2e-dns-config", os, &dns).await?;
    crate::ensure!(
        servers.iter().any(|s| s == "1.1.1.1"),
        "pod e2e-dns-config: expected DNS servers to include 1.1.1.1 from dnsConfig, got {servers:?}"
    );
    let node = lookup_pod(f, "e2e-dns-utils", os, &dns).await?;
    let bogus = f.nslookup("e2e-dns-utils", os, "crossconf-bogus.invalid").await?;
    crate::ensure!(
        !bogus.resolved(),
        "pod e2e-dns-utils on node {node}: expected crossconf-bogus.invalid not to resolve, got {:?}",
        bogus.addresses
    );
    let want = kubernetes_ip(f).await?;
    expect_resolves(
        f,
        "e2e-dns-utils",
        os,
        "kubernetes",
        &want,
        format!(
            "pod e2e-dns-utils on node {node}: expected 'kubernetes' to resolve to {want} through search default.svc.cluster.local"
        ),
    )
    .await
}

/// dnsPolicy ClusterFirst (the default): the pod's DNS server is the cluster DNS, a Service of
/// the pod's namespace resolves by short name, and `kubernetes.default` by FQDN.
async fn cluster_first(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let dns_ip = f.cluster_dns_ip().await?;
    let svc_ip = dns_target(f).await?;
    let dns = Dns::policy("ClusterFirst");
    let (servers, suffixes) = read_dns_config(f, "dns-config", os, &dns).await?;
    crate::ensure!(
        servers.contains(&dns_ip),
        "pod dns-config: expected the cluster DNS {dns_ip} among its DNS servers, got {servers:?}"
    );
    let own = format!("{}.svc.{}", f.ns(), services::CLUSTER_DOMAIN);
    crate::ensure!(
        suffixes.contains(&own),
        "pod dns-config: expected search suffix {own}, got {suffixes:?}"
    );
    let node = lookup_pod(f, "dns-utils", os, &dns).await?;
    expect_dns_target(f, os, &node, &svc_ip, "").await?;
    expect_kubernetes_resolves(f, os, &format!("pod dns-utils on node {node}")).await
}

/// dnsPolicy Default: the pod uses its node's resolver, so the cluster DNS is not its server,
/// a cluster name does not resolve, and a name the node resolves (`--external-name`) does.
async fn default_policy(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let Some(external) = f.settings().external_name.clone() else {
        return Err(f.skip("needs a name the nodes' resolver knows: pass --external-name"));
    };
    f.require_nodes(os, 1).await?;
    let dns_ip = f.cluster_dns_ip().await?;
    let dns = Dns::policy("Default");
    let (servers, _) = read_dns_config(f, "dns-config", os, &dns).await?;
    crate::ensure!(
        !servers.is_empty(),
        "pod dns-config: expected the node's DNS servers, got none"
    );
    crate::ensure!(
        !servers.contains(&dns_ip),
        "pod dns-config: dnsPolicy Default should not use the cluster DNS {dns_ip}, got {servers:?}"
    );
    let node = lookup_pod(f, "dns-utils", os, &dns).await?;
    let outside = f
        .nslookup_eventually("dns-utils", os, &external, DNS_PROPAGATION)
        .await?;
    crate::ensure!(
        outside.resolved(),
        "pod dns-utils on node {node}: expected {external} to resolve through the node's resolver: {}",
        outside.output
    );
    let fqdn = service_fqdn("kubernetes", "default");
    let cluster = f.nslookup("dns-utils", os, &fqdn).await?;
    crate::ensure!(
        !cluster.resolved(),
        "pod dns-utils on node {node}: with dnsPolicy Default, {fqdn} should not resolve, got {:?}",
        cluster.addresses
    );
    Ok(())
}

/// dnsPolicy None with dnsConfig: exactly the configured nameserver, both searches in order,
/// and a Service resolving by short name through the configured search (options are set too;
/// Windows has no resolver options, so they are not read back).
async fn none_policy(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let dns_ip = f.cluster_dns_ip().await?;
    let svc_ip = dns_target(f).await?;
    let own = format!("{}.svc.{}", f.ns(), services::CLUSTER_DOMAIN);
    let searches = vec![own.clone(), "crossconf.test".to_string()];
    let dns = Dns {
        policy: "None",
        config: Some(PodDNSConfig {
            nameservers: Some(vec![dns_ip.clone()]),
            searches: Some(searches.clone()),
            options: Some(vec![PodDNSConfigOption {
                name: Some("ndots".into()),
                value: Some("2".into()),
            }]),
        }),
        host_network: false,
    };
    let (servers, suffixes) = read_dns_config(f, "dns-config", os, &dns).await?;
    crate::ensure!(
        servers == [dns_ip.clone()],
        "pod dns-config: expected exactly the configured nameserver [{dns_ip}], got {servers:?}"
    );
    let positions: Vec<Option<usize>> = searches.iter().map(|s| suffixes.iter().position(|x| x == s)).collect();
    crate::ensure!(
        positions.iter().all(Option::is_some) && positions.windows(2).all(|w| w[0] < w[1]),
        "pod dns-config: expected search suffixes {searches:?} in order, got {suffixes:?}"
    );
    let node = lookup_pod(f, "dns-utils", os, &dns).await?;
    expect_dns_target(f, os, &node, &svc_ip, &format!(" through search {own}")).await
}

/// hostname + subdomain: a pod with `hostname: host`, `subdomain: sub` and a headless Service
/// `sub` selecting it gets `host.sub.<ns>.svc.cluster.local`, resolving to its IP.
pub(super) async fn hostname_subdomain(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    f.create_service(
        &ServiceBuilder::headless("sub")
            .selector("role", "named")
            .netexec_ports(),
    )
    .await?;
    let named = PodBuilder::new("named", os)
        .label("role", "named")
        .hostname("host", "sub")
        .container(ContainerBuilder::new("c", "agnhost").args(["pause"]));
    let pod = f.create_pod_ready(&named).await?;
    let ip = pod_ip(&pod)?;
    f.wait_ready_endpoints("sub", 1).await?;
    let node = lookup_pod(f, "dns-utils", os, &Dns::policy("ClusterFirst")).await?;
    let fqdn = format!("host.{}", service_fqdn("sub", f.ns()));
    expect_resolves(
        f,
        "dns-utils",
        os,
        &fqdn,
        &ip,
        format!(
            "pod dns-utils on node {node}: expected {fqdn} to resolve to pod named's IP {ip} (node {})",
            pod_node(&pod)
        ),
    )
    .await
}

/// dnsPolicy ClusterFirstWithHostNet: a hostNetwork pod resolves cluster names. Windows nodes
/// support neither hostNetwork (outside HostProcess pods) nor this policy, which the case
/// reports as its skip reason.
async fn cluster_first_host_net(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.skip_unless(
        os.supports_cluster_first_with_host_net() && os.supports_host_network(),
        format!(
            "dnsPolicy ClusterFirstWithHostNet is not supported on {} nodes",
            os.title()
        ),
    )?;
    f.require_nodes(os, 1).await?;
    let dns = Dns {
        policy: "ClusterFirstWithHostNet",
        config: None,
        host_network: true,
    };
    let node = lookup_pod(f, "dns-utils", os, &dns).await?;
    expect_kubernetes_resolves(f, os, &format!("hostNetwork pod dns-utils on node {node}")).await
}

#[cfg(test)]
mod tests {
    use super::split_list;

    #[test]
    fn splits_agnhost_lists() {
        assert_eq!(split_list("10.96.0.10,1.1.1.1\n"), ["10.96.0.10", "1.1.1.1"]);
        assert_eq!(split_list("a.svc b.svc\r\n"), ["a.svc", "b.svc"]);
        assert!(split_list("\n").is_empty());
    }
}
