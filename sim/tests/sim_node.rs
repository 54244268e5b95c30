//! Integration tests of the simulated nodes: the API server, the control plane, two Windows
//! nodes and one Linux node on an address block of their own, talking only through kube-rs.
//!
//! Each test starts its own cluster on a block in 127.160–199 derived from the process id, so
//! test binaries and tests inside one binary can run side by side.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_register_ready_with_os_labels() {
    let c = cluster().await;
    let api = Api::<Node>::all(c.client.clone());
    for n in &c.nodes {
        let cond = |node: Option<&Node>| {
            node.and_then(|n| {
                n.status
                    .as_ref()?
                    .conditions
                    .as_ref()?
                    .iter()
                    .find(|c| c.type_ == "Ready")
                    .map(|c| c.status == "True")
            })
            .unwrap_or(false)
        };
        tokio::time::timeout(Duration::from_secs(10), await_condition(api.clone(), n.name(), cond))
            .await
            .expect("ready")
            .expect("watch");
    }
    let win = api.get("win-0").await.unwrap();
    let labels = win.metadata.labels.clone().unwrap();
    assert_eq!(labels["kubernetes.io/os"], "windows");
    assert_eq!(labels["node.kubernetes.io/windows-build"], "10.0.20348");
    let info = win.status.as_ref().unwrap().node_info.clone().unwrap();
    assert_eq!(info.os_image, "Windows Server 2022 Datacenter");
    assert!(info.container_runtime_version.starts_with("containerd://"));
    assert!(!info.boot_id.is_empty());
    let ip = &win.status.as_ref().unwrap().addresses.as_ref().unwrap()[0];
    assert_eq!(
        (ip.type_.as_str(), ip.address.parse::<Ipv4Addr>().unwrap()),
        ("InternalIP", c.nodes[0].ip())
    );
    let lin = api.get("lin-0").await.unwrap();
    assert_eq!(lin.metadata.labels.unwrap()["kubernetes.io/os"], "linux");
    let lease: k8s_openapi::api::coordination::v1::Lease = Api::namespaced(c.client.clone(), "kube-node-lease")
        .get("win-1")
        .await
        .expect("lease");
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("win-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_netexec_pod_serves_exec_logs_and_stats() {
    let c = cluster().await;
    let started = std::time::Instant::now();
    create(&c, netexec("web", "win-0")).await;
    let p = wait_pod(&c, "web", "Running and Ready", running_ready).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "fast profile: Running within 5 s, took {:?}",
        started.elapsed()
    );
    let ip = pod_ip(&p);
    assert!(ip.is_loopback() && c.net.block().pod_node_index(ip) == Some(0), "{ip}");
    let cs = &p.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
    assert!(cs.container_id.as_deref().unwrap().starts_with("containerd://"));
    assert!(cs.image_id.contains("@sha256:"));
    assert_eq!(
        http_get(&c, SocketAddr::new(ip.into(), 8080), "/hostname").await,
        (200, "web".to_string())
    );
    assert_eq!(udp(&c, SocketAddr::new(ip.into(), 8081), "hostname").await, "web");
    let (out, _, code) = exec(&c, "web", &["cmd", "/c", "echo", "hi"]).await;
    assert_eq!((out.trim(), code), ("hi", None));
    let (_, _, code) = exec(&c, "web", &["cmd", "/c", "exit 3"]).await;
    assert_eq!(code.as_deref(), Some("3"));
    let logs = Api::<Pod>::namespaced(c.client.clone(), NS)
        .logs("web", &LogParams::default())
        .await
        .expect("logs");
    assert!(logs.contains("Started HTTP server on port 8080"), "{logs}");
    // The kube-dns Service points at the cluster DNS.
    let dns = Api::<Service>::namespaced(c.client.clone(), "kube-system")
        .get("kube-dns")
        .await
        .expect("kube-dns");
    assert_eq!(
        dns.spec.unwrap().cluster_ip.unwrap(),
        c.net.block().dns_service().to_string()
    );
    // Stats through the API server's node proxy, as the Kubelet-Stats case reads them.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let summary = stats_summary(&c, "win-0").await;
    let pods = summary["pods"].as_array().expect("pods");
    let web = pods
        .iter()
        .find(|p| p["podRef"]["name"] == "web")
        .expect("web in summary");
    assert!(web["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap() > 0, "{web}");
    assert!(web["memory"]["workingSetBytes"].as_u64().unwrap() > 0, "{web}");
    assert!(
        web["containers"][0]["logs"]["availableBytes"].as_u64().unwrap() > 0,
        "{web}"
    );
    assert!(summary["node"]["cpu"]["usageNanoCores"].as_u64().unwrap() > 0);
    // Following the log streams what the container writes later.
    let follow = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let mut lines = Api::<Pod>::namespaced(c.client.clone(), NS)
        .log_stream("web", &follow)
        .await
        .expect("log stream")
        .lines();
    use futures::{AsyncBufReadExt, TryStreamExt};
    let first = tokio::time::timeout(Duration::from_secs(5), lines.try_next())
        .await
        .expect("a line in time")
        .expect("read");
    assert!(first.is_some_and(|l| l.contains("Started")));
    http_get(&c, SocketAddr::new(ip.into(), 8080), "/exit?code=0").await;
    let rest: Vec<String> = tokio::time::timeout(Duration::from_secs(10), lines.try_collect())
        .await
        .expect("stream ends with the container")
        .expect("read");
    assert!(rest.iter().any(|l| l.contains("GET /exit?code=0")), "{rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linux_exec_and_pod_to_pod_dial_over_http_and_udp() {
    let c = cluster().await;
    create(&c, netexec("client", "lin-0")).await;
    create(&c, netexec("server", "win-1")).await;
    let client = wait_pod(&c, "client", "Running", running_ready).await;
    let server = wait_pod(&c, "server", "Running", running_ready).await;
    let (out, _, code) = exec(&c, "client", &["sh", "-c", "echo hi"]).await;
    assert_eq!((out.as_str(), code), ("hi\n", None));
    let (cip, sip) = (pod_ip(&client), pod_ip(&server));
    for proto in ["http", "udp"] {
        let port = if proto == "http" { 8080 } else { 8081 };
        let path = format!("/dial?request=hostname&protocol={proto}&host={sip}&port={port}&tries=1");
        let (status, body) = http_get(&c, SocketAddr::new(cip.into(), 8080), &path).await;
        assert_eq!((status, body.as_str()), (200, r#"{"responses":["server"]}"#), "{proto}");
    }
    // /clientip shows the dialling pod's own address.
    let (_, body) = http_get(
        &c,
        SocketAddr::new(cip.into(), 8080),
        &format!("/dial?request=clientip&protocol=http&host={sip}&port=8080&tries=1"),
    )
    .await;
    assert!(body.contains(&cip.to_string()), "{body}");
    // A hostNetwork pod has its node's IP and serves on the node's address.
    let mut hostnet = netexec("hostnet", "lin-0");
    hostnet.spec.as_mut().unwrap().host_network = Some(true);
    create(&c, hostnet).await;
    let hostnet = wait_pod(&c, "hostnet", "Running", running_ready).await;
    let status = hostnet.status.clone().unwrap_or_default();
    assert_eq!(status.pod_ip, status.host_ip, "a hostNetwork pod's IP is its node's");
    let (code, body) = http_get(&c, SocketAddr::new(pod_ip(&hostnet).into(), 8080), "/hostname").await;
    assert_eq!((code, body.as_str()), (200, "hostnet"));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodeport_on_every_node_and_cluster_dns() {
    let c = cluster().await;
    create(&c, netexec("backend", "win-0")).await;
    wait_pod(&c, "backend", "Running", running_ready).await;
    let svc: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web-np", "namespace": NS},
        "spec": {"type": "NodePort", "selector": {"app": "backend"},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                           {"name": "udp", "port": 90, "targetPort": 8081, "protocol": "UDP"}]},
    }))
    .unwrap();
    let svc = Api::<Service>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &svc)
        .await
        .expect("service");
    let spec = svc.spec.unwrap();
    let node_port = spec.ports.as_ref().unwrap()[0].node_port.expect("node port") as u16;
    let udp_port = spec.ports.as_ref().unwrap()[1].node_port.expect("node port") as u16;
    let cluster_ip: Ipv4Addr = spec.cluster_ip.unwrap().parse().unwrap();
    let mut ok = false;
    for _ in 0..300 {
        let r = try_hostname(&c, SocketAddr::new(cluster_ip.into(), 80)).await;
        if r.is_ok_and(|r| &r.body[..] == b"backend") {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !ok {
        let slices = Api::<k8s_openapi::api::discovery::v1::EndpointSlice>::namespaced(c.client.clone(), NS)
            .list(&ListParams::default())
            .await
            .map(|l| serde_json::to_string(&l.items).unwrap_or_default());
        panic!("ClusterIP {cluster_ip}:80 never answered; endpoint slices: {slices:?}");
    }
    for n in &c.nodes {
        assert_eq!(
            http_get(&c, SocketAddr::new(n.ip().into(), node_port), "/hostname").await,
            (200, "backend".to_string()),
            "node {}",
            n.name()
        );
        assert_eq!(
            udp(&c, SocketAddr::new(n.ip().into(), udp_port), "hostname").await,
            "backend",
            "udp on node {}",
            n.name()
        );
    }
    // kube-proxy off on one node: its NodePort stops answering, the others still do.
    c.faults.set_kube_proxy_off("win-1", true);
    let broken = try_hostname(&c, SocketAddr::new(c.nodes[1].ip().into(), node_port)).await;
    assert!(broken.is_err(), "NodePort answered with kube-proxy off");
    c.faults.set_kube_proxy_off("win-1", false);
    // The cluster DNS answers the service name over UDP.
    let m = ask_cluster_dns(&c, "web-np.default.svc.cluster.local.").await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    let ips: Vec<Ipv4Addr> = m
        .answers
        .iter()
        .filter_map(|r| if let RData::A(a) = &r.data { Some(a.0) } else { None })
        .collect();
    assert_eq!(ips, [cluster_ip]);
    assert_eq!(c.net.cluster_dns().ip(), IpAddr::V4(c.net.block().dns_service()));
    let m = ask_cluster_dns(&c, "nope.default.svc.cluster.local.").await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    // From a pod: the short name resolves through the search list on Windows, the dotted
    // `svc.ns` form does not (Windows treats dotted names as fully qualified); Linux expands it.
    create(&c, pod("lin-dns", "lin-0", AGNHOST, None, vec!["pause"])).await;
    wait_pod(&c, "lin-dns", "Running", running_ready).await;
    let (out, _, code) = exec(&c, "backend", &["cmd", "/c", "nslookup web-np"]).await;
    assert!(code.is_none() && out.contains(&cluster_ip.to_string()), "{out}");
    let (_, err, code) = exec(&c, "backend", &["cmd", "/c", "nslookup web-np.default"]).await;
    assert!(code.is_some() && err.contains("Non-existent domain"), "{err}");
    let (out, _, code) = exec(&c, "lin-dns", &["nslookup", "web-np.default"]).await;
    assert!(code.is_none() && out.contains(&cluster_ip.to_string()), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_and_sandbox_rows_of_the_windows_model() {
    let c = cluster().await;
    // A Linux-only image: fails on Windows naming the mismatch, runs on Linux.
    create(&c, pod("bb-win", "win-0", "busybox:1.36", None, vec!["sleep", "3600"])).await;
    create(&c, pod("bb-lin", "lin-0", "busybox:1.36", None, vec!["sleep", "3600"])).await;
    let p = wait_pod(&c, "bb-win", "an image pull failure", |p| {
        matches!(waiting_reason(p).as_deref(), Some("ErrImagePull" | "ImagePullBackOff"))
    })
    .await;
    let msg = waiting_message(&p);
    assert!(
        msg.contains("linux/amd64") && msg.contains("windows/amd64 10.0.20348"),
        "{msg}"
    );
    wait_pod(&c, "bb-lin", "Running", running_ready).await;
    // An unknown image fails naming it.
    create(
        &c,
        pod(
            "nope",
            "win-0",
            "registry.k8s.io/e2e-test-images/nonexistent:1.0",
            None,
            vec![],
        ),
    )
    .await;
    wait_event(&c, "nope", "Failed", "registry.k8s.io/e2e-test-images/nonexistent:1.0").await;
    // hostNetwork: sandbox creation fails on Windows; Linux runs it.
    let mut hn = pod("hn-win", "win-1", AGNHOST, None, vec!["pause"]);
    hn.spec.as_mut().unwrap().host_network = Some(true);
    create(&c, hn).await;
    let mut hl = pod("hn-lin", "lin-0", AGNHOST, None, vec!["pause"]);
    hl.spec.as_mut().unwrap().host_network = Some(true);
    create(&c, hl).await;
    wait_event(&c, "hn-win", "FailedCreatePodSandBox", "hostNetwork").await;
    wait_pod(&c, "hn-lin", "Running", running_ready).await;
    // Another Windows build (process isolation): the container cannot be created.
    create(
        &c,
        pod(
            "ltsc2019",
            "win-0",
            "mcr.microsoft.com/windows/nanoserver:ltsc2019",
            Some(vec!["cmd", "/c", "ping -t localhost"]),
            vec![],
        ),
    )
    .await;
    let msg = wait_waiting(&c, "ltsc2019", "CreateContainerError").await;
    assert!(msg.contains("does not match the host operating system"), "{msg}");
    // Never pull policy without the image cached.
    let mut never = pod("never", "win-1", "registry.k8s.io/pause:3.10", None, vec![]);
    never.spec.as_mut().unwrap().containers[0].image_pull_policy = Some("Never".into());
    create(&c, never).await;
    wait_waiting(&c, "never", "ErrImageNeverPull").await;
}

fn with_volume(mut p: Pod, volume: serde_json::Value, mount: serde_json::Value) -> Pod {
    let spec = p.spec.as_mut().unwrap();
    spec.volumes = Some(vec![serde_json::from_value(volume).unwrap()]);
    spec.containers[0].volume_mounts = Some(vec![serde_json::from_value(mount).unwrap()]);
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_and_user_rows_of_the_windows_model() {
    let c = cluster().await;
    // Read-only emptyDir: reads work, writes fail with the OS's message.
    let vol = serde_json::json!({"name": "v", "emptyDir": {}});
    let two = |name: &str, node: &str, ro_path: &str, rw_path: &str| {
        let mut p = pod(name, node, AGNHOST, None, vec!["pause"]);
        let spec = p.spec.as_mut().unwrap();
        spec.volumes = Some(vec![serde_json::from_value(vol.clone()).unwrap()]);
        let mut rw = spec.containers[0].clone();
        rw.name = "rw".into();
        rw.volume_mounts = Some(vec![
            serde_json::from_value(serde_json::json!({"name": "v", "mountPath": rw_path})).unwrap(),
        ]);
        spec.containers[0].volume_mounts = Some(vec![
            serde_json::from_value(serde_json::json!({"name": "v", "mountPath": ro_path, "readOnly": true})).unwrap(),
        ]);
        spec.containers.push(rw);
        p
    };
    create(&c, two("ro-win", "win-0", "C:\\mnt\\volume", "C:\\mnt\\rw")).await;
    create(&c, two("ro-lin", "lin-0", "/mnt/volume", "/mnt/rw")).await;
    wait_pod(&c, "ro-win", "Running", running_ready).await;
    wait_pod(&c, "ro-lin", "Running", running_ready).await;
    let (out, err, code) = exec(
        &c,
        "ro-win",
        &["cmd", "/c", "echo windows-volume-test> C:\\mnt\\volume\\file.txt"],
    )
    .await;
    assert!(
        code.is_some() && format!("{out}{err}").contains("Access is denied."),
        "{out}{err}"
    );
    let (_, err, code) = exec_in(
        &c,
        "ro-win",
        "rw",
        &["cmd", "/c", "echo from-rw> C:\\mnt\\rw\\file.txt"],
    )
    .await;
    assert_eq!(code, None, "{err}");
    let (out, _, code) = exec(&c, "ro-win", &["cmd", "/c", "type C:\\mnt\\volume\\file.txt"]).await;
    assert_eq!((out.trim(), code), ("from-rw", None));
    let (out, err, code) = exec(&c, "ro-lin", &["sh", "-c", "echo x > /mnt/volume/file.txt"]).await;
    assert!(
        code.is_some() && format!("{out}{err}").contains("Read-only file system"),
        "{out}{err}"
    );
    // emptyDir medium Memory and subPath: unsupported on Windows, fine on Linux.
    for (name, node) in [("mem-win", "win-1"), ("mem-lin", "lin-0")] {
        let p = with_volume(
            pod(name, node, AGNHOST, None, vec!["pause"]),
            serde_json::json!({"name": "m", "emptyDir": {"medium": "Memory"}}),
            serde_json::json!({"name": "m", "mountPath": "/mnt/m"}),
        );
        create(&c, p).await;
    }
    let msg = wait_waiting(&c, "mem-win", "CreateContainerError").await;
    assert!(msg.contains("medium Memory"), "{msg}");
    wait_pod(&c, "mem-lin", "Running", running_ready).await;
    for (name, node) in [("sub-win", "win-1"), ("sub-lin", "lin-0")] {
        let p = with_volume(
            pod(name, node, AGNHOST, None, vec!["pause"]),
            serde_json::json!({"name": "s", "emptyDir": {}}),
            serde_json::json!({"name": "s", "mountPath": "/mnt/s", "subPath": "x"}),
        );
        create(&c, p).await;
    }
    let msg = wait_waiting(&c, "sub-win", "CreateContainerError").await;
    assert!(msg.contains("subPath"), "{msg}");
    wait_pod(&c, "sub-lin", "Running", running_ready).await;
    // A host named pipe mapped through hostPath shows in the container's pipe namespace; a pipe
    // the host does not have fails the container.
    for (name, pipe) in [("pipe-ok", "containerd-containerd"), ("pipe-missing", "no-such-pipe")] {
        let path = format!(r"\\.\pipe\{pipe}");
        let p = with_volume(
            pod(name, "win-0", AGNHOST, None, vec!["pause"]),
            serde_json::json!({"name": "p", "hostPath": {"path": path}}),
            serde_json::json!({"name": "p", "mountPath": path}),
        );
        create(&c, p).await;
    }
    wait_pod(&c, "pipe-ok", "Running", running_ready).await;
    let (out, _, code) = exec(&c, "pipe-ok", &["cmd", "/c", r"dir /b \\.\pipe\"]).await;
    assert_eq!(code, None);
    assert!(out.lines().any(|l| l.trim() == "containerd-containerd"), "{out}");
    let msg = wait_waiting(&c, "pipe-missing", "CreateContainerError").await;
    assert!(
        msg.contains(r"named pipe \\.\pipe\no-such-pipe does not exist"),
        "{msg}"
    );
    // runAsUserName: applied; an unknown user fails; ContainerAdministrator + runAsNonRoot refused.
    let user = |name: &str, u: &str, non_root: bool| {
        let mut p = pod(name, "win-0", AGNHOST, None, vec!["pause"]);
        p.spec.as_mut().unwrap().security_context = Some(
            serde_json::from_value(
                serde_json::json!({"runAsNonRoot": non_root, "windowsOptions": {"runAsUserName": u}}),
            )
            .unwrap(),
        );
        p
    };
    create(&c, user("user-ok", "ContainerUser", false)).await;
    create(&c, user("user-bad", "NoSuchUser", false)).await;
    create(&c, user("user-admin", "ContainerAdministrator", true)).await;
    wait_pod(&c, "user-ok", "Running", running_ready).await;
    let (out, _, _) = exec(&c, "user-ok", &["cmd", "/c", "whoami"]).await;
    assert_eq!(out.trim(), "user manager\\containeruser");
    wait_event(&c, "user-bad", "Failed", "The user name or password is incorrect").await;
    let msg = wait_waiting(&c, "user-admin", "CreateContainerConfigError").await;
    assert!(msg.contains("non-root"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_rows_restarts_and_deletion() {
    let c = cluster().await;
    create(&c, pod("w", "win-0", AGNHOST, None, vec!["pause"])).await;
    create(&c, pod("l", "lin-0", AGNHOST, None, vec!["pause"])).await;
    wait_pod(&c, "w", "Running", running_ready).await;
    wait_pod(&c, "l", "Running", running_ready).await;
    // ICMP outside the cluster: no reply from Windows, a reply from Linux; TCP egress works.
    let ext = crossconf_sim::addr::MODELLED_EXTERNAL_IPS[0].to_string();
    let (out, _, code) = exec(&c, "w", &["cmd", "/c", &format!("ping -n 1 -w 100 {ext}")]).await;
    assert!(code.is_some() && out.contains("Request timed out."), "{out}");
    let (out, _, code) = exec(&c, "l", &["sh", "-c", &format!("ping -c 1 {ext}")]).await;
    assert!(code.is_none(), "{out}");
    let node_ip = c.nodes[2].ip().to_string();
    let (out, _, code) = exec(&c, "w", &["cmd", "/c", &format!("ping -n 1 {node_ip}")]).await;
    assert!(code.is_none(), "ping inside the cluster works: {out}");
    let (out, _, code) = exec(&c, "w", &["curl.exe", "-s", &format!("http://{ext}/hostname")]).await;
    assert_eq!((out.as_str(), code), ("outside", None));
    // Egress by name through the node resolver (dnsPolicy ClusterFirst forwards it).
    let (out, _, code) = exec(
        &c,
        "w",
        &[
            "curl.exe",
            "-s",
            &format!("http://{}:8080/hostname", crossconf_sim::addr::EXTERNAL_NAME),
        ],
    )
    .await;
    assert_eq!((out.as_str(), code), ("outside", None));
    // A real outside address is modelled unreachable: nothing is sent.
    let before = c.net.dialer().refusals().len();
    let (_, err, code) = exec(&c, "l", &["sh", "-c", "wget -T 1 -q -O - http://1.1.1.1/"]).await;
    assert!(code.is_some(), "{err}");
    assert!(
        c.net.dialer().refusals()[before..]
            .iter()
            .any(|r| r.dst == "1.1.1.1".parse::<IpAddr>().unwrap())
    );
    // /etc/hosts: managed on Linux (the pod IP is there), not on Windows.
    let lp = Api::<Pod>::namespaced(c.client.clone(), NS).get("l").await.unwrap();
    let (out, _, _) = exec(&c, "l", &["/agnhost", "etc-hosts"]).await;
    assert!(out.contains(&pod_ip(&lp).to_string()), "{out}");
    let wp = Api::<Pod>::namespaced(c.client.clone(), NS).get("w").await.unwrap();
    let (out, _, _) = exec(&c, "w", &["/agnhost", "etc-hosts"]).await;
    assert!(!out.contains(&pod_ip(&wp).to_string()), "{out}");
    // CrashLoopBackOff with restarts and the last exit code.
    create(
        &c,
        pod("crash", "win-1", AGNHOST, Some(vec!["cmd", "/c", "exit 3"]), vec![]),
    )
    .await;
    let p = wait_pod(&c, "crash", "restarts", restarted).await;
    let cs = &p.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(
        cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code,
        3
    );
    wait_event(&c, "crash", "BackOff", "Back-off restarting failed container c").await;
    // Graceful deletion: the kubelet stops the containers and removes the pod.
    let api = Api::<Pod>::namespaced(c.client.clone(), NS);
    let uid = api.get("w").await.unwrap().metadata.uid.unwrap();
    api.delete("w", &DeleteParams::default()).await.expect("delete");
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(api.clone(), "w", kube::runtime::conditions::is_deleted(&uid)),
    )
    .await
    .expect("deleted in time")
    .expect("watch");
    wait_event(&c, "w", "Killing", "Stopping container c").await;
    let _ = BTreeMap::<String, String>::new();
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Issue 4's benchmark: 300 pause pods on 3 nodes (fast profile) to Running, and the
/// simulator's resident memory. Run with `cargo test --test sim_node -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark; run explicitly with --ignored --nocapture"]
async fn bench_300_pods_to_running() {
    let c = cluster().await;
    let names = ["win-0", "win-1", "lin-0"];
    let started = std::time::Instant::now();
    let api = Api::<Pod>::namespaced(c.client.clone(), NS);
    let creates = (0..300).map(|i| {
        let api = api.clone();
        let p = pod(
            &format!("bench-{i}"),
            names[i % 3],
            "registry.k8s.io/pause:3.10",
            None,
            vec![],
        );
        async move { api.create(&PostParams::default(), &p).await.map(|_| ()) }
    });
    for r in futures::future::join_all(creates).await {
        r.expect("create bench pod");
    }
    let created = started.elapsed();
    let mut running = 0;
    while started.elapsed() < Duration::from_secs(120) {
        let list = api.list(&ListParams::default()).await.expect("list");
        running = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if running == 300 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = started.elapsed();
    println!(
        "bench: 300 pods on 3 nodes: created in {created:?}, all Running after {took:?}; resident memory {} MiB",
        rss_kib() / 1024
    );
    assert_eq!(running, 300, "only {running} of 300 pods reached Running in {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_probes_hooks_init_and_env() {
    let c = cluster().await;
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": NS}, "data": {"greeting": "hello-cm"},
    }))
    .unwrap();
    Api::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &cm)
        .await
        .expect("configmap");
    let p: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "life", "namespace": NS},
        "spec": {
            "nodeName": "win-0",
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "shared", "emptyDir": {}}],
            "initContainers": [{"name": "init", "image": AGNHOST, "command": ["cmd", "/c", "echo from-init> C:\\mnt\\shared\\init.txt"],
                                "volumeMounts": [{"name": "shared", "mountPath": "C:\\mnt\\shared"}]}],
            "containers": [{
                "name": "c", "image": AGNHOST, "args": ["netexec", "--http-port=8080", "--udp-port=8081"],
                "ports": [{"name": "http", "containerPort": 8080}],
                "env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}},
                        {"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "volumeMounts": [{"name": "shared", "mountPath": "C:\\mnt\\shared"}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1},
                "lifecycle": {"postStart": {"exec": {"command": ["cmd", "/c", "echo from-hook> C:\\mnt\\shared\\hook.txt"]}}},
            }],
        },
    }))
    .unwrap();
    create(&c, p).await;
    let p = wait_pod(&c, "life", "Running and Ready", running_ready).await;
    let init = &p.status.as_ref().unwrap().init_container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        init.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("Completed")
    );
    let (out, _, _) = exec(&c, "life", &["cmd", "/c", "type C:\\mnt\\shared\\init.txt & type C:\\mnt\\shared\\hook.txt & echo %GREETING% %MY_POD% %KUBERNETES_SERVICE_HOST%"]).await;
    let kube_ip = c.net.block().kubernetes_service().to_string();
    assert!(
        out.contains("from-init")
            && out.contains("from-hook")
            && out.contains("hello-cm life")
            && out.contains(&kube_ip),
        "{out}"
    );
    // A failing liveness probe restarts the container, with Unhealthy and Killing events.
    let live: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "live", "namespace": NS},
        "spec": {"nodeName": "lin-0", "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "c", "image": AGNHOST, "args": ["pause"],
            "livenessProbe": {"exec": {"command": ["sh", "-c", "exit 1"]}, "periodSeconds": 1, "failureThreshold": 1},
        }]},
    }))
    .unwrap();
    create(&c, live).await;
    wait_event(&c, "live", "Unhealthy", "Liveness probe failed").await;
    wait_event(&c, "live", "Killing", "failed liveness probe, will be restarted").await;
    wait_pod(&c, "live", "a restart", restarted).await;
    // A missing ConfigMap key is a CreateContainerConfigError naming it.
    let mut bad = pod("badenv", "win-1", AGNHOST, None, vec!["pause"]);
    bad.spec.as_mut().unwrap().containers[0].env = Some(vec![
        serde_json::from_value(serde_json::json!(
            {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope"}}}
        ))
        .unwrap(),
    ]);
    create(&c, bad).await;
    let msg = wait_waiting(&c, "badenv", "CreateContainerConfigError").await;
    assert!(msg.contains("couldn't find key nope in ConfigMap default/cfg"), "{msg}");
}

