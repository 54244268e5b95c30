//! The scheduler's filters as pure functions: [`fits`] decides whether a pod may run on a node
//! given the pods already there, and [`UnfitReason`] says why not in upstream's words.
//!
//! The order of checks follows kube-scheduler's default filter plugins (NodeUnschedulable,
//! NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit): a node is reported
//! with the first filter it fails, as upstream reports it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The taint the node lifecycle controller puts on a node whose Ready condition is False.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint for a node whose Ready condition is Unknown (no heartbeats).
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The taint for `spec.unschedulable` nodes (what `kubectl cordon` leads to).
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// Why a pod does not fit a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnfitReason {
    /// `spec.unschedulable` is set and the pod does not tolerate it.
    Unschedulable,
    /// The pod names another node in `spec.nodeName`.
    NodeName,
    /// A NoSchedule/NoExecute taint the pod does not tolerate.
    UntoleratedTaint {
        /// The taint's key.
        key: String,
        /// The taint's value (may be empty).
        value: String,
    },
    /// nodeSelector or required node affinity does not match.
    NodeAffinity,
    /// A requested host port is taken on the node.
    HostPorts,
    /// Requests exceed what is left of allocatable; resource names as upstream prints them.
    Insufficient(Vec<String>),
}

impl UnfitReason {
    /// The reason strings upstream counts in its "0/N nodes are available" message.
    pub fn messages(&self) -> Vec<String> {
        match self {
            UnfitReason::Unschedulable => vec!["node(s) were unschedulable".into()],
            UnfitReason::NodeName => vec!["node(s) didn't match the requested node name".into()],
            UnfitReason::UntoleratedTaint { key, value } => {
                vec![format!("node(s) had untolerated taint {{{key}: {value}}}")]
            }
            UnfitReason::NodeAffinity => vec!["node(s) didn't match Pod's node affinity/selector".into()],
            UnfitReason::HostPorts => {
                vec!["node(s) didn't have free ports for the requested pod ports".into()]
            }
            UnfitReason::Insufficient(names) => names
                .iter()
                .map(|n| {
                    if n == "pods" {
                        "Too many pods".to_owned()
                    } else {
                        format!("Insufficient {n}")
                    }
                })
                .collect(),
        }
    }

    /// Whether evicting lower-priority pods could make the pod fit (only resource shortages and
    /// port clashes can be resolved that way; upstream calls the rest UnschedulableAndUnresolvable).
    pub fn resolvable_by_preemption(&self) -> bool {
        matches!(self, UnfitReason::Insufficient(_) | UnfitReason::HostPorts)
    }
}

impl fmt::Display for UnfitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.messages().join(", "))
    }
}

/// Parses a Kubernetes quantity into thousandths of its unit (`"100m"` → 100, `"1Ki"` → 1_024_000).
///
/// Returns `None` for text that is not a quantity; fractions of a milli-unit round up, as the
/// API server rounds requests.
pub fn parse_quantity_milli(q: &str) -> Option<i128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    if num.is_empty() {
        return None;
    }
    let value: f64 = num.parse().ok()?;
    let factor: f64 = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    Some((value * factor * 1000.0).ceil() as i128)
}

fn quantity_milli(q: &Quantity) -> i128 {
    parse_quantity_milli(&q.0).unwrap_or(0)
}

/// Resource amounts in milli-units by resource name.
pub type Resources = BTreeMap<String, i128>;

