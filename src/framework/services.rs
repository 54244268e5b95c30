//! Services, endpoints, DNS lookups from pods and reachability checks.
//!
//! The main types are [`ServiceBuilder`] (ClusterIP, headless, NodePort and ExternalName
//! Services in the case namespace), [`ReadyEndpoint`] (what [`Framework::wait_ready_endpoints`]
//! returns after watching the Service's EndpointSlices), [`Lookup`] (an `nslookup` run inside a
//! pod). Parsing is pure and unit-tested; the `Framework` methods only add the I/O. The
//! kubelet's `/stats/summary` is in [`super::stats`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;

use super::netexec::{HTTP_PORT, Protocol, UDP_PORT};
use super::{CaseError, Framework, RUN_ID_LABEL};
use crate::os::Os;

/// The Service port cases use for netexec's HTTP server (forwarded to 8080).
pub const SERVICE_HTTP_PORT: i32 = 80;
/// The Service port cases use for netexec's UDP server (forwarded to 8081).
pub const SERVICE_UDP_PORT: i32 = 90;
/// The label every EndpointSlice carries with the name of its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The cluster domain upstream e2e assumes (`framework.TestContext.ClusterDNSDomain`).
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// How long an upstream "stable networking" check first waits for a path to work
/// (upstream `hybrid_network.go` `warmUpDuration`).
pub const WARM_UP: Duration = Duration::from_secs(30);
/// How long a path must then keep working (upstream `hybrid_network.go` `duration`).
pub const HOLD: Duration = Duration::from_secs(10);

/// The window of a "works within `warm_up`, then keeps working for `hold`" check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stability {
    /// How long the path may take to work the first time.
    pub warm_up: Duration,
    /// How long it must then work on every request.
    pub hold: Duration,
}

/// Upstream `assertConsistentConnectivity`: within 30 s, then consistently for 10 s.
pub const UPSTREAM_STABILITY: Stability = Stability {
    warm_up: WARM_UP,
    hold: HOLD,
};
/// The pause between repeated requests of a retry or "consistently" loop (upstream
/// `pollInterval`). This paces real requests; it never stands in for waiting on state.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The kind of Service to build.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ServiceKind {
    ClusterIp,
    Headless,
    NodePort,
    ExternalName(String),
}

/// Builds a Service in the case namespace.
#[derive(Debug, Clone)]
pub struct ServiceBuilder {
    name: String,
    kind: ServiceKind,
    selector: BTreeMap<String, String>,
    ports: Vec<ServicePort>,
    session_affinity: Option<String>,
}

impl ServiceBuilder {
    fn new(name: &str, kind: ServiceKind) -> ServiceBuilder {
        ServiceBuilder {
            name: name.into(),
            kind,
            selector: BTreeMap::new(),
            ports: Vec::new(),
            session_affinity: None,
        }
    }

    /// A `type: ClusterIP` Service.
    pub fn cluster_ip(name: &str) -> ServiceBuilder {
        ServiceBuilder::new(name, ServiceKind::ClusterIp)
    }

    /// A headless Service (`clusterIP: None`): its name resolves to the ready pods' IPs, and
    /// pods whose `subdomain` equals its name get `<hostname>.<name>.<ns>.svc` records.
    pub fn headless(name: &str) -> ServiceBuilder {
        ServiceBuilder::new(name, ServiceKind::Headless)
    }

    /// A `type: NodePort` Service (the API server allocates the node port).
    pub fn node_port(name: &str) -> ServiceBuilder {
        ServiceBuilder::new(name, ServiceKind::NodePort)
    }

    /// A `type: ExternalName` Service: its name is a CNAME for `target`.
    pub fn external_name(name: &str, target: &str) -> ServiceBuilder {
        ServiceBuilder::new(name, ServiceKind::ExternalName(target.into()))
    }

    /// The Service's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Selects pods with label `key=value`.
    #[must_use]
    pub fn selector(mut self, key: &str, value: &str) -> Self {
        self.selector.insert(key.into(), value.into());
        self
    }

    /// Adds a port `port` forwarding to `target` over `protocol` (`TCP` or `UDP`).
    #[must_use]
    pub fn port(mut self, name: &str, port: i32, target: i32, protocol: &str) -> Self {
        self.ports.push(ServicePort {
            name: Some(name.into()),
            port,
            target_port: Some(IntOrString::Int(target)),
            protocol: Some(protocol.into()),
            ..Default::default()
        });
        self
    }

