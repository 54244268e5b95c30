//! `crossconf doctor`: a preflight table with one line of advice per row.
//!
//! Each row is OK, WARN or FAIL; the command exits 1 when any row fails. The rows are the
//! things that make Windows e2e runs fail for reasons that are not the cases' fault: no Ready
//! Windows node, a taint the cases would not tolerate, an image without a variant for a node's
//! build, no cluster DNS, no kube-proxy/CNI running on the Windows nodes, missing permissions.

use std::fmt::Write as _;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams, PostParams};
use serde::Serialize;

use crate::catalog::Catalog;
use crate::cluster::Cluster;
use crate::images::ImageCatalog;
use crate::os::Os;

/// A row's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    /// Fine.
    Ok,
    /// Works, with a caveat.
    Warn,
    /// Cases will fail because of this.
    Fail,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// The verdict.
    pub level: Level,
    /// What was found.
    pub detail: String,
    /// What to do about it (empty when OK).
    pub advice: String,
}

fn row(name: &str, level: Level, detail: impl Into<String>, advice: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        level,
        detail: detail.into(),
        advice: advice.into(),
    }
}

/// Runs every check against the cluster.
pub async fn run_checks(cluster: &Cluster, images: &ImageCatalog, _catalog: &Catalog) -> Vec<Check> {
    let mut out = vec![row(
        "API server",
        Level::Ok,
        format!("{} answers, version {}", cluster.server(), cluster.version()),
        "",
    )];
    let pools = cluster.pools();
    for os in Os::ALL {
        let all: Vec<_> = pools.of(os).collect();
        let ready = pools.schedulable(os);
        let mut builds: Vec<String> = ready.iter().filter_map(|n| n.windows_build.clone()).collect();
        builds.sort();
        builds.dedup();
        let detail = if os == Os::Windows {
            format!(
                "{} of {} Ready and schedulable; builds: {}",
                ready.len(),
                all.len(),
                if builds.is_empty() {
                    "-".into()
                } else {
                    builds.join(", ")
                }
            )
        } else {
            format!("{} of {} Ready and schedulable", ready.len(), all.len())
        };
        let (level, advice) = match (os, ready.is_empty()) {
            (_, false) => (Level::Ok, String::new()),
            (Os::Windows, true) => (
                Level::Fail,
                "join a Windows node (kubeadm join) and wait for it to be Ready".into(),
            ),
            (Os::Linux, true) => (Level::Warn, "hybrid cases will skip: they need a Linux node".into()),
        };
        out.push(row(&format!("{} nodes", os.title()), level, detail, advice));
    }
    let taints: Vec<String> = pools
        .of(Os::Windows)
        .flat_map(|n| n.blocking_taints().map(move |t| format!("{}: {t}", n.name)))
        .collect();
    out.push(if taints.is_empty() {
        row("Windows taints", Level::Ok, "none", "")
    } else {
        row(
            "Windows taints",
            Level::Ok,
            taints.join("; "),
            "cases add tolerations for these taints to their Windows pods",
        )
    });
    let nodes: Vec<(&str, &str)> = pools
        .schedulable(Os::Windows)
        .into_iter()
        .map(|n| (n.name.as_str(), n.windows_build.as_deref().unwrap_or("unknown")))
        .collect();
    let needed = super::preflight::plan_images(images, Os::Windows);
    let needed: Vec<&str> = needed.iter().map(String::as_str).collect();
    let mismatches = images.check_builds(&needed, &nodes);
    out.push(if mismatches.is_empty() {
        row(
            "image/build compatibility",
            Level::Ok,
            format!("{} have variants for every Windows node", needed.join(", ")),
            "",
        )
    } else {
        row(
            "image/build compatibility",
            Level::Fail,
            super::preflight::summarize(&mismatches).join("; "),
            "use images built for the node's Windows build, or a registry mirror that has them (--kube-test-repo-list)",
        )
    });
    let services: Api<Service> = Api::namespaced(cluster.client().clone(), "kube-system");
    out.push(match services.get_opt("kube-dns").await {
        Ok(Some(svc)) => row(
            "cluster DNS Service",
            Level::Ok,
            format!(
                "kube-system/kube-dns at {}",
                svc.spec.and_then(|s| s.cluster_ip).unwrap_or_default()
            ),
            "",
        ),
        Ok(None) => row(
            "cluster DNS Service",
            Level::Fail,
            "kube-system/kube-dns not found",
            "deploy CoreDNS (or kube-dns) with a Service named kube-dns in kube-system",
        ),
        Err(e) => row(
            "cluster DNS Service",
            Level::Fail,
            crate::framework::render_kube_error(&e),
            "check permissions to read services in kube-system",
        ),
    });
    out.extend(addon_rows(cluster).await);
    for (verb, resource, sub) in [
        ("create", "namespaces", None),
        ("create", "pods", None),
        ("create", "pods", Some("exec")),
        ("get", "nodes", Some("proxy")),
        ("create", "services", None),
    ] {
        out.push(permission(cluster, verb, resource, sub).await);
    }
    out
}