// --- Windows behaviour model rows not covered above -------------------------------------------
//
// DESIGN.md "Windows behaviour model", row by row, and the test that shows each:
// - Linux image / Windows image of another build: `image_and_sandbox_rows_of_the_windows_model`
// - hostNetwork without HostProcess: `image_and_sandbox_rows_of_the_windows_model`
// - Linux-only security fields (rejected with spec.os windows, ignored without):
//   `security_context_row_of_the_windows_model`
// - runAsUserName applied, unknown user fails: `volume_and_user_rows_of_the_windows_model`
// - emptyDir medium Memory: `volume_and_user_rows_of_the_windows_model`; hugepages:
//   `hugepages_and_file_mount_rows_of_the_windows_model`
// - subPath: `volume_and_user_rows_of_the_windows_model`; a single-file mount:
//   `hugepages_and_file_mount_rows_of_the_windows_model`
// - read-only volume mount: `volume_and_user_rows_of_the_windows_model`
// - DNS: dotted names fully qualified: `nodeport_on_every_node_and_cluster_dns`; configured
//   through CNI (no resolv.conf) and ClusterFirstWithHostNet: `dns_row_of_the_windows_model`
// - ICMP outside the cluster, /etc/hosts: `network_rows_restarts_and_deletion`
// - stats: `windows_netexec_pod_serves_exec_logs_and_stats` (pod cpu/memory/logs) and
//   `stats_row_of_the_windows_model` (node, pod, container: cpu, memory, fs, logs, network)

