//! The simulated pod network: the one loopback-only [`Dialer`], behaviour-breaking [`Faults`],
//! and the [`SimNet`] handle the rest of the node side shares.
//!
//! Every emulated network operation (a pod's `curl`, netexec `/dial`, a probe, kube-proxy
//! forwarding, the pods' stub DNS resolver) goes through [`Dialer`], which refuses to open a
//! socket to anything outside 127.0.0.0/8. Addresses in [`addr::MODELLED_EXTERNAL_IPS`] are
//! mapped onto the emulated outside host; every other outside address is modelled as
//! unreachable without a single packet being sent. ICMP is modelled entirely (no raw sockets):
//! [`Dialer::ping`] answers from the address plan and the OS rules in [`crossconf_model::os`].

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream, UdpSocket};
use tracing::debug;

use crate::addr::{self, AddressBlock};
use crossconf_model::os::Os;

/// Errors of the simulated network, worded like the socket errors programs print.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The destination is outside the simulated network and not modelled: nothing was sent.
    #[error("connect: network is unreachable ({dst} is outside the simulated network; nothing was sent)")]
    Unreachable {
        /// The refused destination.
        dst: IpAddr,
    },
    /// The destination is in another simulated cluster's block or unused loopback space.
    #[error("connect: no route to host ({dst} is not part of this simulated cluster)")]
    NoRoute {
        /// The refused destination.
        dst: IpAddr,
    },
    /// A fault switch drops the traffic, so the dial times out.
    #[error("i/o timeout dialing {dst} ({why})")]
    Dropped {
        /// The destination.
        dst: SocketAddr,
        /// Which fault dropped it.
        why: String,
    },
    /// The connection attempt did not finish in time.
    #[error("i/o timeout dialing {dst}")]
    TimedOut {
        /// The destination.
        dst: SocketAddr,
    },
    /// The operating system refused the socket operation (connection refused and the like).
    #[error("dial {proto} {dst}")]
    Io {
        /// `tcp` or `udp`.
        proto: &'static str,
        /// The destination.
        dst: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

pub use crate::faults::{FaultSpecError, Faults, StatsField};

/// Who is dialling: a pod (its IP, node and OS), a node itself, or the host (tests, kubectl).
#[derive(Debug, Clone)]
pub struct Source {
    /// The source address the socket binds to; `None` lets the OS choose (the host).
    pub ip: Option<Ipv4Addr>,
    /// The node the dialler runs on, if any.
    pub node: Option<String>,
    /// The OS of that node (decides the ICMP rule).
    pub os: Os,
    /// Whether the dialler is a pod (as opposed to the node or the host).
    pub is_pod: bool,
}

impl Source {
    /// The host machine (tests, the harness): no source binding, no node.
    pub fn host() -> Self {
        Source {
            ip: None,
            node: None,
            os: Os::Linux,
            is_pod: false,
        }
    }
}

/// The outcome of a modelled ICMP echo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PingOutcome {
    /// An echo reply came back.
    Reply,
    /// The request got no reply (timed out).
    NoReply,
}

/// A record of one refused dial, kept so tests can prove nothing left loopback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The destination the program asked for.
    pub dst: IpAddr,
    /// Why no socket was opened.
    pub why: &'static str,
}

/// The only way the node side opens client sockets.
#[derive(Debug)]
pub struct Dialer {
    block: AddressBlock,
    faults: Arc<Faults>,
    live: RwLock<HashSet<Ipv4Addr>>,
    nodes: RwLock<std::collections::HashMap<usize, String>>,
    /// Nodes gone for good (`node-lost`): nothing reaches them or their pods.
    lost: RwLock<HashSet<String>>,
    sockets_opened: AtomicU64,
    refusals: Mutex<Vec<Refusal>>,
}

/// How long a dial may take before it counts as timed out.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(3);

impl Dialer {
    /// A dialer for `block`, consulting `faults`.
    pub fn new(block: AddressBlock, faults: Arc<Faults>) -> Self {
        Dialer {
            block,
            faults,
            live: RwLock::new(HashSet::new()),
            nodes: RwLock::new(std::collections::HashMap::new()),
            lost: RwLock::new(HashSet::new()),
            sockets_opened: AtomicU64::new(0),
            refusals: Mutex::new(Vec::new()),
        }
    }

    /// The address block this dialer serves.
    pub fn block(&self) -> AddressBlock {
        self.block
    }

    /// The fault switches.
    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    /// Marks `ip` as in use (a node or a running pod), so pings to it are answered.
    pub fn set_live(&self, ip: Ipv4Addr, live: bool) {
        let mut l = self.live.write().expect("live lock");
        if live {
            l.insert(ip);
        } else {
            l.remove(&ip);
        }
    }