/// What a pod asks of a node: the larger of the sum of its containers' requests and any init
/// container's request, plus pod overhead; `pods` is always 1.
pub fn pod_requests(spec: &PodSpec) -> Resources {
    let mut sum = Resources::new();
    for c in &spec.containers {
        for (k, v) in c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .into_iter()
            .flatten()
        {
            *sum.entry(k.clone()).or_default() += quantity_milli(v);
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (k, v) in c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .into_iter()
            .flatten()
        {
            let e = sum.entry(k.clone()).or_default();
            *e = (*e).max(quantity_milli(v));
        }
    }
    for (k, v) in spec.overhead.iter().flatten() {
        *sum.entry(k.clone()).or_default() += quantity_milli(v);
    }
    sum.insert("pods".into(), 1000);
    sum
}

/// Whether a pod still holds node resources: bound pods count until they reach a terminal phase.
pub fn holds_resources(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Whether `toleration` tolerates `taint` (key, operator Equal/Exists, value, effect).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        "Equal" => {
            !key.is_empty()
                && key == taint.key
                && toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// The node's taints plus those the node lifecycle controller would add: not-ready/unreachable
/// for a node that is not Ready, and unschedulable for a cordoned node.
pub fn effective_taints(node: &Node) -> Vec<Taint> {
    let mut taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    let mut add = |key: &str, effect: &str| {
        if !taints.iter().any(|t| t.key == key && t.effect == effect) {
            taints.push(Taint {
                key: key.into(),
                effect: effect.into(),
                ..Taint::default()
            });
        }
    };
    match node_ready(node) {
        Some(true) => {}
        Some(false) => add(TAINT_NOT_READY, "NoSchedule"),
        None => add(TAINT_UNREACHABLE, "NoSchedule"),
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        add(TAINT_UNSCHEDULABLE, "NoSchedule");
    }
    taints
}

/// The node's Ready condition: `Some(true)` True, `Some(false)` False, `None` Unknown or absent.
pub fn node_ready(node: &Node) -> Option<bool> {
    let cond = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))?;
    match cond.status.as_str() {
        "True" => Some(true),
        "False" => Some(false),
        _ => None,
    }
}

/// The first NoSchedule/NoExecute taint of `taints` that none of `tolerations` tolerates.
pub fn untolerated_taint<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value, values) else {
                return false;
            };
            match (v.parse::<i64>(), bound.parse::<i64>()) {
                (Ok(v), Ok(b)) if req.operator == "Gt" => v > b,
                (Ok(v), Ok(b)) => v < b,
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether one node selector term matches: all its expressions and fields; an empty term
/// matches nothing, as upstream.
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.as_ref();
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, node.metadata.name.as_deref()))
}

/// Whether the pod's nodeSelector and required node affinity both match the node.
pub fn matches_node_selector_and_affinity(spec: &PodSpec, node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
    let affinity_ok = match spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref())
    {
        Some(sel) => sel.node_selector_terms.iter().any(|t| term_matches(t, node)),
        None => true,
    };
    selector_ok && affinity_ok
}

fn host_ports(spec: &PodSpec) -> BTreeSet<(String, String, i32)> {
    spec.containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let hp = p.host_port.filter(|hp| *hp > 0)?;
            let ip = p
                .host_ip
                .clone()
                .filter(|ip| !ip.is_empty())
                .unwrap_or_else(|| "0.0.0.0".into());
            Some((ip, p.protocol.clone().unwrap_or_else(|| "TCP".into()), hp))
        })
        .collect()
}

fn ports_clash(a: &(String, String, i32), b: &(String, String, i32)) -> bool {
    a.1 == b.1 && a.2 == b.2 && (a.0 == b.0 || a.0 == "0.0.0.0" || b.0 == "0.0.0.0")
}

/// Whether a host port `spec` asks for is taken by one of `others` (upstream `nodeports.Fits`:
/// the same protocol and port on the same host IP, or on 0.0.0.0 on either side). The scheduler
/// and the kubelet's admission both ask this.
pub fn host_ports_taken<'a>(spec: &PodSpec, others: impl IntoIterator<Item = &'a PodSpec>) -> bool {
    let wanted = host_ports(spec);
    if wanted.is_empty() {
        return false;
    }
    let used: Vec<_> = others.into_iter().flat_map(host_ports).collect();
    wanted.iter().any(|w| used.iter().any(|u| ports_clash(w, u)))
}

