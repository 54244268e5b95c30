//! Objects every cluster has before anybody asks: the system namespaces, the `kubernetes`
//! Service with its endpoints, the system priority classes, the API Priority and Fairness
//! configuration, the component statuses and the bootstrap RBAC policy.

use serde_json::{Value, json};

use super::meta;
use super::state::AppState;

/// Stamps uid/creationTimestamp and stores `obj` under `key`.
fn put(st: &AppState, key: &str, mut obj: Value) {
    let m = meta::meta_mut(&mut obj);
    m.insert("uid".into(), json!(meta::new_uid()));
    m.insert("creationTimestamp".into(), json!(meta::now()));
    let ns = meta::namespace(&obj).to_string();
    let name = meta::name(&obj).to_string();
    // The store is empty at bootstrap, so a clash is a bug in this table.
    st.store
        .create(key, &ns, &name, obj)
        .expect("bootstrap objects are unique");
}

/// An object named `kubernetes` in `default` with `labels` and the fields of `rest`: the API
/// server's own Service, Endpoints and EndpointSlice differ only in kind, labels and body.
fn kubernetes_object(api_version: &str, kind: &str, labels: Value, rest: Value) -> Value {
    let mut obj = json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
    });
    if let (Some(m), Value::Object(rest)) = (obj.as_object_mut(), rest) {
        m.extend(rest);
    }
    obj
}

/// The namespace object as the namespace admission creates it.
pub fn namespace_object(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}
    })
}

/// Creates the bootstrap objects.
pub fn bootstrap(st: &AppState) {
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        put(st, "/namespaces", namespace_object(ns));
    }
    use super::auth::{policy, rbac};
    for (key, objects) in [
        (rbac::CLUSTER_ROLES, policy::cluster_roles()),
        (rbac::CLUSTER_ROLE_BINDINGS, policy::cluster_role_bindings()),
        (rbac::ROLES, policy::roles()),
        (rbac::ROLE_BINDINGS, policy::role_bindings()),
    ] {
        for obj in objects {
            put(st, key, obj);
        }
    }
    let block = st.cfg.block;
    let api_ip = block.api_server().to_string();
    let port = st.cfg.api_port;
    // Fault `bootstrap-controller-off=all`: the post-start hook that publishes the API server's
    // own Service and endpoints never ran; `=endpoints`: it publishes the Service only.
    let faults = &st.cfg.faults;
    if !faults.applies_to("bootstrap-controller-off", "all") {
        put(
            st,
            "/services",
            kubernetes_object(
                "v1",
                "Service",
                json!({"component": "apiserver", "provider": "kubernetes"}),
                json!({
                    "spec": {
                        "clusterIP": block.kubernetes_service().to_string(),
                        "clusterIPs": [block.kubernetes_service().to_string()],
                        "internalTrafficPolicy": "Cluster",
                        "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                        "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
                        "sessionAffinity": "None", "type": "ClusterIP"
                    },
                    "status": {"loadBalancer": {}}
                }),
            ),
        );
    }
    if !faults.is_on("bootstrap-controller-off") {
        put(
            st,
            "/endpoints",
            kubernetes_object(
                "v1",
                "Endpoints",
                json!({"endpointslice.kubernetes.io/skip-mirror": "true"}),
                json!({
                    "subsets": [{"addresses": [{"ip": api_ip}],
                                 "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]
                }),
            ),
        );
        put(
            st,
            "discovery.k8s.io/endpointslices",
            kubernetes_object(
                "discovery.k8s.io/v1",
                "EndpointSlice",
                json!({"kubernetes.io/service-name": "kubernetes",
                       "endpointslice.kubernetes.io/managed-by": "endpointslicemirroring-controller.k8s.io"}),
                json!({
                    "addressType": "IPv4",
                    "endpoints": [{"addresses": [api_ip], "conditions": {"ready": true, "serving": true, "terminating": false}}],
                    "ports": [{"name": "https", "port": port, "protocol": "TCP"}]
                }),
            ),
        );
    }
    for (name, value, desc) in [
        (
            "system-cluster-critical",
            2_000_000_000,
            "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
        ),
        (
            "system-node-critical",
            2_000_001_000,
            "Used for system critical pods that must not be moved from their current node.",
        ),
    ] {
        put(
            st,
            "scheduling.k8s.io/priorityclasses",
            json!({
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value, "globalDefault": false,
                "description": desc, "preemptionPolicy": "PreemptLowerPriority"
            }),
        );
    }
    for pl in super::flowcontrol::priority_levels() {
        put(st, "flowcontrol.apiserver.k8s.io/prioritylevelconfigurations", pl);
    }
    for fs in super::flowcontrol::flow_schemas() {
        put(st, "flowcontrol.apiserver.k8s.io/flowschemas", fs);
    }
    for svc in local_api_services() {
        put(st, "apiregistration.k8s.io/apiservices", svc);
    }
    // ComponentStatus is read-only. Upstream probes each component per request; here the
    // scheduler, controller manager and store run in the API server's own process, so they are
    // healthy whenever it answers.
    for name in ["scheduler", "controller-manager", "etcd-0"] {
        put(
            st,
            "/componentstatuses",
            json!({
                "apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": name},
                "conditions": [{"type": "Healthy", "status": "True", "message": if name == "etcd-0" { r#"{"health":"true","reason":""}"# } else { "ok" }}]
            }),
        );
    }
}

/// The APIService kube-apiserver registers for each group version it serves itself
/// (`v1.apps`, `v1.` for the core group): no service, always Available with reason Local.
/// Upstream sets per-group priorities from a table; here every group gets the same minimum and
/// GA versions rank above the others, which keeps the registry's discovery order.
fn local_api_services() -> Vec<Value> {
    super::registry::group_versions()
        .into_iter()
        .map(|(group, version)| {
            let version_priority = if version.contains("alpha") || version.contains("beta") { 9 } else { 15 };
            json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": format!("{version}.{group}"), "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"}},
                "spec": {"group": group, "version": version, "groupPriorityMinimum": 18000, "versionPriority": version_priority},
                "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local",
                    "message": "Local APIServices are always available", "lastTransitionTime": meta::now()}]}
            })
        })
        .collect()
}
