//! The cells of upstream's printers that take more than reading a field: pod READY, STATUS,
//! RESTARTS and READINESS GATES, node STATUS and ROLES, service EXTERNAL-IP and PORT(S),
//! endpoints, events, job STATUS/COMPLETIONS/DURATION, quota REQUEST/LIMIT, HPA TARGETS and
//! the controller revision owner.

use serde_json::Value;

use super::{i, list, or_none, s, since};
use crate::api::meta;

/// Upstream's quota REQUEST and LIMIT cells: `resource: used/hard` over `status.hard`, sorted,
/// `limits.*` resources in the second.
pub(super) fn quota_cells(o: &Value) -> (String, String) {
    let hard = o.pointer("/status/hard").and_then(Value::as_object);
    let mut names: Vec<&String> = hard.map(|h| h.keys().collect()).unwrap_or_default();
    names.sort();
    let (mut request, mut limit) = (Vec::new(), Vec::new());
    for n in names {
        let used = o
            .pointer(&format!("/status/used/{}", n.replace('~', "~0").replace('/', "~1")))
            .and_then(Value::as_str)
            .unwrap_or("0");
        let h = hard.and_then(|h| h.get(n)).and_then(Value::as_str).unwrap_or("0");
        let cell = format!("{n}: {used}/{h}");
        if n.split('.').next() == Some("limits") && n.contains('.') {
            limit.push(cell);
        } else {
            request.push(cell);
        }
    }
    (request.join(", "), limit.join(", "))
}

/// Upstream's HPA TARGETS cell for the common metric sources (`cpu: <unknown>/50%`).
pub(super) fn hpa_targets(o: &Value) -> String {
    let specs = list(o, "/spec/metrics");
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = list(o, "/status/currentMetrics");
    let parts: Vec<String> = specs
        .iter()
        .map(|m| {
            let ty = s(m, "/type");
            let src = match ty.as_str() {
                "Resource" => "resource",
                "ContainerResource" => "containerResource",
                "Pods" => "pods",
                "Object" => "object",
                _ => "external",
            };
            let name = if matches!(src, "resource" | "containerResource") {
                s(m, &format!("/{src}/name"))
            } else {
                s(m, &format!("/{src}/metric/name"))
            };
            let target = m.pointer(&format!("/{src}/target")).cloned().unwrap_or(Value::Null);
            let current = statuses
                .iter()
                .find(|st| s(st, "/type") == ty)
                .and_then(|st| st.pointer(&format!("/{src}/current")).cloned());
            let (cur, want) = if let Some(u) = target.get("averageUtilization").and_then(Value::as_i64) {
                let c = current
                    .as_ref()
                    .and_then(|c| c.get("averageUtilization"))
                    .and_then(Value::as_i64)
                    .map_or("<unknown>".to_string(), |c| format!("{c}%"));
                (c, format!("{u}%"))
            } else {
                let key = if target.get("averageValue").is_some() {
                    "averageValue"
                } else {
                    "value"
                };
                let c = current
                    .as_ref()
                    .and_then(|c| c.get(key))
                    .and_then(Value::as_str)
                    .map_or("<unknown>".to_string(), String::from);
                (c, s(&target, &format!("/{key}")))
            };
            if name.is_empty() {
                format!("{cur}/{want}")
            } else {
                format!("{name}: {cur}/{want}")
            }
        })
        .collect();
    parts.join(", ")
}

