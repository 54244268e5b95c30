//! Integration tests of the simulated nodes: the API server, the control plane, two Windows
//! nodes and one Linux node on an address block of their own, talking only through kube-rs.
//!
//! Each test starts its own cluster on a block in 127.160–199 derived from the process id, so
//! test binaries and tests inside one binary can run side by side.
//!
//! The helpers (a cluster per test, pods, waits, exec, HTTP and UDP probes) are here; the tests
//! are grouped by what they show: `pods_and_network`, `windows_model` (DESIGN.md's Windows
//! behaviour model, row by row), `lifecycle`, `addons`, the node fault switches
//! (`node_health` on a whole `SimCluster`, `pull_and_dns_faults`) and the ignored `bench`.

#![expect(
    clippy::disallowed_methods,
    reason = "the test paces a real server or process with short sleeps"
)]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use crossconf_model::os::Os;
use crossconf_sim::addr::AddressBlock;
use crossconf_sim::api::{ApiConfig, ApiServer};
use crossconf_sim::control::{self, ControlConfig};
use crossconf_sim::node::{Faults, NodeConfig, NodeHandle, SimNet, Source, start_network, start_node};
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use k8s_openapi::api::core::v1::{Event, Node, Pod, Service};
use kube::api::{AttachParams, DeleteParams, ListParams, LogParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

mod addons;
mod admission;
mod bench;
mod lifecycle;
mod node_health;
mod pods_and_network;
mod pull_and_dns_faults;
#[path = "../support/mod.rs"]
mod support;
mod windows_model;
const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";
const NS: &str = "default";

static NEXT: AtomicU8 = AtomicU8::new(0);

struct Cluster {
    _api: ApiServer,
    client: Client,
    net: SimNet,
    nodes: Vec<NodeHandle>,
    cancel: CancellationToken,
    faults: Arc<Faults>,
    _dir: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

async fn cluster() -> Cluster {
    crossconf_sim::install_crypto_provider();
    let pid = std::process::id();
    let mut found = None;
    for _ in 0..40 {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let block = AddressBlock(160 + ((pid as u32 + u32::from(n) * 7) % 40) as u8);
        if let Ok(api) = ApiServer::start(ApiConfig::new(block)).await {
            found = Some((block, api));
            break;
        }
    }
    let (block, api) = found.expect("a free address block in 160..199");
    let client = Client::try_from(api.kube_config()).expect("client");
    let cancel = CancellationToken::new();
    let ccfg = ControlConfig {
        root_ca_pem: Some(api.ca_pem().to_string()),
        ..ControlConfig::default()
    };
    control::start(client.clone(), ccfg, cancel.clone())
        .await
        .expect("control plane");
    let faults = Arc::new(Faults::default());
    let net = start_network(client.clone(), block, faults.clone(), cancel.clone())
        .await
        .expect("network");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nodes = Vec::new();
    for (i, (name, os)) in [("win-0", Os::Windows), ("win-1", Os::Windows), ("lin-0", Os::Linux)]
        .into_iter()
        .enumerate()
    {
        let cfg = NodeConfig::new(name, os, i, block, dir.path().join(name));
        nodes.push(
            start_node(client.clone(), cfg, net.clone(), cancel.clone())
                .await
                .expect("node"),
        );
    }
    Cluster {
        _api: api,
        client,
        net,
        nodes,
        cancel,
        faults,
        _dir: dir,
    }
}

fn pod(name: &str, node: &str, image: &str, command: Option<Vec<&str>>, args: Vec<&str>) -> Pod {
    let mut c = serde_json::json!({"name": "c", "image": image, "args": args});
    if let Some(cmd) = command {
        c["command"] = serde_json::json!(cmd);
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
        "spec": {"nodeName": node, "containers": [c], "terminationGracePeriodSeconds": 1},
    }))
    .expect("pod json")
}

fn netexec(name: &str, node: &str) -> Pod {
    pod(
        name,
        node,
        AGNHOST,
        None,
        vec!["netexec", "--http-port=8080", "--udp-port=8081"],
    )
}

async fn create(c: &Cluster, p: Pod) -> Pod {
    Api::<Pod>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &p)
        .await
        .expect("create pod")
}

async fn wait_pod(c: &Cluster, name: &str, why: &str, f: impl Fn(&Pod) -> bool) -> Pod {
    let api = Api::<Pod>::namespaced(c.client.clone(), NS);
    let cond = move |p: Option<&Pod>| p.is_some_and(&f);
    match tokio::time::timeout(Duration::from_secs(20), await_condition(api.clone(), name, cond)).await {
        Ok(Ok(Some(p))) => p,
        other => {
            let now = api
                .get(name)
                .await
                .ok()
                .map(|p| serde_json::to_string_pretty(&p.status).unwrap_or_default());
            panic!(
                "pod {name}: waiting for {why} failed ({other:?}); status now: {}",
                now.unwrap_or_default()
            )
        }
    }
}

