//! A pod's DNS configuration as the kubelet computes it from `dnsPolicy` and `dnsConfig`
//! (nameservers, search suffixes, `ndots`), and the names its resolver tries for a name, with
//! Windows' rule that a dotted name is never expanded.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;

use super::CLUSTER_DOMAIN;
use crate::addr::AddressBlock;
use crossconf_model::os::Os;

/// A pod's DNS configuration as its resolver uses it (what `/etc/resolv.conf` holds on Linux
/// and what the CNI configures on Windows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDns {
    /// Nameservers, in order (at most 3, as the kubelet caps them).
    pub nameservers: Vec<IpAddr>,
    /// Search suffixes.
    pub searches: Vec<String>,
    /// The `ndots` option.
    pub ndots: usize,
    /// The `attempts` option from `dnsConfig.options` (glibc caps it at 5), if given; the
    /// resolver's default is [`PodDns::DEFAULT_ATTEMPTS`].
    pub attempts: Option<usize>,
    /// The pod's OS (decides the dotted-name rule).
    pub os: Os,
}

/// Why a pod's DNS cannot be configured.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum DnsConfigError {
    /// `dnsPolicy: None` without nameservers.
    #[error("pod DNS config has no nameservers: dnsPolicy None needs dnsConfig.nameservers")]
    NoNameservers,
    /// A policy this OS does not support.
    #[error("dnsPolicy {policy} is not supported on {os} nodes")]
    Unsupported {
        /// The policy.
        policy: String,
        /// The node OS.
        os: Os,
    },
}

impl PodDns {
    /// How many rounds over the nameservers a query gets without `options attempts`
    /// (glibc's `RES_DFLRETRY`).
    pub const DEFAULT_ATTEMPTS: usize = 2;

    /// The rounds over the nameservers one query gets.
    pub fn attempts(&self) -> usize {
        self.attempts.unwrap_or(Self::DEFAULT_ATTEMPTS)
    }

    /// The DNS configuration of `pod` on a node of `os` in `block`, as the kubelet computes it.
    pub fn for_pod(pod: &Pod, os: Os, block: AddressBlock) -> Result<PodDns, DnsConfigError> {
        let spec = pod.spec.clone().unwrap_or_default();
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let policy = spec.dns_policy.clone().unwrap_or_else(|| "ClusterFirst".into());
        let host_net = spec.host_network.unwrap_or(false);
        let cluster = || PodDns {
            nameservers: vec![IpAddr::V4(block.dns_service())],
            searches: vec![
                format!("{ns}.svc.{CLUSTER_DOMAIN}"),
                format!("svc.{CLUSTER_DOMAIN}"),
                CLUSTER_DOMAIN.into(),
            ],
            ndots: 5,
            attempts: None,
            os,
        };
        let node = || PodDns {
            nameservers: vec![IpAddr::V4(block.node_resolver())],
            searches: vec![],
            ndots: 1,
            attempts: None,
            os,
        };
        let mut dns = match policy.as_str() {
            "ClusterFirstWithHostNet" if !os.supports_cluster_first_with_host_net() => {
                return Err(DnsConfigError::Unsupported { policy, os });
            }
            "ClusterFirstWithHostNet" => cluster(),
            "ClusterFirst" if host_net => node(),
            "ClusterFirst" => cluster(),
            "Default" => node(),
            "None" => PodDns {
                nameservers: vec![],
                searches: vec![],
                ndots: 5,
                attempts: None,
                os,
            },
            _ => cluster(),
        };
        if let Some(cfg) = &spec.dns_config {
            for ns in cfg.nameservers.iter().flatten() {
                if let Ok(ip) = ns.parse::<IpAddr>()
                    && !dns.nameservers.contains(&ip)
                {
                    dns.nameservers.push(ip);
                }
            }
            for s in cfg.searches.iter().flatten() {
                if !dns.searches.contains(s) {
                    dns.searches.push(s.clone());
                }
            }
            for o in cfg.options.iter().flatten() {
                if o.name.as_deref() == Some("ndots")
                    && let Some(v) = o.value.as_deref().and_then(|v| v.parse().ok())
                {
                    dns.ndots = v;
                }
                if o.name.as_deref() == Some("attempts")
                    && let Some(v) = o.value.as_deref().and_then(|v| v.parse::<usize>().ok())
                {
                    dns.attempts = Some(v.clamp(1, 5));
                }
            }
        }
        dns.nameservers.truncate(3);
        if dns.nameservers.is_empty() {
            return Err(DnsConfigError::NoNameservers);
        }
        Ok(dns)
    }

