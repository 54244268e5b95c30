//! The bootstrap RBAC policy a kube-apiserver 1.33 creates at start-up (upstream
//! plugin/pkg/auth/authorizer/rbac/bootstrappolicy: `ClusterRoles`, `ClusterRoleBindings`,
//! `NamespaceRoles`, `NamespaceRoleBindings`; the per-controller roles live in
//! `controller_policy`), plus kubeadm's `kubeadm:cluster-admins` binding, which is what makes
//! the admin kubeconfig user (group `kubeadm:cluster-admins`) a cluster admin on kind and
//! kubeadm clusters (kubeadm >= 1.29).
//!
//! Data, written as a table of rules; the lists inside each rule sorted, as the generated
//! testdata YAMLs print them. Provenance (upstream's testdata, as stored in the search index;
//! no 1.33 release tag was available, so each piece is the newest copy that could be dated):
//! - ClusterRoles: `testdata/cluster-roles.yaml` of kubernetes/kubernetes@025f2834a128798cef30018a5e6a6ae82b5ad885
//!   (has `selfsubjectreviews`, `/metrics/slis`, leases in `system:aggregate-to-edit`), with
//!   the trailing-slash issuer-discovery URLs of the newer pohly/kubernetes@756168acf7903ecfc0eda5bdf750e7b6e1d6c43d.
//!   Not taken from the newer copy: its DynamicResourceAllocation rules for
//!   `system:kube-scheduler` and `system:node` (the gate is off by default in 1.33) and its
//!   `leasecandidates` / list+watch lease rules for `system:kube-scheduler`, which
//!   kubernetes/kubernetes@01899a7c86337b05a16a4155c9351cf947beaee9 prints only in
//!   `cluster-roles-featuregates.yaml` (every gate on), i.e. they sit behind a gate.
//!   That all-gates file also shows gated rules not modelled here because the 1.33 default of
//!   their gate was not confirmed from source: `nodes/configz|healthz|pods` in
//!   `system:kubelet-api-admin`, `servicecidrs` list/watch in `system:node-proxier`,
//!   `clustertrustbundles` and `serviceaccounts` get in `system:node`, `/flagz` and
//!   `/statusz` in `system:monitoring`.
//! - ClusterRoleBindings: translatecn/kubernetes@ac57958046c65943b60f6a67e5345bdeb8c63c9d
//!   (newest copy with the `system:monitoring` and issuer-discovery bindings).
//! - Roles: kubernetes/kubernetes@1892e4deb967a2b39cfc2fea87a8bd49274449ef (>= 1.31: the
//!   leader-locking Roles grant leases and `leasecandidates`).
//! - RoleBindings: translatecn/kubernetes@ac57958046c65943b60f6a67e5345bdeb8c63c9d.
//!
//! Roles behind feature gates that are off by default in 1.33 are left out, as upstream does.

use serde_json::{Value, json};

/// Every bootstrap object carries this label (upstream's `bootstrappolicy.Label`).
pub const BOOTSTRAP_LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");
/// ... and this annotation (the reconciler may update them).
pub const AUTOUPDATE: (&str, &str) = ("rbac.authorization.kubernetes.io/autoupdate", "true");

pub(super) const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
pub(super) const RW: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const EVENTS: &[&str] = &["create", "patch", "update"];
/// The verbs the kube-system leader-locking Roles grant on leases and lease candidates.
const LEADER_LOCKING: &[&str] = &["create", "get", "list", "update", "watch"];

/// A resource rule.
pub(super) fn r(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

/// A resource rule limited to names.
pub(super) fn rn(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Value {
    json!({"apiGroups": groups, "resourceNames": names, "resources": resources, "verbs": verbs})
}

/// A non-resource rule.
fn u(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"nonResourceURLs": urls, "verbs": verbs})
}

/// Upstream's `eventsRule()`: core and events.k8s.io events.
pub(super) fn events_rule() -> Value {
    r(EVENTS, &["", "events.k8s.io"], &["events"])
}

