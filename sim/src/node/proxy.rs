//! kube-proxy: real TCP and UDP listeners on every Service's `ClusterIP:port` and on every
//! node's `InternalIP:nodePort`, forwarding to ready endpoints from EndpointSlices.
//!
//! Like kube-proxy in iptables mode, a Service without ready endpoints rejects connections
//! (reset), ClusterIP traffic keeps the client's source address and NodePort traffic is
//! masqueraded to the node address (externalTrafficPolicy Cluster). The cluster DNS Service IP
//! is served by the DNS itself, so it is skipped here. The `kube-proxy-off` fault makes a
//! node's NodePorts refuse.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::Store;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::node::net::{NetError, SimNet, Source};

/// A listener key: address, port, protocol.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    ip: Ipv4Addr,
    port: u16,
    udp: bool,
}

/// What a listener forwards to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    namespace: String,
    service: String,
    port_name: Option<String>,
    target_port: Option<u16>,
    /// The node whose NodePort this is (None for ClusterIPs).
    node: Option<String>,
    /// `sessionAffinity: ClientIP` and its idle timeout.
    affinity: Option<Duration>,
}

/// kube-proxy's default `sessionAffinityConfig.clientIP.timeoutSeconds` (3 hours).
const DEFAULT_AFFINITY_TIMEOUT: Duration = Duration::from_secs(10800);

/// A Service port (namespace, name, port name) and a client address.
type AffinityKey = (String, String, Option<String>, IpAddr);

/// Which endpoint each client address of a Service port was sent to, and when last.
#[derive(Debug, Default)]
struct Affinity {
    table: Mutex<HashMap<AffinityKey, (SocketAddr, Instant)>>,
}

/// How a listener picks an endpoint: at random, as kube-proxy's iptables and Windows' HNS
/// load balancers do (a shared round-robin counter would let interleaved clients always land on
/// the same backend), honouring session affinity.
#[derive(Debug, Default)]
struct Balancer {
    affinity: Affinity,
}

impl Balancer {
    /// The endpoint for a connection of `client` to `t`: the one `client` is pinned to while
    /// it is still an endpoint and the affinity has not timed out, else the next in turn.
    fn pick(&self, net: &SimNet, t: &Target, eps: &[SocketAddr], client: IpAddr) -> Option<SocketAddr> {
        if eps.is_empty() {
            return None;
        }
        let timeout = t.affinity.filter(|_| !net.faults().is_on("session-affinity-ignored"));
        let Some(timeout) = timeout else {
            return Some(eps[rand::random_range(0..eps.len())]);
        };
        let key = (t.namespace.clone(), t.service.clone(), t.port_name.clone(), client);
        let now = Instant::now();
        let mut table = self.affinity.table.lock().expect("affinity lock");
        if let Some((ep, last)) = table.get(&key).copied()
            && now.duration_since(last) <= timeout
            && eps.contains(&ep)
        {
            table.insert(key, (ep, now));
            return Some(ep);
        }
        let ep = eps[rand::random_range(0..eps.len())];
        table.insert(key, (ep, now));
        Some(ep)
    }
}

/// The stores kube-proxy reads.
#[derive(Clone)]
pub struct ProxyStores {
    /// Services.
    pub services: Store<Service>,
    /// EndpointSlices.
    pub slices: Store<EndpointSlice>,
    /// Nodes.
    pub nodes: Store<Node>,
}

struct Listener {
    target: Arc<Mutex<Target>>,
    stop: CancellationToken,
}

