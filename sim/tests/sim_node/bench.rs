//! The ignored pod start-up benchmark (`-- --ignored --nocapture`): 300 pause pods to Running
//! and the simulator's resident memory with them.

use super::*;

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