/// Creates `p` and returns the API server's error, which must be a 422 Invalid.
async fn create_rejected(c: &Cluster, p: Pod) -> Box<kube::core::Status> {
    match Api::<Pod>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &p)
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            e
        }
        other => panic!("pod {:?} was not rejected: {other:?}", p.metadata.name),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_context_row_of_the_windows_model() {
    let c = cluster().await;
    let linux_only_fields = |name: &str, os_field: bool| {
        let mut p = pod(name, "win-0", AGNHOST, None, vec!["pause"]);
        let spec = p.spec.as_mut().unwrap();
        if os_field {
            spec.os = Some(serde_json::from_value(serde_json::json!({"name": "windows"})).unwrap());
        }
        spec.security_context = Some(
            serde_json::from_value(serde_json::json!({
                "runAsUser": 1000, "runAsGroup": 3000,
                "seLinuxOptions": {"level": "s0:c123,c456"},
            }))
            .unwrap(),
        );
        spec.containers[0].security_context = Some(
            serde_json::from_value(serde_json::json!({
                "privileged": true, "capabilities": {"add": ["NET_ADMIN"]},
                "readOnlyRootFilesystem": true, "procMount": "Default", "runAsUser": 1000,
            }))
            .unwrap(),
        );
        p
    };
    // With spec.os.name windows the API server refuses each Linux-only field by path.
    let e = create_rejected(&c, linux_only_fields("sc-os", true)).await;
    for field in [
        "securityContext.runAsUser",
        "securityContext.runAsGroup",
        "securityContext.seLinuxOptions",
        "privileged",
        "capabilities",
        "readOnlyRootFilesystem",
        "procMount",
    ] {
        assert!(e.message.contains(field), "{field} not named: {}", e.message);
    }
    assert!(e.message.contains("cannot be set for a windows pod"), "{}", e.message);
    // Without it the pod is admitted and the Windows node ignores the fields: it runs as the
    // image's user, and the root filesystem stays writable.
    create(&c, linux_only_fields("sc-ignored", false)).await;
    wait_pod(&c, "sc-ignored", "Running", running_ready).await;
    let (out, _, code) = exec(&c, "sc-ignored", &["cmd", "/c", "whoami"]).await;
    assert_eq!((out.trim(), code), ("user manager\\containeradministrator", None));
    let (out, err, code) = exec(
        &c,
        "sc-ignored",
        &["cmd", "/c", "echo x> C:\\written.txt && type C:\\written.txt"],
    )
    .await;
    assert_eq!((out.trim(), code), ("x", None), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hugepages_and_file_mount_rows_of_the_windows_model() {
    let c = cluster().await;
    // hugepages: the container cannot be created on Windows.
    let mut huge = pod("huge-win", "win-0", AGNHOST, None, vec!["pause"]);
    huge.spec.as_mut().unwrap().containers[0].resources = Some(
        serde_json::from_value(serde_json::json!({
            "requests": {"memory": "100Mi", "hugepages-2Mi": "100Mi"},
            "limits": {"memory": "100Mi", "hugepages-2Mi": "100Mi"},
        }))
        .unwrap(),
    );
    create(&c, huge).await;
    let msg = wait_waiting(&c, "huge-win", "CreateContainerError").await;
    assert!(msg.contains("hugepages"), "{msg}");
    // A volume mounted onto a single file (hostPath of type FileOrCreate): unsupported on
    // Windows, fine on Linux.
    for (name, node, host, at) in [
        ("file-win", "win-1", "C:\\var\\crossconf\\one.txt", "C:\\mnt\\one.txt"),
        ("file-lin", "lin-0", "/var/crossconf/one.txt", "/mnt/one.txt"),
    ] {
        let p = with_volume(
            pod(name, node, AGNHOST, None, vec!["pause"]),
            serde_json::json!({"name": "f", "hostPath": {"path": host, "type": "FileOrCreate"}}),
            serde_json::json!({"name": "f", "mountPath": at}),
        );
        create(&c, p).await;
    }
    let msg = wait_waiting(&c, "file-win", "CreateContainerError").await;
    assert!(msg.contains("onto a single file") && msg.contains("Windows"), "{msg}");
    wait_pod(&c, "file-lin", "Running", running_ready).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_row_of_the_windows_model() {
    let c = cluster().await;
    let dns_ip = c.net.block().dns_service().to_string();
    create(&c, pod("dns-win", "win-0", AGNHOST, None, vec!["pause"])).await;
    create(&c, pod("dns-lin", "lin-0", AGNHOST, None, vec!["pause"])).await;
    wait_pod(&c, "dns-win", "Running", running_ready).await;
    wait_pod(&c, "dns-lin", "Running", running_ready).await;
    // Windows: the DNS servers and suffixes come from the network configuration (what
    // agnhost dns-server-list / dns-suffix read), and there is no /etc/resolv.conf.
    let (out, _, code) = exec(&c, "dns-win", &["/agnhost", "dns-server-list"]).await;
    assert_eq!((out.trim(), code), (dns_ip.as_str(), None));
    let (out, _, _) = exec(&c, "dns-win", &["/agnhost", "dns-suffix"]).await;
    assert!(out.trim().starts_with("default.svc.cluster.local"), "{out}");
    let (out, err, code) = exec(&c, "dns-win", &["cmd", "/c", "type C:\\etc\\resolv.conf"]).await;
    assert!(code.is_some(), "a Windows container has no resolv.conf: {out}{err}");
    // Linux: the kubelet writes /etc/resolv.conf with the same server.
    let (out, _, code) = exec(&c, "dns-lin", &["cat", "/etc/resolv.conf"]).await;
    assert!(code.is_none() && out.contains(&format!("nameserver {dns_ip}")), "{out}");
    // ClusterFirstWithHostNet: the Windows sandbox cannot be set up; Linux accepts it.
    for (name, node) in [("cfhn-win", "win-1"), ("cfhn-lin", "lin-0")] {
        let mut p = pod(name, node, AGNHOST, None, vec!["pause"]);
        p.spec.as_mut().unwrap().dns_policy = Some("ClusterFirstWithHostNet".into());
        create(&c, p).await;
    }
    wait_event(&c, "cfhn-win", "FailedCreatePodSandBox", "ClusterFirstWithHostNet").await;
    wait_pod(&c, "cfhn-lin", "Running", running_ready).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_row_of_the_windows_model() {
    let c = cluster().await;
    create(&c, netexec("stats-win", "win-1")).await;
    let p = wait_pod(&c, "stats-win", "Running", running_ready).await;
    // Some traffic, so the pod's network counters move.
    let (code, body) = http_get(&c, SocketAddr::new(pod_ip(&p).into(), 8080), "/hostname").await;
    assert_eq!((code, body.as_str()), (200, "stats-win"));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let summary = stats_summary(&c, "win-1").await;
    let positive = |v: &serde_json::Value, path: &str| {
        let n = v.pointer(path).and_then(serde_json::Value::as_u64);
        assert!(n.is_some_and(|n| n > 0), "{path} is {n:?} in {v}");
    };
    let node = &summary["node"];
    assert_eq!(node["nodeName"], "win-1");
    for path in [
        "/cpu/usageNanoCores",
        "/cpu/usageCoreNanoSeconds",
        "/memory/workingSetBytes",
        "/fs/capacityBytes",
        "/fs/availableBytes",
        "/network/rxBytes",
        "/runtime/imageFs/usedBytes",
    ] {
        positive(node, path);
    }
    let pod_stats = summary["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["podRef"]["name"] == "stats-win" && p["podRef"]["namespace"] == NS)
        .expect("the pod in the summary");
    for path in [
        "/cpu/usageCoreNanoSeconds",
        "/memory/workingSetBytes",
        "/network/rxBytes",
        "/network/txBytes",
    ] {
        positive(pod_stats, path);
    }
    let container = &pod_stats["containers"][0];
    assert_eq!(container["name"], "c");
    for path in [
        "/cpu/usageCoreNanoSeconds",
        "/memory/workingSetBytes",
        "/rootfs/usedBytes",
        "/rootfs/capacityBytes",
        "/logs/availableBytes",
        "/logs/usedBytes",
    ] {
        positive(container, path);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_addons_run_on_the_nodes_of_their_os() {
    let c = cluster().await;
    let ds = Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(c.client.clone(), "kube-system");
    // Each add-on DaemonSet has a ready pod on every node of its OS, and only there.
    for (name, os, nodes) in [
        ("kube-proxy", "linux", 1),
        ("kube-flannel-ds", "linux", 1),
        ("kube-proxy-windows", "windows", 2),
        ("kube-flannel-ds-windows-amd64", "windows", 2),
    ] {
        let ready = |d: Option<&k8s_openapi::api::apps::v1::DaemonSet>| {
            d.and_then(|d| d.status.as_ref())
                .is_some_and(|s| s.desired_number_scheduled == nodes && s.number_ready == nodes)
        };
        tokio::time::timeout(Duration::from_secs(30), await_condition(ds.clone(), name, ready))
            .await
            .unwrap_or_else(|_| panic!("{name}: not {nodes} ready pods in 30s"))
            .expect("watch");
        let pods = Api::<Pod>::namespaced(c.client.clone(), "kube-system")
            .list(&ListParams::default())
            .await
            .unwrap();
        let placed: Vec<String> = pods
            .items
            .iter()
            .filter(|p| p.metadata.owner_references.iter().flatten().any(|o| o.name == name))
            .map(|p| p.spec.as_ref().unwrap().node_name.clone().unwrap_or_default())
            .collect();
        let prefix = if os == "windows" { "win-" } else { "lin-" };
        assert!(
            placed.len() == nodes as usize && placed.iter().all(|n| n.starts_with(prefix)),
            "{name} placed on {placed:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalogue_dns_tools_image_resolves_names_on_both_oses() {
    let c = cluster().await;
    let catalog = crossconf_model::images::ImageCatalog::load_default();
    for (name, node, os, build) in [
        ("dnsutils-win", "win-0", Os::Windows, Some("10.0.20348")),
        ("dnsutils-lin", "lin-0", Os::Linux, None),
    ] {
        let image = catalog.resolve("jessie-dnsutils", os, build).unwrap().reference;
        let command = match os {
            Os::Windows => vec!["cmd", "/c", "ping -t localhost"],
            Os::Linux => vec!["sleep", "3600"],
        };
        create(&c, pod(name, node, &image, Some(command), vec![])).await;
        wait_pod(&c, name, "Running", running_ready).await;
        let (out, err, code) = exec(&c, name, &["nslookup", "kubernetes.default.svc.cluster.local"]).await;
        assert!(code.is_none(), "{name}: {out}{err}");
        assert!(out.contains("kubernetes.default.svc.cluster.local"), "{name}: {out}");
    }
}