/// Runs kube-proxy until `cancel`; `changed` is notified on every store change.
pub async fn run(net: SimNet, stores: ProxyStores, changed: Arc<Notify>, cancel: CancellationToken) {
    let mut active: HashMap<Key, Listener> = HashMap::new();
    let rr = Arc::new(Balancer::default());
    loop {
        let desired = desired(&net, &stores);
        active.retain(|k, l| {
            let keep = desired.contains_key(k);
            if !keep {
                l.stop.cancel();
            }
            keep
        });
        for (k, t) in desired {
            if let Some(l) = active.get(&k) {
                *l.target.lock().expect("target lock") = t;
                continue;
            }
            let target = Arc::new(Mutex::new(t));
            let stop = cancel.child_token();
            let ok = if k.udp {
                serve_udp(&net, &stores, &k, target.clone(), rr.clone(), stop.clone()).await
            } else {
                serve_tcp(&net, &stores, &k, target.clone(), rr.clone(), stop.clone()).await
            };
            if ok {
                active.insert(k, Listener { target, stop });
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = changed.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

fn desired(net: &SimNet, stores: &ProxyStores) -> HashMap<Key, Target> {
    let block = net.block();
    let node_ips: Vec<(Ipv4Addr, String)> = stores
        .nodes
        .state()
        .iter()
        .filter_map(|n| {
            let ip = n
                .status
                .as_ref()?
                .addresses
                .as_ref()?
                .iter()
                .find(|a| a.type_ == "InternalIP")?
                .address
                .parse::<Ipv4Addr>()
                .ok()?;
            block
                .contains(ip)
                .then(|| (ip, n.metadata.name.clone().unwrap_or_default()))
        })
        .collect();
    let mut out = HashMap::new();
    for s in stores.services.state() {
        let Some(spec) = &s.spec else { continue };
        let ns = s.metadata.namespace.clone().unwrap_or_default();
        let name = s.metadata.name.clone().unwrap_or_default();
        if spec.type_.as_deref() == Some("ExternalName") {
            continue;
        }
        let cluster_ip = spec
            .cluster_ip
            .as_deref()
            .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
            .filter(|ip| block.contains(*ip));
        for p in spec.ports.iter().flatten() {
            let udp = p.protocol.as_deref() == Some("UDP");
            if p.protocol.as_deref() == Some("SCTP") {
                continue;
            }
            let target = Target {
                namespace: ns.clone(),
                service: name.clone(),
                port_name: p.name.clone(),
                target_port: match &p.target_port {
                    Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) => u16::try_from(*n).ok(),
                    _ => None,
                },
                node: None,
                affinity: (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
                    spec.session_affinity_config
                        .as_ref()
                        .and_then(|c| c.client_ip.as_ref())
                        .and_then(|c| c.timeout_seconds)
                        .and_then(|t| u64::try_from(t).ok())
                        .map_or(DEFAULT_AFFINITY_TIMEOUT, Duration::from_secs)
                }),
            };
            let Ok(port) = u16::try_from(p.port) else { continue };
            if let Some(ip) = cluster_ip
                && ip != block.dns_service()
            {
                out.insert(Key { ip, port, udp }, target.clone());
            }
            if matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"))
                && let Some(np) = p.node_port.and_then(|n| u16::try_from(n).ok())
            {
                for (ip, node) in &node_ips {
                    out.insert(
                        Key { ip: *ip, port: np, udp },
                        Target {
                            node: Some(node.clone()),
                            ..target.clone()
                        },
                    );
                }
            }
        }
    }
    out
}

/// Resets a connection at once, as an iptables REJECT does.
#[expect(
    deprecated,
    reason = "a zero linger sends a reset immediately and never blocks on drop"
)]
fn reject(conn: &tokio::net::TcpStream) {
    let _ = conn.set_linger(Some(Duration::ZERO));
}

/// The ready endpoints of a target, as (ip, port).
fn endpoints(stores: &ProxyStores, t: &Target) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for slice in stores.slices.state() {
        if slice.metadata.namespace.as_deref() != Some(t.namespace.as_str())
            || slice
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/service-name"))
                != Some(&t.service)
        {
            continue;
        }
        let ports = slice.ports.clone().unwrap_or_default();
        let port = ports
            .iter()
            .find(|p| p.name == t.port_name || (ports.len() == 1 && t.port_name.is_none()))
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
            .or(t.target_port);
        let Some(port) = port else { continue };
        for ep in &slice.endpoints {
            if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            for a in &ep.addresses {
                if let Ok(ip) = a.parse::<IpAddr>() {
                    out.push(SocketAddr::new(ip, port));
                }
            }
        }
    }
    out
}

/// The source a forwarded connection uses: the client for ClusterIPs, the node for NodePorts.
fn forward_source(client: SocketAddr, listen_ip: Ipv4Addr, t: &Target) -> Source {
    let ip = match (t.node.is_some(), client.ip()) {
        (true, _) => listen_ip,
        (false, IpAddr::V4(c)) => c,
        (false, IpAddr::V6(_)) => listen_ip,
    };
    Source {
        ip: Some(ip),
        node: t.node.clone(),
        os: crossconf_model::os::Os::Linux,
        is_pod: false,
    }
}

