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

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, CNAME, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::Store;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::addr::{self, AddressBlock};
use crate::node::net::{Faults, NetError, Source};
use crossconf_model::os::Os;

/// The cluster domain.
pub const CLUSTER_DOMAIN: &str = "cluster.local";
/// TTL of every answer (CoreDNS's kubernetes plugin default is 5 s).
const TTL: u32 = 5;

/// Errors of the DNS servers.
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    /// Neither port 53 nor an ephemeral port could be bound.
    #[error("bind dns server on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// What a pod's resolver got for a name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ResolveError {
    /// Every candidate name was answered NXDOMAIN (or had no address).
    #[error("can't find {name}: Non-existent domain")]
    NotFound {
        /// The name asked for.
        name: String,
    },
    /// No nameserver answered.
    #[error("connection timed out; no servers could be reached")]
    NoServers,
}

/// The answer of a zone lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The name exists; these are its records of the asked type (maybe none).
    Records(Vec<Record>),
    /// The name does not exist.
    NxDomain,
}

/// The outside world's names, as the node-level resolver knows them.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamZone {
    block: AddressBlock,
}

impl UpstreamZone {
    /// The upstream zone of `block`.
    pub fn new(block: AddressBlock) -> Self {
        UpstreamZone { block }
    }

    /// Answers `name`: only [`addr::EXTERNAL_NAME`] exists (at the outside host).
    pub fn lookup(&self, name: &Name, qtype: RecordType) -> Lookup {
        let n = normalise(name);
        if n == addr::EXTERNAL_NAME {
            let recs = if qtype == RecordType::A || qtype == RecordType::ANY {
                vec![a_record(name, self.block.outside())]
            } else {
                vec![]
            };
            Lookup::Records(recs)
        } else {
            Lookup::NxDomain
        }
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

fn normalise(name: &Name) -> String {
    name.to_ascii().trim_end_matches('.').to_ascii_lowercase()
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

/// Anything that answers DNS questions.
pub trait Zone: Send + Sync + 'static {
    /// Answers one question.
    fn answer(&self, name: &Name, qtype: RecordType) -> Lookup;
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

/// Builds the response to one encoded request; `None` for undecodable input (dropped, as real
/// servers drop garbage).
pub fn respond(zone: &dyn Zone, request: &[u8]) -> Option<Vec<u8>> {
    let req = Message::from_vec(request).ok()?;
    let mut resp = Message::response(req.metadata.id, req.metadata.op_code);
    resp.metadata.recursion_desired = req.metadata.recursion_desired;
    resp.metadata.recursion_available = true;
    resp.metadata.authoritative = true;
    if req.metadata.op_code != OpCode::Query || req.queries.len() != 1 {
        resp.metadata.response_code = ResponseCode::NotImp;
        return resp.to_vec().ok();
    }
    let q = req.queries[0].clone();
    match zone.answer(&q.name, q.query_type) {
        Lookup::Records(recs) => {
            resp.answers = recs;
        }
        Lookup::NxDomain => resp.metadata.response_code = ResponseCode::NXDomain,
    }
    resp.queries.push(q);
    resp.to_vec().ok()
}

/// A running DNS server: where it listens.
#[derive(Debug, Clone, Copy)]
pub struct DnsEndpoint {
    /// The address (port 53 unless binding 53 failed).
    pub addr: SocketAddr,
}

/// Binds a DNS server for `zone` on `ip`, port 53 (or an ephemeral port if 53 cannot be bound),
/// over UDP and TCP, until `cancel`. Queries are ignored (time out) while `faults` says DNS is
/// stopped and `stoppable` is set.
pub async fn serve(
    ip: Ipv4Addr,
    zone: Arc<dyn Zone>,
    faults: Arc<Faults>,
    stoppable: bool,
    cancel: CancellationToken,
) -> Result<DnsEndpoint, DnsError> {
    let udp = match UdpSocket::bind((ip, 53)).await {
        Ok(s) => s,
        Err(e) => {
            warn!(%ip, error = %e, "cannot bind dns port 53, using an ephemeral port");
            UdpSocket::bind((ip, 0)).await.map_err(|source| DnsError::Bind {
                addr: SocketAddr::new(ip.into(), 0),
                source,
            })?
        }
    };
    let addr = udp.local_addr().map_err(|source| DnsError::Bind {
        addr: SocketAddr::new(ip.into(), 0),
        source,
    })?;
    let tcp = TcpListener::bind(addr)
        .await
        .map_err(|source| DnsError::Bind { addr, source })?;
    info!(%addr, "dns server listening");
    let udp = Arc::new(udp);
    {
        let (zone, faults, cancel) = (zone.clone(), faults.clone(), cancel.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let (n, peer) = tokio::select! {
                    _ = cancel.cancelled() => return,
                    r = udp.recv_from(&mut buf) => match r {
                        Ok(x) => x,
                        Err(e) => { debug!(error = %e, "dns udp receive failed"); continue; }
                    },
                };
                if stoppable && faults.dns_stopped() {
                    continue;
                }
                if let Some(out) = respond(zone.as_ref(), &buf[..n])
                    && let Err(e) = udp.send_to(&out, peer).await
                {
                    debug!(error = %e, %peer, "dns udp reply failed");
                }
            }
        });
    }
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = tokio::select! {
                _ = cancel.cancelled() => return,
                r = tcp.accept() => match r { Ok(x) => x, Err(_) => continue },
            };
            if stoppable && faults.dns_stopped() {
                continue;
            }
            let zone = zone.clone();
            tokio::spawn(async move {
                loop {
                    let mut len = [0u8; 2];
                    if conn.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
                    if conn.read_exact(&mut msg).await.is_err() {
                        return;
                    }
                    let Some(out) = respond(zone.as_ref(), &msg) else {
                        return;
                    };
                    let Ok(l) = u16::try_from(out.len()) else { return };
                    if conn.write_all(&l.to_be_bytes()).await.is_err() || conn.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(DnsEndpoint { addr })
}

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
            os,
        };
        let node = || PodDns {
            nameservers: vec![IpAddr::V4(block.node_resolver())],
            searches: vec![],
            ndots: 1,
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

/// Where a nameserver address really listens: the cluster DNS may have fallen back from port 53.
pub trait DnsPorts: Send + Sync {
    /// The socket address to send queries for nameserver `ip` to.
    fn dns_socket(&self, ip: IpAddr) -> SocketAddr;
    /// Sends one query datagram from `src` and waits for the reply.
    fn query<'a>(
        &'a self,
        src: &'a Source,
        server: SocketAddr,
        payload: &'a [u8],
    ) -> futures::future::BoxFuture<'a, Result<Vec<u8>, NetError>>;
}

/// How long a pod's resolver waits for one nameserver.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// The answer of a successful resolution: the name that matched and its addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The canonical name of the answer: the name asked for, or, when it is an alias (a CNAME,
    /// as an ExternalName Service is), the end of the CNAME chain. This is what `nslookup`
    /// prints after `Name:` and what glibc returns as `h_name`.
    pub name: String,
    /// The aliases that led to [`Resolved::name`], starting with the fully qualified name
    /// asked for; empty without a CNAME. busybox nslookup prints each as
    /// `<alias>\tcanonical name = <target>`, Windows nslookup as `Aliases:  <alias>`.
    pub aliases: Vec<String>,
    /// Its IPv4 addresses.
    pub addrs: Vec<Ipv4Addr>,
    /// The nameserver that answered.
    pub server: IpAddr,
}

/// Resolves `name` as the pod's stub resolver would: each candidate name in turn, each asked of
/// the nameservers in order, over real DNS packets through the loopback-only dialer.
pub async fn resolve(dns: &PodDns, net: &dyn DnsPorts, src: &Source, name: &str) -> Result<Resolved, ResolveError> {
    if let Ok(ip) = name.parse::<Ipv4Addr>() {
        return Ok(Resolved {
            name: name.into(),
            aliases: vec![],
            addrs: vec![ip],
            server: dns.nameservers[0],
        });
    }
    let mut any_answer = false;
    for cand in dns.candidates(name) {
        let Ok(qname) = Name::from_ascii(format!("{cand}.")) else {
            continue;
        };
        let mut msg = Message::query();
        msg.metadata.recursion_desired = true;
        msg.metadata.message_type = MessageType::Query;
        msg.queries.push(Query::query(qname, RecordType::A));
        let Ok(bytes) = msg.to_vec() else { continue };
        for server in &dns.nameservers {
            let sock = net.dns_socket(*server);
            match net.query(src, sock, &bytes).await {
                Ok(reply) => {
                    any_answer = true;
                    let Ok(r) = Message::from_vec(&reply) else { continue };
                    let addrs: Vec<Ipv4Addr> = r
                        .answers
                        .iter()
                        .filter_map(|rec| match &rec.data {
                            RData::A(a) => Some(a.0),
                            _ => None,
                        })
                        .collect();
                    if r.metadata.response_code == ResponseCode::NoError && !addrs.is_empty() {
                        let (name, aliases) = cname_chain(&cand, &r.answers);
                        return Ok(Resolved {
                            name,
                            aliases,
                            addrs,
                            server: *server,
                        });
                    }
                    // NXDOMAIN or no data: this candidate is settled; try the next name.
                    break;
                }
                Err(e) => debug!(%server, error = %e, "nameserver did not answer"),
            }
        }
    }
    if any_answer {
        Err(ResolveError::NotFound { name: name.into() })
    } else {
        Err(ResolveError::NoServers)
    }
}

/// Follows the CNAME records of `answers` from `asked`: the canonical name and the aliases
/// that led to it (empty when `asked` is not an alias).
fn cname_chain(asked: &str, answers: &[Record]) -> (String, Vec<String>) {
    let mut name = asked.trim_end_matches('.').to_string();
    let mut aliases = Vec::new();
    // A chain longer than the answer section would loop.
    for _ in 0..answers.len() {
        let next = answers.iter().find_map(|rec| match &rec.data {
            RData::CNAME(c) if normalise(&rec.name) == name.to_ascii_lowercase() => {
                Some(c.0.to_ascii().trim_end_matches('.').to_string())
            }
            _ => None,
        });
        let Some(next) = next else { break };
        aliases.push(std::mem::replace(&mut name, next));
    }
    (name, aliases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodDNSConfig, PodSpec, ServicePort, ServiceSpec};
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};
    use kube::api::ObjectMeta;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    fn zone(services: Vec<Service>, slices: Vec<EndpointSlice>, pods: Vec<Pod>) -> ClusterZone {
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

    fn svc(ns: &str, name: &str, ip: &str) -> Service {
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

    fn ask(z: &ClusterZone, name: &str, t: RecordType) -> Lookup {
        z.lookup(&Name::from_ascii(name).unwrap(), t)
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

    #[test]
    fn external_name_is_an_alias_of_its_target() {
        let mut ext = svc("ns1", "ext", "");
        if let Some(spec) = ext.spec.as_mut() {
            spec.type_ = Some("ExternalName".into());
            spec.external_name = Some("kubernetes.default.svc.cluster.local".into());
            spec.cluster_ip = None;
        }
        let z = zone(vec![svc("default", "kubernetes", "127.210.96.1"), ext], vec![], vec![]);
        let Lookup::Records(recs) = ask(&z, "ext.ns1.svc.cluster.local.", RecordType::A) else {
            panic!("nxdomain")
        };
        let (name, aliases) = cname_chain("ext.ns1.svc.cluster.local", &recs);
        assert_eq!(name, "kubernetes.default.svc.cluster.local");
        assert_eq!(aliases, ["ext.ns1.svc.cluster.local"]);
        let (plain, none) = cname_chain("kubernetes.default.svc.cluster.local", &recs[1..]);
        assert_eq!(plain, "kubernetes.default.svc.cluster.local");
        assert!(none.is_empty());
    }

    #[test]
    fn wire_round_trip() {
        let z = zone(vec![svc("default", "kubernetes", "127.210.96.1")], vec![], vec![]);
        let mut q = Message::query();
        q.queries.push(Query::query(
            Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
            RecordType::A,
        ));
        let out = respond(&z, &q.to_vec().unwrap()).unwrap();
        let r = Message::from_vec(&out).unwrap();
        assert_eq!(r.metadata.id, q.metadata.id);
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
        assert_eq!(r.answers.len(), 1);
        let mut q = Message::query();
        q.queries.push(Query::query(
            Name::from_ascii("bogus.default.svc.cluster.local.").unwrap(),
            RecordType::A,
        ));
        let r = Message::from_vec(&respond(&z, &q.to_vec().unwrap()).unwrap()).unwrap();
        assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    }

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