/// Upstream's pod STATUS column.
pub fn pod_status(p: &Value) -> String {
    let mut reason = s(p, "/status/reason");
    if reason.is_empty() {
        reason = s(p, "/status/phase");
    }
    let mut initializing = false;
    let inits = list(p, "/status/initContainerStatuses");
    let n_init = list(p, "/spec/initContainers").len();
    for (idx, c) in inits.iter().enumerate() {
        if c.pointer("/state/terminated").is_some() && i(c, "/state/terminated/exitCode") == 0 {
            continue;
        }
        if let Some(t) = c.pointer("/state/terminated") {
            let r = s(t, "/reason");
            reason = if r.is_empty() {
                if i(t, "/signal") != 0 {
                    format!("Init:Signal:{}", i(t, "/signal"))
                } else {
                    format!("Init:ExitCode:{}", i(t, "/exitCode"))
                }
            } else {
                format!("Init:{r}")
            };
        } else if let Some(w) = c
            .pointer("/state/waiting")
            .filter(|w| !s(w, "/reason").is_empty() && s(w, "/reason") != "PodInitializing")
        {
            reason = format!("Init:{}", s(w, "/reason"));
        } else {
            reason = format!("Init:{idx}/{n_init}");
        }
        initializing = true;
        break;
    }
    if !initializing {
        let mut has_running = false;
        for c in list(p, "/status/containerStatuses").iter().rev() {
            if let Some(w) = c.pointer("/state/waiting").filter(|w| !s(w, "/reason").is_empty()) {
                reason = s(w, "/reason");
            } else if let Some(t) = c.pointer("/state/terminated") {
                let r = s(t, "/reason");
                reason = if !r.is_empty() {
                    r
                } else if i(t, "/signal") != 0 {
                    format!("Signal:{}", i(t, "/signal"))
                } else {
                    format!("ExitCode:{}", i(t, "/exitCode"))
                };
            } else if c.get("ready").and_then(Value::as_bool) == Some(true) && c.pointer("/state/running").is_some() {
                has_running = true;
            }
        }
        if reason == "Completed" && has_running {
            let ready = list(p, "/status/conditions")
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            reason = if ready { "Running".into() } else { "NotReady".into() };
        }
    }
    if meta::is_deleting(p) {
        reason = if s(p, "/status/reason") == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    reason
}

/// Upstream's pod READY column: ready containers of all containers.
pub(super) fn pod_ready(p: &Value) -> String {
    let total = list(p, "/spec/containers").len();
    let ready = list(p, "/status/containerStatuses")
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    format!("{ready}/{total}")
}

/// Upstream's pod RESTARTS column, with the time of the latest restart.
pub(super) fn pod_restarts(p: &Value) -> String {
    let statuses = list(p, "/status/containerStatuses");
    let restarts: i64 = statuses.iter().map(|c| i(c, "/restartCount")).sum();
    let last = statuses
        .iter()
        .filter_map(|c| c.pointer("/lastState/terminated/finishedAt").and_then(Value::as_str))
        .max();
    match last {
        Some(ts) if restarts > 0 => format!("{restarts} ({} ago)", since(ts)),
        _ => restarts.to_string(),
    }
}

/// Upstream's pod READINESS GATES column: gates whose condition is True, of all gates.
pub(super) fn pod_gates(p: &Value) -> String {
    let gates = list(p, "/spec/readinessGates");
    if gates.is_empty() {
        return "<none>".into();
    }
    let conds = list(p, "/status/conditions");
    let ok = gates
        .iter()
        .filter(|g| {
            conds
                .iter()
                .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
        })
        .count();
    format!("{ok}/{}", gates.len())
}

pub(super) fn node_status(n: &Value) -> String {
    let ready = list(n, "/status/conditions")
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| s(c, "/status"));
    // As kubectl's printNode: a Ready condition that is not True (False or Unknown) prints
    // NotReady; only a node without one prints Unknown.
    let mut status = match ready {
        Some(x) if x == "True" => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if n.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    status
}

pub(super) fn node_roles(n: &Value) -> String {
    let mut roles: Vec<String> = n
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.iter()
                .filter_map(|(k, v)| {
                    k.strip_prefix("node-role.kubernetes.io/")
                        .map(String::from)
                        .or_else(|| (k == "kubernetes.io/role").then(|| v.as_str().unwrap_or_default().to_string()))
                })
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.join(",")
}

pub(super) fn node_address(n: &Value, t: &str) -> String {
    list(n, "/status/addresses")
        .iter()
        .find(|x| x["type"] == t)
        .map(|x| s(x, "/address"))
        .unwrap_or_default()
}

/// Upstream's service EXTERNAL-IP column.
pub(super) fn service_external(v: &Value) -> String {
    let ext_ips: Vec<String> = list(v, "/spec/externalIPs")
        .iter()
        .filter_map(|x| x.as_str().map(String::from))
        .collect();
    match s(v, "/spec/type").as_str() {
        "ExternalName" => s(v, "/spec/externalName"),
        "LoadBalancer" => {
            let ing: Vec<String> = list(v, "/status/loadBalancer/ingress")
                .iter()
                .map(|x| {
                    if x.get("ip").is_some() {
                        s(x, "/ip")
                    } else {
                        s(x, "/hostname")
                    }
                })
                .chain(ext_ips.iter().cloned())
                .collect();
            if ing.is_empty() {
                "<pending>".into()
            } else {
                ing.join(",")
            }
        }
        _ => or_none(ext_ips.join(",")),
    }
}

/// Upstream's service PORT(S) column: `port[:nodePort]/protocol`, comma-joined.
pub(super) fn service_ports(v: &Value) -> String {
    let ports: Vec<String> = list(v, "/spec/ports")
        .iter()
        .map(|p| {
            let proto = s(p, "/protocol");
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(np) => format!("{}:{np}/{proto}", i(p, "/port")),
                None => format!("{}/{proto}", i(p, "/port")),
            }
        })
        .collect();
    ports.join(",")
}