async fn serve_tcp(
    net: &SimNet,
    stores: &ProxyStores,
    k: &Key,
    target: Arc<Mutex<Target>>,
    rr: Arc<Balancer>,
    stop: CancellationToken,
) -> bool {
    let listener = match TcpListener::bind((k.ip, k.port)).await {
        Ok(l) => l,
        Err(e) => {
            warn!(ip = %k.ip, port = k.port, error = %e, "kube-proxy cannot bind service port");
            return false;
        }
    };
    debug!(ip = %k.ip, port = k.port, "kube-proxy tcp listener");
    let (net, stores, listen_ip) = (net.clone(), stores.clone(), k.ip);
    tokio::spawn(async move {
        loop {
            let (mut conn, client) = tokio::select! {
                _ = stop.cancelled() => return,
                r = listener.accept() => match r { Ok(x) => x, Err(_) => continue },
            };
            let t = target.lock().expect("target lock").clone();
            if let Some(node) = &t.node
                && net.faults().is_kube_proxy_off(node)
            {
                reject(&conn);
                drop(conn);
                continue;
            }
            let Some(ep) = rr.pick(&net, &t, &endpoints(&stores, &t), client.ip()) else {
                // iptables mode: REJECT for a Service without endpoints.
                reject(&conn);
                drop(conn);
                continue;
            };
            let net = net.clone();
            tokio::spawn(async move {
                let src = forward_source(client, listen_ip, &t);
                let mut up = match net.dialer().tcp(&src, ep).await {
                    Ok(s) => s,
                    Err(e @ (NetError::Dropped { .. } | NetError::TimedOut { .. })) => {
                        // The DNATed SYN is lost: the client sees no answer, not a reset.
                        debug!(%ep, error = %e, "kube-proxy upstream dial dropped");
                        hold_silent(conn).await;
                        return;
                    }
                    Err(e) => {
                        debug!(%ep, error = %e, "kube-proxy upstream dial failed");
                        reject(&conn);
                        return;
                    }
                };
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
            });
        }
    });
    true
}

/// Keeps a client connection open without answering until the client gives up (or a minute
/// passes), as a connection whose packets are dropped beyond the proxy looks to the client.
async fn hold_silent(mut conn: tokio::net::TcpStream) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(n) = conn.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

async fn serve_udp(
    net: &SimNet,
    stores: &ProxyStores,
    k: &Key,
    target: Arc<Mutex<Target>>,
    rr: Arc<Balancer>,
    stop: CancellationToken,
) -> bool {
    let sock = match UdpSocket::bind((k.ip, k.port)).await {
        Ok(s) => Arc::new(s),
        Err(e) => {
            warn!(ip = %k.ip, port = k.port, error = %e, "kube-proxy cannot bind service udp port");
            return false;
        }
    };
    let (net, stores, listen_ip) = (net.clone(), stores.clone(), k.ip);
    tokio::spawn(async move {
        let sessions: Arc<Mutex<HashMap<SocketAddr, Arc<UdpSocket>>>> = Arc::new(Mutex::new(HashMap::new()));
        let mut buf = vec![0u8; 65535];
        loop {
            let (n, client) = tokio::select! {
                _ = stop.cancelled() => return,
                r = sock.recv_from(&mut buf) => match r { Ok(x) => x, Err(_) => continue },
            };
            let t = target.lock().expect("target lock").clone();
            if let Some(node) = &t.node
                && net.faults().is_kube_proxy_off(node)
            {
                continue;
            }
            let existing = sessions.lock().expect("sessions lock").get(&client).cloned();
            let up = match existing {
                Some(u) => u,
                None => {
                    let Some(ep) = rr.pick(&net, &t, &endpoints(&stores, &t), client.ip()) else {
                        continue;
                    };
                    let src = forward_source(client, listen_ip, &t);
                    // A dropped path (a blackholed endpoint) loses the datagram.
                    let Ok(target_ip) = net.dialer().admit(&src, ep) else {
                        continue;
                    };
                    let bind = SocketAddr::new(IpAddr::V4(src.ip.unwrap_or(listen_ip)), 0);
                    let Ok(u) = UdpSocket::bind(bind).await else { continue };
                    if u.connect(SocketAddr::new(IpAddr::V4(target_ip), ep.port()))
                        .await
                        .is_err()
                    {
                        continue;
                    }
                    let u = Arc::new(u);
                    sessions.lock().expect("sessions lock").insert(client, u.clone());
                    let (u2, back, sessions2, stop2) = (u.clone(), sock.clone(), sessions.clone(), stop.clone());
                    tokio::spawn(async move {
                        let mut b = vec![0u8; 65535];
                        loop {
                            let r = tokio::select! {
                                _ = stop2.cancelled() => break,
                                r = tokio::time::timeout(Duration::from_secs(30), u2.recv(&mut b)) => r,
                            };
                            match r {
                                Ok(Ok(n)) => {
                                    let _ = back.send_to(&b[..n], client).await;
                                }
                                _ => break,
                            }
                        }
                        sessions2.lock().expect("sessions lock").remove(&client);
                    });
                    u
                }
            };
            let _ = up.send(&buf[..n]).await;
        }
    });
    true
}