    /// The names the resolver tries for `name`, in order.
    ///
    /// Windows treats any name containing a dot as fully qualified (no suffixes;
    /// [`Os::expands_dotted_names`]); Linux follows resolv.conf `ndots` rules.
    pub fn candidates(&self, name: &str) -> Vec<String> {
        if let Some(abs) = name.strip_suffix('.') {
            return vec![abs.to_string()];
        }
        let dots = name.matches('.').count();
        let with_suffixes = self.searches.iter().map(|s| format!("{name}.{s}"));
        if dots > 0 && !self.os.expands_dotted_names() {
            return vec![name.to_string()];
        }
        if dots >= self.ndots {
            std::iter::once(name.to_string()).chain(with_suffixes).collect()
        } else {
            with_suffixes.chain(std::iter::once(name.to_string())).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodDNSConfig, PodSpec};
    use kube::api::ObjectMeta;

    fn pod_with(policy: Option<&str>, cfg: Option<PodDNSConfig>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                dns_policy: policy.map(Into::into),
                dns_config: cfg,
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn dns_policies() {
        let b = AddressBlock(211);
        let cf = PodDns::for_pod(&pod_with(None, None), Os::Windows, b).unwrap();
        assert_eq!(cf.nameservers, [IpAddr::V4(b.dns_service())]);
        assert_eq!(cf.searches[0], "ns1.svc.cluster.local");
        let def = PodDns::for_pod(&pod_with(Some("Default"), None), Os::Linux, b).unwrap();
        assert_eq!(def.nameservers, [IpAddr::V4(b.node_resolver())]);
        let none = PodDns::for_pod(
            &pod_with(
                Some("None"),
                Some(PodDNSConfig {
                    nameservers: Some(vec![b.dns_service().to_string(), "1.1.1.1".into()]),
                    searches: Some(vec!["default.svc.cluster.local".into()]),
                    options: None,
                }),
            ),
            Os::Windows,
            b,
        )
        .unwrap();
        assert_eq!(none.nameservers.len(), 2);
        assert_eq!(none.searches, ["default.svc.cluster.local"]);
        assert_eq!(none.attempts(), PodDns::DEFAULT_ATTEMPTS);
        let tries = PodDns::for_pod(
            &pod_with(
                None,
                Some(PodDNSConfig {
                    options: Some(vec![k8s_openapi::api::core::v1::PodDNSConfigOption {
                        name: Some("attempts".into()),
                        value: Some("9".into()),
                    }]),
                    ..Default::default()
                }),
            ),
            Os::Linux,
            b,
        )
        .unwrap();
        assert_eq!(tries.attempts(), 5, "glibc's RES_MAXRETRY caps attempts");
        assert_eq!(
            PodDns::for_pod(&pod_with(Some("None"), None), Os::Linux, b),
            Err(DnsConfigError::NoNameservers)
        );
        assert!(PodDns::for_pod(&pod_with(Some("ClusterFirstWithHostNet"), None), Os::Windows, b).is_err());
        assert!(PodDns::for_pod(&pod_with(Some("ClusterFirstWithHostNet"), None), Os::Linux, b).is_ok());
    }

    #[test]
    fn windows_does_not_expand_dotted_names() {
        let b = AddressBlock(212);
        let win = PodDns::for_pod(&pod_with(None, None), Os::Windows, b).unwrap();
        let lin = PodDns::for_pod(&pod_with(None, None), Os::Linux, b).unwrap();
        assert_eq!(win.candidates("svc.ns"), ["svc.ns"]);
        assert_eq!(lin.candidates("svc.ns")[0], "svc.ns.ns1.svc.cluster.local");
        assert!(
            lin.candidates("svc.ns")
                .contains(&"svc.ns.svc.cluster.local".to_string())
        );
        assert_eq!(win.candidates("svc")[0], "svc.ns1.svc.cluster.local");
        assert_eq!(win.candidates("a.b.c.")[0], "a.b.c");
    }
}
