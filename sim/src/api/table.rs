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

/// One column of a kind's Table: the definition kubectl prints as a header and the function that
/// fills the column's cell in every row. Keeping the two in one value is what keeps a kind's
/// headers and cells in step, and lets the columns kinds share (NAME, AGE, the workload
/// CONTAINERS/IMAGES/SELECTOR...) be written once; each kind's Table is then a list of these.
#[derive(Clone, Copy)]
struct Column {
    name: &'static str,
    /// The OpenAPI type kubectl is told (`string`, `integer`, `boolean`).
    ty: &'static str,
    /// 0, or 1 for the columns only `-o wide` shows.
    priority: u8,
    cell: fn(&Value) -> Value,
}

const fn column(name: &'static str, ty: &'static str, priority: u8, cell: fn(&Value) -> Value) -> Column {
    Column {
        name,
        ty,
        priority,
        cell,
    }
}

const fn string(name: &'static str, priority: u8, cell: fn(&Value) -> Value) -> Column {
    column(name, "string", priority, cell)
}

const fn integer(name: &'static str, priority: u8, cell: fn(&Value) -> Value) -> Column {
    column(name, "integer", priority, cell)
}

const fn boolean(name: &'static str, priority: u8, cell: fn(&Value) -> Value) -> Column {
    column(name, "boolean", priority, cell)
}

/// Where the pod template's containers of Deployments, ReplicaSets, DaemonSets, StatefulSets,
/// Jobs and ReplicationControllers are.
const TEMPLATE: &str = "/spec/template/spec/containers";
const JOB_TEMPLATE: &str = "/spec/jobTemplate/spec/template/spec/containers";

const NAME: Column = string("Name", 0, |o| json!(meta::name(o)));
const AGE: Column = string("Age", 0, |o| json!(age(o)));
const CONTAINERS: Column = string("Containers", 1, |o| json!(container_list(o, TEMPLATE, "/name")));
const IMAGES: Column = string("Images", 1, |o| json!(container_list(o, TEMPLATE, "/image")));
const SELECTOR: Column = string("Selector", 1, |o| {
    json!(o.pointer("/spec/selector").map(selector_string).unwrap_or_default())
});
/// `readyReplicas/replicas`, the READY of Deployments and StatefulSets.
const READY_OF: Column = string("Ready", 0, |o| {
    json!(format!("{}/{}", i(o, "/status/readyReplicas"), i(o, "/spec/replicas")))
});
const DESIRED: Column = integer("Desired", 0, |o| json!(i(o, "/spec/replicas")));
const CURRENT: Column = integer("Current", 0, |o| json!(i(o, "/status/replicas")));
const READY: Column = integer("Ready", 0, |o| json!(i(o, "/status/readyReplicas")));

