//! The pod's stub resolver: each candidate name asked of each nameserver in turn, over real
//! DNS packets through the simulated network, and the CNAME chain of an answer (what
//! `nslookup` prints as the canonical name and aliases).
//!
//! A SERVFAIL (or REFUSED, NOTIMP) answer is handled as glibc's `res_send` and
//! `res_search` handle it: the query moves on to the next nameserver, for up to `attempts`
//! rounds (`options attempts`, default 2); a name that only ever got SERVFAIL is skipped and
//! the search goes on with the next candidate; when nothing resolves, the failure is
//! [`ResolveError::ServFail`] (glibc's `TRY_AGAIN`, "Temporary failure in name resolution")
//! unless some candidate existed without an address (`NO_DATA`). The Windows DNS client also
//! resends a failed query to its servers before giving up; the same rounds stand for it. A
//! round in which no server answered at all (a timeout) is not repeated: a stopped DNS costs
//! one timeout per server and name, as the `dns-stopped` cases expect.

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
    /// The nameservers answered SERVFAIL for every candidate name, every attempt.
    #[error("can't find {name}: Server failure (SERVFAIL)")]
    ServFail {
        /// The name asked for.
        name: String,
    },
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
/// the nameservers in order (for up to `attempts` rounds while they answer SERVFAIL), over real
/// DNS packets through the loopback-only dialer.
pub async fn resolve(dns: &PodDns, net: &dyn DnsPorts, src: &Source, name: &str) -> Result<Resolved, ResolveError> {
    if let Ok(ip) = name.parse::<Ipv4Addr>() {
        return Ok(Resolved {
            name: name.into(),
            aliases: vec![],
            addrs: vec![ip],
            server: dns.nameservers[0],
        });
    }
    let (mut any_answer, mut servfail, mut nodata) = (false, false, false);
    for cand in dns.candidates(name) {
        let Ok(qname) = Name::from_ascii(format!("{cand}.")) else {
            continue;
        };
        let mut msg = Message::query();
        msg.metadata.recursion_desired = true;
        msg.metadata.message_type = MessageType::Query;
        msg.queries.push(Query::query(qname, RecordType::A));
        let Ok(bytes) = msg.to_vec() else { continue };
        match ask(dns, net, src, &bytes).await {
            Answer::Settled(r, server) => {
                any_answer = true;
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
                        server,
                    });
                }
                // NXDOMAIN, or the name exists without an address: try the next name.
                nodata |= r.metadata.response_code == ResponseCode::NoError;
            }
            Answer::ServFail => {
                any_answer = true;
                servfail = true;
            }
            Answer::NoReply => {}
        }
    }
    if servfail && !nodata {
        Err(ResolveError::ServFail { name: name.into() })
    } else if any_answer {
        Err(ResolveError::NotFound { name: name.into() })
    } else {
        Err(ResolveError::NoServers)
    }
}

/// How the queries for one candidate name ended.
enum Answer {
    /// A server answered for good (NOERROR or NXDOMAIN).
    Settled(Message, IpAddr),
    /// Every answer, every round, was a server failure.
    ServFail,
    /// No server answered.
    NoReply,
}

/// Whether an answer tells the resolver to try another server (glibc `send_dg`).
fn server_failed(code: ResponseCode) -> bool {
    matches!(
        code,
        ResponseCode::ServFail | ResponseCode::Refused | ResponseCode::NotImp
    )
}

