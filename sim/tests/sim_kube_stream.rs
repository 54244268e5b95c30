//! kube-rs streaming against the simulated cluster: `Api::exec` with
//! `AttachParams::stdin(true)` (stdin written while `cat` runs, its echo read before stdin
//! closes) and `Api::portforward` to a pod's HTTP server.

use std::time::Duration;

use crossconf_sim::{SimCluster, SimConfig};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{AttachParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn running(pods: &Api<Pod>, name: &str) {
    let ready = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| !cs.is_empty() && cs.iter().all(|c| c.ready))
    };
    tokio::time::timeout(
        Duration::from_secs(30),
        kube::runtime::wait::await_condition(pods.clone(), name, ready),
    )
    .await
    .unwrap_or_else(|_| panic!("{name} not ready in 30 s"))
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kube_rs_exec_stdin_and_portforward() {
    let sim = SimCluster::start(SimConfig::default()).await.expect("sim starts");
    let client = Client::try_from(sim.kube_config()).unwrap();
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "kr"}})).unwrap(),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "kr");
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "containers": [{"name": "c", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                            "args": ["netexec", "--http-port=8080"]}],
        },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    running(&pods, "web").await;

    let mut proc = pods
        .exec("web", ["cat"], &AttachParams::default().stdin(true).stderr(false))
        .await
        .unwrap();
    let mut stdin = proc.stdin().unwrap();
    let mut stdout = proc.stdout().unwrap();
    stdin.write_all(b"hello\n").await.unwrap();
    let mut echo = [0u8; 6];
    tokio::time::timeout(Duration::from_secs(10), stdout.read_exact(&mut echo))
        .await
        .expect("cat answers while stdin is still open")
        .unwrap();
    assert_eq!(&echo, b"hello\n");
    // kube-rs sends v5's close-stdin signal when the writer is shut down.
    stdin.shutdown().await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), proc.take_status().unwrap())
        .await
        .expect("cat ends when stdin closes");
    assert_eq!(status.and_then(|s| s.status).as_deref(), Some("Success"));

    let mut pf = pods.portforward("web", &[8080]).await.unwrap();
    let mut s = pf.take_stream(8080).unwrap();
    s.write_all(b"GET /hostname HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"web") {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("an answer through the forward")
            .unwrap();
        assert!(n > 0, "forward closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
    drop(s);
    pf.abort();
    sim.shutdown().await;
}