    /// Records that node `index` of the address plan is called `name` (for the blackhole fault,
    /// which names nodes).
    pub fn register_node(&self, index: usize, name: &str) {
        self.nodes.write().expect("nodes lock").insert(index, name.to_string());
    }

    /// Whether `ip` is a pod address on a node whose pod network is blackholed.
    fn dst_blackholed(&self, ip: Ipv4Addr) -> Option<String> {
        let idx = self.block.pod_node_index(ip)?;
        let name = self.nodes.read().expect("nodes lock").get(&idx).cloned()?;
        self.faults.is_blackholed(&name).then_some(name)
    }

    /// Marks node `name` lost for good (`node-lost`): traffic to its address and its pods', and
    /// from its pods, is dropped from now on, as for a machine cut off from the network.
    pub fn set_node_lost(&self, name: &str, lost: bool) {
        let mut l = self.lost.write().expect("lost lock");
        if lost {
            l.insert(name.to_string());
        } else {
            l.remove(name);
        }
    }

    /// The lost node `ip` belongs to (its own address or one of its pods'), if any.
    fn lost_node_of(&self, ip: Ipv4Addr) -> Option<String> {
        let lost = self.lost.read().expect("lost lock");
        if lost.is_empty() {
            return None;
        }
        let nodes = self.nodes.read().expect("nodes lock");
        let idx = self
            .block
            .pod_node_index(ip)
            .or_else(|| nodes.keys().copied().find(|&i| self.block.node(i) == ip))?;
        nodes.get(&idx).filter(|n| lost.contains(*n)).cloned()
    }

    /// Whether node `name` is lost.
    fn is_lost(&self, name: &str) -> bool {
        self.lost.read().expect("lost lock").contains(name)
    }

    /// How many client sockets this dialer has opened (all of them to loopback).
    pub fn sockets_opened(&self) -> u64 {
        self.sockets_opened.load(Ordering::SeqCst)
    }