    /// The two netexec ports: `http` 80 → 8080/TCP and `udp` 90 → 8081/UDP.
    #[must_use]
    pub fn netexec_ports(self) -> Self {
        self.port("http", SERVICE_HTTP_PORT, i32::from(HTTP_PORT), "TCP").port(
            "udp",
            SERVICE_UDP_PORT,
            i32::from(UDP_PORT),
            "UDP",
        )
    }

    /// Sets `sessionAffinity: ClientIP`.
    #[must_use]
    pub fn session_affinity_client_ip(mut self) -> Self {
        self.session_affinity = Some("ClientIP".into());
        self
    }

    /// Builds the Service object for namespace `ns`, labelled with the run id `run_id`.
    pub fn build(&self, ns: &str, run_id: &str) -> Service {
        let mut spec = ServiceSpec {
            selector: (!self.selector.is_empty()).then(|| self.selector.clone()),
            ports: (!self.ports.is_empty()).then(|| self.ports.clone()),
            session_affinity: self.session_affinity.clone(),
            ..Default::default()
        };
        match &self.kind {
            ServiceKind::ClusterIp => spec.type_ = Some("ClusterIP".into()),
            ServiceKind::Headless => {
                spec.type_ = Some("ClusterIP".into());
                spec.cluster_ip = Some("None".into());
            }
            ServiceKind::NodePort => spec.type_ = Some("NodePort".into()),
            ServiceKind::ExternalName(target) => {
                spec.type_ = Some("ExternalName".into());
                spec.external_name = Some(target.clone());
            }
        }
        Service {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(ns.into()),
                labels: Some(BTreeMap::from([(RUN_ID_LABEL.to_string(), run_id.to_string())])),
                ..Default::default()
            },
            spec: Some(spec),
            status: None,
        }
    }
}

/// The ClusterIP of a Service, or a failure naming it (headless and ExternalName Services
/// have none).
///
/// # Errors
/// When the Service has no ClusterIP.
pub fn cluster_ip(svc: &Service) -> Result<String, CaseError> {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .filter(|ip| !ip.is_empty() && ip != "None")
        .ok_or_else(|| {
            CaseError::failed(format!(
                "service {} has no ClusterIP",
                svc.metadata.name.as_deref().unwrap_or("?")
            ))
        })
}

/// The node port allocated for the Service port named `port_name`.
///
/// # Errors
/// When the Service has no such port or no node port was allocated.
pub fn node_port(svc: &Service, port_name: &str) -> Result<u16, CaseError> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|ports| ports.iter().find(|p| p.name.as_deref() == Some(port_name)))
        .and_then(|p| p.node_port)
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| {
            CaseError::failed(format!(
                "service {} has no node port for port {port_name:?}: {:?}",
                svc.metadata.name.as_deref().unwrap_or("?"),
                svc.spec.as_ref().and_then(|s| s.ports.clone())
            ))
        })
}

/// The fully qualified name of Service `svc` in namespace `ns`.
pub fn service_fqdn(svc: &str, ns: &str) -> String {
    format!("{svc}.{ns}.svc.{CLUSTER_DOMAIN}")
}

/// One ready endpoint of a Service, as its EndpointSlices list it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReadyEndpoint {
    /// The endpoint's address (a pod IP).
    pub ip: String,
    /// The pod behind it (`targetRef.name`), or `?`.
    pub pod: String,
    /// The node it runs on (`nodeName`), or `?`.
    pub node: String,
}

/// The ready endpoints listed by `slices` (deduplicated by address). A missing `ready`
/// condition counts as ready, as the EndpointSlice API asks consumers to treat "unknown".
pub fn ready_endpoints<'a>(slices: impl IntoIterator<Item = &'a EndpointSlice>) -> Vec<ReadyEndpoint> {
    let mut out = BTreeSet::new();
    for slice in slices {
        for e in &slice.endpoints {
            if !e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true) {
                continue;
            }
            for ip in &e.addresses {
                out.insert(ReadyEndpoint {
                    ip: ip.clone(),
                    pod: e
                        .target_ref
                        .as_ref()
                        .and_then(|r| r.name.clone())
                        .unwrap_or_else(|| "?".into()),
                    node: e.node_name.clone().unwrap_or_else(|| "?".into()),
                });
            }
        }
    }
    out.into_iter().collect()
}

