//! A client for agnhost `netexec`, the server most network cases drive.
//!
//! netexec serves HTTP (`--http-port`, 8080) and UDP (`--udp-port`, 8081). Its `/dial` endpoint
//! makes *the pod* dial another address and report what answered, which is how upstream checks
//! pod-to-pod paths without a route from the test runner to the pod network. We reach a pod's
//! netexec through the API server's pod proxy.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;

use super::pods::{ContainerBuilder, PodBuilder};
use super::{CaseError, Framework};
use crate::os::Os;

/// netexec's default HTTP port (upstream `EndpointHTTPPort`).
pub const HTTP_PORT: u16 = 8080;
/// netexec's default UDP port (upstream `EndpointUDPPort`).
pub const UDP_PORT: u16 = 8081;
/// Upstream `maxTries` for granular checks before a connection counts as failed.
pub const MAX_DIAL_TRIES: u32 = 39;
/// The pause after a failed dial try (upstream's hitEndpointRetryDelay is 2 s).
const DIAL_RETRY_DELAY: Duration = Duration::from_secs(1);
/// How long failed dial tries are paced (see [`Framework::dial_expect`]). Upstream paces all
/// 39 tries 2 s apart (about 80 s); 40 s covers a data path whose kube-proxy or DNS informer
/// was backing off (client-go's reflector: 0.8 s doubling to 30 s) through an API outage when
/// the case changed the Service, which the fault matrix met at 15 s.
const DIAL_SETTLE: Duration = Duration::from_secs(40);
/// The case time [`Framework::dial_expect`] keeps for reporting instead of trying again.
const DIAL_RESERVE: std::time::Duration = std::time::Duration::from_secs(20);
/// The logical image name of agnhost in the catalogue.
pub const AGNHOST: &str = "agnhost";

/// Where a `/dial` goes: from which pod, by which protocol, to which address.
struct Target<'a> {
    from: &'a str,
    protocol: Protocol,
    host: &'a str,
    port: u16,
}

/// The protocol `/dial` uses to reach its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP GET `/<request>` on the target.
    Http,
    /// A UDP datagram `<request>` to the target.
    Udp,
}

impl Protocol {
    /// The value of `/dial?protocol=`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Udp => "udp",
        }
    }

    /// The netexec port serving this protocol.
    pub fn port(self) -> u16 {
        match self {
            Protocol::Http => HTTP_PORT,
            Protocol::Udp => UDP_PORT,
        }
    }
}

/// The JSON `/dial` answers with.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct DialResponse {
    /// What the target answered, one entry per successful try.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub responses: Vec<String>,
    /// Errors of failed tries.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub errors: Vec<String>,
}

/// agnhost is written in Go, whose JSON encoder writes an empty slice as `null`.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

impl DialResponse {
    /// The distinct answers.
    pub fn distinct(&self) -> BTreeSet<String> {
        self.responses.iter().map(|s| s.trim().to_string()).collect()
    }
}

/// The shell script that sends one ICMP echo to `host` and exits 0 only on a reply: Windows
/// `ping -n 1 -w 2000`, busybox `ping -c 1 -W 2`.
///
/// This belongs in the OS profile (`Os::ping_once`); it lives here until the profile grows
/// that method, so case bodies stay free of OS branches.
pub fn ping_once_script(os: Os, host: &str) -> String {
    match os {
        Os::Linux => format!("ping -c 1 -W 2 {host}"),
        Os::Windows => format!("ping -n 1 -w 2000 {host}"),
    }
}

/// A netexec pod builder: `agnhost netexec --http-port=8080 --udp-port=8081` on `os`.
pub fn netexec_pod(name: &str, os: Os) -> PodBuilder {
    PodBuilder::new(name, os).label("app", "netexec").container(
        ContainerBuilder::new("webserver", AGNHOST)
            .args([
                "netexec".to_string(),
                format!("--http-port={HTTP_PORT}"),
                format!("--udp-port={UDP_PORT}"),
            ])
            .port(i32::from(HTTP_PORT), "TCP")
            .port(i32::from(UDP_PORT), "UDP"),
    )
}

impl Framework {
    /// From netexec pod `from`, dials `host:port` over `protocol` asking `request` (e.g.
    /// `hostname`), `tries` times, and returns what answered.
    ///
    /// # Errors
    /// When the proxy request fails, netexec refuses the request (400), or the answer is not
    /// `/dial`'s JSON. A dial whose tries all failed is not an error here: its `errors` say why,
    /// and the caller asserts.
    pub async fn dial(
        &self,
        from: &str,
        protocol: Protocol,
        host: &str,
        port: u16,
        request: &str,
        tries: u32,
    ) -> Result<DialResponse, CaseError> {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("request", request)
            .append_pair("protocol", protocol.as_str())
            .append_pair("host", host)
            .append_pair("port", &port.to_string())
            .append_pair("tries", &tries.to_string())
            .finish();
        let answer = self.pod_proxy_answer(from, HTTP_PORT, &format!("dial?{query}")).await?;
        // netexec answers 200 when the last try succeeded and 417 when it failed, with the
        // same JSON either way; 400 means it could not even start (bad input, or a UDP
        // target name that does not resolve). Anything else comes from the API server's proxy.
        if !matches!(answer.status, 200 | 417) {
            return Err(CaseError::failed(format!(
                "/dial from pod {from} to {} {host}:{port}: HTTP {}: {}",
                protocol.as_str(),
                answer.status,
                answer.message()
            )));
        }
        serde_json::from_str(&answer.body).map_err(|e| {
            CaseError::failed(format!(
                "/dial from {from} to {host}:{port} answered {:?}, not its JSON: {e}",
                answer.body
            ))
        })
    }