/// Asks the nameservers for one encoded query, in rounds (see the module documentation).
async fn ask(dns: &PodDns, net: &dyn DnsPorts, src: &Source, query: &[u8]) -> Answer {
    let mut failed = false;
    for _ in 0..dns.attempts() {
        let mut replied = false;
        for server in &dns.nameservers {
            let sock = net.dns_socket(*server);
            match net.query(src, sock, query).await {
                Ok(reply) => {
                    replied = true;
                    let Ok(r) = Message::from_vec(&reply) else { continue };
                    if server_failed(r.metadata.response_code) {
                        debug!(%server, code = %r.metadata.response_code, "nameserver failed; trying the next");
                        failed = true;
                        continue;
                    }
                    return Answer::Settled(r, *server);
                }
                Err(e) => debug!(%server, error = %e, "nameserver did not answer"),
            }
        }
        if !replied {
            break;
        }
    }
    if failed { Answer::ServFail } else { Answer::NoReply }
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
    use crate::addr::AddressBlock;
    use crate::node::dns::Lookup;
    use crate::node::dns::testutil::{ask, svc, zone};
    use crossconf_model::os::Os;
    use hickory_proto::rr::rdata::A;
    use std::sync::Mutex;

    /// A nameserver that answers each query with the next code of a script (the last repeats);
    /// NOERROR carries one A record.
    struct Scripted {
        codes: Vec<ResponseCode>,
        asked: Mutex<Vec<String>>,
    }

    impl DnsPorts for Scripted {
        fn dns_socket(&self, ip: IpAddr) -> SocketAddr {
            SocketAddr::new(ip, 53)
        }
        fn query<'a>(
            &'a self,
            _src: &'a Source,
            _server: SocketAddr,
            payload: &'a [u8],
        ) -> futures::future::BoxFuture<'a, Result<Vec<u8>, NetError>> {
            let req = Message::from_vec(payload).unwrap();
            let mut asked = self.asked.lock().unwrap();
            let code = self.codes[asked.len().min(self.codes.len() - 1)];
            asked.push(req.queries[0].name().to_ascii());
            let mut resp = Message::response(req.metadata.id, req.metadata.op_code);
            resp.metadata.response_code = code;
            if code == ResponseCode::NoError {
                resp.answers.push(Record::from_rdata(
                    req.queries[0].name().clone(),
                    5,
                    RData::A(A::new(127, 0, 0, 9)),
                ));
            }
            resp.queries = req.queries;
            Box::pin(futures::future::ready(Ok(resp.to_vec().unwrap())))
        }
    }

    async fn run(codes: &[ResponseCode], name: &str) -> (Result<Resolved, ResolveError>, Vec<String>) {
        let net = Scripted {
            codes: codes.to_vec(),
            asked: Mutex::new(vec![]),
        };
        let pod = serde_json::from_value(serde_json::json!({"metadata": {"namespace": "ns1"}, "spec": {}})).unwrap();
        let dns = PodDns::for_pod(&pod, Os::Linux, AddressBlock(213)).unwrap();
        let r = resolve(&dns, &net, &Source::host(), name).await;
        (r, net.asked.into_inner().unwrap())
    }

    #[tokio::test]
    async fn servfail_is_retried_then_reported() {
        use ResponseCode::{NXDomain, NoError, ServFail};
        // One SERVFAIL, then the answer: the retry (next round) resolves it.
        let (r, asked) = run(&[ServFail, NoError], "svc").await;
        assert_eq!(r.unwrap().addrs, [Ipv4Addr::new(127, 0, 0, 9)]);
        assert_eq!(asked.len(), 2);
        // Always SERVFAIL: every candidate gets `attempts` (2) tries, then SERVFAIL is the error.
        let (r, asked) = run(&[ServFail], "svc").await;
        assert_eq!(r, Err(ResolveError::ServFail { name: "svc".into() }));
        assert_eq!(asked.len(), 8, "4 candidates x 2 attempts: {asked:?}");
        assert_eq!(r.unwrap_err().to_string(), "can't find svc: Server failure (SERVFAIL)");
        // A SERVFAIL on the first name and NXDOMAIN on the rest still reads as TRY_AGAIN.
        let (r, _) = run(&[ServFail, ServFail, NXDomain], "svc").await;
        assert!(matches!(r, Err(ResolveError::ServFail { .. })), "{r:?}");
        let (r, asked) = run(&[NXDomain], "svc").await;
        assert!(matches!(r, Err(ResolveError::NotFound { .. })), "{r:?}");
        assert_eq!(asked.len(), 4, "NXDOMAIN is not retried");
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
}