pub(super) fn endpoints_cell(e: &Value) -> String {
    let mut all = Vec::new();
    for sub in e.pointer("/subsets").and_then(Value::as_array).into_iter().flatten() {
        let ports: Vec<i64> = sub["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| i(p, "/port"))
            .collect();
        for a in sub["addresses"].as_array().into_iter().flatten() {
            if ports.is_empty() {
                all.push(s(a, "/ip"));
            }
            for p in &ports {
                all.push(format!("{}:{p}", s(a, "/ip")));
            }
        }
    }
    if all.is_empty() {
        return "<none>".into();
    }
    if all.len() > 3 {
        let more = all.len() - 3;
        return format!("{} + {more} more...", all[..3].join(","));
    }
    all.join(",")
}

pub(super) fn slice_ports(e: &Value) -> String {
    let ports: Vec<String> = list(e, "/ports").iter().map(|p| i(p, "/port").to_string()).collect();
    if ports.is_empty() {
        "<unset>".into()
    } else {
        ports.join(",")
    }
}

pub(super) fn slice_endpoints(e: &Value) -> String {
    let addrs: Vec<String> = list(e, "/endpoints")
        .iter()
        .flat_map(|x| x["addresses"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    if addrs.is_empty() {
        "<unset>".to_string()
    } else if addrs.len() > 3 {
        format!("{} + {} more...", addrs[..3].join(","), addrs.len() - 3)
    } else {
        addrs.join(",")
    }
}

/// An event's time for LAST SEEN (`primary` = `/lastTimestamp`) or FIRST SEEN
/// (`/firstTimestamp`): the first of it, `eventTime` and the creation time that is set.
pub(super) fn event_time(e: &Value, primary: &str) -> String {
    [s(e, primary), s(e, "/eventTime"), s(e, "/metadata/creationTimestamp")]
        .into_iter()
        .find(|x| !x.is_empty())
        .unwrap_or_default()
}

pub(super) fn event_source(e: &Value) -> String {
    let mut source = s(e, "/source/component");
    if source.is_empty() {
        source = s(e, "/reportingComponent");
    }
    if !s(e, "/source/host").is_empty() {
        source = format!("{source}, {}", s(e, "/source/host"));
    }
    source
}

/// Upstream's job STATUS column.
pub(super) fn job_status(o: &Value) -> &'static str {
    let conds = list(o, "/status/conditions");
    let has = |t: &str| conds.iter().any(|c| c["type"] == t && c["status"] == "True");
    if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if meta::is_deleting(o) {
        "Terminating"
    } else {
        "Running"
    }
}

pub(super) fn job_completions(o: &Value) -> String {
    match o.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(n) => format!("{}/{n}", i(o, "/status/succeeded")),
        None => format!(
            "{}/1 of {}",
            i(o, "/status/succeeded"),
            i(o, "/spec/parallelism").max(1)
        ),
    }
}

pub(super) fn job_duration(o: &Value) -> String {
    let start = s(o, "/status/startTime");
    if start.is_empty() {
        return String::new();
    }
    let end = s(o, "/status/completionTime");
    let st = meta::age_secs(&start).unwrap_or(0);
    let secs = if end.is_empty() {
        st
    } else {
        st - meta::age_secs(&end).unwrap_or(0)
    };
    meta::human_duration(secs)
}

/// Upstream's controller revision CONTROLLER column: `kind.group/name` of the controller.
pub(super) fn revision_owner(o: &Value) -> String {
    list(o, "/metadata/ownerReferences")
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|r| {
            let group = s(r, "/apiVersion").split('/').next().unwrap_or_default().to_string();
            let kind = s(r, "/kind").to_lowercase();
            let kind = if s(r, "/apiVersion").contains('/') {
                format!("{kind}.{group}")
            } else {
                kind
            };
            format!("{kind}/{}", s(r, "/name"))
        })
        .unwrap_or_else(|| "<none>".into())
}

#[cfg(test)]
mod tests {
    use crate::api::registry::find;
    use crate::api::table::{TableOpts, render};
    use serde_json::json;

    #[test]
    fn service_ports_and_external_ip() {
        let def = find("", "v1", "services").unwrap();
        let svc = json!({"metadata": {"name": "s"}, "spec": {"type": "NodePort", "clusterIP": "127.1.96.5",
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}], "selector": {"app": "web"}}});
        let t = render(def, &[svc], &TableOpts { include: "None".into() }, None);
        assert_eq!(t["rows"][0]["cells"][3], "<none>");
        assert_eq!(t["rows"][0]["cells"][4], "80:30080/TCP");
        assert_eq!(t["rows"][0]["cells"][6], "app=web");
    }
}
