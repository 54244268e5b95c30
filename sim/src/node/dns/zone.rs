//! The zones DNS answers from: the cluster zone (Services by ClusterIP or ready endpoints,
//! SRV records of named ports, headless pod hostnames, dashed pod addresses, ExternalName
//! aliases) read from reflector stores, and the upstream zone of the node-level resolver.

use std::net::Ipv4Addr;
use std::sync::Arc;

use hickory_proto::rr::rdata::{A, CNAME, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::Store;

use super::{CLUSTER_DOMAIN, Lookup, Zone, normalise};
use crate::addr::{self, AddressBlock};

/// TTL of every answer (CoreDNS's kubernetes plugin default is 5 s).
const TTL: u32 = 5;

/// The outside world's names, as the node-level resolver knows them.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamZone {
    block: AddressBlock,
    /// Whether the cluster runs the simulated Active Directory domain, whose DNS (on its
    /// controller, as AD-integrated DNS is) the upstream resolvers forward the domain to.
    domain: bool,
}

impl UpstreamZone {
    /// The upstream zone of `block`.
    pub fn new(block: AddressBlock) -> Self {
        UpstreamZone { block, domain: false }
    }

    /// The upstream zone of `block` with the simulated domain's names
    /// ([`crate::node::ad::DOMAIN`] and its controller `dc1.` under it).
    pub fn with_domain(block: AddressBlock) -> Self {
        UpstreamZone { block, domain: true }
    }

    /// Answers `name`: [`addr::EXTERNAL_NAME`] (at the outside host) and, with the domain,
    /// the domain's name and its controller's (at the controller).
    pub fn lookup(&self, name: &Name, qtype: RecordType) -> Lookup {
        let n = normalise(name);
        let dc_name = format!(
            "{}.{}",
            crate::node::ad::CONTROLLER_NAME.to_ascii_lowercase(),
            crate::node::ad::DOMAIN
        );
        let ip = if n == addr::EXTERNAL_NAME {
            self.block.outside()
        } else if self.domain && (n == crate::node::ad::DOMAIN || n == dc_name) {
            self.block.domain_controller()
        } else {
            return Lookup::NxDomain;
        };
        let recs = if qtype == RecordType::A || qtype == RecordType::ANY {
            vec![a_record(name, ip)]
        } else {
            vec![]
        };
        Lookup::Records(recs)
    }
}

/// The cluster zone, read from reflector stores of Services, EndpointSlices and Pods.
#[derive(Clone)]
pub struct ClusterZone {
    /// Services of all namespaces.
    pub services: Store<Service>,
    /// EndpointSlices of all namespaces.
    pub slices: Store<EndpointSlice>,
    /// Pods of all namespaces.
    pub pods: Store<Pod>,
    /// Where names outside the cluster domain go.
    pub upstream: UpstreamZone,
}

fn a_record(name: &Name, ip: Ipv4Addr) -> Record {
    Record::from_rdata(name.clone(), TTL, RData::A(A(ip)))
}

fn fqdn(s: &str) -> Name {
    Name::from_ascii(format!("{s}.")).unwrap_or_else(|_| Name::root())
}

/// One endpoint of a Service as DNS sees it.
struct Ep {
    ip: Ipv4Addr,
    hostname: Option<String>,
    ready: bool,
}

impl ClusterZone {
    fn service(&self, ns: &str, name: &str) -> Option<Arc<Service>> {
        self.services
            .find(|s| s.metadata.namespace.as_deref() == Some(ns) && s.metadata.name.as_deref() == Some(name))
    }