/// Resources of the node still free after `pods` (those holding resources there).
pub fn free_resources(node: &Node, pods: &[&Pod]) -> Resources {
    let mut free: Resources = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), quantity_milli(v)))
        .collect();
    for p in pods.iter().filter(|p| holds_resources(p)) {
        if let Some(spec) = &p.spec {
            for (k, v) in pod_requests(spec) {
                *free.entry(k).or_default() -= v;
            }
        }
    }
    free
}

/// The resources `requests` asks for beyond `free`, in upstream's order (cpu, memory,
/// ephemeral-storage, pods, then extended resources by name).
pub fn insufficient(requests: &Resources, free: &Resources) -> Vec<String> {
    let order = |n: &str| match n {
        "pods" => 0,
        "cpu" => 1,
        "memory" => 2,
        "ephemeral-storage" => 3,
        _ => 4,
    };
    let mut short: Vec<String> = requests
        .iter()
        .filter(|(name, want)| **want > 0 && **want > free.get(*name).copied().unwrap_or(0))
        .map(|(name, _)| name.clone())
        .collect();
    short.sort_by_key(|n| (order(n), n.clone()));
    short
}

/// Whether `pod` may run on `node`, given `pods_on_node` (the pods bound there, terminated
/// ones included: they are skipped here).
///
/// # Errors
///
/// The first failing check, as kube-scheduler's filter chain reports it.
pub fn fits(pod: &Pod, node: &Node, pods_on_node: &[&Pod]) -> Result<(), UnfitReason> {
    fits_without(pod, node, pods_on_node, &[])
}

/// [`fits`] with the filter plugins named in `disabled` (upstream's plugin names:
/// `TaintToleration`, `NodeAffinity`, `NodePorts`, `NodeResourcesFit`) left out of the chain, as a
/// scheduler profile that disables them runs it (the `scheduler-filter-off` fault).
pub fn fits_without(pod: &Pod, node: &Node, pods_on_node: &[&Pod], disabled: &[String]) -> Result<(), UnfitReason> {
    let on = |plugin: &str| !disabled.iter().any(|d| d == plugin);
    let Some(spec) = pod.spec.as_ref() else {
        return Err(UnfitReason::NodeAffinity);
    };
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let taints = effective_taints(node);
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
        && let Some(t) = taints.iter().find(|t| t.key == TAINT_UNSCHEDULABLE)
        && !tolerations.iter().any(|tol| tolerates(tol, t))
    {
        return Err(UnfitReason::Unschedulable);
    }
    if let Some(name) = spec.node_name.as_deref().filter(|n| !n.is_empty())
        && Some(name) != node.metadata.name.as_deref()
    {
        return Err(UnfitReason::NodeName);
    }
    let others: Vec<Taint> = taints.into_iter().filter(|t| t.key != TAINT_UNSCHEDULABLE).collect();
    if on("TaintToleration")
        && let Some(t) = untolerated_taint(&others, tolerations)
    {
        return Err(UnfitReason::UntoleratedTaint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
        });
    }
    if on("NodeAffinity") && !matches_node_selector_and_affinity(spec, node) {
        return Err(UnfitReason::NodeAffinity);
    }
    if on("NodePorts")
        && host_ports_taken(
            spec,
            pods_on_node
                .iter()
                .filter(|p| holds_resources(p))
                .filter_map(|p| p.spec.as_ref()),
        )
    {
        return Err(UnfitReason::HostPorts);
    }
    if on("NodeResourcesFit") {
        let short = insufficient(&pod_requests(spec), &free_resources(node, pods_on_node));
        if !short.is_empty() {
            return Err(UnfitReason::Insufficient(short));
        }
    }
    Ok(())
}