const PODS: &[Column] = &[
    NAME,
    string("Ready", 0, |p| json!(pod_ready(p))),
    string("Status", 0, |p| json!(pod_status(p))),
    string("Restarts", 0, |p| json!(pod_restarts(p))),
    AGE,
    string("IP", 1, |p| json!(or_none(s(p, "/status/podIP")))),
    string("Node", 1, |p| json!(or_none(s(p, "/spec/nodeName")))),
    string("Nominated Node", 1, |p| {
        json!(or_none(s(p, "/status/nominatedNodeName")))
    }),
    string("Readiness Gates", 1, |p| json!(pod_gates(p))),
];
const NODES: &[Column] = &[
    NAME,
    string("Status", 0, |n| json!(node_status(n))),
    string("Roles", 0, |n| json!(or_none(node_roles(n)))),
    AGE,
    string("Version", 0, |n| json!(s(n, "/status/nodeInfo/kubeletVersion"))),
    string("Internal-IP", 1, |n| json!(or_none(node_address(n, "InternalIP")))),
    string("External-IP", 1, |n| json!(or_none(node_address(n, "ExternalIP")))),
    string("OS-Image", 1, |n| json!(s(n, "/status/nodeInfo/osImage"))),
    string("Kernel-Version", 1, |n| json!(s(n, "/status/nodeInfo/kernelVersion"))),
    string("Container-Runtime", 1, |n| {
        json!(s(n, "/status/nodeInfo/containerRuntimeVersion"))
    }),
];
const SERVICES: &[Column] = &[
    NAME,
    string("Type", 0, |v| json!(s(v, "/spec/type"))),
    string("Cluster-IP", 0, |v| json!(or_none(s(v, "/spec/clusterIP")))),
    string("External-IP", 0, |v| json!(service_external(v))),
    string("Port(s)", 0, |v| json!(or_none(service_ports(v)))),
    AGE,
    string("Selector", 1, |v| json!(or_none(key_values(v, "/spec/selector")))),
];
const EVENTS: &[Column] = &[
    string("Last Seen", 0, |e| json!(since(&event_time(e, "/lastTimestamp")))),
    string("Type", 0, |e| json!(s(e, "/type"))),
    string("Reason", 0, |e| json!(s(e, "/reason"))),
    string("Object", 0, |e| {
        json!(format!(
            "{}/{}",
            s(e, "/involvedObject/kind").to_lowercase(),
            s(e, "/involvedObject/name")
        ))
    }),
    string("Subobject", 1, |e| json!(s(e, "/involvedObject/fieldPath"))),
    string("Source", 1, |e| json!(event_source(e))),
    string("Message", 0, |e| json!(s(e, "/message").trim())),
    string("First Seen", 1, |e| json!(since(&event_time(e, "/firstTimestamp")))),
    string("Count", 1, |e| {
        json!(e.pointer("/count").and_then(Value::as_i64).unwrap_or(1).to_string())
    }),
    string("Name", 1, |e| json!(meta::name(e))),
];
const DEPLOYMENTS: &[Column] = &[
    NAME,
    READY_OF,
    string("Up-to-date", 0, |o| json!(i(o, "/status/updatedReplicas"))),
    string("Available", 0, |o| json!(i(o, "/status/availableReplicas"))),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];
const REPLICASETS: &[Column] = &[NAME, DESIRED, CURRENT, READY, AGE, CONTAINERS, IMAGES, SELECTOR];
const DAEMONSETS: &[Column] = &[
    NAME,
    integer("Desired", 0, |o| json!(i(o, "/status/desiredNumberScheduled"))),
    integer("Current", 0, |o| json!(i(o, "/status/currentNumberScheduled"))),
    integer("Ready", 0, |o| json!(i(o, "/status/numberReady"))),
    integer("Up-to-date", 0, |o| json!(i(o, "/status/updatedNumberScheduled"))),
    integer("Available", 0, |o| json!(i(o, "/status/numberAvailable"))),
    string("Node Selector", 0, |o| {
        json!(or_none(key_values(o, "/spec/template/spec/nodeSelector")))
    }),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];
const STATEFULSETS: &[Column] = &[NAME, READY_OF, AGE, CONTAINERS, IMAGES];
const JOBS: &[Column] = &[
    NAME,
    string("Status", 0, |o| json!(job_status(o))),
    string("Completions", 0, |o| json!(job_completions(o))),
    string("Duration", 0, |o| json!(job_duration(o))),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];
