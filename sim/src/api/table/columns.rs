//! The columns of each kind's Table, upstream's printers for the served kinds: the shared
//! columns (NAME, AGE, the workload CONTAINERS/IMAGES/SELECTOR, replica counts) and one list per
//! kind, chosen by [`columns`].

use serde_json::{Value, json};

use super::cells::{
    endpoints_cell, event_source, event_time, hpa_targets, job_completions, job_duration, job_status, node_address,
    node_roles, node_status, pod_gates, pod_ready, pod_restarts, pod_status, quota_cells, revision_owner,
    service_external, service_ports, slice_endpoints, slice_ports,
};
use super::{Column, age, container_list, entries, i, key_values, list, or_none, s, since};
use crate::api::meta;
use crate::api::objects::selector_string;
use crate::api::registry::ResourceDef;

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
/// Roles, ClusterRoles and CRDs (upstream's default table convertor): the creation time
/// itself, not an age.
const ROLES: &[Column] = &[
    NAME,
    column("Created At", "date", 0, |o| json!(s(o, "/metadata/creationTimestamp"))),
];
/// The subjects of a binding of one kind, comma-separated (`namespace/name` for
/// ServiceAccounts), as upstream's binding printers list them.
fn subjects_of(o: &Value, kind: &str) -> Value {
    let names: Vec<String> = o
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|sub| sub.get("kind").and_then(Value::as_str) == Some(kind))
        .map(|sub| {
            let name = s(sub, "/name");
            if kind == "ServiceAccount" {
                format!("{}/{name}", s(sub, "/namespace"))
            } else {
                name.to_string()
            }
        })
        .collect();
    json!(names.join(", "))
}
const BINDINGS: &[Column] = &[
    NAME,
    string("Role", 0, |o| {
        json!(format!("{}/{}", s(o, "/roleRef/kind"), s(o, "/roleRef/name")))
    }),
    AGE,
    string("Users", 1, |o| subjects_of(o, "User")),
    string("Groups", 1, |o| subjects_of(o, "Group")),
    string("ServiceAccounts", 1, |o| subjects_of(o, "ServiceAccount")),
];
const OTHERS: &[Column] = &[NAME, AGE];

/// The columns of a kind's Table, upstream's printers for the served kinds.
pub(super) fn columns(def: &ResourceDef) -> &'static [Column] {
    match (def.group, def.plural) {
        // Upstream's default table convertor: the name and the creation time itself.
        ("apiextensions.k8s.io", "customresourcedefinitions") => ROLES,
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
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => ROLES,
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => BINDINGS,
        _ => super::cluster::columns(def).unwrap_or(OTHERS),
    }
}

#[cfg(test)]
mod tests {
    use crate::api::meta;
    use crate::api::registry::find;
    use crate::api::table::{TableOpts, render};
    use serde_json::json;

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
}