    fn endpoints(&self, ns: &str, svc: &str) -> Vec<Ep> {
        let mut out = Vec::new();
        for slice in self.slices.state() {
            if slice.metadata.namespace.as_deref() != Some(ns)
                || slice
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("kubernetes.io/service-name"))
                    .map(String::as_str)
                    != Some(svc)
            {
                continue;
            }
            for ep in &slice.endpoints {
                let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
                for a in &ep.addresses {
                    if let Ok(ip) = a.parse::<Ipv4Addr>() {
                        out.push(Ep {
                            ip,
                            hostname: ep.hostname.clone(),
                            ready,
                        });
                    }
                }
            }
        }
        out
    }

    fn is_headless(svc: &Service) -> bool {
        svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
    }

    fn publishes_not_ready(svc: &Service) -> bool {
        svc.spec
            .as_ref()
            .and_then(|s| s.publish_not_ready_addresses)
            .unwrap_or(false)
    }

    /// Answers `name` of type `qtype`.
    pub fn lookup(&self, name: &Name, qtype: RecordType) -> Lookup {
        let n = normalise(name);
        let Some(local) = n.strip_suffix(CLUSTER_DOMAIN).map(|s| s.trim_end_matches('.')) else {
            return self.upstream.lookup(name, qtype);
        };
        let parts: Vec<&str> = if local.is_empty() {
            vec![]
        } else {
            local.split('.').collect()
        };
        let want_a = matches!(qtype, RecordType::A | RecordType::ANY);
        match parts.as_slice() {
            [svc, ns, "svc"] => {
                let Some(service) = self.service(ns, svc) else {
                    return Lookup::NxDomain;
                };
                let spec = service.spec.clone().unwrap_or_default();
                if spec.type_.as_deref() == Some("ExternalName") {
                    let target = spec.external_name.unwrap_or_default();
                    let mut recs = vec![Record::from_rdata(
                        name.clone(),
                        TTL,
                        RData::CNAME(CNAME(fqdn(&target))),
                    )];
                    if let Lookup::Records(more) = self.lookup(&fqdn(&target), qtype) {
                        recs.extend(more);
                    }
                    return Lookup::Records(recs);
                }
                if !want_a {
                    return Lookup::Records(vec![]);
                }
                if Self::is_headless(&service) {
                    let all = Self::publishes_not_ready(&service);
                    let recs = self
                        .endpoints(ns, svc)
                        .into_iter()
                        .filter(|e| e.ready || all)
                        .map(|e| a_record(name, e.ip))
                        .collect();
                    Lookup::Records(recs)
                } else {
                    match spec.cluster_ip.as_deref().and_then(|ip| ip.parse().ok()) {
                        Some(ip) => Lookup::Records(vec![a_record(name, ip)]),
                        None => Lookup::Records(vec![]),
                    }
                }
            }
            [host, svc, ns, "svc"] if !host.starts_with('_') => {
                let Some(service) = self.service(ns, svc) else {
                    return Lookup::NxDomain;
                };
                if !Self::is_headless(&service) {
                    return Lookup::NxDomain;
                }
                let all = Self::publishes_not_ready(&service);
                let mut ip = self
                    .endpoints(ns, svc)
                    .into_iter()
                    .find(|e| (e.ready || all) && (e.hostname.as_deref() == Some(host) || dashed(e.ip) == *host))
                    .map(|e| e.ip);
                if ip.is_none() {
                    // Pods with spec.hostname/subdomain, as the kubelet publishes them.
                    ip = self
                        .pods
                        .find(|p| {
                            p.metadata.namespace.as_deref() == Some(ns)
                                && p.spec.as_ref().is_some_and(|s| {
                                    s.hostname.as_deref() == Some(host) && s.subdomain.as_deref() == Some(svc)
                                })
                        })
                        .and_then(|p| p.status.as_ref()?.pod_ip.as_ref()?.parse().ok());
                }
                match ip {
                    Some(ip) if want_a => Lookup::Records(vec![a_record(name, ip)]),
                    Some(_) => Lookup::Records(vec![]),
                    None => Lookup::NxDomain,
                }
            }
            [port, proto, svc, ns, "svc"] if port.starts_with('_') && proto.starts_with('_') => {
                let Some(service) = self.service(ns, svc) else {
                    return Lookup::NxDomain;
                };
                let (port, proto) = (&port[1..], proto[1..].to_ascii_uppercase());
                let spec = service.spec.clone().unwrap_or_default();
                let Some(sp) = spec
                    .ports
                    .unwrap_or_default()
                    .into_iter()
                    .find(|p| p.name.as_deref() == Some(port) && p.protocol.as_deref().unwrap_or("TCP") == proto)
                else {
                    return Lookup::NxDomain;
                };
                if !(qtype == RecordType::SRV || qtype == RecordType::ANY) {
                    return Lookup::Records(vec![]);
                }
                let svc_fqdn = format!("{svc}.{ns}.svc.{CLUSTER_DOMAIN}");
                if Self::is_headless(&service) {
                    let all = Self::publishes_not_ready(&service);
                    let target_port = u16::try_from(sp.port).unwrap_or(0);
                    let recs = self
                        .endpoints(ns, svc)
                        .into_iter()
                        .filter(|e| e.ready || all)
                        .map(|e| {
                            let host = e.hostname.clone().unwrap_or_else(|| dashed(e.ip));
                            let t = fqdn(&format!("{host}.{svc_fqdn}"));
                            Record::from_rdata(name.clone(), TTL, RData::SRV(SRV::new(0, 100, target_port, t)))
                        })
                        .collect();
                    Lookup::Records(recs)
                } else {
                    let t = fqdn(&svc_fqdn);
                    let port = u16::try_from(sp.port).unwrap_or(0);
                    Lookup::Records(vec![Record::from_rdata(
                        name.clone(),
                        TTL,
                        RData::SRV(SRV::new(0, 100, port, t)),
                    )])
                }
            }
            [dashed_ip, _ns, "pod"] => match undashed(dashed_ip) {
                Some(ip) if want_a => Lookup::Records(vec![a_record(name, ip)]),
                Some(_) => Lookup::Records(vec![]),
                None => Lookup::NxDomain,
            },
            _ => Lookup::NxDomain,
        }
    }
}