/// How long the add-on rows wait for a kube-proxy/CNI DaemonSet that is still rolling out
/// (pods pulling or starting, as right after a node joins) before reporting it as not ready.
const ADDON_SETTLE: Duration = Duration::from_secs(20);

/// Name fragments of Windows CNI DaemonSets: flannel (sig-windows-tools), Calico, Antrea, and
/// the generic `cni` some distributions use.
const CNI_NAMES: [&str; 6] = ["flannel", "calico", "antrea", "cilium", "cni", "azure"];

/// The "kube-proxy for Windows" and "CNI for Windows" rows.
///
/// A kubeadm cluster with Windows nodes joined as the sig-windows-tools guide does runs
/// `kube-proxy-windows` and `kube-flannel-ds-windows-amd64` DaemonSets in `kube-system`
/// (Calico and Antrea have their own `-windows` DaemonSets). Each row is OK when such a
/// DaemonSet has a ready pod on every node it targets, and WARN otherwise: a host service
/// (managed clusters install kube-proxy and the CNI on the host) is a valid setup the API
/// cannot show, so the absence is not a failure.
async fn addon_rows(cluster: &Cluster) -> Vec<Check> {
    let api: Api<DaemonSet> = Api::namespaced(cluster.client().clone(), "kube-system");
    let list = match api.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(e) => {
            return vec![row(
                "kube-proxy and CNI for Windows",
                Level::Warn,
                crate::framework::render_kube_error(&e),
                "cannot list DaemonSets in kube-system",
            )];
        }
    };
    let windows: Vec<&DaemonSet> = list.items.iter().filter(|d| targets_windows(d)).collect();
    let name = |d: &DaemonSet| d.metadata.name.clone().unwrap_or_default();
    let proxies: Vec<String> = windows
        .iter()
        .map(|d| name(d))
        .filter(|n| n.contains("kube-proxy"))
        .collect();
    let cnis: Vec<String> = windows
        .iter()
        .map(|d| name(d))
        .filter(|n| CNI_NAMES.iter().any(|k| n.contains(k)))
        .collect();
    let mut rows = Vec::new();
    for (title, names, missing, advice) in [
        (
            "kube-proxy for Windows",
            proxies,
            "no kube-proxy DaemonSet targeting Windows nodes in kube-system",
            "Services will not work from Windows pods unless kube-proxy runs there (a host service is fine: then ignore this)",
        ),
        (
            "CNI for Windows",
            cnis,
            "no CNI DaemonSet targeting Windows nodes in kube-system",
            "pods on Windows nodes need a CNI (flannel, Calico, Antrea…)",
        ),
    ] {
        if names.is_empty() {
            rows.push(row(title, Level::Warn, missing, advice));
            continue;
        }
        let mut details = Vec::new();
        let mut all_ready = true;
        for ds in &names {
            let (ready, desired) = settled(&api, ds).await;
            all_ready &= desired > 0 && ready >= desired;
            details.push(format!("{ds}: {ready} of {desired} pods ready"));
        }
        rows.push(if all_ready {
            row(title, Level::Ok, details.join("; "), "")
        } else {
            row(
                title,
                Level::Warn,
                details.join("; "),
                "its pods are not running on every Windows node: `kubectl -n kube-system describe ds` shows why",
            )
        });
    }
    rows
}

/// `(ready, desired)` pods of DaemonSet `name`, once every desired pod is ready or after
/// [`ADDON_SETTLE`] (watched, not polled).
async fn settled(api: &Api<DaemonSet>, name: &str) -> (i32, i32) {
    fn counts(d: Option<&DaemonSet>) -> (i32, i32) {
        d.and_then(|d| d.status.as_ref())
            .map(|s| (s.number_ready, s.desired_number_scheduled))
            .unwrap_or((0, 0))
    }
    let done = |d: Option<&DaemonSet>| {
        let (ready, desired) = counts(d);
        desired > 0 && ready >= desired
    };
    match tokio::time::timeout(
        ADDON_SETTLE,
        kube::runtime::wait::await_condition(api.clone(), name, done),
    )
    .await
    {
        Ok(Ok(d)) => counts(d.as_ref()),
        _ => counts(api.get_opt(name).await.ok().flatten().as_ref()),
    }
}