/// The least-allocated score of placing `requests` on a node with `free` left of `allocatable`
/// (0–100, higher is emptier): the mean over cpu and memory of the share left free afterwards.
pub fn least_allocated_score(requests: &Resources, free: &Resources, node: &Node) -> i64 {
    let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let mut total = 0i64;
    let mut n = 0i64;
    for r in ["cpu", "memory"] {
        let cap = alloc.and_then(|a| a.get(r)).map(quantity_milli).unwrap_or(0);
        if cap <= 0 {
            continue;
        }
        let left = free.get(r).copied().unwrap_or(0) - requests.get(r).copied().unwrap_or(0);
        total += ((left.max(0) * 100) / cap) as i64;
        n += 1;
    }
    if n == 0 { 0 } else { total / n }
}

/// Upstream's summary of why no node fits: `"0/3 nodes are available: 1 node(s) had
/// untolerated taint {os: windows}, 2 node(s) didn't match Pod's node affinity/selector."`.
pub fn unschedulable_summary(nodes: usize, reasons: &[UnfitReason]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in reasons {
        for m in r.messages() {
            *counts.entry(m).or_default() += 1;
        }
    }
    let mut parts: Vec<String> = counts.into_iter().map(|(m, n)| format!("{n} {m}")).collect();
    parts.sort();
    if parts.is_empty() {
        format!("0/{nodes} nodes are available.")
    } else {
        format!("0/{nodes} nodes are available: {}.", parts.join(", "))
    }
}