/// What `nslookup <name>` printed inside a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The name asked for.
    pub name: String,
    /// The addresses of the answer (not of the server), in order.
    pub addresses: Vec<String>,
    /// Stdout and stderr, for failure messages.
    pub output: String,
}

impl Lookup {
    /// Whether the name resolved to at least one address.
    pub fn resolved(&self) -> bool {
        !self.addresses.is_empty()
    }
}

/// The answer addresses in `nslookup` output, from Windows' `nslookup.exe` or busybox/bind.
///
/// Both print the server first (`Server:` / `Address:`), then the answer after a `Name:` line
/// (`Address:`, `Addresses:` followed by indented continuation lines, or busybox's
/// `Address 1: <ip> <name>`). Only addresses after the first `Name:` line count, so a server
/// that answered "Non-existent domain" yields nothing.
pub fn parse_nslookup(output: &str) -> Vec<String> {
    let mut in_answer = false;
    let mut out = Vec::new();
    for line in output.lines() {
        let trimmed = line.trim();
        let lower = trimmed.to_ascii_lowercase();
        if lower.starts_with("name:") {
            in_answer = true;
            continue;
        }
        if !in_answer {
            continue;
        }
        let rest = if lower.starts_with("address") {
            trimmed.split_once(':').map(|(_, r)| r).unwrap_or("")
        } else if line.starts_with(char::is_whitespace) || line.starts_with('\t') {
            trimmed
        } else {
            continue;
        };
        for token in rest.split_whitespace() {
            if let Some(ip) = as_ip(token) {
                out.push(ip);
                break;
            }
        }
    }
    out
}

/// `token` as an IP address, accepting a trailing `#53` or `:53` port on IPv4 addresses.
fn as_ip(token: &str) -> Option<String> {
    let t = token.split('#').next().unwrap_or(token);
    if t.parse::<std::net::IpAddr>().is_ok() {
        return Some(t.to_string());
    }
    let (host, port) = t.rsplit_once(':')?;
    (host.parse::<std::net::Ipv4Addr>().is_ok() && port.parse::<u16>().is_ok()).then(|| host.to_string())
}

/// The case time [`Framework::nslookup_eventually`] keeps for its last lookup and the report.
const LOOKUP_RESERVE: Duration = Duration::from_secs(20);

/// Parses the environment a shell's `set` (cmd) or `set`/`env` (sh) printed: `NAME=value`
/// lines, with sh's single quotes around values removed.
pub fn parse_env(output: &str) -> BTreeMap<String, String> {
    output
        .lines()
        .filter_map(|l| l.trim_end_matches('\r').split_once('='))
        .filter(|(k, _)| !k.is_empty() && !k.contains(' '))
        .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
        .collect()
}

/// A one-line rendering of an Event for failure messages: `reason: message`.
pub fn describe_event(e: &Event) -> String {
    format!(
        "{}: {}",
        e.reason.as_deref().unwrap_or("?"),
        e.message.as_deref().unwrap_or("").trim()
    )
}

impl Framework {
    /// Watches the case namespace's Events until one about pod `pod` satisfies `pred`, and
    /// returns it. `what` says what is awaited, for the timeout message.
    ///
    /// # Errors
    /// A failure listing the pod's Events seen, when `within` (bounded by the case deadline)
    /// passes first.
    pub async fn wait_pod_event(
        &self,
        pod: &str,
        what: &str,
        within: Duration,
        pred: impl Fn(&Event) -> bool,
    ) -> Result<Event, CaseError> {
        self.step(format!("waiting for an event on pod {pod}: {what}"));
        let mut stream = watcher::watcher(self.api::<Event>(), watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut seen: Vec<String> = Vec::new();
        let within = within.min(self.remaining());
        let result = tokio::time::timeout(within, async {
            while let Some(event) = stream.next().await {
                let e = match event {
                    Ok(watcher::Event::Apply(e) | watcher::Event::InitApply(e)) => e,
                    Ok(_) => continue,
                    Err(err) => {
                        crate::cluster::retry::journal().record(crate::cluster::retry::Trouble::WatchRestart);
                        tracing::debug!(pod, error = %err, "event watch error");
                        continue;
                    }
                };
                if e.involved_object.name.as_deref() != Some(pod) {
                    continue;
                }
                if pred(&e) {
                    return Some(e);
                }
                let line = describe_event(&e);
                if !seen.contains(&line) {
                    seen.push(line);
                }
            }
            None
        })
        .await;
        match result {
            Ok(Some(e)) => Ok(e),
            _ => Err(CaseError::failed(format!(
                "pod {pod}: no event {what} within {within:?}; events seen: [{}]",
                seen.join("; ")
            ))),
        }
    }

    /// The Events of pod `pod` so far (a list, not a watch).
    ///
    /// # Errors
    /// When listing fails.
    pub async fn pod_events(&self, pod: &str) -> Result<Vec<Event>, CaseError> {
        let list = self.api::<Event>().list(&kube::api::ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(pod))
            .collect())
    }