/// Whether `d` runs on Windows nodes: an OS nodeSelector, `spec.os`, or a required node
/// affinity on the OS label (flannel, Antrea and Calico select their OS that way).
fn targets_windows(d: &DaemonSet) -> bool {
    let spec = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let selector_windows = spec
        .and_then(|s| s.node_selector.as_ref())
        .and_then(|m| m.get(crate::os::OS_LABEL))
        .is_some_and(|v| v == "windows");
    let os_windows = spec.and_then(|s| s.os.as_ref()).is_some_and(|o| o.name == "windows");
    let affinity_windows = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
        .is_some_and(|r| {
            r.node_selector_terms.iter().any(|t| {
                t.match_expressions.iter().flatten().any(|e| {
                    e.key == crate::os::OS_LABEL
                        && e.operator == "In"
                        && e.values.iter().flatten().any(|v| v == "windows")
                })
            })
        });
    selector_windows || os_windows || affinity_windows
}

async fn permission(cluster: &Cluster, verb: &str, resource: &str, sub: Option<&str>) -> Check {
    let what = match sub {
        Some(s) => format!("{verb} {resource}/{s}"),
        None => format!("{verb} {resource}"),
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(cluster.client().clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                subresource: sub.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &review).await {
        Ok(r) => {
            let allowed = r.status.as_ref().is_some_and(|s| s.allowed);
            if allowed {
                row(&format!("permission: {what}"), Level::Ok, "allowed", "")
            } else {
                let why = r.status.and_then(|s| s.reason).unwrap_or_default();
                row(
                    &format!("permission: {what}"),
                    Level::Fail,
                    format!("denied {why}"),
                    "grant the run's identity this permission (cluster-admin is what upstream jobs use)",
                )
            }
        }
        Err(e) => row(
            &format!("permission: {what}"),
            Level::Warn,
            crate::framework::render_kube_error(&e),
            "SelfSubjectAccessReview not available; permissions unknown",
        ),
    }
}

/// Whether any row failed.
pub fn worst_failed(checks: &[Check]) -> bool {
    checks.iter().any(|c| c.level == Level::Fail)
}

/// The table for people.
pub fn render_table(checks: &[Check]) -> String {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for c in checks {
        let level = match c.level {
            Level::Ok => "OK  ",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        };
        let _ = writeln!(out, "{level}  {:<width$}  {}", c.name, c.detail);
        if !c.advice.is_empty() && c.level != Level::Ok {
            let _ = writeln!(out, "      {:<width$}  → {}", "", c.advice);
        }
    }
    out
}

/// The JSON for scripts.
pub fn render_json(checks: &[Check]) -> String {
    serde_json::to_string_pretty(checks).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn daemonset(spec: serde_json::Value) -> DaemonSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "x", "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": spec}},
        }))
        .unwrap()
    }

    #[test]
    fn windows_daemonsets_are_found_by_selector_os_or_affinity() {
        let c = serde_json::json!([{"name": "c", "image": "i"}]);
        let by_selector =
            daemonset(serde_json::json!({"containers": c, "nodeSelector": {"kubernetes.io/os": "windows"}}));
        let by_os = daemonset(serde_json::json!({"containers": c, "os": {"name": "windows"}}));
        let by_affinity = daemonset(serde_json::json!({"containers": c, "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]}]}}}}));
        let linux = daemonset(serde_json::json!({"containers": c, "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}}));
        let anywhere = daemonset(serde_json::json!({"containers": c}));
        assert!(targets_windows(&by_selector) && targets_windows(&by_os) && targets_windows(&by_affinity));
        assert!(!targets_windows(&linux) && !targets_windows(&anywhere));
    }

    #[test]
    fn table_shows_advice_only_for_problems() {
        let checks = vec![
            row("a", Level::Ok, "fine", "ignored advice"),
            row("b", Level::Fail, "broken", "fix it"),
        ];
        let t = render_table(&checks);
        assert!(t.contains("OK    a"));
        assert!(t.contains("FAIL  b"));
        assert!(t.contains("→ fix it"));
        assert!(!t.contains("ignored advice"));
        assert!(worst_failed(&checks));
    }
}
