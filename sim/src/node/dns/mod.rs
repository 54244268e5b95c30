//! Cluster DNS: a real DNS server (the DNS protocol over UDP and TCP, encoded with
//! hickory-proto) on the cluster DNS Service IP, the node-level resolver, and the stub resolver
//! pods use according to their `dnsPolicy`.
//!
//! The cluster zone follows the Kubernetes DNS specification: `<svc>.<ns>.svc.cluster.local` A
//! records (the ClusterIP, or every ready endpoint of a headless Service), SRV records
//! `_<port>._<proto>.<svc>.<ns>.svc.cluster.local`, `<hostname>.<subdomain>.<ns>.svc.cluster.local`
//! for pods behind a headless Service, and `a-b-c-d.<ns>.pod.cluster.local`. Other names under
//! `cluster.local` are NXDOMAIN; names outside it are forwarded (in-process, as CoreDNS forwards
//! to the node's resolver) to the node-level resolver, which knows only
//! [`addr::EXTERNAL_NAME`]. No name is ever given to the machine's resolver.
//!
//! Split by concept: `zone` answers names from the cluster's Services, EndpointSlices and Pods
//! (and the node-level resolver's upstream names), `server` speaks the DNS protocol on a
//! socket, `pod_config` computes a pod's resolver configuration from its `dnsPolicy`, and
//! `resolver` is the pod's stub resolver. This file keeps what they share: the cluster domain,
//! the answer of a lookup and the [`Zone`] trait the server asks.
//!
//! [`addr::EXTERNAL_NAME`]: crate::addr::EXTERNAL_NAME

use hickory_proto::rr::{Name, Record, RecordType};

mod pod_config;
mod resolver;
mod server;
mod zone;

pub use pod_config::{DnsConfigError, PodDns};
pub use resolver::{DnsPorts, QUERY_TIMEOUT, ResolveError, Resolved, resolve};
pub use server::{DnsEndpoint, DnsError, respond, serve, servfail};
pub use zone::{ClusterZone, UpstreamZone};

/// The cluster domain.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// The answer of a zone lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The name exists; these are its records of the asked type (maybe none).
    Records(Vec<Record>),
    /// The name does not exist.
    NxDomain,
}

fn normalise(name: &Name) -> String {
    name.to_ascii().trim_end_matches('.').to_ascii_lowercase()
}

/// Anything that answers DNS questions.
pub trait Zone: Send + Sync + 'static {
    /// Answers one question.
    fn answer(&self, name: &Name, qtype: RecordType) -> Lookup;
}

/// Fixtures of the DNS unit tests: a cluster zone from objects.
#[cfg(test)]
mod testutil {
    use hickory_proto::rr::{Name, RecordType};
    use k8s_openapi::api::core::v1::{Pod, Service, ServicePort, ServiceSpec};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::ObjectMeta;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    use super::{ClusterZone, Lookup, UpstreamZone};
    use crate::addr::AddressBlock;

    pub(super) fn zone(services: Vec<Service>, slices: Vec<EndpointSlice>, pods: Vec<Pod>) -> ClusterZone {
        let mut ws: Writer<Service> = Writer::default();
        let mut we: Writer<EndpointSlice> = Writer::default();
        let mut wp: Writer<Pod> = Writer::default();
        for s in services {
            ws.apply_watcher_event(&Event::Apply(s));
        }
        for s in slices {
            we.apply_watcher_event(&Event::Apply(s));
        }
        for p in pods {
            wp.apply_watcher_event(&Event::Apply(p));
        }
        ClusterZone {
            services: ws.as_reader(),
            slices: we.as_reader(),
            pods: wp.as_reader(),
            upstream: UpstreamZone::new(AddressBlock(210)),
        }
    }

    pub(super) fn svc(ns: &str, name: &str, ip: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some(ip.into()),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: 80,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        }
    }

    pub(super) fn ask(z: &ClusterZone, name: &str, t: RecordType) -> Lookup {
        z.lookup(&Name::from_ascii(name).unwrap(), t)
    }
}