const CRONJOBS: &[Column] = &[
    NAME,
    string("Schedule", 0, |o| json!(s(o, "/spec/schedule"))),
    string("Timezone", 0, |o| json!(or_none(s(o, "/spec/timeZone")))),
    boolean("Suspend", 0, |o| {
        json!(o.pointer("/spec/suspend").and_then(Value::as_bool).unwrap_or(false))
    }),
    integer("Active", 0, |o| json!(list(o, "/status/active").len())),
    string("Last Schedule", 0, |o| {
        let last = s(o, "/status/lastScheduleTime");
        json!(if last.is_empty() { "<none>".into() } else { since(&last) })
    }),
    AGE,
    string("Containers", 1, |o| json!(container_list(o, JOB_TEMPLATE, "/name"))),
    string("Images", 1, |o| json!(container_list(o, JOB_TEMPLATE, "/image"))),
    string("Selector", 1, |o| {
        json!(
            o.pointer("/spec/jobTemplate/spec/selector")
                .map(selector_string)
                .unwrap_or_else(|| "<none>".into())
        )
    }),
];
const ENDPOINTS: &[Column] = &[NAME, string("Endpoints", 0, |e| json!(endpoints_cell(e))), AGE];
const ENDPOINTSLICES: &[Column] = &[
    NAME,
    string("AddressType", 0, |e| json!(s(e, "/addressType"))),
    string("Ports", 0, |e| json!(slice_ports(e))),
    string("Endpoints", 0, |e| json!(slice_endpoints(e))),
    AGE,
];
const NAMESPACES: &[Column] = &[NAME, string("Status", 0, |o| json!(s(o, "/status/phase"))), AGE];
const CONFIGMAPS: &[Column] = &[
    NAME,
    integer("Data", 0, |o| json!(entries(o, "data") + entries(o, "binaryData"))),
    AGE,
];
const SECRETS: &[Column] = &[
    NAME,
    string("Type", 0, |o| json!(s(o, "/type"))),
    integer("Data", 0, |o| json!(entries(o, "data"))),
    AGE,
];
const SERVICEACCOUNTS: &[Column] = &[NAME, string("Secrets", 0, |o| json!(list(o, "/secrets").len())), AGE];
const REPLICATIONCONTROLLERS: &[Column] = &[
    NAME,
    DESIRED,
    CURRENT,
    READY,
    AGE,
    CONTAINERS,
    IMAGES,
    string("Selector", 1, |o| json!(key_values(o, "/spec/selector"))),
];
const RESOURCEQUOTAS: &[Column] = &[
    NAME,
    AGE,
    string("Request", 0, |o| json!(quota_cells(o).0)),
    string("Limit", 0, |o| json!(quota_cells(o).1)),
];
const LEASES: &[Column] = &[NAME, string("Holder", 0, |o| json!(s(o, "/spec/holderIdentity"))), AGE];
const PRIORITYCLASSES: &[Column] = &[
    NAME,
    integer("Value", 0, |o| json!(i(o, "/value"))),
    boolean("Global-Default", 0, |o| {
        json!(o.get("globalDefault").and_then(Value::as_bool).unwrap_or(false))
    }),
    AGE,
    string("PreemptionPolicy", 0, |o| json!(s(o, "/preemptionPolicy"))),
];
const RUNTIMECLASSES: &[Column] = &[NAME, string("Handler", 0, |o| json!(s(o, "/handler"))), AGE];
const CONTROLLERREVISIONS: &[Column] = &[
    NAME,
    string("Controller", 0, |o| json!(revision_owner(o))),
    integer("Revision", 0, |o| json!(i(o, "/revision"))),
    AGE,
];
const HORIZONTALPODAUTOSCALERS: &[Column] = &[
    NAME,
    string("Reference", 0, |o| {
        json!(format!(
            "{}/{}",
            s(o, "/spec/scaleTargetRef/kind"),
            s(o, "/spec/scaleTargetRef/name")
        ))
    }),
    string("Targets", 0, |o| json!(hpa_targets(o))),
    string("MinPods", 0, |o| {
        json!(
            o.pointer("/spec/minReplicas")
                .and_then(Value::as_i64)
                .map_or("<unset>".to_string(), |m| m.to_string())
        )
    }),
    string("MaxPods", 0, |o| json!(i(o, "/spec/maxReplicas").to_string())),
    string("Replicas", 0, |o| json!(i(o, "/status/currentReplicas").to_string())),
    AGE,
];
const OTHERS: &[Column] = &[NAME, AGE];

/// The columns of a kind's Table, upstream's printers for the served kinds.
fn columns(def: &ResourceDef) -> &'static [Column] {
    match (def.group, def.plural) {
        ("", "pods") => PODS,
        ("", "nodes") => NODES,
        ("", "services") => SERVICES,
        ("", "endpoints") => ENDPOINTS,
        ("", "namespaces") => NAMESPACES,
        ("", "configmaps") => CONFIGMAPS,
        ("", "secrets") => SECRETS,
        ("", "events") | ("events.k8s.io", "events") => EVENTS,
        ("apps", "deployments") => DEPLOYMENTS,
        ("apps", "replicasets") => REPLICASETS,
        ("apps", "daemonsets") => DAEMONSETS,
        ("apps", "statefulsets") => STATEFULSETS,
        ("batch", "jobs") => JOBS,
        ("batch", "cronjobs") => CRONJOBS,
        ("discovery.k8s.io", "endpointslices") => ENDPOINTSLICES,
        ("", "serviceaccounts") => SERVICEACCOUNTS,
        ("", "replicationcontrollers") => REPLICATIONCONTROLLERS,
        ("", "resourcequotas") => RESOURCEQUOTAS,
        ("coordination.k8s.io", "leases") => LEASES,
        ("scheduling.k8s.io", "priorityclasses") => PRIORITYCLASSES,
        ("node.k8s.io", "runtimeclasses") => RUNTIMECLASSES,
        ("apps", "controllerrevisions") => CONTROLLERREVISIONS,
        ("autoscaling", "horizontalpodautoscalers") => HORIZONTALPODAUTOSCALERS,
        _ => OTHERS,
    }
}

