//! The kubelet's `/metrics` counters that cases read: container starts and failed starts by
//! container type (`kubelet_started_containers_total`, `..._errors_total`) and their
//! HostProcess twins, in the Prometheus text format and with the names and HELP texts of
//! pkg/kubelet/metrics (all ALPHA). Counted where the real kubelet counts them
//! (kuberuntime's `startContainer`): a start is counted once the container is created, an
//! error when starting it then fails.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use super::Role;

/// The `container_type` label of a container.
pub fn container_type(role: Role) -> &'static str {
    match role {
        Role::Init => "init_container",
        Role::App => "container",
        Role::Ephemeral => "ephemeral_container",
    }
}

/// Counters by `(container_type)` and `(container_type, code)`.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    started: BTreeMap<String, u64>,
    errors: BTreeMap<(String, String), u64>,
    hpc_started: BTreeMap<String, u64>,
    hpc_errors: BTreeMap<(String, String), u64>,
}

impl Metrics {
    /// A container of `kind` was created and is being started.
    pub fn started(&self, kind: &str, host_process: bool) {
        let mut c = self.inner.lock().expect("metrics lock");
        *c.started.entry(kind.into()).or_default() += 1;
        if host_process {
            *c.hpc_started.entry(kind.into()).or_default() += 1;
        }
    }

    /// Starting a container of `kind` failed (gRPC `code`, as CRI reports it).
    pub fn start_failed(&self, kind: &str, code: &str, host_process: bool) {
        let mut c = self.inner.lock().expect("metrics lock");
        *c.errors.entry((kind.into(), code.into())).or_default() += 1;
        if host_process {
            *c.hpc_errors.entry((kind.into(), code.into())).or_default() += 1;
        }
    }

    /// The exposition text; the HostProcess families only on Windows, where the kubelet
    /// registers them.
    pub fn render(&self, windows: bool) -> String {
        let c = self.inner.lock().expect("metrics lock");
        let mut out = String::new();
        family(
            &mut out,
            "kubelet_started_containers_total",
            "Cumulative number of containers started",
            c.started.iter().map(|(k, v)| (format!("container_type=\"{k}\""), *v)),
        );
        family(
            &mut out,
            "kubelet_started_containers_errors_total",
            "Cumulative number of errors when starting containers",
            c.errors
                .iter()
                .map(|((k, code), v)| (format!("code=\"{code}\",container_type=\"{k}\""), *v)),
        );
        if windows {
            family(
                &mut out,
                "kubelet_started_host_process_containers_total",
                "Cumulative number of hostprocess containers started. This metric will only be collected on Windows.",
                c.hpc_started
                    .iter()
                    .map(|(k, v)| (format!("container_type=\"{k}\""), *v)),
            );
            family(
                &mut out,
                "kubelet_started_host_process_containers_errors_total",
                "Cumulative number of errors when starting hostprocess containers. This metric will only be collected on Windows.",
                c.hpc_errors
                    .iter()
                    .map(|((k, code), v)| (format!("code=\"{code}\",container_type=\"{k}\""), *v)),
            );
        }
        out
    }
}

/// One counter family; like client_golang, a family without samples is not written.
fn family(out: &mut String, name: &str, help: &str, samples: impl Iterator<Item = (String, u64)>) {
    let samples: Vec<_> = samples.collect();
    if samples.is_empty() {
        return;
    }
    let _ = writeln!(out, "# HELP {name} [ALPHA] {help}\n# TYPE {name} counter");
    for (labels, v) in samples {
        let _ = writeln!(out, "{name}{{{labels}}} {v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.started("init_container", true);
        m.start_failed("init_container", "Unknown", true);
        m.started("container", false);
        let text = m.render(true);
        assert!(
            text.contains("# TYPE kubelet_started_host_process_containers_total counter"),
            "{text}"
        );
        assert!(text.contains("kubelet_started_host_process_containers_errors_total{code=\"Unknown\",container_type=\"init_container\"} 1"), "{text}");
        assert!(
            text.contains("kubelet_started_containers_total{container_type=\"container\"} 1"),
            "{text}"
        );
        assert!(!m.render(false).contains("host_process"));
    }
}