/// The preemption half of the message: how many nodes preemption cannot help on and why.
pub fn preemption_summary(nodes: usize, not_helpful: usize, no_victims: usize) -> String {
    let mut parts = Vec::new();
    if no_victims > 0 {
        parts.push(format!("{no_victims} No preemption victims found for incoming pod."));
    }
    if not_helpful > 0 {
        parts.push(format!("{not_helpful} Preemption is not helpful for scheduling."));
    }
    parts.sort();
    format!("preemption: 0/{nodes} nodes are available: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        let mut base = json!({
            "metadata": {"name": "n1", "labels": {"kubernetes.io/os": "linux"}},
            "status": {
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110", "ephemeral-storage": "10Gi"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        });
        merge(&mut base, v);
        serde_json::from_value(base).unwrap()
    }

    fn pod(v: serde_json::Value) -> Pod {
        let mut base = json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}
        });
        merge(&mut base, v);
        serde_json::from_value(base).unwrap()
    }

    fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
        match (a, b) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn with_requests(cpu: &str, mem: &str) -> serde_json::Value {
        json!({"spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}})
    }

    #[test]
    fn quantities_parse_to_milli_units() {
        for (q, want) in [
            ("100m", 100),
            ("1", 1000),
            ("1.5", 1500),
            ("1Ki", 1_024_000),
            ("128Mi", 128 * 1024 * 1024 * 1000),
            ("1k", 1_000_000),
            ("1e3", 1_000_000),
            ("2G", 2_000_000_000_000),
        ] {
            assert_eq!(parse_quantity_milli(q), Some(want), "{q}");
        }
        assert_eq!(parse_quantity_milli("lots"), None);
        assert_eq!(parse_quantity_milli("1Zi"), None);
    }

    #[test]
    fn fit_table() {
        let windows_taint = json!({"spec": {"taints": [{"key": "os", "value": "windows", "effect": "NoSchedule"}]}});
        let cases: Vec<(&str, serde_json::Value, serde_json::Value, Result<(), UnfitReason>)> = vec![
            ("plain pod fits", json!({}), json!({}), Ok(())),
            (
                "untolerated taint",
                json!({}),
                windows_taint.clone(),
                Err(UnfitReason::UntoleratedTaint {
                    key: "os".into(),
                    value: "windows".into(),
                }),
            ),
            (
                "tolerated taint (Equal)",
                json!({"spec": {"tolerations": [{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}]}}),
                windows_taint.clone(),
                Ok(()),
            ),
            (
                "tolerated taint (Exists without key)",
                json!({"spec": {"tolerations": [{"operator": "Exists"}]}}),
                windows_taint.clone(),
                Ok(()),
            ),
            (
                "toleration with other value",
                json!({"spec": {"tolerations": [{"key": "os", "value": "linux", "effect": "NoSchedule"}]}}),
                windows_taint,
                Err(UnfitReason::UntoleratedTaint {
                    key: "os".into(),
                    value: "windows".into(),
                }),
            ),
            (
                "PreferNoSchedule is ignored",
                json!({}),
                json!({"spec": {"taints": [{"key": "k", "effect": "PreferNoSchedule"}]}}),
                Ok(()),
            ),
            (
                "NoExecute counts",
                json!({}),
                json!({"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}}),
                Err(UnfitReason::UntoleratedTaint {
                    key: "k".into(),
                    value: "v".into(),
                }),
            ),
            (
                "node selector mismatch",
                json!({"spec": {"nodeSelector": {"kubernetes.io/os": "windows"}}}),
                json!({}),
                Err(UnfitReason::NodeAffinity),
            ),
            (
                "node selector match",
                json!({"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}),
                json!({}),
                Ok(()),
            ),
            (
                "affinity In",
                json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]},
                    {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}
                ]}}}}}),
                json!({}),
                Ok(()),
            ),
            (
                "affinity NotIn",
                json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "NotIn", "values": ["linux"]}]}
                ]}}}}}),
                json!({}),
                Err(UnfitReason::NodeAffinity),
            ),
            (
                "affinity Exists and DoesNotExist",
                json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "Exists"}, {"key": "gpu", "operator": "DoesNotExist"}]}
                ]}}}}}),
                json!({}),
                Ok(()),
            ),
            (
                "affinity Gt",
                json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]}
                ]}}}}}),
                json!({"metadata": {"labels": {"cores": "8"}}}),
                Ok(()),
            ),
            (
                "affinity Lt fails",
                json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["4"]}]}
                ]}}}}}),
                json!({"metadata": {"labels": {"cores": "8"}}}),
                Err(UnfitReason::NodeAffinity),
            ),
            (
                "matchFields metadata.name",
                json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
                ]}}}}}),
                json!({}),
                Err(UnfitReason::NodeAffinity),
            ),
            (
                "empty term matches nothing",
                json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}}}),
                json!({}),
                Err(UnfitReason::NodeAffinity),
            ),
            ("requests fit", with_requests("1", "1Gi"), json!({}), Ok(())),
            (
                "cpu and memory short",
                with_requests("3", "5Gi"),
                json!({}),
                Err(UnfitReason::Insufficient(vec!["cpu".into(), "memory".into()])),
            ),
            (
                "unschedulable node",
                json!({}),
                json!({"spec": {"unschedulable": true}}),
                Err(UnfitReason::Unschedulable),
            ),
            (
                "unschedulable tolerated",
                json!({"spec": {"tolerations": [{"key": TAINT_UNSCHEDULABLE, "operator": "Exists", "effect": "NoSchedule"}]}}),
                json!({"spec": {"unschedulable": true}}),
                Ok(()),
            ),
            (
                "not ready node",
                json!({}),
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
                Err(UnfitReason::UntoleratedTaint {
                    key: TAINT_NOT_READY.into(),
                    value: String::new(),
                }),
            ),
            (
                "unknown readiness",
                json!({}),
                json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
                Err(UnfitReason::UntoleratedTaint {
                    key: TAINT_UNREACHABLE.into(),
                    value: String::new(),
                }),
            ),
            (
                "nodeName elsewhere",
                json!({"spec": {"nodeName": "n2"}}),
                json!({}),
                Err(UnfitReason::NodeName),
            ),
            ("nodeName here", json!({"spec": {"nodeName": "n1"}}), json!({}), Ok(())),
        ];
        for (name, p, n, want) in cases {
            assert_eq!(fits(&pod(p), &node(n), &[]), want, "{name}");
        }
    }

    #[test]
    fn bound_pods_use_up_allocatable_until_they_terminate() {
        let n = node(json!({"status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "2"}}}));
        let big = pod(with_requests("1500m", "1Gi"));
        let new = pod(with_requests("1", "1Gi"));
        assert_eq!(
            fits(&new, &n, &[&big]),
            Err(UnfitReason::Insufficient(vec!["cpu".into()]))
        );
        let mut done = big.clone();
        done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
        assert_eq!(fits(&new, &n, &[&done]), Ok(()));
        let small = pod(json!({}));
        assert_eq!(
            fits(&small, &n, &[&small, &small]),
            Err(UnfitReason::Insufficient(vec!["pods".into()]))
        );
        assert_eq!(
            UnfitReason::Insufficient(vec!["pods".into()]).messages(),
            vec!["Too many pods"]
        );
    }

    #[test]
    fn host_ports_clash() {
        let n = node(json!({}));
        let hp = json!({"spec": {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}});
        let a = pod(hp.clone());
        assert_eq!(fits(&a, &n, &[&pod(hp.clone())]), Err(UnfitReason::HostPorts));
        assert_eq!(fits(&a, &n, &[]), Ok(()));
        assert_eq!(fits_without(&a, &n, &[&pod(hp.clone())], &["NodePorts".into()]), Ok(()));
    }

    #[test]
    fn host_ports_taken_matches_protocol_port_and_host_ip() {
        let spec = |port: serde_json::Value| {
            pod(json!({"spec": {"containers": [{"name": "c", "image": "x", "ports": [port]}]}}))
                .spec
                .unwrap()
        };
        let wanted = spec(json!({"containerPort": 21017, "hostPort": 21017}));
        assert!(host_ports_taken(
            &wanted,
            &[spec(json!({"containerPort": 1, "hostPort": 21017}))]
        ));
        // Another protocol, another port, or no host port at all: free.
        assert!(!host_ports_taken(
            &wanted,
            &[spec(
                json!({"containerPort": 21017, "hostPort": 21017, "protocol": "UDP"})
            )]
        ));
        assert!(!host_ports_taken(
            &wanted,
            &[spec(json!({"containerPort": 21017, "hostPort": 21018}))]
        ));
        assert!(!host_ports_taken(&wanted, &[spec(json!({"containerPort": 21017}))]));
        // Distinct host IPs do not clash; 0.0.0.0 (the default) clashes with any.
        let on_a = spec(json!({"containerPort": 80, "hostPort": 8080, "hostIP": "127.0.0.1"}));
        assert!(!host_ports_taken(
            &on_a,
            &[spec(
                json!({"containerPort": 80, "hostPort": 8080, "hostIP": "127.0.0.2"})
            )]
        ));
        assert!(host_ports_taken(
            &on_a,
            &[spec(json!({"containerPort": 80, "hostPort": 8080}))]
        ));
        // A pod without host ports never clashes.
        assert!(!host_ports_taken(&spec(json!({"containerPort": 80})), &[wanted]));
    }

    #[test]
    fn init_containers_take_the_max_and_overhead_adds() {
        let p = pod(json!({"spec": {
            "containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "100m"}}},
                           {"name": "b", "image": "x", "resources": {"requests": {"cpu": "200m"}}}],
            "initContainers": [{"name": "i", "image": "x", "resources": {"requests": {"cpu": "500m"}}}],
            "overhead": {"cpu": "10m"}
        }}));
        assert_eq!(pod_requests(p.spec.as_ref().unwrap()).get("cpu"), Some(&510));
    }

    #[test]
    fn summary_matches_upstream_format() {
        let taint = UnfitReason::UntoleratedTaint {
            key: "os".into(),
            value: "windows".into(),
        };
        let msg = unschedulable_summary(3, &[taint, UnfitReason::NodeAffinity, UnfitReason::NodeAffinity]);
        assert_eq!(
            msg,
            "0/3 nodes are available: 1 node(s) had untolerated taint {os: windows}, 2 node(s) didn't match Pod's node affinity/selector."
        );
        assert_eq!(
            preemption_summary(3, 3, 0),
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
    }
}