fn dashed(ip: Ipv4Addr) -> String {
    ip.to_string().replace('.', "-")
}

fn undashed(s: &str) -> Option<Ipv4Addr> {
    s.replace('-', ".").parse().ok()
}

impl Zone for ClusterZone {
    fn answer(&self, name: &Name, qtype: RecordType) -> Lookup {
        self.lookup(name, qtype)
    }
}

impl Zone for UpstreamZone {
    fn answer(&self, name: &Name, qtype: RecordType) -> Lookup {
        self.lookup(name, qtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::dns::testutil::{ask, svc, zone};
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};
    use kube::api::ObjectMeta;

    fn slice(ns: &str, svc: &str, ips: &[(&str, Option<&str>)]) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some(format!("{svc}-abc")),
                namespace: Some(ns.into()),
                labels: Some([("kubernetes.io/service-name".to_string(), svc.to_string())].into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: ips
                .iter()
                .map(|(ip, h)| Endpoint {
                    addresses: vec![(*ip).into()],
                    hostname: h.map(str::to_string),
                    conditions: Some(EndpointConditions {
                        ready: Some(true),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
            ports: None,
        }
    }

    fn ips(l: Lookup) -> Vec<Ipv4Addr> {
        match l {
            Lookup::Records(r) => r
                .iter()
                .filter_map(|r| if let RData::A(a) = &r.data { Some(a.0) } else { None })
                .collect(),
            Lookup::NxDomain => panic!("nxdomain"),
        }
    }

    #[test]
    fn services_headless_pods_and_srv() {
        let z = zone(
            vec![svc("ns1", "web", "127.210.96.20"), svc("ns1", "hl", "None")],
            vec![slice(
                "ns1",
                "hl",
                &[("127.210.16.2", Some("p0")), ("127.210.16.3", None)],
            )],
            vec![],
        );
        assert_eq!(
            ips(ask(&z, "web.ns1.svc.cluster.local.", RecordType::A)),
            ["127.210.96.20".parse::<Ipv4Addr>().unwrap()]
        );
        assert_eq!(ips(ask(&z, "hl.ns1.svc.cluster.local.", RecordType::A)).len(), 2);
        assert_eq!(
            ips(ask(&z, "p0.hl.ns1.svc.cluster.local.", RecordType::A)),
            ["127.210.16.2".parse::<Ipv4Addr>().unwrap()]
        );
        assert_eq!(ask(&z, "nope.ns1.svc.cluster.local.", RecordType::A), Lookup::NxDomain);
        assert_eq!(ask(&z, "web.ns2.svc.cluster.local.", RecordType::A), Lookup::NxDomain);
        let Lookup::Records(srv) = ask(&z, "_http._tcp.web.ns1.svc.cluster.local.", RecordType::SRV) else {
            panic!()
        };
        assert!(matches!(&srv[0].data, RData::SRV(s) if s.port == 80));
        assert_eq!(
            ask(&z, "_nope._tcp.web.ns1.svc.cluster.local.", RecordType::SRV),
            Lookup::NxDomain
        );
        assert_eq!(
            ips(ask(&z, "outside.crossconf.test.", RecordType::A)),
            [AddressBlock(210).outside()]
        );
        assert_eq!(ask(&z, "example.com.", RecordType::A), Lookup::NxDomain);
    }

    #[test]
    fn pod_hostname_subdomain_from_pod_spec() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                hostname: Some("h".into()),
                subdomain: Some("hl".into()),
                ..Default::default()
            }),
            status: Some(k8s_openapi::api::core::v1::PodStatus {
                pod_ip: Some("127.210.16.9".into()),
                ..Default::default()
            }),
        };
        let z = zone(vec![svc("ns1", "hl", "None")], vec![], vec![pod]);
        assert_eq!(
            ips(ask(&z, "h.hl.ns1.svc.cluster.local.", RecordType::A)),
            ["127.210.16.9".parse::<Ipv4Addr>().unwrap()]
        );
    }
}
