//! The pod's stub resolver: each candidate name asked of each nameserver in turn, over real
//! DNS packets through the simulated network, and the CNAME chain of an answer (what
//! `nslookup` prints as the canonical name and aliases).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tracing::debug;

use super::{PodDns, normalise};
use crate::node::net::{NetError, Source};

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
    use crate::node::dns::Lookup;
    use crate::node::dns::testutil::{ask, svc, zone};

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
}