    /// Every dial refused without opening a socket.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.refusals.lock().expect("refusals lock").clone()
    }

    fn refuse(&self, dst: IpAddr, why: &'static str) {
        debug!(%dst, why, "dial refused without sending");
        self.refusals.lock().expect("refusals lock").push(Refusal { dst, why });
    }

    /// Maps a destination to the loopback address that really serves it, or refuses.
    ///
    /// `127.0.0.1` from a pod means the pod itself (its own network namespace).
    pub fn route(&self, src: &Source, dst: IpAddr) -> Result<Ipv4Addr, NetError> {
        let v4 = match dst {
            IpAddr::V4(v4) => v4,
            IpAddr::V6(v6) if v6.is_loopback() => Ipv4Addr::LOCALHOST,
            IpAddr::V6(_) => {
                self.refuse(dst, "ipv6 outside loopback");
                return Err(NetError::Unreachable { dst });
            }
        };
        if addr::MODELLED_EXTERNAL_IPS.contains(&v4) {
            return Ok(self.block.outside());
        }
        if !addr::dialable(IpAddr::V4(v4)) {
            self.refuse(dst, "outside the simulated network");
            return Err(NetError::Unreachable { dst });
        }
        if v4 == Ipv4Addr::LOCALHOST
            && let (true, Some(own)) = (src.is_pod, src.ip)
        {
            return Ok(own);
        }
        if !self.block.contains(v4) && v4 != Ipv4Addr::LOCALHOST {
            self.refuse(dst, "another cluster's address block");
            return Err(NetError::NoRoute { dst });
        }
        Ok(v4)
    }

    /// Checks the fault switches for traffic from `src` to `dst`.
    fn check_faults(&self, src: &Source, dst: SocketAddrV4) -> Result<(), NetError> {
        let ip = *dst.ip();
        if Some(ip) != src.ip {
            let lost = self
                .lost_node_of(ip)
                .or_else(|| src.node.clone().filter(|n| src.is_pod && self.is_lost(n)));
            if let Some(node) = lost {
                return Err(NetError::Dropped {
                    dst: dst.into(),
                    why: format!("node {node} is lost (node-lost): nothing reaches it or its pods"),
                });
            }
        }
        if Some(ip) != src.ip
            && let Some(node) = self.dst_blackholed(ip)
        {
            return Err(NetError::Dropped {
                dst: dst.into(),
                why: format!("pod network of node {node} is blackholed"),
            });
        }
        if src.is_pod && ip == self.block.outside() && self.faults.is_on("external-unreachable") {
            return Err(NetError::Dropped {
                dst: dst.into(),
                why: "traffic from pods to the outside world is dropped (external-unreachable)".into(),
            });
        }
        if src.is_pod
            && let Some(node) = &src.node
            && Some(ip) != src.ip
        {
            if self.faults.is_blackholed(node) {
                return Err(NetError::Dropped {
                    dst: dst.into(),
                    why: format!("pod network of node {node} is blackholed"),
                });
            }
            if self.block.is_service_ip(ip) && ip != self.block.dns_service() && self.faults.is_kube_proxy_off(node) {
                return Err(NetError::Dropped {
                    dst: dst.into(),
                    why: format!("kube-proxy is off on node {node}"),
                });
            }
        }
        Ok(())
    }

    /// Routes `dst` for `src` and applies the fault switches, for forwarders (kube-proxy's UDP
    /// path) that open their own sockets: the loopback address to send to, or why the
    /// traffic is refused or dropped.
    pub fn admit(&self, src: &Source, dst: SocketAddr) -> Result<Ipv4Addr, NetError> {
        let ip = self.route(src, dst.ip())?;
        self.check_faults(src, SocketAddrV4::new(ip, dst.port()))?;
        Ok(ip)
    }

    /// Opens a TCP connection from `src` to `dst` (after routing), within [`DIAL_TIMEOUT`].
    pub async fn tcp(&self, src: &Source, dst: SocketAddr) -> Result<TcpStream, NetError> {
        let target = SocketAddrV4::new(self.route(src, dst.ip())?, dst.port());
        self.check_faults(src, target)?;
        assert!(
            addr::dialable(IpAddr::V4(*target.ip())),
            "routing let a non-loopback address through"
        );
        let socket = TcpSocket::new_v4().map_err(|source| NetError::Io {
            proto: "tcp",
            dst,
            source,
        })?;
        if let Some(ip) = src.ip {
            socket
                .bind(SocketAddr::new(IpAddr::V4(ip), 0))
                .map_err(|source| NetError::Io {
                    proto: "tcp",
                    dst,
                    source,
                })?;
        }
        self.sockets_opened.fetch_add(1, Ordering::SeqCst);
        match tokio::time::timeout(DIAL_TIMEOUT, socket.connect(target.into())).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(source)) => Err(NetError::Io {
                proto: "tcp",
                dst,
                source,
            }),
            Err(_) => Err(NetError::TimedOut { dst }),
        }
    }

    /// Sends one UDP datagram from `src` to `dst` and waits up to `wait` for one reply.
    pub async fn udp_request(
        &self,
        src: &Source,
        dst: SocketAddr,
        payload: &[u8],
        wait: Duration,
    ) -> Result<Vec<u8>, NetError> {
        let target = SocketAddrV4::new(self.route(src, dst.ip())?, dst.port());
        self.check_faults(src, target)?;
        assert!(
            addr::dialable(IpAddr::V4(*target.ip())),
            "routing let a non-loopback address through"
        );
        let bind = SocketAddr::new(IpAddr::V4(src.ip.unwrap_or(Ipv4Addr::LOCALHOST)), 0);
        let sock = UdpSocket::bind(bind).await.map_err(|source| NetError::Io {
            proto: "udp",
            dst,
            source,
        })?;
        self.sockets_opened.fetch_add(1, Ordering::SeqCst);
        sock.connect(SocketAddr::V4(target))
            .await
            .map_err(|source| NetError::Io {
                proto: "udp",
                dst,
                source,
            })?;
        sock.send(payload).await.map_err(|source| NetError::Io {
            proto: "udp",
            dst,
            source,
        })?;
        let mut buf = vec![0u8; 65535];
        match tokio::time::timeout(wait, sock.recv(&mut buf)).await {
            Ok(Ok(n)) => {
                buf.truncate(n);
                Ok(buf)
            }
            Ok(Err(source)) => Err(NetError::Io {
                proto: "udp",
                dst,
                source,
            }),
            Err(_) => Err(NetError::TimedOut { dst }),
        }
    }

    /// A modelled ICMP echo from `src` to `dst`; no packet is ever sent.
    ///
    /// Inside the cluster network an address answers when something lives there (a node, a
    /// running pod, the DNS, the outside host). Outside it, a modelled external address answers
    /// only if the source OS lets ICMP leave the cluster (`Os::icmp_leaves_cluster`: not
    /// Windows); any other outside address never answers.
    pub fn ping(&self, src: &Source, dst: IpAddr) -> PingOutcome {
        let outside = matches!(dst, IpAddr::V4(v4) if addr::MODELLED_EXTERNAL_IPS.contains(&v4))
            || matches!(dst, IpAddr::V4(v4) if v4 == self.block.outside());
        let Ok(target) = self.route(src, dst) else {
            return PingOutcome::NoReply;
        };
        if let (true, Some(node)) = (src.is_pod, &src.node)
            && self.faults.is_blackholed(node)
            && Some(target) != src.ip
        {
            return PingOutcome::NoReply;
        }
        if outside {
            let dropped = src.is_pod && self.faults.is_on("external-unreachable");
            return if src.os.icmp_leaves_cluster() && !dropped {
                PingOutcome::Reply
            } else {
                PingOutcome::NoReply
            };
        }
        if self.dst_blackholed(target).is_some() && Some(target) != src.ip {
            return PingOutcome::NoReply;
        }
        if Some(target) != src.ip
            && (self.lost_node_of(target).is_some()
                || (src.is_pod && src.node.as_deref().is_some_and(|n| self.is_lost(n))))
        {
            return PingOutcome::NoReply;
        }
        let live = self.live.read().expect("live lock");
        if live.contains(&target)
            || Some(target) == src.ip
            || target == self.block.dns_service()
            || target == self.block.node_resolver()
            || target == self.block.api_server()
        {
            PingOutcome::Reply
        } else {
            PingOutcome::NoReply
        }
    }
}

