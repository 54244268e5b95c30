//! Upstream `[sig-network] Service endpoints latency should not be very high`
//! (test/e2e/network/service_latency.go): a ReplicationController runs one pause pod of the
//! target OS; 200 Services selecting it are created, 15 at a time, and each one's latency is the
//! time from its create call until one watch on the namespace's Endpoints (as kube-proxy would
//! consume them) sees its Endpoints with an address. The median must stay under 20 s and the
//! 99th percentile under 50 s, with at least 100 samples and at most 5 % of trials failing.
//!
//! Departure: upstream waits for every trial without a limit; a trial here gives up after the
//! tail limit (50 s, a latency that fails the case anyway) and the case stops starting trials
//! once more than 5 % have failed, so a cluster that never publishes endpoints fails in about a
//! minute instead of hanging.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Endpoints, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::catalog::{Case, Kind};
use crate::framework::workloads::{conditions as wl, replication_controller, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};

/// Upstream service_latency.go "should not be very high" (its name ends in a space upstream;
/// e2e.test trims it).
pub const ENDPOINTS_LATENCY: &str = "[sig-network] Service endpoints latency should not be very high [Conformance]";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![crate::case!(ENDPOINTS_LATENCY, Kind::Adapted, endpoints_latency)]
}

/// Upstream's thresholds and sample sizes.
const LIMIT_MEDIAN: Duration = Duration::from_secs(20);
const LIMIT_TAIL: Duration = Duration::from_secs(50);
const TOTAL_TRIALS: usize = 200;
const PARALLEL_TRIALS: usize = 15;
const MIN_SAMPLE_SIZE: usize = 100;
/// At most this many of [`TOTAL_TRIALS`] may fail (upstream's acceptable ratio, 5 %).
const ACCEPTABLE_FAILURES: usize = TOTAL_TRIALS / 20;
/// The RC's name; its pod is labelled `name=<it>` and every Service selects that.
const RC: &str = "svc-latency-rc";

/// When each Endpoints object was first seen with an address, shared between the watch and
/// the trials.
#[derive(Default)]
struct Seen {
    at: Mutex<HashMap<String, Instant>>,
    changed: Notify,
}

impl Seen {
    fn record(&self, e: &Endpoints) {
        let has_address = e
            .subsets
            .as_ref()
            .and_then(|s| s.first())
            .and_then(|s| s.addresses.as_ref())
            .is_some_and(|a| !a.is_empty());
        if has_address && let Some(name) = e.metadata.name.clone() {
            self.at
                .lock()
                .expect("seen lock")
                .entry(name)
                .or_insert_with(Instant::now);
            self.changed.notify_waiters();
        }
    }

    fn get(&self, name: &str) -> Option<Instant> {
        self.at.lock().expect("seen lock").get(name).copied()
    }

    /// Waits until `name` has been seen with an address, or `until`.
    async fn wait(&self, name: &str, until: Instant) -> Option<Instant> {
        loop {
            let changed = self.changed.notified();
            if let Some(at) = self.get(name) {
                return Some(at);
            }
            if tokio::time::timeout_at(until, changed).await.is_err() {
                return self.get(name);
            }
        }
    }
}

/// The `p`th percentile of sorted `d` as upstream picks it (`d[n*p/100]`, capped).
fn percentile(d: &[Duration], p: usize) -> Duration {
    let est = d.len() * p / 100;
    d[est.min(d.len() - 1)]
}

/// What is wrong with a run's latencies (upstream's `failing` set), empty when it passes.
fn verdict(sorted: &[Duration], errors: &[String]) -> Vec<String> {
    let mut failing = Vec::new();
    if errors.len() > ACCEPTABLE_FAILURES {
        failing.push(format!(
            "Not all RC/pod/service trials succeeded: {} of {TOTAL_TRIALS} failed, more than {ACCEPTABLE_FAILURES} \
             (first: {})",
            errors.len(),
            errors.first().map(String::as_str).unwrap_or_default()
        ));
    }
    if sorted.len() < MIN_SAMPLE_SIZE {
        failing.push(format!(
            "Did not get a good sample size: {} latencies, expected at least {MIN_SAMPLE_SIZE}",
            sorted.len()
        ));
    }
    if sorted.len() >= 2 {
        if percentile(sorted, 50) > LIMIT_MEDIAN {
            failing.push(format!("Median latency should be less than {LIMIT_MEDIAN:?}"));
        }
        if percentile(sorted, 99) > LIMIT_TAIL {
            failing.push(format!(
                "Tail (99 percentile) latency should be less than {LIMIT_TAIL:?}"
            ));
        }
    }
    failing
}