/// A row's cells. events.k8s.io Events print as core Events, so they are read in their
/// storage (core) form.
fn cells(def: &ResourceDef, o: &Value) -> Vec<Value> {
    let converted;
    let o = if (def.group, def.plural) == ("events.k8s.io", "events") {
        converted = super::convert::to_storage(def, o.clone());
        &converted
    } else {
        o
    };
    columns(def).iter().map(|c| (c.cell)(o)).collect()
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

/// The array at `p`, empty when absent.
fn list<'a>(v: &'a Value, p: &str) -> &'a [Value] {
    v.pointer(p).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// How many entries the map at `key` has.
fn entries(o: &Value, key: &str) -> usize {
    o.get(key).and_then(Value::as_object).map_or(0, |m| m.len())
}

/// The string map at `p` as `k=v,k=v` (selectors and node selectors), empty when absent.
fn key_values(v: &Value, p: &str) -> String {
    v.pointer(p)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, x)| format!("{k}={}", x.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// The comma-joined `field` (`/name` or `/image`) of the containers at `spec`.
fn container_list(obj: &Value, spec: &str, field: &str) -> String {
    let values: Vec<String> = list(obj, spec).iter().map(|c| s(c, field)).collect();
    values.join(",")
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
fn pod_ready(p: &Value) -> String {
    let total = list(p, "/spec/containers").len();
    let ready = list(p, "/status/containerStatuses")
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    format!("{ready}/{total}")
}

/// Upstream's pod RESTARTS column, with the time of the latest restart.
fn pod_restarts(p: &Value) -> String {
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
fn pod_gates(p: &Value) -> String {
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

fn node_status(n: &Value) -> String {
    let ready = list(n, "/status/conditions")
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| s(c, "/status"));
    let mut status = match ready {
        Some(x) if x == "True" => "Ready".to_string(),
        Some(x) if x == "False" => "NotReady".to_string(),
        _ => "Unknown".to_string(),
    };
    if n.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    status
}

fn node_roles(n: &Value) -> String {
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

fn node_address(n: &Value, t: &str) -> String {
    list(n, "/status/addresses")
        .iter()
        .find(|x| x["type"] == t)
        .map(|x| s(x, "/address"))
        .unwrap_or_default()
}

/// Upstream's service EXTERNAL-IP column.
fn service_external(v: &Value) -> String {
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
fn service_ports(v: &Value) -> String {
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

fn slice_ports(e: &Value) -> String {
    let ports: Vec<String> = list(e, "/ports").iter().map(|p| i(p, "/port").to_string()).collect();
    if ports.is_empty() {
        "<unset>".into()
    } else {
        ports.join(",")
    }
}

fn slice_endpoints(e: &Value) -> String {
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
fn event_time(e: &Value, primary: &str) -> String {
    [s(e, primary), s(e, "/eventTime"), s(e, "/metadata/creationTimestamp")]
        .into_iter()
        .find(|x| !x.is_empty())
        .unwrap_or_default()
}

fn event_source(e: &Value) -> String {
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
fn job_status(o: &Value) -> &'static str {
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

fn job_completions(o: &Value) -> String {
    match o.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(n) => format!("{}/{n}", i(o, "/status/succeeded")),
        None => format!(
            "{}/1 of {}",
            i(o, "/status/succeeded"),
            i(o, "/spec/parallelism").max(1)
        ),
    }
}

fn job_duration(o: &Value) -> String {
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
fn revision_owner(o: &Value) -> String {
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

/// A Table of `items`; `list_meta` is the list's metadata (None for one object or a watch event).
pub fn render(def: &ResourceDef, items: &[Value], opts: &TableOpts, list_meta: Option<Value>) -> Value {
    let cols: Vec<Value> = columns(def)
        .iter()
        .map(|c| {
            let format = if c.name == "Name" { "name" } else { "" };
            json!({"name": c.name, "type": c.ty, "format": format, "description": description(c.name), "priority": c.priority})
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
    use crate::api::registry::find;

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