#[cfg(test)]
#[path = "net_tests.rs"]
mod tests;

/// The simulated network of one cluster, shared by its nodes: the dialer, where the cluster DNS
/// and the node resolver listen, and the fault switches.
#[derive(Clone, Debug)]
pub struct SimNet {
    inner: Arc<SimNetInner>,
}

#[derive(Debug)]
struct SimNetInner {
    block: AddressBlock,
    dialer: Dialer,
    cluster_dns: SocketAddr,
    node_resolver: SocketAddr,
    domain: Option<Arc<crate::node::ad::Domain>>,
}

impl SimNet {
    /// A network handle; the DNS addresses are where the servers really listen (port 53 unless
    /// binding it failed).
    pub fn new(block: AddressBlock, faults: Arc<Faults>, cluster_dns: SocketAddr, node_resolver: SocketAddr) -> Self {
        SimNet::with_domain(block, faults, cluster_dns, node_resolver, None)
    }

    /// [`SimNet::new`] for a cluster that runs a simulated Active Directory domain.
    pub fn with_domain(
        block: AddressBlock,
        faults: Arc<Faults>,
        cluster_dns: SocketAddr,
        node_resolver: SocketAddr,
        domain: Option<Arc<crate::node::ad::Domain>>,
    ) -> Self {
        SimNet {
            inner: Arc::new(SimNetInner {
                block,
                dialer: Dialer::new(block, faults),
                cluster_dns,
                node_resolver,
                domain,
            }),
        }
    }

    /// The simulated Active Directory domain, when the cluster runs one (`--gmsa-domain`).
    pub fn domain(&self) -> Option<&Arc<crate::node::ad::Domain>> {
        self.inner.domain.as_ref()
    }

    /// The cluster's address block.
    pub fn block(&self) -> AddressBlock {
        self.inner.block
    }

    /// The loopback-only dialer.
    pub fn dialer(&self) -> &Dialer {
        &self.inner.dialer
    }

    /// The fault switches.
    pub fn faults(&self) -> &Arc<Faults> {
        self.inner.dialer.faults()
    }

    /// Where the cluster DNS listens (the DNS Service IP, port 53 or the fallback port).
    pub fn cluster_dns(&self) -> SocketAddr {
        self.inner.cluster_dns
    }

    /// Where the node-level resolver listens.
    pub fn node_resolver(&self) -> SocketAddr {
        self.inner.node_resolver
    }
}

impl crate::node::dns::DnsPorts for SimNet {
    fn dns_socket(&self, ip: IpAddr) -> SocketAddr {
        if ip == self.inner.cluster_dns.ip() {
            self.inner.cluster_dns
        } else if ip == self.inner.node_resolver.ip() {
            self.inner.node_resolver
        } else {
            SocketAddr::new(ip, 53)
        }
    }

    fn query<'a>(
        &'a self,
        src: &'a Source,
        server: SocketAddr,
        payload: &'a [u8],
    ) -> futures::future::BoxFuture<'a, Result<Vec<u8>, NetError>> {
        Box::pin(
            self.inner
                .dialer
                .udp_request(src, server, payload, crate::node::dns::QUERY_TIMEOUT),
        )
    }
}