    /// Dials until the set of answers equals `expected` or `max_tries` dials were made, like
    /// upstream `DialFromContainer` with its retry loop; returns the answers seen.
    ///
    /// # Errors
    /// A failure naming the target, what was expected and what answered.
    pub async fn dial_expect(
        &self,
        from: &str,
        protocol: Protocol,
        host: &str,
        port: u16,
        expected: &BTreeSet<String>,
        max_tries: u32,
    ) -> Result<BTreeSet<String>, CaseError> {
        if expected.is_empty() {
            // An empty expectation would be met by a dead path: nothing answering.
            return Err(CaseError::failed(format!(
                "dial {} {host}:{port} from pod {from}: no backends to expect answers from",
                protocol.as_str()
            )));
        }
        let target = Target {
            from,
            protocol,
            host,
            port,
        };
        let (seen, last_error) = self
            .dial_until(&target, max_tries, |seen| seen == expected || !seen.is_subset(expected))
            .await;
        if &seen == expected {
            return Ok(seen);
        }
        Err(CaseError::failed(format!(
            "dial {} {host}:{port} from pod {from}: expected answers {expected:?}, got {seen:?} (last error: {last_error})",
            protocol.as_str()
        )))
    }

    /// Dials until one of `backends` answers, like the polling in front of upstream's
    /// `checkAffinity`: a data path still settling (kube-proxy catching up with new endpoints
    /// after an API outage) is given [`MAX_DIAL_TRIES`] paced tries before the check proper.
    /// Returns the backend that answered.
    ///
    /// # Errors
    /// When no backend answered, or one outside `backends` did.
    pub async fn dial_until_answered(
        &self,
        from: &str,
        protocol: Protocol,
        host: &str,
        port: u16,
        backends: &BTreeSet<String>,
    ) -> Result<String, CaseError> {
        let target = Target {
            from,
            protocol,
            host,
            port,
        };
        let (seen, last_error) = self.dial_until(&target, MAX_DIAL_TRIES, |seen| !seen.is_empty()).await;
        match seen.iter().next() {
            Some(first) if seen.is_subset(backends) => Ok(first.clone()),
            _ => Err(CaseError::failed(format!(
                "dial {} {host}:{port} from pod {from}: expected an answer from one of {backends:?}, got {seen:?} (last error: {last_error})",
                protocol.as_str()
            ))),
        }
    }

    /// The retry loop behind [`Self::dial_expect`] and [`Self::dial_until_answered`]: one
    /// `/dial` try at a time until `done` holds for the answers so far or `max_tries` were made; returns
    /// the answers seen and the last error.
    async fn dial_until(
        &self,
        t: &Target<'_>,
        max_tries: u32,
        done: impl Fn(&BTreeSet<String>) -> bool,
    ) -> (BTreeSet<String>, String) {
        let mut seen = BTreeSet::new();
        let mut errors = Vec::new();
        // After a failed try, wait before the next, as upstream's hitEndpointRetryDelay does: a
        // data path that is still settling (kube-proxy or DNS catching up with a change, a node
        // briefly NotReady) gets seconds, not back-to-back refusals. Only for the first
        // [`DIAL_SETTLE`]: a path still broken after that is broken, and the remaining tries go
        // at once, as before.
        let mut pace = tokio::time::interval(DIAL_RETRY_DELAY);
        pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        pace.tick().await;
        let settle_until = tokio::time::Instant::now() + DIAL_SETTLE;
        for _ in 0..max_tries.max(1) {
            // A try can take seconds on a broken cluster (a DNS that never answers); stop early
            // enough that the caller's failure, not the case timeout, is what gets reported.
            if !errors.is_empty() && self.remaining() < DIAL_RESERVE {
                break;
            }
            // Like upstream, a failed request counts as a try, not a hard failure: a name the
            // DNS does not serve yet is answered 400 until it does.
            let answer = match self.dial(t.from, t.protocol, t.host, t.port, "hostname", 1).await {
                Ok(a) => a,
                Err(e) => {
                    errors.push(e.to_string());
                    if tokio::time::Instant::now() < settle_until {
                        pace.tick().await;
                    }
                    continue;
                }
            };
            let failed = !answer.errors.is_empty();
            seen.extend(answer.distinct());
            errors.extend(answer.errors);
            if done(&seen) {
                break;
            }
            if failed && tokio::time::Instant::now() < settle_until {
                pace.tick().await;
            }
        }
        (seen, errors.last().cloned().unwrap_or_else(|| "none".into()))
    }

    /// Asks netexec pod `pod` for `/hostname` through the API server's pod proxy.
    ///
    /// # Errors
    /// When the proxy request fails.
    pub async fn netexec_hostname(&self, pod: &str) -> Result<String, CaseError> {
        Ok(self.pod_proxy_get(pod, HTTP_PORT, "hostname").await?.trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dial_response_parses_upstream_json() {
        let r: DialResponse = serde_json::from_str(r#"{"responses":["pod-a","pod-a"],"errors":null}"#).unwrap();
        assert_eq!(r.distinct().into_iter().collect::<Vec<_>>(), ["pod-a"]);
        let e: DialResponse = serde_json::from_str(r#"{"errors":["timeout"]}"#).unwrap();
        assert!(e.responses.is_empty());
        assert_eq!(e.errors, ["timeout"]);
    }
}