/// One trial: creates Service `name` selecting the RC's pod and returns how long its Endpoints
/// took to show an address to the watch.
async fn single_latency(f: &Framework, seen: &Seen, name: &str) -> Result<Duration, String> {
    let svc = Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                protocol: Some("TCP".into()),
                port: 80,
                ..Default::default()
            }]),
            selector: Some([("name".to_string(), RC.to_string())].into()),
            type_: Some("ClusterIP".into()),
            session_affinity: Some("None".into()),
            ..Default::default()
        }),
        status: None,
    };
    let start = Instant::now();
    f.api::<Service>()
        .create(&PostParams::default(), &svc)
        .await
        .map_err(|e| format!("creating service {name}: {e}"))?;
    match seen.wait(name, start + LIMIT_TAIL).await {
        Some(at) => Ok(at.max(start).duration_since(start)),
        None => Err(format!("never got a result for endpoint {name} within {LIMIT_TAIL:?}")),
    }
}

/// Upstream service_latency.go "should not be very high".
async fn endpoints_latency(f: &Framework) -> CaseResult {
    let pod = f
        .pod(RC)
        .label("name", RC)
        .container(ContainerBuilder::new(RC, "agnhost").args(["pause"]));
    f.create(&replication_controller(RC, 1, template_of(pod.build(f)?)))
        .await?;
    f.wait_for(
        &f.api::<k8s_openapi::api::core::v1::ReplicationController>(),
        RC,
        wl::replication_controller_ready(1),
        "to run its pause pod",
    )
    .await?;

    // One watch on the namespace's Endpoints, synced before any trial starts.
    let seen = Arc::new(Seen::default());
    let synced = Arc::new(Notify::new());
    let watch = {
        let (seen, synced) = (seen.clone(), synced.clone());
        let stream = watcher::watcher(f.api::<Endpoints>(), watcher::Config::default()).default_backoff();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                match stream.try_next().await {
                    Ok(Some(watcher::Event::Apply(e) | watcher::Event::InitApply(e))) => seen.record(&e),
                    Ok(Some(watcher::Event::InitDone)) => synced.notify_one(),
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "endpoints watch error; resuming with back-off");
                    }
                }
            }
        })
    };
    let result = async {
        tokio::time::timeout(Duration::from_secs(60), synced.notified())
            .await
            .map_err(|_| CaseError::failed("the Endpoints watch did not sync within 60s"))?;
        f.step("one warm-up trial (thrown away), then the measured trials");
        single_latency(f, &seen, "latency-svc-warmup")
            .await
            .map_err(|e| CaseError::failed(format!("warm-up trial: {e}")))?;
        let failures = Arc::new(Mutex::new(Vec::<String>::new()));
        let outcomes: Vec<Result<Duration, String>> = futures::stream::iter(0..TOTAL_TRIALS)
            .map(|i| {
                let (seen, failures) = (seen.clone(), failures.clone());
                async move {
                    if failures.lock().expect("failures lock").len() > ACCEPTABLE_FAILURES {
                        return Err("not started: too many trials failed already".to_string());
                    }
                    let got = single_latency(f, &seen, &format!("latency-svc-{i}")).await;
                    if let Err(e) = &got {
                        failures.lock().expect("failures lock").push(e.clone());
                    }
                    got
                }
            })
            .buffer_unordered(PARALLEL_TRIALS)
            .collect()
            .await;
        let errors: Vec<String> = outcomes.iter().filter_map(|o| o.clone().err()).collect();
        let mut sorted: Vec<Duration> = outcomes.into_iter().filter_map(Result::ok).collect();
        sorted.sort();
        if !sorted.is_empty() {
            f.property("p50_ms", percentile(&sorted, 50).as_millis());
            f.property("p99_ms", percentile(&sorted, 99).as_millis());
        }
        let failing = verdict(&sorted, &errors);
        if failing.is_empty() {
            return Ok(());
        }
        let helpful = if sorted.len() >= 2 {
            format!(
                "; 50, 90, 99 percentiles: {:?} {:?} {:?}",
                percentile(&sorted, 50),
                percentile(&sorted, 90),
                percentile(&sorted, 99)
            )
        } else {
            String::new()
        };
        Err(CaseError::failed(format!("{}{helpful}", failing.join("; "))))
    }
    .await;
    watch.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|s| Duration::from_secs(*s)).collect()
    }

    #[test]
    fn percentiles_pick_like_upstream() {
        let d = secs(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(percentile(&d, 50), Duration::from_secs(6));
        assert_eq!(percentile(&d, 99), Duration::from_secs(10));
    }

    #[test]
    fn verdict_checks_sample_size_errors_and_limits() {
        let fast = vec![Duration::from_millis(30); 190];
        assert!(verdict(&fast, &[]).is_empty());
        assert!(verdict(&fast[..50], &[])[0].contains("sample size"));
        let errors = vec!["x".to_string(); ACCEPTABLE_FAILURES + 1];
        assert!(verdict(&fast, &errors)[0].contains("Not all"));
        let slow = vec![Duration::from_secs(21); 150];
        let v = verdict(&slow, &[]);
        assert!(v.iter().any(|m| m.contains("Median")), "{v:?}");
        let mut tail = vec![Duration::from_secs(1); 150];
        tail.extend(vec![Duration::from_secs(51); 2]);
        let v = verdict(&tail, &[]);
        assert!(
            v.iter().any(|m| m.contains("Tail")) && !v.iter().any(|m| m.contains("Median")),
            "{v:?}"
        );
    }
}
