//! The per-controller ClusterRoles (`system:controller:<name>`) and their bindings to the
//! kube-system ServiceAccounts kube-controller-manager runs each controller as (upstream
//! plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go).
//!
//! The simulator's controllers act as the admin user, so nothing here grants the simulator
//! itself anything; the objects exist because a real cluster lists them (`kubectl get
//! clusterroles` on kind shows ~30 of them) and tools that audit RBAC read them.
//!
//! Provenance: transcribed from upstream's generated testdata `controller-roles.yaml` /
//! `controller-role-bindings.yaml` as stored for pohly/kubernetes at commit
//! 756168acf7903ecfc0eda5bdf750e7b6e1d6c43d (a kubernetes fork; the newest copy in the index
//! that still prints `creationTimestamp: null`, i.e. predates the 1.35 omitzero change, and
//! that already has the 1.28 `validatingadmissionpolicy-status-controller` and
//! `legacy-service-account-token-cleaner` roles). Its `resource-claim-controller` role is left
//! out: controller_policy.go adds it only with the DynamicResourceAllocation gate, which is off
//! by default in 1.33. kubernetes/kubernetes@008b3652959ca58af8be3fb5b6ecfe9ae7638282 is newer
//! than 1.33 (no `creationTimestamp`, `volumeattributesclass-protection-controller` and
//! `device-taint-eviction-controller` roles, `watch` added to several controllers) and was
//! not followed.

use serde_json::Value;

use super::policy::{READ, cluster_role, crb, events_rule, r, rn};

/// Prefix of every controller role and binding (upstream's `saRolePrefix`).
pub const PREFIX: &str = "system:controller:";

fn role(controller: &str, rules: Vec<Value>) -> Value {
    cluster_role(&format!("{PREFIX}{controller}"), &[], rules)
}

/// A controller role with upstream's trailing `eventsRule()`.
fn role_with_events(controller: &str, mut rules: Vec<Value>) -> Value {
    rules.push(events_rule());
    role(controller, rules)
}

