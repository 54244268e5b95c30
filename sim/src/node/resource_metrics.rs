//! `/metrics/resource`: the kubelet's resource metrics endpoint (what metrics-server scrapes),
//! in the Prometheus text format of upstream pkg/kubelet/metrics/collectors/resource_metrics.go:
//! node, pod and container CPU seconds and memory working set, container start times and
//! `resource_scrape_error`, each sample with its timestamp in milliseconds.
//!
//! It is rendered from the same figures as `/stats/summary` (the real collector reads the same
//! stats provider), so a field `/stats/summary` lacks (the `stats-missing` fault) is missing
//! here too: upstream skips a series whose source value is absent.

use std::fmt::Write as _;

use serde_json::Value;

/// The metric families in upstream's order: (name, type, help).
const FAMILIES: [(&str, &str, &str); 7] = [
    (
        "container_cpu_usage_seconds_total",
        "counter",
        "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
    ),
    (
        "container_memory_working_set_bytes",
        "gauge",
        "[STABLE] Current working set of the container in bytes",
    ),
    (
        "container_start_time_seconds",
        "gauge",
        "[STABLE] Start time of the container since unix epoch in seconds",
    ),
    (
        "node_cpu_usage_seconds_total",
        "counter",
        "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
    ),
    (
        "node_memory_working_set_bytes",
        "gauge",
        "[STABLE] Current working set of the node in bytes",
    ),
    (
        "pod_cpu_usage_seconds_total",
        "counter",
        "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
    ),
    (
        "pod_memory_working_set_bytes",
        "gauge",
        "[STABLE] Current working set of the pod in bytes",
    ),
];

/// Milliseconds since the epoch of an RFC 3339 time, if it parses.
fn millis(v: Option<&Value>) -> Option<i64> {
    let t: jiff::Timestamp = v?.as_str()?.parse().ok()?;
    Some(t.as_millisecond())
}

/// CPU seconds of a stats block's `cpu`, with its sample time.
fn cpu_seconds(block: &Value) -> Option<(f64, Option<i64>)> {
    let cpu = block.get("cpu")?;
    let ns = cpu.get("usageCoreNanoSeconds")?.as_u64()?;
    Some((ns as f64 / 1e9, millis(cpu.get("time"))))
}

/// Working set bytes of a stats block's `memory`, with its sample time.
fn working_set(block: &Value) -> Option<(f64, Option<i64>)> {
    let mem = block.get("memory")?;
    let ws = mem.get("workingSetBytes")?.as_u64()?;
    Some((ws as f64, millis(mem.get("time"))))
}

/// One sample line: `name{labels} value [timestamp]`.
fn sample(out: &mut Vec<(usize, String)>, family: usize, labels: &str, value: (f64, Option<i64>)) {
    let name = FAMILIES[family].0;
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let line = match value.1 {
        Some(ts) => format!("{name}{braces} {} {ts}", value.0),
        None => format!("{name}{braces} {}", value.0),
    };
    out.push((family, line));
}

/// Renders `/metrics/resource` from a `/stats/summary` document.
pub(crate) fn render(summary: &Value) -> String {
    let mut samples: Vec<(usize, String)> = Vec::new();
    let node = summary.get("node").cloned().unwrap_or_default();
    if let Some(v) = cpu_seconds(&node) {
        sample(&mut samples, 3, "", v);
    }
    if let Some(v) = working_set(&node) {
        sample(&mut samples, 4, "", v);
    }
    for pod in summary
        .get("pods")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let ns = pod
            .pointer("/podRef/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = pod.pointer("/podRef/name").and_then(Value::as_str).unwrap_or_default();
        let pod_labels = format!("namespace=\"{ns}\",pod=\"{name}\"");
        if let Some(v) = cpu_seconds(pod) {
            sample(&mut samples, 5, &pod_labels, v);
        }
        if let Some(v) = working_set(pod) {
            sample(&mut samples, 6, &pod_labels, v);
        }
        for c in pod
            .get("containers")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let cname = c.get("name").and_then(Value::as_str).unwrap_or_default();
            let labels = format!("container=\"{cname}\",{pod_labels}");
            if let Some(v) = cpu_seconds(c) {
                sample(&mut samples, 0, &labels, v);
            }
            if let Some(v) = working_set(c) {
                sample(&mut samples, 1, &labels, v);
            }
            if let Some(start) = millis(c.get("startTime")) {
                sample(&mut samples, 2, &labels, (start as f64 / 1e3, None));
            }
        }
    }
    let mut out = String::new();
    for (i, (name, kind, help)) in FAMILIES.iter().enumerate() {
        let lines: Vec<&String> = samples.iter().filter(|(f, _)| *f == i).map(|(_, l)| l).collect();
        if lines.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
    }
    out.push_str(
        "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise\n\
         # TYPE resource_scrape_error gauge\nresource_scrape_error 0\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_pod_and_container_series_from_the_summary() {
        let t = "2026-01-01T00:00:00Z";
        let summary = json!({
            "node": {"cpu": {"time": t, "usageCoreNanoSeconds": 2_000_000_000u64}, "memory": {"time": t, "workingSetBytes": 1024}},
            "pods": [{
                "podRef": {"name": "p", "namespace": "ns"},
                "cpu": {"time": t, "usageCoreNanoSeconds": 500_000_000u64},
                "memory": {"time": t, "workingSetBytes": 4096},
                "containers": [{"name": "c", "startTime": t, "memory": {"time": t}}],
            }],
        });
        let text = render(&summary);
        assert!(text.contains("node_cpu_usage_seconds_total 2 1767225600000"), "{text}");
        assert!(
            text.contains("pod_memory_working_set_bytes{namespace=\"ns\",pod=\"p\"} 4096 1767225600000"),
            "{text}"
        );
        assert!(
            text.contains("pod_cpu_usage_seconds_total{namespace=\"ns\",pod=\"p\"} 0.5"),
            "{text}"
        );
        assert!(
            text.contains("container_start_time_seconds{container=\"c\",namespace=\"ns\",pod=\"p\"} 1767225600"),
            "{text}"
        );
        // A container without a working set has no working-set series.
        assert!(!text.contains("# TYPE container_memory_working_set_bytes"), "{text}");
        assert!(text.ends_with("resource_scrape_error 0\n"));
    }
}
