//! The table of served resources: what discovery lists and what the router accepts.
//!
//! The main structure is [`ResourceDef`]; [`RESOURCES`] is the whole table. Names, short names,
//! categories, verbs and subresources are upstream's, because kubectl's `api-resources`,
//! shortname expansion (`kubectl get po`) and `get all` read them from discovery.

/// Verbs of an ordinary read-write resource.
const RW: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// Verbs of a read-only computed resource (ComponentStatus).
const READ: &[&str] = &["get", "list"];
/// Verbs of a create-only review resource.
const CREATE: &[&str] = &["create"];

/// One served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// Served version.
    pub version: &'static str,
    /// Kind of one object.
    pub kind: &'static str,
    /// URL segment.
    pub plural: &'static str,
    /// Singular name (`kubectl get pod`).
    pub singular: &'static str,
    /// Short names (`po`, `svc`).
    pub short_names: &'static [&'static str],
    /// Categories (`all`).
    pub categories: &'static [&'static str],
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Discovery verbs.
    pub verbs: &'static [&'static str],
    /// Subresources served (`status`, `scale`, `log`...).
    pub subresources: &'static [&'static str],
    /// Another resource whose storage this one shares (events.k8s.io events store as core events).
    pub storage_of: Option<(&'static str, &'static str)>,
    /// What a CustomResourceDefinition says of this served version (schema, printer columns,
    /// scale paths); `None` for built-in resources. See [`super::crd`].
    pub custom: Option<&'static super::crd::Custom>,
}

impl ResourceDef {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The list kind, `PodList`.
    pub fn list_kind(&self) -> String {
        if let Some(c) = self.custom {
            return c.list_kind.clone();
        }
        format!("{}List", self.kind)
    }

    /// The storage key shared by every version of the resource: `group/plural`.
    pub fn storage_key(&self) -> String {
        let (g, p) = self.storage_of.unwrap_or((self.group, self.plural));
        format!("{g}/{p}")
    }

    /// Whether a verb is served.
    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }

    /// Whether a subresource is served.
    pub fn has_sub(&self, sub: &str) -> bool {
        self.subresources.contains(&sub)
    }

    /// Whether a spec change bumps `metadata.generation` (upstream: objects with a status
    /// subresource whose spec a controller reconciles).
    /// The warning upstream sends with every request to a deprecated resource
    /// (`v1 ComponentStatus is deprecated in v1.19+`), if this is one.
    pub fn deprecation(&self) -> Option<&'static str> {
        match (self.group, self.plural) {
            ("", "componentstatuses") => Some("v1 ComponentStatus is deprecated in v1.19+"),
            _ => None,
        }
    }

    /// NetworkPolicy and IngressClass have no status but their strategies bump the generation
    /// on spec changes too; CSRs and VolumeAttachments have a status but never do.
    pub fn tracks_generation(&self) -> bool {
        // Upstream's custom resource strategy sets generation 1 on create and bumps it on
        // every change outside metadata (and status, when that is a subresource).
        if self.custom.is_some() {
            return true;
        }
        (self.has_sub("status")
            && !matches!(
                self.plural,
                "namespaces" | "nodes" | "services" | "certificatesigningrequests" | "volumeattachments"
            ))
            || matches!(self.plural, "networkpolicies" | "ingressclasses")
    }
}

#[expect(clippy::too_many_arguments, reason = "a table row, read column by column")]
const fn def(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    namespaced: bool,
    verbs: &'static [&'static str],
    subresources: &'static [&'static str],
) -> ResourceDef {
    ResourceDef {
        group,
        version,
        kind,
        plural,
        singular,
        short_names,
        categories,
        namespaced,
        verbs,
        subresources,
        storage_of: None,
        custom: None,
    }
}

const ALL: &[&str] = &["all"];
const NONE: &[&str] = &[];