    /// Creates a Service in the case namespace.
    ///
    /// # Errors
    /// When the API refuses it (its message is kept).
    pub async fn create_service(&self, svc: &ServiceBuilder) -> Result<Service, CaseError> {
        self.step(format!("creating service {} ({:?})", svc.name, svc.kind));
        self.api::<Service>()
            .create(&PostParams::default(), &svc.build(self.ns(), &self.run().run_id))
            .await
            .map_err(|e| CaseError::from(e).context(format!("creating service {}", svc.name)))
    }

    /// Watches the EndpointSlices of `service` until they list at least `n` ready endpoints,
    /// and returns them.
    ///
    /// `n` must be at least 1: a Service without endpoints proves nothing.
    ///
    /// # Errors
    /// A failure naming the endpoints seen when the case deadline (or one pod start timeout)
    /// passes first.
    pub async fn wait_ready_endpoints(&self, service: &str, n: usize) -> Result<Vec<ReadyEndpoint>, CaseError> {
        let n = n.max(1);
        self.step(format!("waiting for {n} ready endpoint(s) of service {service}"));
        let api = self.api::<EndpointSlice>();
        let config = watcher::Config::default().labels(&format!("{SERVICE_NAME_LABEL}={service}"));
        let mut stream = watcher::watcher(api, config).default_backoff().boxed();
        let mut slices: BTreeMap<String, EndpointSlice> = BTreeMap::new();
        let mut init: BTreeMap<String, EndpointSlice> = BTreeMap::new();
        let within = super::POD_START_TIMEOUT.min(self.remaining());
        let result = tokio::time::timeout(within, async {
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(s)) => {
                        slices.insert(s.metadata.name.clone().unwrap_or_default(), s);
                    }
                    Ok(watcher::Event::Delete(s)) => {
                        slices.remove(&s.metadata.name.clone().unwrap_or_default());
                    }
                    Ok(watcher::Event::Init) => init.clear(),
                    Ok(watcher::Event::InitApply(s)) => {
                        init.insert(s.metadata.name.clone().unwrap_or_default(), s);
                    }
                    Ok(watcher::Event::InitDone) => slices = std::mem::take(&mut init),
                    Err(e) => {
                        crate::cluster::retry::journal().record(crate::cluster::retry::Trouble::WatchRestart);
                        tracing::debug!(service, error = %e, "endpointslice watch error");
                    }
                }
                let ready = ready_endpoints(slices.values());
                if ready.len() >= n {
                    return Some(ready);
                }
            }
            None
        })
        .await;
        match result {
            Ok(Some(ready)) => Ok(ready),
            _ => Err(CaseError::failed(format!(
                "service {service}: expected at least {n} ready endpoint(s) within {within:?}, saw {:?} in {} EndpointSlice(s) labelled {SERVICE_NAME_LABEL}={service}",
                ready_endpoints(slices.values()),
                slices.len()
            ))),
        }
    }

    /// The ClusterIP of the cluster DNS Service (`kube-system/kube-dns`, the name every DNS
    /// add-on keeps for compatibility).
    ///
    /// # Errors
    /// When the Service is missing or has no ClusterIP.
    pub async fn cluster_dns_ip(&self) -> Result<String, CaseError> {
        let api: kube::Api<Service> = kube::Api::namespaced(self.client(), "kube-system");
        let svc = api
            .get("kube-dns")
            .await
            .map_err(|e| CaseError::from(e).context("reading service kube-system/kube-dns"))?;
        cluster_ip(&svc)
    }

    /// Runs `nslookup <name>` in `pod` (whose OS is `os`) and parses the answer.
    ///
    /// A failed lookup is not an error: [`Lookup::resolved`] is false and
    /// [`Lookup::output`] says why.
    ///
    /// # Errors
    /// When the exec itself fails.
    pub async fn nslookup(&self, pod: &str, os: Os, name: &str) -> Result<Lookup, CaseError> {
        let out = self.exec_shell(pod, None, os, &format!("nslookup {name}")).await?;
        Ok(Lookup {
            name: name.into(),
            addresses: parse_nslookup(&out.stdout),
            output: format!("{}{}", out.stdout, out.stderr).trim().to_string(),
        })
    }

    /// Repeats `nslookup <name>` in `pod` until it resolves (DNS records follow endpoints with
    /// a delay) or `within` passes; returns the last lookup either way.
    ///
    /// # Errors
    /// When an exec fails.
    pub async fn nslookup_eventually(
        &self,
        pod: &str,
        os: Os,
        name: &str,
        within: Duration,
    ) -> Result<Lookup, CaseError> {
        self.nslookup_until(pod, os, name, within, Lookup::resolved).await
    }

    /// Repeats `nslookup <name>` in `pod` until the answer satisfies `done` or `within` passes;
    /// returns the last lookup either way. A record that changed (an ExternalName's new target)
    /// reaches the cluster DNS with a delay, so until then the old answer comes back.
    ///
    /// # Errors
    /// When an exec fails.
    pub async fn nslookup_until(
        &self,
        pod: &str,
        os: Os,
        name: &str,
        within: Duration,
        done: impl Fn(&Lookup) -> bool,
    ) -> Result<Lookup, CaseError> {
        // One lookup can take seconds when no server answers (every search suffix times
        // out), so keep enough of the case time to report the last one.
        let deadline = Instant::now() + within.min(self.remaining().saturating_sub(LOOKUP_RESERVE));
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        loop {
            tick.tick().await;
            let lookup = self.nslookup(pod, os, name).await?;
            if done(&lookup) || Instant::now() >= deadline {
                return Ok(lookup);
            }
        }
    }

    /// Checks that netexec pod `from` reaches `host:port` over `protocol` and gets an answer
    /// in `expected` (hostnames): first within `window.warm_up`, then on every request for
    /// `window.hold`,
    /// as upstream's `assertConsistentConnectivity` does ([`UPSTREAM_STABILITY`]). Returns the
    /// answers seen.
    ///
    /// # Errors
    /// A failure naming the path, when it never worked during the warm-up or broke during the
    /// hold.
    pub async fn dial_stable(
        &self,
        from: &str,
        protocol: Protocol,
        host: &str,
        port: u16,
        expected: &BTreeSet<String>,
        window: Stability,
    ) -> Result<BTreeSet<String>, CaseError> {
        let Stability { warm_up, hold } = window;
        let path = format!("{} {host}:{port} from pod {from}", protocol.as_str());
        self.step(format!("checking {path} works within {warm_up:?} then for {hold:?}"));
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        let warm_deadline = Instant::now() + warm_up.min(self.remaining());
        loop {
            tick.tick().await;
            let answer = self.dial(from, protocol, host, port, "hostname", 1).await?;
            let seen = answer.distinct();
            if !seen.is_empty() && seen.is_subset(expected) {
                break;
            }
            let last = format!("answers {seen:?}, errors {:?}", answer.errors);
            if Instant::now() >= warm_deadline {
                return Err(CaseError::failed(format!(
                    "{path}: no answer from {expected:?} within {warm_up:?}; last try: {last}"
                )));
            }
        }
        let mut seen_all = BTreeSet::new();
        let hold_deadline = Instant::now() + hold.min(self.remaining());
        let mut requests = 0;
        while Instant::now() < hold_deadline {
            tick.tick().await;
            requests += 1;
            let answer = self.dial(from, protocol, host, port, "hostname", 1).await?;
            let seen = answer.distinct();
            if seen.is_empty() || !seen.is_subset(expected) {
                return Err(CaseError::failed(format!(
                    "{path} worked, then request {requests} of the {hold:?} hold failed: expected an answer from \
                     {expected:?}, got {seen:?}, errors {:?}",
                    answer.errors
                )));
            }
            seen_all.extend(seen);
        }
        Ok(seen_all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builds_each_service_kind() {
        let h = ServiceBuilder::headless("h")
            .selector("app", "x")
            .netexec_ports()
            .build("ns", "r");
        let spec = h.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.ports.unwrap().len(), 2);
        let e = ServiceBuilder::external_name("e", "kubernetes.default.svc.cluster.local").build("ns", "r");
        assert_eq!(e.spec.as_ref().unwrap().type_.as_deref(), Some("ExternalName"));
        assert!(e.spec.unwrap().selector.is_none());
        let n = ServiceBuilder::node_port("n")
            .session_affinity_client_ip()
            .build("ns", "r");
        assert_eq!(n.spec.as_ref().unwrap().session_affinity.as_deref(), Some("ClientIP"));
        assert_eq!(n.metadata.labels.unwrap()[RUN_ID_LABEL], "r");
    }

    #[test]
    fn reads_cluster_ip_and_node_port() {
        let svc: Service = serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.0.0.5",
            "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}}))
        .unwrap();
        assert_eq!(cluster_ip(&svc).unwrap(), "10.0.0.5");
        assert_eq!(node_port(&svc, "http").unwrap(), 30080);
        assert!(node_port(&svc, "udp").is_err());
        let headless: Service =
            serde_json::from_value(json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}})).unwrap();
        assert!(cluster_ip(&headless).is_err());
    }

    #[test]
    fn only_ready_endpoints_count() {
        let s: EndpointSlice = serde_json::from_value(json!({"metadata": {"name": "s-1"}, "addressType": "IPv4", "endpoints": [
            {"addresses": ["127.1.0.2"], "conditions": {"ready": true}, "nodeName": "win-1", "targetRef": {"kind": "Pod", "name": "p1"}},
            {"addresses": ["127.1.0.3"], "conditions": {"ready": false}, "nodeName": "win-2"}]}))
        .unwrap();
        let ready = ready_endpoints([&s]);
        assert_eq!(
            ready,
            [ReadyEndpoint {
                ip: "127.1.0.2".into(),
                pod: "p1".into(),
                node: "win-1".into()
            }]
        );
    }

    #[test]
    fn parses_windows_nslookup() {
        let out = "Server:  kube-dns.kube-system.svc.cluster.local\r\nAddress:  10.96.0.10\r\n\r\nName:    kubernetes.default.svc.cluster.local\r\nAddress:  10.96.0.1\r\n";
        assert_eq!(parse_nslookup(out), ["10.96.0.1"]);
        let multi = "Server:  x\nAddress:  10.96.0.10\n\nName:    h.ns.svc.cluster.local\nAddresses:  10.1.0.4\n          10.1.0.5\n";
        assert_eq!(parse_nslookup(multi), ["10.1.0.4", "10.1.0.5"]);
        let missing = "Server:  x\nAddress:  10.96.0.10\n\n*** x can't find nope: Non-existent domain\n";
        assert!(parse_nslookup(missing).is_empty());
    }

    #[test]
    fn parses_busybox_nslookup() {
        let out = "Server:\t\t10.96.0.10\nAddress:\t10.96.0.10:53\n\nName:\tkubernetes.default.svc.cluster.local\nAddress: 10.96.0.1\n";
        assert_eq!(parse_nslookup(out), ["10.96.0.1"]);
        let old = "Server:    10.96.0.10\nAddress 1: 10.96.0.10 kube-dns.kube-system.svc.cluster.local\n\nName:      kubernetes\nAddress 1: 10.96.0.1 kubernetes.default.svc.cluster.local\n";
        assert_eq!(parse_nslookup(old), ["10.96.0.1"]);
        assert!(
            parse_nslookup("Server: 10.96.0.10\nAddress: 10.96.0.10#53\n\n** server can't find nope: NXDOMAIN\n")
                .is_empty()
        );
    }

    #[test]
    fn parses_env_of_both_shells() {
        let env = parse_env("A_SERVICE_HOST=10.0.0.1\r\nB='x y'\nnot a var\n");
        assert_eq!(env["A_SERVICE_HOST"], "10.0.0.1");
        assert_eq!(env["B"], "x y");
        assert_eq!(env.len(), 2);
    }
}
