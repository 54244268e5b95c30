//! Benchmark of the simulated API server (issue 3 item 7), printing figures:
//! GETs of one pod per second, LISTs of 1,000 pods per second, a 50-watcher fan-out, and
//! resident memory with 5,000 objects stored.
//!
//! The server runs in a child process (this binary again, with `BENCH_API_SERVE` set), so the
//! resident memory printed is the server's alone: measured in one process, the client's
//! decoded lists and the allocator's high-water mark after the load were counted with it. The
//! client still shares the two cores, so LIST is measured twice: with the body only checked
//! and its items counted (what the server can serve), and decoded into typed pods (what a
//! kube-rs caller sees, the client's decoding included).
//!
//! Run with `cargo run --release --example bench_api` (or without `--release` for a debug
//! build's figures). Everything stays on loopback: the server binds a 127.B.0.1 address.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crossconf_sim::addr::AddressBlock;
use crossconf_sim::api::{ApiConfig, ApiServer};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"bench": "yes"}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}))
    .expect("valid pod")
}

/// Resident set size of process `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(String::from))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// Runs `f` from `workers` tasks for `dur`; returns operations per second.
async fn rate<F, Fut>(workers: usize, dur: Duration, f: F) -> f64
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while start.elapsed() < dur {
                f().await;
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("worker");
    }
    total as f64 / start.elapsed().as_secs_f64()
}

/// Environment variable that makes this binary the server: it writes its kubeconfig to the
/// path the variable names, prints `ready` and serves until its stdin closes.
const SERVE: &str = "BENCH_API_SERVE";

/// The child process's side: one API server on a loopback block.
async fn serve(kubeconfig: &str) -> anyhow::Result<()> {
    let block = AddressBlock(230 + (std::process::id() % 9) as u8);
    let srv = ApiServer::start(ApiConfig::new(block).port(0)).await?;
    std::fs::write(kubeconfig, srv.kubeconfig_yaml("bench"))?;
    println!("ready");
    std::io::stdout().flush()?;
    // Serve until the parent closes our stdin (it exits or is done).
    tokio::task::spawn_blocking(|| std::io::stdin().lines().count()).await?;
    srv.shutdown().await;
    Ok(())
}

/// Starts the server process and returns it with a client for it once it is serving.
async fn start_server(dir: &std::path::Path) -> anyhow::Result<(Child, Client)> {
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(std::env::current_exe()?)
        .env(SERVE, &kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let out = child.stdout.take().expect("piped stdout");
    let line = tokio::task::spawn_blocking(move || BufReader::new(out).lines().next()).await?;
    anyhow::ensure!(
        matches!(line, Some(Ok(ref l)) if l == "ready"),
        "the server process did not start: {line:?}"
    );
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig)?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    Ok((child, Client::try_from(config)?))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    crossconf_sim::install_crypto_provider();
    if let Some(path) = std::env::var_os(SERVE) {
        return serve(&path.to_string_lossy()).await;
    }
    let dir = tempfile::tempdir()?;
    let (mut server, client) = start_server(dir.path()).await?;
    let rss_empty = rss_kib(server.id());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // 1,000 pods for GET/LIST.
    for i in 0..1000 {
        pods.create(&PostParams::default(), &pod(&format!("p{i:04}"))).await?;
    }
    let rss_loaded = rss_kib(server.id());
    let get = {
        let pods = pods.clone();
        rate(8, Duration::from_secs(3), move || {
            let pods = pods.clone();
            async move {
                pods.get("p0500").await.expect("get");
            }
        })
        .await
    };
    println!("GET one pod:          {get:>10.0} /s (8 concurrent clients)");
    let list = {
        let pods = pods.clone();
        rate(2, Duration::from_secs(3), move || {
            let pods = pods.clone();
            async move {
                let l = pods.list(&ListParams::default()).await.expect("list");
                assert_eq!(l.items.len(), 1000);
            }
        })
        .await
    };
    println!("LIST of 1,000 pods:   {list:>10.1} /s (2 concurrent clients, decoded into typed pods)");
    let raw_list = {
        let client = client.clone();
        rate(2, Duration::from_secs(3), move || {
            let client = client.clone();
            async move {
                /// The list's items, each skipped without building anything.
                #[derive(serde::Deserialize)]
                struct Counted {
                    items: Vec<serde::de::IgnoredAny>,
                }
                let req = http::Request::get("/api/v1/namespaces/default/pods")
                    .body(Vec::new())
                    .expect("request");
                let text = client.request_text(req).await.expect("list");
                let counted: Counted = serde_json::from_str(&text).expect("a pod list");
                assert_eq!(counted.items.len(), 1000);
            }
        })
        .await
    };
    println!("LIST of 1,000 pods:   {raw_list:>10.1} /s (2 concurrent clients, body counted, not decoded)");

    // 50 watchers, 200 new pods: time until every watcher has seen every ADDED.
    let rv = pods
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut watchers = Vec::new();
    for _ in 0..50 {
        let pods = pods.clone();
        let rv = rv.clone();
        let mut stream = pods.watch(&WatchParams::default(), &rv).await?.boxed();
        watchers.push(tokio::spawn(async move {
            let mut seen = 0;
            while seen < 200 {
                match stream.next().await {
                    Some(Ok(WatchEvent::Added(_))) => seen += 1,
                    Some(Ok(_)) => {}
                    _ => break,
                }
            }
            seen
        }));
    }
    let start = Instant::now();
    for i in 0..200 {
        pods.create(&PostParams::default(), &pod(&format!("w{i:04}"))).await?;
    }
    let mut delivered = 0;
    for w in watchers {
        delivered += w.await?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "watch fan-out:        {delivered} events to 50 watchers in {secs:.2} s ({:.0} events/s)",
        delivered as f64 / secs
    );

    // Memory with 5,000 objects (the 1,200 pods plus configmaps).
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..3800 {
        let cm =
            serde_json::from_value(json!({"metadata": {"name": format!("cm{i:04}")}, "data": {"k": "v".repeat(64)}}))?;
        cms.create(&PostParams::default(), &cm).await?;
    }
    println!(
        "server RSS:           {:.1} MiB empty, {:.1} MiB with 1,000 pods (before the load), \
         {:.1} MiB with 5,000 objects (plus watch history, after the load)",
        rss_empty as f64 / 1024.0,
        rss_loaded as f64 / 1024.0,
        rss_kib(server.id()) as f64 / 1024.0
    );
    drop(server.stdin.take());
    let status = server.wait()?;
    anyhow::ensure!(status.success(), "the server process ended with {status}");
    Ok(())
}