/// Every served resource, grouped by API group in discovery order. One row per resource, read
/// column by column as [`def`]'s parameters: group, version, kind, plural, singular, short names,
/// categories, namespaced, verbs, subresources.
///
/// Left unformatted on purpose: rustfmt would spread each row over a dozen lines and the table
/// would stop reading as one.
#[rustfmt::skip]
pub static RESOURCES: &[ResourceDef] = &[
    def("", "v1", "Namespace", "namespaces", "namespace", &["ns"], NONE, false, RW, &["status", "finalize"]),
    def("", "v1", "Pod", "pods", "pod",
        &["po"], ALL, true, RW, &["status", "binding", "log", "exec", "attach", "portforward", "proxy", "eviction", "ephemeralcontainers"]),
    def("", "v1", "Service", "services", "service", &["svc"], ALL, true, RW, &["status", "proxy"]),
    def("", "v1", "Endpoints", "endpoints", "endpoints", &["ep"], NONE, true, RW, NONE),
    def("", "v1", "ConfigMap", "configmaps", "configmap", &["cm"], NONE, true, RW, NONE),
    def("", "v1", "Secret", "secrets", "secret", NONE, NONE, true, RW, NONE),
    def("", "v1", "ReplicationController", "replicationcontrollers", "replicationcontroller",
        &["rc"], ALL, true, RW, &["status", "scale"]),
    def("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", &["sa"], NONE, true, RW, &["token"]),
    def("", "v1", "Node", "nodes", "node", &["no"], NONE, false, RW, &["status", "proxy"]),
    def("", "v1", "Event", "events", "event", &["ev"], NONE, true, RW, NONE),
    def("", "v1", "ResourceQuota", "resourcequotas", "resourcequota", &["quota"], NONE, true, RW, &["status"]),
    def("", "v1", "LimitRange", "limitranges", "limitrange", &["limits"], NONE, true, RW, NONE),
    def("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim",
        &["pvc"], NONE, true, RW, &["status"]),
    def("", "v1", "PersistentVolume", "persistentvolumes", "persistentvolume", &["pv"], NONE, false, RW, &["status"]),
    def("", "v1", "Binding", "bindings", "binding", NONE, NONE, true, CREATE, NONE),
    def("", "v1", "PodTemplate", "podtemplates", "podtemplate", NONE, NONE, true, RW, NONE),
    def("", "v1", "ComponentStatus", "componentstatuses", "componentstatus", &["cs"], NONE, false, READ, NONE),
    def("apps", "v1", "Deployment", "deployments", "deployment", &["deploy"], ALL, true, RW, &["status", "scale"]),
    def("apps", "v1", "ReplicaSet", "replicasets", "replicaset", &["rs"], ALL, true, RW, &["status", "scale"]),
    def("apps", "v1", "DaemonSet", "daemonsets", "daemonset", &["ds"], ALL, true, RW, &["status"]),
    def("apps", "v1", "StatefulSet", "statefulsets", "statefulset", &["sts"], ALL, true, RW, &["status", "scale"]),
    def("apps", "v1", "ControllerRevision", "controllerrevisions", "controllerrevision", NONE, NONE, true, RW, NONE),
    def("batch", "v1", "Job", "jobs", "job", NONE, ALL, true, RW, &["status"]),
    def("batch", "v1", "CronJob", "cronjobs", "cronjob", &["cj"], ALL, true, RW, &["status"]),
    def("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "horizontalpodautoscaler",
        &["hpa"], ALL, true, RW, &["status"]),
    // autoscaling/v1 serves the v2 objects with only the CPU utilization target (see `convert`).
    ResourceDef {
        storage_of: Some(("autoscaling", "horizontalpodautoscalers")),
        ..def("autoscaling", "v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "horizontalpodautoscaler",
            &["hpa"], ALL, true, RW, &["status"])
    },
    def("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", "endpointslice", NONE, NONE, true, RW, NONE),
    def("coordination.k8s.io", "v1", "Lease", "leases", "lease", NONE, NONE, true, RW, NONE),
    def("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass", &["pc"], NONE, false, RW, NONE),
    def("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", "runtimeclass", NONE, NONE, false, RW, NONE),
    ResourceDef {
        storage_of: Some(("", "events")),
        ..def("events.k8s.io", "v1", "Event", "events", "event", &["ev"], NONE, true, RW, NONE)
    },
    def("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", "networkpolicy",
        &["netpol"], NONE, true, RW, NONE),
    def("networking.k8s.io", "v1", "Ingress", "ingresses", "ingress", &["ing"], NONE, true, RW, &["status"]),
    def("networking.k8s.io", "v1", "IngressClass", "ingressclasses", "ingressclass", NONE, NONE, false, RW, NONE),
    def("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", "poddisruptionbudget",
        &["pdb"], NONE, true, RW, &["status"]),
    def("storage.k8s.io", "v1", "StorageClass", "storageclasses", "storageclass", &["sc"], NONE, false, RW, NONE),
    def("storage.k8s.io", "v1", "CSIDriver", "csidrivers", "csidriver", NONE, NONE, false, RW, NONE),
    def("storage.k8s.io", "v1", "CSINode", "csinodes", "csinode", NONE, NONE, false, RW, NONE),
    def("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", "volumeattachment",
        NONE, NONE, false, RW, &["status"]),
    def("storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities", "csistoragecapacity",
        NONE, NONE, true, RW, NONE),
    def("certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests",
        "certificatesigningrequest", &["csr"], NONE, false, RW, &["approval", "status"]),
    def("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema", "flowschemas", "flowschema",
        NONE, NONE, false, RW, &["status"]),
    def("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration", "prioritylevelconfigurations",
        "prioritylevelconfiguration", NONE, NONE, false, RW, &["status"]),
    def("authorization.k8s.io", "v1", "LocalSubjectAccessReview", "localsubjectaccessreviews", "localsubjectaccessreview",
        NONE, NONE, true, CREATE, NONE),
    def("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", "selfsubjectaccessreview",
        NONE, NONE, false, CREATE, NONE),
    def("authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", "selfsubjectrulesreview",
        NONE, NONE, false, CREATE, NONE),
    def("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", "subjectaccessreview",
        NONE, NONE, false, CREATE, NONE),
    def("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", "selfsubjectreview",
        NONE, NONE, false, CREATE, NONE),
    def("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", "tokenreview", NONE, NONE, false, CREATE, NONE),
    def("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", "clusterrolebinding",
        NONE, NONE, false, RW, NONE),
    def("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", "clusterrole", NONE, NONE, false, RW, NONE),
    def("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", "rolebinding", NONE, NONE, true, RW, NONE),
    def("rbac.authorization.k8s.io", "v1", "Role", "roles", "role", NONE, NONE, true, RW, NONE),
    def("apiregistration.k8s.io", "v1", "APIService", "apiservices", "apiservice",
        NONE, &["api-extensions"], false, RW, &["status"]),
    def("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
        "customresourcedefinition", &["crd", "crds"], &["api-extensions"], false, RW, &["status"]),
    def("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration", NONE, &["api-extensions"], false, RW, NONE),
    def("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
        "validatingwebhookconfiguration", NONE, &["api-extensions"], false, RW, NONE),
    def("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies",
        "validatingadmissionpolicy", NONE, &["api-extensions"], false, RW, &["status"]),
    def("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings",
        "validatingadmissionpolicybinding", NONE, &["api-extensions"], false, RW, NONE),
];