fn running_ready(p: &Pod) -> bool {
    let st = p.status.as_ref();
    st.and_then(|s| s.phase.as_deref()) == Some("Running")
        && st
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn waiting_reason(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

/// Waits until the pod's first container is waiting with `reason`; returns the waiting message.
async fn wait_waiting(c: &Cluster, name: &str, reason: &str) -> String {
    let p = wait_pod(c, name, reason, |p| waiting_reason(p).as_deref() == Some(reason)).await;
    waiting_message(&p)
}

/// Whether the pod's first container has restarted.
fn restarted(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .is_some_and(|c| c.restart_count >= 1)
}

fn waiting_message(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| w.message.clone())
        .unwrap_or_default()
}

fn pod_ip(p: &Pod) -> Ipv4Addr {
    p.status
        .as_ref()
        .and_then(|s| s.pod_ip.as_ref())
        .expect("pod ip")
        .parse()
        .expect("ipv4")
}

type HttpResult = Result<crossconf_sim::node::http::Response, crossconf_sim::node::http::HttpError>;

/// A GET from the host to `addr` with the given Host header and timeout.
async fn try_get(c: &Cluster, addr: SocketAddr, host: &str, path: &str, timeout: Duration) -> HttpResult {
    crossconf_sim::node::http::get(c.net.dialer(), &Source::host(), addr, host, path, &[], timeout).await
}

/// `/hostname` from `addr` within a second, for an address that may not answer (yet).
async fn try_hostname(c: &Cluster, addr: SocketAddr) -> HttpResult {
    try_get(c, addr, "x", "/hostname", Duration::from_secs(1)).await
}

async fn http_get(c: &Cluster, addr: SocketAddr, path: &str) -> (u16, String) {
    let r = try_get(c, addr, &addr.to_string(), path, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("GET {addr}{path}: {}", crossconf_sim::node::error_chain(&e)));
    (r.status, String::from_utf8_lossy(&r.body).to_string())
}

async fn exec(c: &Cluster, name: &str, cmd: &[&str]) -> (String, String, Option<String>) {
    exec_in(c, name, "c", cmd).await
}

async fn exec_in(c: &Cluster, name: &str, container: &str, cmd: &[&str]) -> (String, String, Option<String>) {
    let api = Api::<Pod>::namespaced(c.client.clone(), NS);
    let mut p = api
        .exec(
            name,
            cmd.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            &AttachParams::default().container(container).stdout(true).stderr(true),
        )
        .await
        .unwrap_or_else(|e| panic!("exec {cmd:?} in {name}: {e}"));
    let mut out = String::new();
    let mut err = String::new();
    let (mut so, mut se) = (p.stdout().expect("stdout"), p.stderr().expect("stderr"));
    let status = p.take_status().expect("status");
    let (_, _, st) = tokio::join!(so.read_to_string(&mut out), se.read_to_string(&mut err), status);
    let code = st.and_then(|s| {
        if s.status.as_deref() == Some("Success") {
            None
        } else {
            s.details
                .and_then(|d| d.causes)
                .and_then(|c| c.first().and_then(|c| c.message.clone()))
                .or(s.message)
        }
    });
    (out, err, code)
}

async fn events_for(c: &Cluster, name: &str) -> Vec<(String, String)> {
    let api = Api::<Event>::namespaced(c.client.clone(), NS);
    let list = api.list(&ListParams::default()).await.expect("events");
    list.items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

async fn wait_event(c: &Cluster, name: &str, reason: &str, contains: &str) -> String {
    for _ in 0..200 {
        if let Some((_, m)) = events_for(c, name)
            .await
            .into_iter()
            .find(|(r, m)| r == reason && m.contains(contains))
        {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "pod {name}: no {reason} event containing {contains:?}; events: {:?}",
        events_for(c, name).await
    )
}

/// The node's stats summary, read through the API server's node proxy as the Kubelet-Stats case
/// reads it.
async fn stats_summary(c: &Cluster, node: &str) -> serde_json::Value {
    let req = http::Request::get(format!("/api/v1/nodes/{node}/proxy/stats/summary"))
        .body(Vec::new())
        .unwrap();
    c.client.request(req).await.expect("stats summary")
}

async fn udp(c: &Cluster, addr: SocketAddr, msg: &str) -> String {
    let r = c
        .net
        .dialer()
        .udp_request(&Source::host(), addr, msg.as_bytes(), Duration::from_secs(3))
        .await
        .expect("udp answer");
    String::from_utf8_lossy(&r).to_string()
}

/// Asks the cluster DNS, over UDP from the host, for the A records of `name`.
async fn ask_cluster_dns(c: &Cluster, name: &str) -> Message {
    let mut q = Message::query();
    q.metadata.recursion_desired = true;
    q.queries
        .push(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    let reply = c
        .net
        .dialer()
        .udp_request(
            &Source::host(),
            c.net.cluster_dns(),
            &q.to_vec().unwrap(),
            Duration::from_secs(2),
        )
        .await
        .expect("dns reply");
    Message::from_vec(&reply).unwrap()
}