fn metadata(name: &str, namespace: Option<&str>, extra_labels: &[(&str, &str)]) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert(BOOTSTRAP_LABEL.0.into(), json!(BOOTSTRAP_LABEL.1));
    for (k, v) in extra_labels {
        labels.insert((*k).into(), json!(v));
    }
    let mut m = json!({"annotations": {AUTOUPDATE.0: AUTOUPDATE.1}, "labels": labels, "name": name});
    if let Some(ns) = namespace {
        m["namespace"] = json!(ns);
    }
    m
}

pub(super) fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": metadata(name, None, labels), "rules": rules})
}

/// An aggregated role: its rules are filled by the clusterrole-aggregation controller.
fn aggregated(name: &str, labels: &[(&str, &str)], select: &str) -> Value {
    json!({"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {select: "true"}}]},
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": metadata(name, None, labels), "rules": null})
}

/// Upstream's per-signer approver roles (`system:certificates.k8s.io:<name>`): `approve`
/// on the one `signers` resource name, which the CSR approval check asks for.
fn signer_approver(name: &str, signer: &str) -> Value {
    cluster_role(
        &format!("system:certificates.k8s.io:{name}"),
        &[],
        vec![rn(&["approve"], &["certificates.k8s.io"], &["signers"], &[signer])],
    )
}

const TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
const TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

/// The bootstrap ClusterRoles: policy.go's, then controller_policy.go's (the apiserver's
/// RBAC post-start hook creates both sets).
pub fn cluster_roles() -> Vec<Value> {
    let mut out = policy_cluster_roles();
    out.extend(super::controller_policy::controller_roles());
    out
}

/// policy.go's `ClusterRoles()`, in the testdata's (name) order.
fn policy_cluster_roles() -> Vec<Value> {
    vec![
        aggregated("admin", &[], TO_ADMIN),
        cluster_role("cluster-admin", &[], vec![r(&["*"], &["*"], &["*"]), u(&["*"], &["*"])]),
        aggregated("edit", &[(TO_ADMIN, "true")], TO_EDIT),
        cluster_role(
            "system:aggregate-to-admin",
            &[(TO_ADMIN, "true")],
            vec![
                r(&["create"], &["authorization.k8s.io"], &["localsubjectaccessreviews"]),
                r(RW, &["rbac.authorization.k8s.io"], &["rolebindings", "roles"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[(TO_EDIT, "true")],
            vec![
                r(
                    READ,
                    &[""],
                    &[
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                        "secrets",
                        "services/proxy",
                    ],
                ),
                r(&["impersonate"], &[""], &["serviceaccounts"]),
                r(
                    WRITE,
                    &[""],
                    &["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"],
                ),
                r(&["create"], &[""], &["pods/eviction"]),
                r(
                    WRITE,
                    &[""],
                    &[
                        "configmaps",
                        "events",
                        "persistentvolumeclaims",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "secrets",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                    ],
                ),
                r(&["create"], &[""], &["serviceaccounts/token"]),
                r(
                    WRITE,
                    &["apps"],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/rollback",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/scale",
                        "statefulsets",
                        "statefulsets/scale",
                    ],
                ),
                r(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
                r(WRITE, &["batch"], &["cronjobs", "jobs"]),
                r(
                    WRITE,
                    &["extensions"],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/rollback",
                        "deployments/scale",
                        "ingresses",
                        "networkpolicies",
                        "replicasets",
                        "replicasets/scale",
                        "replicationcontrollers/scale",
                    ],
                ),
                r(WRITE, &["policy"], &["poddisruptionbudgets"]),
                r(WRITE, &["networking.k8s.io"], &["ingresses", "networkpolicies"]),
                r(RW, &["coordination.k8s.io"], &["leases"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[(TO_VIEW, "true")],
            vec![
                r(
                    READ,
                    &[""],
                    &[
                        "configmaps",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                    ],
                ),
                r(
                    READ,
                    &[""],
                    &[
                        "bindings",
                        "events",
                        "limitranges",
                        "namespaces/status",
                        "pods/log",
                        "pods/status",
                        "replicationcontrollers/status",
                        "resourcequotas",
                        "resourcequotas/status",
                    ],
                ),
                r(READ, &[""], &["namespaces"]),
                r(READ, &["discovery.k8s.io"], &["endpointslices"]),
                r(
                    READ,
                    &["apps"],
                    &[
                        "controllerrevisions",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "statefulsets",
                        "statefulsets/scale",
                        "statefulsets/status",
                    ],
                ),
                r(
                    READ,
                    &["autoscaling"],
                    &["horizontalpodautoscalers", "horizontalpodautoscalers/status"],
                ),
                r(
                    READ,
                    &["batch"],
                    &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
                ),
                r(
                    READ,
                    &["extensions"],
                    &[
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "ingresses",
                        "ingresses/status",
                        "networkpolicies",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "replicationcontrollers/scale",
                    ],
                ),
                r(
                    READ,
                    &["policy"],
                    &["poddisruptionbudgets", "poddisruptionbudgets/status"],
                ),
                r(
                    READ,
                    &["networking.k8s.io"],
                    &["ingresses", "ingresses/status", "networkpolicies"],
                ),
            ],
        ),
        cluster_role(
            "system:auth-delegator",
            &[],
            vec![
                r(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                r(&["create"], &["authorization.k8s.io"], &["subjectaccessreviews"]),
            ],
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                r(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                r(&["create"], &["authentication.k8s.io"], &["selfsubjectreviews"]),
            ],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            &[],
            vec![r(
                &["create"],
                &["certificates.k8s.io"],
                &["certificatesigningrequests/nodeclient"],
            )],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            &[],
            vec![r(
                &["create"],
                &["certificates.k8s.io"],
                &["certificatesigningrequests/selfnodeclient"],
            )],
        ),
        signer_approver("kube-apiserver-client-approver", "kubernetes.io/kube-apiserver-client"),
        signer_approver(
            "kube-apiserver-client-kubelet-approver",
            "kubernetes.io/kube-apiserver-client-kubelet",
        ),
        signer_approver("kubelet-serving-approver", "kubernetes.io/kubelet-serving"),
        signer_approver("legacy-unknown-approver", "kubernetes.io/legacy-unknown"),
        cluster_role(
            "system:discovery",
            &[],
            vec![u(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
        ),
        cluster_role(
            "system:heapster",
            &[],
            vec![
                r(READ, &[""], &["events", "namespaces", "nodes", "pods"]),
                r(READ, &["extensions"], &["deployments"]),
            ],
        ),
        cluster_role(
            "system:kube-aggregator",
            &[],
            vec![r(READ, &[""], &["endpoints", "services"])],
        ),
        cluster_role(
            "system:kube-controller-manager",
            &[],
            vec![
                events_rule(),
                r(&["create"], &["coordination.k8s.io"], &["leases"]),
                rn(
                    &["get", "update"],
                    &["coordination.k8s.io"],
                    &["leases"],
                    &["kube-controller-manager"],
                ),
                r(&["create"], &[""], &["secrets", "serviceaccounts"]),
                r(&["delete"], &[""], &["secrets"]),
                r(
                    &["get"],
                    &[""],
                    &["configmaps", "namespaces", "secrets", "serviceaccounts"],
                ),
                r(&["update"], &[""], &["secrets", "serviceaccounts"]),
                r(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                r(&["create"], &["authorization.k8s.io"], &["subjectaccessreviews"]),
                r(&["list", "watch"], &["*"], &["*"]),
                r(&["create"], &[""], &["serviceaccounts/token"]),
            ],
        ),
        cluster_role(
            "system:kube-dns",
            &[],
            vec![r(&["list", "watch"], &[""], &["endpoints", "services"])],
        ),
        cluster_role(
            "system:kube-scheduler",
            &[],
            vec![
                events_rule(),
                r(&["create"], &["coordination.k8s.io"], &["leases"]),
                rn(
                    &["get", "update"],
                    &["coordination.k8s.io"],
                    &["leases"],
                    &["kube-scheduler"],
                ),
                r(READ, &[""], &["nodes"]),
                r(&["delete", "get", "list", "watch"], &[""], &["pods"]),
                r(&["create"], &[""], &["bindings", "pods/binding"]),
                r(&["patch", "update"], &[""], &["pods/status"]),
                r(READ, &[""], &["replicationcontrollers", "services"]),
                r(READ, &["apps", "extensions"], &["replicasets"]),
                r(READ, &["apps"], &["statefulsets"]),
                r(READ, &["policy"], &["poddisruptionbudgets"]),
                r(READ, &[""], &["persistentvolumeclaims", "persistentvolumes"]),
                r(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                r(&["create"], &["authorization.k8s.io"], &["subjectaccessreviews"]),
                r(READ, &["storage.k8s.io"], &["csinodes"]),
                r(READ, &[""], &["namespaces"]),
                r(READ, &["storage.k8s.io"], &["csidrivers"]),
                r(READ, &["storage.k8s.io"], &["csistoragecapacities"]),
            ],
        ),
        cluster_role(
            "system:kubelet-api-admin",
            &[],
            vec![
                r(READ, &[""], &["nodes"]),
                r(&["proxy"], &[""], &["nodes"]),
                r(
                    &["*"],
                    &[""],
                    &["nodes/log", "nodes/metrics", "nodes/proxy", "nodes/stats"],
                ),
            ],
        ),
        cluster_role(
            "system:monitoring",
            &[],
            vec![u(
                &["get"],
                &[
                    "/healthz",
                    "/healthz/*",
                    "/livez",
                    "/livez/*",
                    "/metrics",
                    "/metrics/slis",
                    "/readyz",
                    "/readyz/*",
                ],
            )],
        ),
        cluster_role(
            "system:node",
            &[],
            vec![
                r(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                r(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["localsubjectaccessreviews", "subjectaccessreviews"],
                ),
                r(READ, &[""], &["services"]),
                r(&["create", "get", "list", "watch"], &[""], &["nodes"]),
                r(&["patch", "update"], &[""], &["nodes/status"]),
                r(&["patch", "update"], &[""], &["nodes"]),
                r(EVENTS, &[""], &["events"]),
                r(READ, &[""], &["pods"]),
                r(&["create", "delete"], &[""], &["pods"]),
                r(&["patch", "update"], &[""], &["pods/status"]),
                r(&["create"], &[""], &["pods/eviction"]),
                r(READ, &[""], &["configmaps", "secrets"]),
                r(&["get"], &[""], &["persistentvolumeclaims", "persistentvolumes"]),
                r(&["get"], &[""], &["endpoints"]),
                r(
                    &["create", "get", "list", "watch"],
                    &["certificates.k8s.io"],
                    &["certificatesigningrequests"],
                ),
                r(
                    &["create", "delete", "get", "patch", "update"],
                    &["coordination.k8s.io"],
                    &["leases"],
                ),
                r(&["get"], &["storage.k8s.io"], &["volumeattachments"]),
                r(&["create"], &[""], &["serviceaccounts/token"]),
                r(&["get", "patch", "update"], &[""], &["persistentvolumeclaims/status"]),
                r(READ, &["storage.k8s.io"], &["csidrivers"]),
                r(
                    &["create", "delete", "get", "patch", "update"],
                    &["storage.k8s.io"],
                    &["csinodes"],
                ),
                r(READ, &["node.k8s.io"], &["runtimeclasses"]),
            ],
        ),
        cluster_role(
            "system:node-bootstrapper",
            &[],
            vec![r(
                &["create", "get", "list", "watch"],
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
            )],
        ),
        cluster_role(
            "system:node-problem-detector",
            &[],
            vec![
                r(&["get"], &[""], &["nodes"]),
                r(&["patch"], &[""], &["nodes/status"]),
                events_rule(),
            ],
        ),
        cluster_role(
            "system:node-proxier",
            &[],
            vec![
                r(&["list", "watch"], &[""], &["endpoints", "services"]),
                r(READ, &[""], &["nodes"]),
                events_rule(),
                r(&["list", "watch"], &["discovery.k8s.io"], &["endpointslices"]),
            ],
        ),
        cluster_role(
            "system:persistent-volume-provisioner",
            &[],
            vec![
                r(
                    &["create", "delete", "get", "list", "watch"],
                    &[""],
                    &["persistentvolumes"],
                ),
                r(&["get", "list", "update", "watch"], &[""], &["persistentvolumeclaims"]),
                r(READ, &["storage.k8s.io"], &["storageclasses"]),
                r(&["watch"], &[""], &["events"]),
                events_rule(),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            vec![u(&["get"], &["/healthz", "/livez", "/readyz", "/version", "/version/"])],
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            &[],
            vec![u(
                &["get"],
                &[
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                ],
            )],
        ),
        cluster_role(
            "system:volume-scheduler",
            &[],
            vec![
                r(
                    &["get", "list", "patch", "update", "watch"],
                    &[""],
                    &["persistentvolumes"],
                ),
                r(READ, &["storage.k8s.io"], &["storageclasses"]),
                r(
                    &["get", "list", "patch", "update", "watch"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
            ],
        ),
        aggregated("view", &[(TO_EDIT, "true")], TO_VIEW),
    ]
}

fn subject(kind: &str, name: &str) -> Value {
    if kind == "ServiceAccount" {
        let (ns, n) = name.split_once('/').unwrap_or(("", name));
        json!({"kind": kind, "name": n, "namespace": ns})
    } else {
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name})
    }
}

fn binding(
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    role_kind: &str,
    role: &str,
    subjects: &[(&str, &str)],
) -> Value {
    let mut b = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
        "metadata": metadata(name, namespace, &[]),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}});
    if !subjects.is_empty() {
        b["subjects"] = Value::Array(subjects.iter().map(|(k, n)| subject(k, n)).collect());
    }
    b
}

pub(super) fn crb(name: &str, subjects: &[(&str, &str)]) -> Value {
    binding("ClusterRoleBinding", name, None, "ClusterRole", name, subjects)
}

/// The bootstrap ClusterRoleBindings, then kubeadm's admin binding.
pub fn cluster_role_bindings() -> Vec<Value> {
    let authenticated = ("Group", "system:authenticated");
    let mut out = vec![
        crb("cluster-admin", &[("Group", "system:masters")]),
        crb("system:basic-user", &[authenticated]),
        crb("system:discovery", &[authenticated]),
        crb(
            "system:kube-controller-manager",
            &[("User", "system:kube-controller-manager")],
        ),
        crb("system:kube-dns", &[("ServiceAccount", "kube-system/kube-dns")]),
        crb("system:kube-scheduler", &[("User", "system:kube-scheduler")]),
        crb("system:monitoring", &[("Group", "system:monitoring")]),
        // Upstream binds system:node to nobody (the Node authorizer serves nodes).
        crb("system:node", &[]),
        crb("system:node-proxier", &[("User", "system:kube-proxy")]),
        crb(
            "system:public-info-viewer",
            &[authenticated, ("Group", "system:unauthenticated")],
        ),
        crb(
            "system:service-account-issuer-discovery",
            &[("Group", "system:serviceaccounts")],
        ),
        crb("system:volume-scheduler", &[("User", "system:kube-scheduler")]),
    ];
    out.extend(super::controller_policy::controller_role_bindings());
    // kubeadm's binding carries neither the bootstrap label nor the autoupdate annotation.
    out.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "kubeadm:cluster-admins"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [subject("Group", super::user::KUBEADM_CLUSTER_ADMINS)]}),
    );
    out
}

fn role(name: &str, ns: &str, rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": metadata(name, Some(ns), &[]), "rules": rules})
}

/// The bootstrap Roles (kube-system and kube-public).
pub fn roles() -> Vec<Value> {
    vec![
        role(
            "system:controller:bootstrap-signer",
            "kube-public",
            vec![
                r(READ, &[""], &["configmaps"]),
                rn(&["update"], &[""], &["configmaps"], &["cluster-info"]),
                events_rule(),
            ],
        ),
        role(
            "extension-apiserver-authentication-reader",
            "kube-system",
            vec![rn(
                READ,
                &[""],
                &["configmaps"],
                &["extension-apiserver-authentication"],
            )],
        ),
        role(
            "system::leader-locking-kube-controller-manager",
            "kube-system",
            vec![
                r(&["watch"], &[""], &["configmaps"]),
                rn(&["get", "update"], &[""], &["configmaps"], &["kube-controller-manager"]),
                r(LEADER_LOCKING, &["coordination.k8s.io"], &["leases"]),
                r(LEADER_LOCKING, &["coordination.k8s.io"], &["leasecandidates"]),
            ],
        ),
        role(
            "system::leader-locking-kube-scheduler",
            "kube-system",
            vec![
                r(&["watch"], &[""], &["configmaps"]),
                rn(&["get", "update"], &[""], &["configmaps"], &["kube-scheduler"]),
                r(LEADER_LOCKING, &["coordination.k8s.io"], &["leases"]),
                r(LEADER_LOCKING, &["coordination.k8s.io"], &["leasecandidates"]),
            ],
        ),
        role(
            "system:controller:bootstrap-signer",
            "kube-system",
            vec![r(READ, &[""], &["secrets"])],
        ),
        role(
            "system:controller:cloud-provider",
            "kube-system",
            vec![r(&["create", "get", "list", "watch"], &[""], &["configmaps"])],
        ),
        role(
            "system:controller:token-cleaner",
            "kube-system",
            vec![
                r(&["delete", "get", "list", "watch"], &[""], &["secrets"]),
                events_rule(),
            ],
        ),
    ]
}

/// The bootstrap RoleBindings.
pub fn role_bindings() -> Vec<Value> {
    let rb = |name: &str, ns: &str, subjects: &[(&str, &str)]| {
        binding("RoleBinding", name, Some(ns), "Role", name, subjects)
    };
    vec![
        rb(
            "system:controller:bootstrap-signer",
            "kube-public",
            &[("ServiceAccount", "kube-system/bootstrap-signer")],
        ),
        binding(
            "RoleBinding",
            "system::extension-apiserver-authentication-reader",
            Some("kube-system"),
            "Role",
            "extension-apiserver-authentication-reader",
            &[
                ("User", "system:kube-controller-manager"),
                ("User", "system:kube-scheduler"),
            ],
        ),
        rb(
            "system::leader-locking-kube-controller-manager",
            "kube-system",
            &[
                ("User", "system:kube-controller-manager"),
                ("ServiceAccount", "kube-system/kube-controller-manager"),
            ],
        ),
        rb(
            "system::leader-locking-kube-scheduler",
            "kube-system",
            &[
                ("User", "system:kube-scheduler"),
                ("ServiceAccount", "kube-system/kube-scheduler"),
            ],
        ),
        rb(
            "system:controller:bootstrap-signer",
            "kube-system",
            &[("ServiceAccount", "kube-system/bootstrap-signer")],
        ),
        rb(
            "system:controller:cloud-provider",
            "kube-system",
            &[("ServiceAccount", "kube-system/cloud-provider")],
        ),
        rb(
            "system:controller:token-cleaner",
            "kube-system",
            &[("ServiceAccount", "kube-system/token-cleaner")],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(v: &Value) -> &str {
        v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
    }

    #[test]
    fn bindings_name_bootstrap_roles_and_objects_carry_the_label() {
        let crs = cluster_roles();
        let role_names: Vec<&str> = crs.iter().map(name).collect();
        for b in cluster_role_bindings() {
            let r = b.pointer("/roleRef/name").and_then(Value::as_str).unwrap();
            assert!(role_names.contains(&r), "{} binds missing {r}", name(&b));
        }
        let ns_roles = roles();
        for b in role_bindings() {
            let r = b.pointer("/roleRef/name").and_then(Value::as_str).unwrap();
            let ns = b.pointer("/metadata/namespace").and_then(Value::as_str).unwrap();
            assert!(
                ns_roles
                    .iter()
                    .any(|x| name(x) == r && x.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns)),
                "{} binds missing {ns}/{r}",
                name(&b)
            );
        }
        for o in cluster_roles().iter().chain(&roles()).chain(&role_bindings()) {
            assert_eq!(
                o["metadata"]["labels"][BOOTSTRAP_LABEL.0],
                BOOTSTRAP_LABEL.1,
                "{}",
                name(o)
            );
            assert_eq!(o["metadata"]["annotations"][AUTOUPDATE.0], AUTOUPDATE.1, "{}", name(o));
        }
        let policy_names: Vec<&str> = crs.iter().take(policy_cluster_roles().len()).map(name).collect();
        let mut sorted = policy_names.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, policy_names, "cluster roles in upstream's (name) order");
    }
}
