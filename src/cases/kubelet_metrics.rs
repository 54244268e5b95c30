//! "Kubelet metrics on Windows node" (upstream test/e2e/windows/metrics.go): with two stats
//! test pods running on a Windows node, the kubelet's `/stats/summary` has memory figures for
//! them and its `/metrics/resource` has their `pod_memory_working_set_bytes`.
//!
//! Upstream runs these under the kubelet's alpha gate `PodAndContainerStatsFromCRI` (stats from
//! the runtime rather than cAdvisor); on Windows the stats come from the runtime either way, and
//! the cases check what either source must report.

use std::time::Duration;

use super::node::stats::stats_pods;
use crate::catalog::{Case, Kind};
use crate::fail;
use crate::framework::{CaseError, CaseResult, Framework};
use crate::os::Os;

/// Upstream It("validates /stats/summary").
pub const SUMMARY: &str = "[sig-windows] [Feature:Windows] Kubelet metrics on Windows node [Serial] [Slow] [Disruptive] [FeatureGate:PodAndContainerStatsFromCRI] [Alpha] [Feature:OffByDefault] validates /stats/summary";
/// Upstream It("validates /metrics/resource").
pub const RESOURCE: &str = "[sig-windows] [Feature:Windows] Kubelet metrics on Windows node [Serial] [Slow] [Disruptive] [FeatureGate:PodAndContainerStatsFromCRI] [Alpha] [Feature:OffByDefault] validates /metrics/resource";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(SUMMARY, Kind::WindowsSpecific, summary),
        crate::case!(RESOURCE, Kind::WindowsSpecific, resource),
    ]
}

/// The name prefix of upstream's `newKubeletStatsTestPods`.
const PREFIX: &str = "statscollectiontest";

/// How long the kubelet gets to report the new pods (its stats are sampled, not instant).
const REPORT_WITHIN: Duration = Duration::from_secs(60);

/// Upstream's BeforeEach: two stats test pods running and ready on one Windows node; its name.
async fn with_test_pods(f: &Framework) -> Result<String, CaseError> {
    f.skip_unless(
        f.target_os() == Os::Windows,
        "the kubelet metrics of Windows nodes are checked on a Windows target",
    )?;
    let node = f.require_nodes(Os::Windows, 1).await?.remove(0).name;
    stats_pods(f, Os::Windows, &node, 2).await?;
    Ok(node)
}

/// Retries `check` every 2 s until it returns no problems or [`REPORT_WITHIN`] passes, then
/// fails with the last problems.
async fn until_reported<F, Fut>(node: &str, what: &str, mut check: F) -> CaseResult
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Vec<String>, CaseError>>,
{
    let deadline = tokio::time::Instant::now() + REPORT_WITHIN;
    let mut pace = tokio::time::interval(Duration::from_secs(2));
    let mut last = Vec::new();
    while tokio::time::Instant::now() < deadline {
        pace.tick().await;
        last = check().await?;
        if last.is_empty() {
            return Ok(());
        }
    }
    fail!(
        "node {node} {what} within {} s: {}",
        REPORT_WITHIN.as_secs(),
        last.join("; ")
    )
}

/// Upstream: the summary has node figures, and each test pod one container, with working set
/// bytes above zero for the pod and its container (and available bytes above zero where given).
async fn summary(f: &Framework) -> CaseResult {
    let node = with_test_pods(f).await?;
    let at = node.as_str();
    until_reported(at, "/stats/summary not as expected", move || async move {
        let summary = f.stats_summary(at).await?;
        let mut problems = Vec::new();
        if summary.node.node_name.is_empty() {
            problems.push("the node summary is empty".to_string());
        }
        let pods: Vec<_> = summary
            .pods_in(f.ns())
            .filter(|p| p.pod_ref.name.starts_with(PREFIX))
            .collect();
        if pods.len() != 2 {
            problems.push(format!("expected 2 {PREFIX} pods, found {}", pods.len()));
        }
        for p in pods {
            let who = format!("pod {}", p.pod_ref.name);
            if p.containers.len() != 1 {
                problems.push(format!(
                    "{who}: expected 1 container, found {:?}",
                    p.containers.iter().map(|c| c.name.as_str()).collect::<Vec<_>>()
                ));
            }
            let blocks = std::iter::once((who.clone(), p.memory.as_ref())).chain(
                p.containers
                    .iter()
                    .map(|c| (format!("{who} container {}", c.name), c.memory.as_ref())),
            );
            for (at, memory) in blocks {
                match memory.and_then(|m| m.working_set_bytes) {
                    Some(v) if v > 0 => {}
                    other => problems.push(format!("{at}: memory.workingSetBytes is {other:?}, expected > 0")),
                }
                if memory.and_then(|m| m.available_bytes) == Some(0) {
                    problems.push(format!("{at}: memory.availableBytes is 0, expected > 0"));
                }
            }
        }
        Ok(problems)
    })
    .await
}

/// One sample of a Prometheus text exposition: metric name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// The samples of a Prometheus text exposition, comments skipped.
fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, rest) = match l.find('}') {
                Some(end) => (&l[..=end], &l[end + 1..]),
                None => l.split_once(' ')?,
            };
            let value: f64 = rest.split_whitespace().next()?.parse().ok()?;
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let labels = labels
                .trim_end_matches('}')
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim_matches('"').to_string()))
                .collect();
            Some((name.trim().to_string(), labels, value))
        })
        .collect()
}

/// Upstream: `/metrics/resource` has `pod_memory_working_set_bytes` samples, and those of the
/// test pods are above zero.
async fn resource(f: &Framework) -> CaseResult {
    let node = with_test_pods(f).await?;
    let key = "pod_memory_working_set_bytes";
    let at = node.as_str();
    until_reported(at, "/metrics/resource not as expected", move || async move {
        let text = f.node_proxy_get(at, "metrics/resource").await?;
        let all = samples(&text);
        let of_key: Vec<_> = all.iter().filter(|(n, _, _)| n == key).collect();
        if of_key.is_empty() {
            return Ok(vec![format!(
                "expected metric {key} in /metrics/resource, found only {:?}",
                all.iter()
                    .map(|(n, _, _)| n.as_str())
                    .collect::<std::collections::BTreeSet<_>>()
            )]);
        }
        let mut problems = Vec::new();
        let mut seen = 0;
        for (_, labels, value) in of_key {
            let pod = labels.iter().find(|(k, _)| k == "pod").map(|(_, v)| v.as_str());
            let ns = labels.iter().find(|(k, _)| k == "namespace").map(|(_, v)| v.as_str());
            if !(pod.is_some_and(|p| p.starts_with(PREFIX)) && ns == Some(f.ns())) {
                continue;
            }
            seen += 1;
            if *value <= 0.0 {
                problems.push(format!(
                    "{key} of pod {} is {value}, expected > 0",
                    pod.unwrap_or_default()
                ));
            }
        }
        if seen == 0 {
            problems.push(format!("no {key} sample for the {PREFIX} pods of namespace {}", f.ns()));
        }
        Ok(problems)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_prometheus_samples() {
        let text = "# HELP x y\n# TYPE x gauge\npod_memory_working_set_bytes{namespace=\"a\",pod=\"p\"} 4096 1700000000000\nresource_scrape_error 0\n";
        let s = samples(text);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].0, "pod_memory_working_set_bytes");
        assert_eq!(
            s[0].1,
            vec![("namespace".into(), "a".into()), ("pod".into(), "p".into())]
        );
        assert!((s[0].2 - 4096.0).abs() < f64::EPSILON);
        assert_eq!(s[1].0, "resource_scrape_error");
    }
}
