//! Pod start-up latency on a Windows node (upstream `windows/density.go`): a batch of pods
//! created at once, their p50/p90/p99 start-up latency against upstream's limits.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder};

/// Upstream density.go.
pub const DENSITY: &str = "[sig-windows] [Feature:Windows] Density [Serial] [Slow] create a batch of pods latency/resource should be within limit when create 10 pods with 0s interval";

/// The cases of this group, in catalogue order.
pub(super) fn cases() -> Vec<Case> {
    vec![crate::case!(DENSITY, Kind::WindowsSpecific, density)]
}

/// Upstream density.go limits for Windows pod start-up latency (p50, p90, p99).
pub const DENSITY_LIMITS: [(u32, Duration); 3] = [
    (50, Duration::from_secs(30)),
    (90, Duration::from_secs(54)),
    (99, Duration::from_secs(59)),
];

/// The nearest-rank percentile `p` of sorted `values`.
pub(crate) fn percentile(sorted: &[f64], p: u32) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (f64::from(p) / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Aborts a spawned task when dropped, so a case that returns early leaves no watch behind.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Upstream density.go "should be within limit when create 10 pods with 0s interval": N pause
/// pods (`--density-pods`, default 10) created at once; creation→running latency p50/p90/p99
/// recorded as properties and in `density-<namespace>.json`, and held to 30/54/59 s.
///
/// The latency is upstream's "e2e lag": from just before the runner's create call to the moment
/// its watch, opened before the first create, sees the pod Running. Both ends are the runner's
/// own clock, so sub-second starts are measured (the pods' timestamps have one-second
/// resolution and would report them all as 0).
async fn density(f: &Framework) -> CaseResult {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};

    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let n = f.settings().density_pods.unwrap_or(10).max(1);
    let builders: Vec<PodBuilder> = (0..n)
        .map(|i| {
            PodBuilder::new(&format!("density-{i}"), os)
                .label("type", "density")
                .container(ContainerBuilder::new("pause", "pause"))
        })
        .collect();
    let running: std::sync::Arc<Mutex<BTreeMap<String, Instant>>> = Default::default();
    let (listed_tx, listed_rx) = tokio::sync::oneshot::channel::<()>();
    let watch = {
        let running = running.clone();
        let config = watcher::Config::default().labels("type=density");
        let mut stream = watcher::watcher(f.api::<Pod>(), config).default_backoff().boxed();
        tokio::spawn(async move {
            let mut listed_tx = Some(listed_tx);
            while let Some(event) = stream.next().await {
                let pod = match event {
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = listed_tx.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::debug!(error = %e, "density watch error");
                        continue;
                    }
                };
                if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
                    let mut seen = running.lock().expect("density lock");
                    seen.entry(pod.metadata.name.clone().unwrap_or_default())
                        .or_insert_with(Instant::now);
                    if seen.len() >= n {
                        return;
                    }
                }
            }
        })
    };
    let _stop_watch = AbortOnDrop(watch.abort_handle());
    tokio::time::timeout(f.remaining(), listed_rx)
        .await
        .map_err(|_| CaseError::failed("the watch on the density pods never listed them"))?
        .map_err(|_| CaseError::failed("the watch on the density pods ended before it listed them"))?;
    let mut created = BTreeMap::new();
    for b in &builders {
        created.insert(b.name().to_string(), Instant::now());
        f.create_pod(b).await?;
    }
    let waited = Instant::now();
    if tokio::time::timeout(f.remaining(), watch).await.is_err() {
        let seen = running.lock().expect("density lock").clone();
        let pods = f.api::<Pod>().list(&Default::default()).await?;
        let pending: Vec<String> = pods
            .items
            .iter()
            .filter(|p| !seen.contains_key(p.metadata.name.as_deref().unwrap_or_default()))
            .map(|p| {
                format!(
                    "{} ({})",
                    p.metadata.name.clone().unwrap_or_default(),
                    p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
                )
            })
            .collect();
        crate::fail!(
            "{} of {n} density pods Running after {:.1?}; not Running: {}",
            seen.len(),
            waited.elapsed(),
            pending.join(", ")
        );
    }
    let seen = running.lock().expect("density lock").clone();
    let mut latencies = Vec::new();
    for (name, at) in &created {
        let Some(ran) = seen.get(name) else {
            crate::fail!("density pod {name} was never seen Running");
        };
        latencies.push(ran.saturating_duration_since(*at).as_secs_f64());
    }
    latencies.sort_by(f64::total_cmp);
    let mut report = serde_json::Map::new();
    let mut over = Vec::new();
    for (p, limit) in DENSITY_LIMITS {
        let v = percentile(&latencies, p).unwrap_or_default();
        f.property(format!("pod_startup_latency_p{p}_seconds"), format!("{v:.3}"));
        report.insert(format!("p{p}_seconds"), serde_json::json!(v));
        if v > limit.as_secs_f64() {
            over.push(format!("p{p} {v:.1}s > {}s", limit.as_secs()));
        }
    }
    report.insert("pods".into(), serde_json::json!(n));
    report.insert("latencies_seconds".into(), serde_json::json!(latencies));
    let dir = &f.run().artifacts_dir;
    let path = dir.join(format!("density-{}.json", f.ns()));
    let written = tokio::fs::create_dir_all(dir).await.and(
        tokio::fs::write(
            &path,
            serde_json::to_vec_pretty(&serde_json::Value::Object(report)).unwrap_or_default(),
        )
        .await,
    );
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), error = %e, "could not write the density report");
    }
    crate::ensure!(
        over.is_empty(),
        "pod start-up latency over the upstream limits for {n} pods: {}",
        over.join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 50), Some(5.0));
        assert_eq!(percentile(&v, 90), Some(9.0));
        assert_eq!(percentile(&v, 99), Some(10.0));
        assert_eq!(percentile(&[], 50), None);
    }
}
