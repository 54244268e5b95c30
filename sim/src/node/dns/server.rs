//! The DNS server: one encoded request answered from a [`Zone`], and the UDP and TCP
//! listeners on a DNS Service IP (port 53, or an ephemeral port when 53 cannot be bound) that
//! stop answering while a fault says DNS is down.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use hickory_proto::op::{Message, OpCode, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{Lookup, Zone};
use crate::node::net::Faults;

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

/// The SERVFAIL answer to one encoded request, as CoreDNS gives it when it cannot answer (an
/// upstream or plugin failure): the question echoed, RCODE 2, no records. `None` for
/// undecodable input.
pub fn servfail(request: &[u8]) -> Option<Vec<u8>> {
    let req = Message::from_vec(request).ok()?;
    let mut resp = Message::response(req.metadata.id, req.metadata.op_code);
    resp.metadata.recursion_desired = req.metadata.recursion_desired;
    resp.metadata.recursion_available = true;
    resp.metadata.response_code = ResponseCode::ServFail;
    resp.queries = req.queries;
    resp.to_vec().ok()
}

/// Whether the `dns-servfail=PERCENT` switch picks this query (the largest share when several
/// values are on).
fn draws_servfail(faults: &Faults) -> bool {
    let share = faults
        .values("dns-servfail")
        .iter()
        .filter_map(|v| crate::faults::values::parse_percent(v))
        .fold(0.0, f64::max);
    share > 0.0 && rand::random::<f64>() < share
}

/// The answer of the cluster DNS to one request: SERVFAIL when the switch draws it, else the
/// zone's answer.
fn answer(zone: &dyn Zone, faults: &Faults, cluster: bool, request: &[u8]) -> Option<Vec<u8>> {
    if cluster && draws_servfail(faults) {
        return servfail(request);
    }
    respond(zone, request)
}

/// A running DNS server: where it listens.
#[derive(Debug, Clone, Copy)]
pub struct DnsEndpoint {
    /// The address (port 53 unless binding 53 failed).
    pub addr: SocketAddr,
}

/// Binds a DNS server for `zone` on `ip`, port 53 (or an ephemeral port if 53 cannot be bound),
/// over UDP and TCP, until `cancel`. `stoppable` marks the cluster DNS: its queries are ignored
/// (time out) while `faults` says DNS is stopped, and the `dns-servfail` share of them is
/// answered SERVFAIL.
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
                if let Some(out) = answer(zone.as_ref(), &faults, stoppable, &buf[..n])
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
            let (zone, faults) = (zone.clone(), faults.clone());
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
                    let Some(out) = answer(zone.as_ref(), &faults, stoppable, &msg) else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::dns::testutil::{svc, zone};
    use hickory_proto::op::Query;
    use hickory_proto::rr::{Name, RecordType};

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

    #[test]
    fn servfail_share_of_the_cluster_dns() {
        let z = zone(vec![svc("default", "kubernetes", "127.210.96.1")], vec![], vec![]);
        let mut q = Message::query();
        q.queries.push(Query::query(
            Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
            RecordType::A,
        ));
        let q = q.to_vec().unwrap();
        let code = |faults: &Faults, cluster: bool| {
            let out = answer(&z, faults, cluster, &q).unwrap();
            let r = Message::from_vec(&out).unwrap();
            assert_eq!(r.queries.len(), 1, "the question is echoed");
            r.metadata.response_code
        };
        let all = Faults::parse("dns-servfail=100%").unwrap();
        assert_eq!(code(&all, true), ResponseCode::ServFail);
        assert_eq!(
            code(&all, false),
            ResponseCode::NoError,
            "the node resolver is not the cluster DNS"
        );
        let none = Faults::parse("dns-servfail=0%").unwrap();
        assert_eq!(code(&none, true), ResponseCode::NoError);
        let half = Faults::parse("dns-servfail=50").unwrap();
        let failed = (0..400).filter(|_| code(&half, true) == ResponseCode::ServFail).count();
        assert!((120..280).contains(&failed), "{failed} of 400");
    }
}