/// The served group versions in discovery order: `("", "v1")` first.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// The group versions of `defs` in order of first appearance.
pub fn group_versions_of(defs: &[&'static ResourceDef]) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in defs {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// Every built-in resource, as references (custom ones are appended per server; see
/// [`super::crd::Table::all`]).
pub fn builtin() -> Vec<&'static ResourceDef> {
    RESOURCES.iter().collect()
}

/// Looks a resource up by group, version and plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Looks a resource up by group and kind (any version).
pub fn find_kind(group: &str, kind: &str) -> Option<&'static ResourceDef> {
    RESOURCES.iter().find(|r| r.group == group && r.kind == kind)
}

/// The resource whose storage holds `storage_key` objects, in its primary version.
pub fn by_storage_key(key: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|r| r.storage_of.is_none() && r.storage_key() == key)
}

/// Whether the group serves the version.
pub fn serves(group: &str, version: &str) -> bool {
    RESOURCES.iter().any(|r| r.group == group && r.version == version)
}

/// The core namespaces resource (needed for namespace checks).
pub fn namespaces() -> &'static ResourceDef {
    find("", "v1", "namespaces").expect("namespaces is served")
}

/// Whether a resource is stored (review resources are computed per request, never stored).
pub fn is_stored(def: &ResourceDef) -> bool {
    !matches!(def.group, "authorization.k8s.io" | "authentication.k8s.io") && def.plural != "bindings"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_issue_resources_and_unique_keys() {
        for (g, p) in [
            ("", "namespaces"),
            ("", "pods"),
            ("", "resourcequotas"),
            ("apps", "controllerrevisions"),
            ("batch", "cronjobs"),
            ("discovery.k8s.io", "endpointslices"),
            ("coordination.k8s.io", "leases"),
            ("scheduling.k8s.io", "priorityclasses"),
            ("node.k8s.io", "runtimeclasses"),
            ("autoscaling", "horizontalpodautoscalers"),
            ("events.k8s.io", "events"),
            ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ] {
            assert!(RESOURCES.iter().any(|r| r.group == g && r.plural == p), "{g}/{p}");
        }
        let mut keys: Vec<_> = RESOURCES.iter().map(|r| (r.group, r.version, r.plural)).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), RESOURCES.len());
        assert_eq!(find("events.k8s.io", "v1", "events").unwrap().storage_key(), "/events");
        assert_eq!(group_versions()[0], ("", "v1"));
    }
}