/// Logs the proxy start (kept separate so the network module stays declarative).
pub fn announce(net: &SimNet) {
    info!(block = net.block().0, "kube-proxy started");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::faults::Faults;

    fn net(faults: &str) -> SimNet {
        let any: SocketAddr = "127.0.0.1:53".parse().unwrap();
        SimNet::new(AddressBlock(205), Arc::new(Faults::parse(faults).unwrap()), any, any)
    }

    fn target(affinity: Option<Duration>) -> Target {
        Target {
            namespace: "ns".into(),
            service: "svc".into(),
            port_name: Some("http".into()),
            target_port: None,
            node: None,
            affinity,
        }
    }

    #[test]
    fn client_ip_affinity_pins_a_client_to_one_endpoint() {
        let eps: Vec<SocketAddr> = vec![
            "127.205.16.2:8080".parse().unwrap(),
            "127.205.16.3:8080".parse().unwrap(),
        ];
        let (a, b): (IpAddr, IpAddr) = ("127.205.16.9".parse().unwrap(), "127.205.16.10".parse().unwrap());
        let net = net("");
        let balancer = Balancer::default();
        let pinned = target(Some(DEFAULT_AFFINITY_TIMEOUT));
        let first = balancer.pick(&net, &pinned, &eps, a).unwrap();
        assert!((0..10).all(|_| balancer.pick(&net, &pinned, &eps, a) == Some(first)));
        // Another client is balanced on its own; without affinity every endpoint is used.
        assert!(balancer.pick(&net, &pinned, &eps, b).is_some());
        let spread: std::collections::HashSet<_> = (0..64)
            .filter_map(|_| balancer.pick(&net, &target(None), &eps, a))
            .collect();
        assert_eq!(spread.len(), 2);
        // A pinned endpoint that left the Service is replaced.
        let other = eps.iter().copied().find(|e| *e != first).unwrap();
        assert_eq!(balancer.pick(&net, &pinned, &[other], a), Some(other));
    }

    #[test]
    fn affinity_expires_and_can_be_ignored() {
        let eps: Vec<SocketAddr> = vec![
            "127.205.16.2:8080".parse().unwrap(),
            "127.205.16.3:8080".parse().unwrap(),
        ];
        let a: IpAddr = "127.205.16.9".parse().unwrap();
        let balancer = Balancer::default();
        let short = target(Some(Duration::ZERO));
        let seen: std::collections::HashSet<_> = (0..64)
            .filter_map(|_| {
                std::thread::sleep(Duration::from_millis(2));
                balancer.pick(&net(""), &short, &eps, a)
            })
            .collect();
        assert_eq!(seen.len(), 2, "an expired affinity balances again");
        let ignored = net("session-affinity-ignored");
        let pinned = target(Some(DEFAULT_AFFINITY_TIMEOUT));
        let seen: std::collections::HashSet<_> = (0..64)
            .filter_map(|_| balancer.pick(&ignored, &pinned, &eps, a))
            .collect();
        assert_eq!(seen.len(), 2);
    }
}