/// The controller ClusterRoles, in upstream's (name) order.
pub fn controller_roles() -> Vec<Value> {
    let events_watch = r(&["watch"], &[""], &["events"]);
    vec![
        role(
            "attachdetach-controller",
            vec![
                r(
                    &["list", "watch"],
                    &[""],
                    &["persistentvolumeclaims", "persistentvolumes"],
                ),
                r(READ, &[""], &["nodes"]),
                r(&["patch", "update"], &[""], &["nodes/status"]),
                r(&["list", "watch"], &[""], &["pods"]),
                events_rule(),
                r(
                    &["create", "delete", "get", "list", "watch"],
                    &["storage.k8s.io"],
                    &["volumeattachments"],
                ),
                r(READ, &["storage.k8s.io"], &["csidrivers"]),
                r(READ, &["storage.k8s.io"], &["csinodes"]),
            ],
        ),
        role_with_events(
            "certificate-controller",
            vec![
                r(
                    &["delete", "get", "list", "watch"],
                    &["certificates.k8s.io"],
                    &["certificatesigningrequests"],
                ),
                r(
                    &["update"],
                    &["certificates.k8s.io"],
                    &[
                        "certificatesigningrequests/approval",
                        "certificatesigningrequests/status",
                    ],
                ),
                rn(
                    &["approve"],
                    &["certificates.k8s.io"],
                    &["signers"],
                    &["kubernetes.io/kube-apiserver-client-kubelet"],
                ),
                rn(
                    &["sign"],
                    &["certificates.k8s.io"],
                    &["signers"],
                    &[
                        "kubernetes.io/kube-apiserver-client",
                        "kubernetes.io/kube-apiserver-client-kubelet",
                        "kubernetes.io/kubelet-serving",
                        "kubernetes.io/legacy-unknown",
                    ],
                ),
                r(&["create"], &["authorization.k8s.io"], &["subjectaccessreviews"]),
            ],
        ),
        role(
            "clusterrole-aggregation-controller",
            vec![r(
                &["escalate", "get", "list", "patch", "update", "watch"],
                &["rbac.authorization.k8s.io"],
                &["clusterroles"],
            )],
        ),
        role_with_events(
            "cronjob-controller",
            vec![
                r(&["get", "list", "update", "watch"], &["batch"], &["cronjobs"]),
                r(
                    &["create", "delete", "get", "list", "patch", "update", "watch"],
                    &["batch"],
                    &["jobs"],
                ),
                r(&["update"], &["batch"], &["cronjobs/status"]),
                r(&["update"], &["batch"], &["cronjobs/finalizers"]),
                r(&["delete", "list"], &[""], &["pods"]),
            ],
        ),
        role_with_events(
            "daemon-set-controller",
            vec![
                r(READ, &["apps", "extensions"], &["daemonsets"]),
                r(&["update"], &["apps", "extensions"], &["daemonsets/status"]),
                r(&["update"], &["apps", "extensions"], &["daemonsets/finalizers"]),
                r(&["list", "watch"], &[""], &["nodes"]),
                r(&["create", "delete", "list", "patch", "watch"], &[""], &["pods"]),
                r(&["create"], &[""], &["pods/binding"]),
                r(
                    &["create", "delete", "get", "list", "patch", "update", "watch"],
                    &["apps"],
                    &["controllerrevisions"],
                ),
            ],
        ),
        role_with_events(
            "deployment-controller",
            vec![
                r(
                    &["get", "list", "update", "watch"],
                    &["apps", "extensions"],
                    &["deployments"],
                ),
                r(&["update"], &["apps", "extensions"], &["deployments/status"]),
                r(&["update"], &["apps", "extensions"], &["deployments/finalizers"]),
                r(
                    &["create", "delete", "get", "list", "patch", "update", "watch"],
                    &["apps", "extensions"],
                    &["replicasets"],
                ),
                r(&["get", "list", "update", "watch"], &[""], &["pods"]),
            ],
        ),
        role_with_events(
            "disruption-controller",
            vec![
                r(READ, &["apps", "extensions"], &["deployments"]),
                r(READ, &["apps", "extensions"], &["replicasets"]),
                r(READ, &[""], &["replicationcontrollers"]),
                r(READ, &["policy"], &["poddisruptionbudgets"]),
                r(READ, &["apps"], &["statefulsets"]),
                r(&["update"], &["policy"], &["poddisruptionbudgets/status"]),
                r(&["patch", "update"], &[""], &["pods/status"]),
                r(&["get"], &["*"], &["*/scale"]),
            ],
        ),
        role_with_events(
            "endpoint-controller",
            vec![
                r(READ, &[""], &["pods", "services"]),
                r(&["create", "delete", "get", "list", "update"], &[""], &["endpoints"]),
                r(&["create"], &[""], &["endpoints/restricted"]),
            ],
        ),
        role_with_events(
            "endpointslice-controller",
            vec![
                r(READ, &[""], &["nodes", "pods", "services"]),
                r(&["update"], &[""], &["services/finalizers"]),
                r(
                    &["create", "delete", "get", "list", "update"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
            ],
        ),
        role_with_events(
            "endpointslicemirroring-controller",
            vec![
                r(READ, &[""], &["endpoints", "services"]),
                r(&["update"], &[""], &["services/finalizers"]),
                r(&["update"], &[""], &["endpoints/finalizers"]),
                r(
                    &["create", "delete", "get", "list", "update"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
            ],
        ),
        role_with_events(
            "ephemeral-volume-controller",
            vec![
                r(READ, &[""], &["pods"]),
                r(&["update"], &[""], &["pods/finalizers"]),
                r(&["create", "get", "list", "watch"], &[""], &["persistentvolumeclaims"]),
            ],
        ),
        role(
            "expand-controller",
            vec![
                r(
                    &["get", "list", "patch", "update", "watch"],
                    &[""],
                    &["persistentvolumes"],
                ),
                r(&["patch", "update"], &[""], &["persistentvolumeclaims/status"]),
                r(READ, &[""], &["persistentvolumeclaims"]),
                events_rule(),
                r(&["get"], &[""], &["services"]),
            ],
        ),
        role_with_events(
            "generic-garbage-collector",
            vec![r(
                &["delete", "get", "list", "patch", "update", "watch"],
                &["*"],
                &["*"],
            )],
        ),
        role_with_events(
            "horizontal-pod-autoscaler",
            vec![
                r(READ, &["autoscaling"], &["horizontalpodautoscalers"]),
                r(&["update"], &["autoscaling"], &["horizontalpodautoscalers/status"]),
                r(&["get", "update"], &["*"], &["*/scale"]),
                r(&["list"], &[""], &["pods"]),
                r(&["list"], &["metrics.k8s.io"], &["pods"]),
                r(&["get", "list"], &["custom.metrics.k8s.io"], &["*"]),
                r(&["get", "list"], &["external.metrics.k8s.io"], &["*"]),
            ],
        ),
        role_with_events(
            "job-controller",
            vec![
                r(&["get", "list", "patch", "update", "watch"], &["batch"], &["jobs"]),
                r(&["update"], &["batch"], &["jobs/status"]),
                r(&["update"], &["batch"], &["jobs/finalizers"]),
                r(&["create", "delete", "list", "patch", "watch"], &[""], &["pods"]),
            ],
        ),
        role(
            "legacy-service-account-token-cleaner",
            vec![
                rn(
                    &["get"],
                    &[""],
                    &["configmaps"],
                    &["kube-apiserver-legacy-service-account-token-tracking"],
                ),
                r(&["delete", "patch"], &[""], &["secrets"]),
            ],
        ),
        role(
            "namespace-controller",
            vec![
                r(&["delete", "get", "list", "watch"], &[""], &["namespaces"]),
                r(&["update"], &[""], &["namespaces/finalize", "namespaces/status"]),
                r(&["delete", "deletecollection", "get", "list"], &["*"], &["*"]),
            ],
        ),
        role_with_events(
            "node-controller",
            vec![
                r(&["delete", "get", "list", "patch", "update"], &[""], &["nodes"]),
                r(&["patch", "update"], &[""], &["nodes/status"]),
                r(&["patch", "update"], &[""], &["pods/status"]),
                r(&["delete", "get", "list"], &[""], &["pods"]),
            ],
        ),
        role(
            "persistent-volume-binder",
            vec![
                r(
                    &["create", "delete", "get", "list", "update", "watch"],
                    &[""],
                    &["persistentvolumes"],
                ),
                r(&["update"], &[""], &["persistentvolumes/status"]),
                r(&["get", "list", "update", "watch"], &[""], &["persistentvolumeclaims"]),
                r(&["update"], &[""], &["persistentvolumeclaims/status"]),
                r(&["create", "delete", "get", "list", "watch"], &[""], &["pods"]),
                r(READ, &["storage.k8s.io"], &["storageclasses"]),
                r(&["list", "watch"], &[""], &["nodes"]),
                events_rule(),
                events_watch,
                r(&["get"], &[""], &["services"]),
            ],
        ),
        role(
            "pod-garbage-collector",
            vec![
                r(&["delete", "list", "watch"], &[""], &["pods"]),
                r(&["get", "list"], &[""], &["nodes"]),
                r(&["patch"], &[""], &["pods/status"]),
            ],
        ),
        role_with_events(
            "pv-protection-controller",
            vec![r(&["get", "list", "update", "watch"], &[""], &["persistentvolumes"])],
        ),
        role_with_events(
            "pvc-protection-controller",
            vec![
                r(&["get", "list", "update", "watch"], &[""], &["persistentvolumeclaims"]),
                r(READ, &[""], &["pods"]),
            ],
        ),
        role_with_events(
            "replicaset-controller",
            vec![
                r(
                    &["get", "list", "update", "watch"],
                    &["apps", "extensions"],
                    &["replicasets"],
                ),
                r(&["update"], &["apps", "extensions"], &["replicasets/status"]),
                r(&["update"], &["apps", "extensions"], &["replicasets/finalizers"]),
                r(&["create", "delete", "list", "patch", "watch"], &[""], &["pods"]),
            ],
        ),
        role_with_events(
            "replication-controller",
            vec![
                r(&["get", "list", "update", "watch"], &[""], &["replicationcontrollers"]),
                r(&["update"], &[""], &["replicationcontrollers/status"]),
                r(&["update"], &[""], &["replicationcontrollers/finalizers"]),
                r(&["create", "delete", "list", "patch", "watch"], &[""], &["pods"]),
            ],
        ),
        role_with_events(
            "resourcequota-controller",
            vec![
                r(&["list", "watch"], &["*"], &["*"]),
                r(&["update"], &[""], &["resourcequotas/status"]),
            ],
        ),
        role_with_events(
            "root-ca-cert-publisher",
            vec![r(&["create", "update"], &[""], &["configmaps"])],
        ),
        role_with_events(
            "route-controller",
            vec![
                r(&["list", "watch"], &[""], &["nodes"]),
                r(&["patch"], &[""], &["nodes/status"]),
            ],
        ),
        role_with_events(
            "service-account-controller",
            vec![r(&["create"], &[""], &["serviceaccounts"])],
        ),
        role_with_events(
            "service-controller",
            vec![
                r(READ, &[""], &["services"]),
                r(&["patch", "update"], &[""], &["services/status"]),
                r(&["list", "watch"], &[""], &["nodes"]),
            ],
        ),
        role(
            "statefulset-controller",
            vec![
                r(&["list", "watch"], &[""], &["pods"]),
                r(READ, &["apps"], &["statefulsets"]),
                r(&["update"], &["apps"], &["statefulsets/status"]),
                r(&["update"], &["apps"], &["statefulsets/finalizers"]),
                r(&["create", "delete", "get", "patch", "update"], &[""], &["pods"]),
                r(
                    &["create", "delete", "get", "list", "patch", "update", "watch"],
                    &["apps"],
                    &["controllerrevisions"],
                ),
                r(&["create", "get", "list", "watch"], &[""], &["persistentvolumeclaims"]),
                events_rule(),
                r(&["delete", "update"], &[""], &["persistentvolumeclaims"]),
                r(&["update"], &[""], &["pods/finalizers"]),
            ],
        ),
        role_with_events(
            "ttl-after-finished-controller",
            vec![r(&["delete", "get", "list", "watch"], &["batch"], &["jobs"])],
        ),
        role_with_events(
            "ttl-controller",
            vec![r(&["list", "patch", "update", "watch"], &[""], &["nodes"])],
        ),
        role_with_events(
            "validatingadmissionpolicy-status-controller",
            vec![
                r(
                    READ,
                    &["admissionregistration.k8s.io"],
                    &["validatingadmissionpolicies"],
                ),
                r(
                    &["get", "patch", "update"],
                    &["admissionregistration.k8s.io"],
                    &["validatingadmissionpolicies/status"],
                ),
            ],
        ),
    ]
}

/// One ClusterRoleBinding per controller role, to the ServiceAccount of the same name in
/// kube-system (upstream's `addControllerRole`).
pub fn controller_role_bindings() -> Vec<Value> {
    controller_roles()
        .iter()
        .filter_map(|role| role.pointer("/metadata/name").and_then(Value::as_str))
        .map(|name| {
            let sa = name.strip_prefix(PREFIX).unwrap_or(name);
            crb(name, &[("ServiceAccount", &format!("kube-system/{sa}"))])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_controller_role_is_bound_to_its_kube_system_service_account() {
        let roles = controller_roles();
        let bindings = controller_role_bindings();
        assert_eq!(roles.len(), bindings.len());
        let names: Vec<&str> = roles.iter().filter_map(|r| r["metadata"]["name"].as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "upstream lists them by name");
        let b = bindings
            .iter()
            .find(|b| b["metadata"]["name"] == "system:controller:namespace-controller")
            .unwrap();
        assert_eq!(b["roleRef"]["name"], "system:controller:namespace-controller");
        assert_eq!(
            b["subjects"][0],
            serde_json::json!({"kind": "ServiceAccount", "name": "namespace-controller", "namespace": "kube-system"})
        );
    }

    #[test]
    fn gated_off_roles_are_absent_and_events_rules_follow_upstream() {
        let roles = controller_roles();
        let find = |n: &str| roles.iter().find(|r| r["metadata"]["name"] == format!("{PREFIX}{n}"));
        assert!(
            find("resource-claim-controller").is_none(),
            "DRA is off by default in 1.33"
        );
        // namespace-controller has no events rule; job-controller ends with one.
        let ns_rules = find("namespace-controller").unwrap()["rules"]
            .as_array()
            .unwrap()
            .clone();
        assert!(ns_rules.iter().all(|r| r["resources"] != serde_json::json!(["events"])));
        let job = find("job-controller").unwrap()["rules"].as_array().unwrap().clone();
        assert_eq!(
            job.last().unwrap()["apiGroups"],
            serde_json::json!(["", "events.k8s.io"])
        );
        let gc = find("generic-garbage-collector").unwrap();
        assert_eq!(
            gc["rules"][0]["verbs"],
            serde_json::json!(["delete", "get", "list", "patch", "update", "watch"])
        );
    }
}
