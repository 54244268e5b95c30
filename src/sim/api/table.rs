//! Server-side printing: `meta.k8s.io/v1` Tables with upstream's columns.
//!
//! kubectl asks for a Table (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) and prints
//! what it gets, so these columns are what a person sees in `kubectl get`. Columns with
//! priority 1 appear with `-o wide`. The main function is [`render`].

use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::meta;
use super::objects::selector_string;
use super::registry::ResourceDef;

/// What the client asked of a Table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOpts {
    /// `includeObject`: `None`, `Metadata` (default) or `Object`.
    pub include: String,
}

/// Whether the Accept header asks for a Table; `include` comes from the `includeObject`
/// query parameter.
pub fn wants(headers: &HeaderMap, include: Option<&str>) -> Option<TableOpts> {
    let accept = headers.get("accept").and_then(|v| v.to_str().ok())?;
    let table = accept.split(',').any(|range| {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
    });
    table.then(|| TableOpts {
        include: include.unwrap_or("Metadata").to_string(),
    })
}

type Col = (&'static str, &'static str, u8);

const NAME: Col = ("Name", "string", 0);
const AGE: Col = ("Age", "string", 0);

fn columns(def: &ResourceDef) -> Vec<Col> {
    match (def.group, def.plural) {
        ("", "pods") => vec![
            NAME,
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            AGE,
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ],
        ("", "nodes") => vec![
            NAME,
            ("Status", "string", 0),
            ("Roles", "string", 0),
            AGE,
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ],
        ("", "services") => vec![
            NAME,
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            AGE,
            ("Selector", "string", 1),
        ],
        ("", "endpoints") => vec![NAME, ("Endpoints", "string", 0), AGE],
        ("", "namespaces") => vec![NAME, ("Status", "string", 0), AGE],
        ("", "configmaps") => vec![NAME, ("Data", "integer", 0), AGE],
        ("", "secrets") => vec![NAME, ("Type", "string", 0), ("Data", "integer", 0), AGE],
        ("", "events") | ("events.k8s.io", "events") => vec![
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Subobject", "string", 1),
            ("Source", "string", 1),
            ("Message", "string", 0),
            ("First Seen", "string", 1),
            ("Count", "string", 1),
            ("Name", "string", 1),
        ],
        ("apps", "deployments") => vec![
            NAME,
            ("Ready", "string", 0),
            ("Up-to-date", "string", 0),
            ("Available", "string", 0),
            AGE,
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        ("apps", "replicasets") => vec![
            NAME,
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            AGE,
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        ("apps", "daemonsets") => vec![
            NAME,
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            ("Up-to-date", "integer", 0),
            ("Available", "integer", 0),
            ("Node Selector", "string", 0),
            AGE,
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        ("apps", "statefulsets") => {
            vec![
                NAME,
                ("Ready", "string", 0),
                AGE,
                ("Containers", "string", 1),
                ("Images", "string", 1),
            ]
        }
        ("batch", "jobs") => vec![
            NAME,
            ("Status", "string", 0),
            ("Completions", "string", 0),
            ("Duration", "string", 0),
            AGE,
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        ("batch", "cronjobs") => vec![
            NAME,
            ("Schedule", "string", 0),
            ("Timezone", "string", 0),
            ("Suspend", "boolean", 0),
            ("Active", "integer", 0),
            ("Last Schedule", "string", 0),
            AGE,
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        ("discovery.k8s.io", "endpointslices") => vec![
            NAME,
            ("AddressType", "string", 0),
            ("Ports", "string", 0),
            ("Endpoints", "string", 0),
            AGE,
        ],
        ("", "serviceaccounts") => vec![NAME, ("Secrets", "string", 0), AGE],
        ("", "replicationcontrollers") => vec![
            NAME,
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            AGE,
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        ("", "resourcequotas") => vec![NAME, AGE, ("Request", "string", 0), ("Limit", "string", 0)],
        ("coordination.k8s.io", "leases") => vec![NAME, ("Holder", "string", 0), AGE],
        ("scheduling.k8s.io", "priorityclasses") => vec![
            NAME,
            ("Value", "integer", 0),
            ("Global-Default", "boolean", 0),
            AGE,
            ("PreemptionPolicy", "string", 0),
        ],
        ("node.k8s.io", "runtimeclasses") => vec![NAME, ("Handler", "string", 0), AGE],
        ("apps", "controllerrevisions") => {
            vec![NAME, ("Controller", "string", 0), ("Revision", "integer", 0), AGE]
        }
        ("autoscaling", "horizontalpodautoscalers") => vec![
            NAME,
            ("Reference", "string", 0),
            ("Targets", "string", 0),
            ("MinPods", "string", 0),
            ("MaxPods", "string", 0),
            ("Replicas", "string", 0),
            AGE,
        ],
        _ => vec![NAME, AGE],
    }
}

/// Upstream's quota REQUEST and LIMIT cells: `resource: used/hard` over `status.hard`, sorted,
/// `limits.*` resources in the second.
fn quota_cells(o: &Value) -> (String, String) {
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
fn hpa_targets(o: &Value) -> String {
    let specs = o
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = o
        .pointer("/status/currentMetrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
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

fn s(v: &Value, p: &str) -> String {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn i(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn or_none(x: String) -> String {
    if x.is_empty() { "<none>".into() } else { x }
}

fn age(obj: &Value) -> String {
    since(&s(obj, "/metadata/creationTimestamp"))
}

fn since(ts: &str) -> String {
    meta::age_secs(ts).map_or_else(|| "<unknown>".into(), meta::human_duration)
}

fn containers_images(obj: &Value, spec: &str) -> (String, String) {
    let cs = obj.pointer(spec).and_then(Value::as_array).cloned().unwrap_or_default();
    let names: Vec<String> = cs.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<String> = cs.iter().map(|c| s(c, "/image")).collect();
    (names.join(","), images.join(","))
}

/// Upstream's pod STATUS column.
pub fn pod_status(p: &Value) -> String {
    let mut reason = s(p, "/status/reason");
    if reason.is_empty() {
        reason = s(p, "/status/phase");
    }
    let mut initializing = false;
    let inits = p
        .pointer("/status/initContainerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let n_init = p
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
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
        let statuses = p
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for c in statuses.iter().rev() {
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
            let ready = p
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
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

fn pod_cells(p: &Value) -> Vec<Value> {
    let total = p
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let statuses = p
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses.iter().map(|c| i(c, "/restartCount")).sum();
    let last = statuses
        .iter()
        .filter_map(|c| c.pointer("/lastState/terminated/finishedAt").and_then(Value::as_str))
        .max();
    let restarts = match last {
        Some(ts) if restarts > 0 => format!("{restarts} ({} ago)", since(ts)),
        _ => restarts.to_string(),
    };
    let gates = p
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let gates = if gates.is_empty() {
        "<none>".into()
    } else {
        let conds = p
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let ok = gates
            .iter()
            .filter(|g| {
                conds
                    .iter()
                    .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
            })
            .count();
        format!("{ok}/{}", gates.len())
    };
    vec![
        json!(meta::name(p)),
        json!(format!("{ready}/{total}")),
        json!(pod_status(p)),
        json!(restarts),
        json!(age(p)),
        json!(or_none(s(p, "/status/podIP"))),
        json!(or_none(s(p, "/spec/nodeName"))),
        json!(or_none(s(p, "/status/nominatedNodeName"))),
        json!(gates),
    ]
}

fn node_cells(n: &Value) -> Vec<Value> {
    let conds = n
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut status = match conds.iter().find(|c| c["type"] == "Ready").map(|c| s(c, "/status")) {
        Some(x) if x == "True" => "Ready".to_string(),
        Some(x) if x == "False" => "NotReady".to_string(),
        _ => "Unknown".to_string(),
    };
    if n.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
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
    let addr = |t: &str| {
        n.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| x["type"] == t))
            .map(|x| s(x, "/address"))
            .unwrap_or_default()
    };
    vec![
        json!(meta::name(n)),
        json!(status),
        json!(or_none(roles.join(","))),
        json!(age(n)),
        json!(s(n, "/status/nodeInfo/kubeletVersion")),
        json!(or_none(addr("InternalIP"))),
        json!(or_none(addr("ExternalIP"))),
        json!(s(n, "/status/nodeInfo/osImage")),
        json!(s(n, "/status/nodeInfo/kernelVersion")),
        json!(s(n, "/status/nodeInfo/containerRuntimeVersion")),
    ]
}

fn service_cells(v: &Value) -> Vec<Value> {
    let ty = s(v, "/spec/type");
    let ext_ips: Vec<String> = v
        .pointer("/spec/externalIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(String::from))
        .collect();
    let external = match ty.as_str() {
        "ExternalName" => s(v, "/spec/externalName"),
        "LoadBalancer" => {
            let ing: Vec<String> = v
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
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
    };
    let ports: Vec<String> = v
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let proto = s(p, "/protocol");
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(np) => format!("{}:{np}/{proto}", i(p, "/port")),
                None => format!("{}/{proto}", i(p, "/port")),
            }
        })
        .collect();
    let selector: Vec<String> = v
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, x)| format!("{k}={}", x.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    let cip = s(v, "/spec/clusterIP");
    vec![
        json!(meta::name(v)),
        json!(ty),
        json!(if cip.is_empty() { "<none>".into() } else { cip }),
        json!(external),
        json!(or_none(ports.join(","))),
        json!(age(v)),
        json!(or_none(selector.join(","))),
    ]
}

fn endpoints_cell(e: &Value) -> String {
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

fn slice_cells(e: &Value) -> Vec<Value> {
    let ports: Vec<String> = e
        .pointer("/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| i(p, "/port").to_string())
        .collect();
    let addrs: Vec<String> = e
        .pointer("/endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|x| x["addresses"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    let eps = if addrs.is_empty() {
        "<unset>".to_string()
    } else if addrs.len() > 3 {
        format!("{} + {} more...", addrs[..3].join(","), addrs.len() - 3)
    } else {
        addrs.join(",")
    };
    vec![
        json!(meta::name(e)),
        json!(s(e, "/addressType")),
        json!(if ports.is_empty() {
            "<unset>".into()
        } else {
            ports.join(",")
        }),
        json!(eps),
        json!(age(e)),
    ]
}

fn event_cells(e: &Value) -> Vec<Value> {
    let last = [
        s(e, "/lastTimestamp"),
        s(e, "/eventTime"),
        s(e, "/metadata/creationTimestamp"),
    ]
    .into_iter()
    .find(|x| !x.is_empty())
    .unwrap_or_default();
    let first = [
        s(e, "/firstTimestamp"),
        s(e, "/eventTime"),
        s(e, "/metadata/creationTimestamp"),
    ]
    .into_iter()
    .find(|x| !x.is_empty())
    .unwrap_or_default();
    let kind = s(e, "/involvedObject/kind").to_lowercase();
    let object = format!("{kind}/{}", s(e, "/involvedObject/name"));
    let mut source = s(e, "/source/component");
    if source.is_empty() {
        source = s(e, "/reportingComponent");
    }
    if !s(e, "/source/host").is_empty() {
        source = format!("{source}, {}", s(e, "/source/host"));
    }
    let count = e.pointer("/count").and_then(Value::as_i64).unwrap_or(1);
    vec![
        json!(since(&last)),
        json!(s(e, "/type")),
        json!(s(e, "/reason")),
        json!(object),
        json!(s(e, "/involvedObject/fieldPath")),
        json!(source),
        json!(s(e, "/message").trim()),
        json!(since(&first)),
        json!(count.to_string()),
        json!(meta::name(e)),
    ]
}

fn cells(def: &ResourceDef, o: &Value) -> Vec<Value> {
    let name = json!(meta::name(o));
    let tmpl = "/spec/template/spec/containers";
    match (def.group, def.plural) {
        ("", "pods") => pod_cells(o),
        ("", "nodes") => node_cells(o),
        ("", "services") => service_cells(o),
        ("", "endpoints") => vec![name, json!(endpoints_cell(o)), json!(age(o))],
        ("", "namespaces") => vec![name, json!(s(o, "/status/phase")), json!(age(o))],
        ("", "configmaps") => {
            let n = ["data", "binaryData"]
                .iter()
                .map(|k| o.get(*k).and_then(Value::as_object).map_or(0, |m| m.len()))
                .sum::<usize>();
            vec![name, json!(n), json!(age(o))]
        }
        ("", "secrets") => {
            let n = o.get("data").and_then(Value::as_object).map_or(0, |m| m.len());
            vec![name, json!(s(o, "/type")), json!(n), json!(age(o))]
        }
        ("", "events") => event_cells(o),
        ("events.k8s.io", "events") => event_cells(&super::convert::to_storage(def, o.clone())),
        ("apps", "deployments") => {
            let (c, im) = containers_images(o, tmpl);
            vec![
                name,
                json!(format!("{}/{}", i(o, "/status/readyReplicas"), i(o, "/spec/replicas"))),
                json!(i(o, "/status/updatedReplicas")),
                json!(i(o, "/status/availableReplicas")),
                json!(age(o)),
                json!(c),
                json!(im),
                json!(o.pointer("/spec/selector").map(selector_string).unwrap_or_default()),
            ]
        }
        ("apps", "replicasets") => {
            let (c, im) = containers_images(o, tmpl);
            vec![
                name,
                json!(i(o, "/spec/replicas")),
                json!(i(o, "/status/replicas")),
                json!(i(o, "/status/readyReplicas")),
                json!(age(o)),
                json!(c),
                json!(im),
                json!(o.pointer("/spec/selector").map(selector_string).unwrap_or_default()),
            ]
        }
        ("apps", "daemonsets") => {
            let (c, im) = containers_images(o, tmpl);
            let ns: Vec<String> = o
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect()
                })
                .unwrap_or_default();
            vec![
                name,
                json!(i(o, "/status/desiredNumberScheduled")),
                json!(i(o, "/status/currentNumberScheduled")),
                json!(i(o, "/status/numberReady")),
                json!(i(o, "/status/updatedNumberScheduled")),
                json!(i(o, "/status/numberAvailable")),
                json!(or_none(ns.join(","))),
                json!(age(o)),
                json!(c),
                json!(im),
                json!(o.pointer("/spec/selector").map(selector_string).unwrap_or_default()),
            ]
        }
        ("apps", "statefulsets") => {
            let (c, im) = containers_images(o, tmpl);
            vec![
                name,
                json!(format!("{}/{}", i(o, "/status/readyReplicas"), i(o, "/spec/replicas"))),
                json!(age(o)),
                json!(c),
                json!(im),
            ]
        }
        ("batch", "jobs") => {
            let (c, im) = containers_images(o, tmpl);
            let conds = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let has = |t: &str| conds.iter().any(|c| c["type"] == t && c["status"] == "True");
            let status = if has("Complete") {
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
            };
            let completions = match o.pointer("/spec/completions").and_then(Value::as_i64) {
                Some(n) => format!("{}/{n}", i(o, "/status/succeeded")),
                None => format!(
                    "{}/1 of {}",
                    i(o, "/status/succeeded"),
                    i(o, "/spec/parallelism").max(1)
                ),
            };
            let start = s(o, "/status/startTime");
            let duration = if start.is_empty() {
                String::new()
            } else {
                let end = s(o, "/status/completionTime");
                let st = meta::age_secs(&start).unwrap_or(0);
                let secs = if end.is_empty() {
                    st
                } else {
                    st - meta::age_secs(&end).unwrap_or(0)
                };
                meta::human_duration(secs)
            };
            vec![
                name,
                json!(status),
                json!(completions),
                json!(duration),
                json!(age(o)),
                json!(c),
                json!(im),
                json!(o.pointer("/spec/selector").map(selector_string).unwrap_or_default()),
            ]
        }
        ("batch", "cronjobs") => {
            let (c, im) = containers_images(o, "/spec/jobTemplate/spec/template/spec/containers");
            let last = s(o, "/status/lastScheduleTime");
            vec![
                name,
                json!(s(o, "/spec/schedule")),
                json!(or_none(s(o, "/spec/timeZone"))),
                json!(o.pointer("/spec/suspend").and_then(Value::as_bool).unwrap_or(false)),
                json!(
                    o.pointer("/status/active")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len)
                ),
                json!(if last.is_empty() { "<none>".into() } else { since(&last) }),
                json!(age(o)),
                json!(c),
                json!(im),
                json!(
                    o.pointer("/spec/jobTemplate/spec/selector")
                        .map(selector_string)
                        .unwrap_or_else(|| "<none>".into())
                ),
            ]
        }
        ("discovery.k8s.io", "endpointslices") => slice_cells(o),
        ("", "serviceaccounts") => {
            let n = o.get("secrets").and_then(Value::as_array).map_or(0, Vec::len);
            vec![name, json!(n), json!(age(o))]
        }
        ("", "replicationcontrollers") => {
            let (c, im) = containers_images(o, tmpl);
            let sel = o
                .pointer("/spec/selector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            vec![
                name,
                json!(i(o, "/spec/replicas")),
                json!(i(o, "/status/replicas")),
                json!(i(o, "/status/readyReplicas")),
                json!(age(o)),
                json!(c),
                json!(im),
                json!(sel),
            ]
        }
        ("", "resourcequotas") => {
            let (request, limit) = quota_cells(o);
            vec![name, json!(age(o)), json!(request), json!(limit)]
        }
        ("coordination.k8s.io", "leases") => {
            vec![name, json!(s(o, "/spec/holderIdentity")), json!(age(o))]
        }
        ("scheduling.k8s.io", "priorityclasses") => vec![
            name,
            json!(i(o, "/value")),
            json!(o.get("globalDefault").and_then(Value::as_bool).unwrap_or(false)),
            json!(age(o)),
            json!(s(o, "/preemptionPolicy")),
        ],
        ("node.k8s.io", "runtimeclasses") => vec![name, json!(s(o, "/handler")), json!(age(o))],
        ("apps", "controllerrevisions") => {
            let owner = o
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|refs| {
                    refs.iter()
                        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
                })
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
                .unwrap_or_else(|| "<none>".into());
            vec![name, json!(owner), json!(i(o, "/revision")), json!(age(o))]
        }
        ("autoscaling", "horizontalpodautoscalers") => {
            let min = o
                .pointer("/spec/minReplicas")
                .and_then(Value::as_i64)
                .map_or("<unset>".to_string(), |m| m.to_string());
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    s(o, "/spec/scaleTargetRef/kind"),
                    s(o, "/spec/scaleTargetRef/name")
                )),
                json!(hpa_targets(o)),
                json!(min),
                json!(i(o, "/spec/maxReplicas").to_string()),
                json!(i(o, "/status/currentReplicas").to_string()),
                json!(age(o)),
            ]
        }
        _ => vec![name, json!(age(o))],
    }
}

/// A Table of `items`; `list_meta` is the list's metadata (None for one object or a watch event).
pub fn render(def: &ResourceDef, items: &[Value], opts: &TableOpts, list_meta: Option<Value>) -> Value {
    let cols: Vec<Value> = columns(def)
        .into_iter()
        .map(|(name, ty, prio)| {
            let format = if name == "Name" { "name" } else { "" };
            json!({"name": name, "type": ty, "format": format, "description": description(name), "priority": prio})
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(def, o)});
            match opts.include.as_str() {
                "Object" => row["object"] = o.clone(),
                "None" => {}
                _ => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": o.get("metadata").cloned().unwrap_or_default()})
                }
            }
            row
        })
        .collect();
    let metadata = list_meta.unwrap_or_else(
        || json!({"resourceVersion": items.first().map(|o| s(o, "/metadata/resourceVersion")).unwrap_or_default()}),
    );
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": cols, "rows": rows})
}

fn description(col: &str) -> &'static str {
    match col {
        "Name" => {
            "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
        }
        "Age" => {
            "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC."
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::api::registry::find;

    #[test]
    fn pod_row_has_upstream_columns() {
        let def = find("", "v1", "pods").unwrap();
        let p = json!({"metadata": {"name": "web", "creationTimestamp": meta::now()},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "127.16.16.2",
                "containerStatuses": [{"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}}},
                                      {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let t = render(def, &[p], &TableOpts { include: "None".into() }, None);
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[1], "1/2");
        assert_eq!(cells[2], "CrashLoopBackOff");
        assert_eq!(cells[3], "1");
        assert_eq!(cells[6], "n1");
        assert_eq!(t["columnDefinitions"][5]["priority"], 1);
    }

    #[test]
    fn accept_header_selects_table() {
        let mut h = HeaderMap::new();
        h.insert(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
                .parse()
                .unwrap(),
        );
        assert_eq!(wants(&h, None).unwrap().include, "Metadata");
        h.insert("accept", "application/json".parse().unwrap());
        assert!(wants(&h, None).is_none());
    }

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
