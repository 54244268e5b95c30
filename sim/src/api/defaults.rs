//! Defaulting, as upstream's `SetDefaults_*` functions and default admission plugins fill
//! fields: what `kubectl get -o yaml` shows that the manifest never said.
//!
//! The main function is [`apply`]. Only absent fields are filled; nothing a client set changes.

use serde_json::{Map, Value, json};

use super::registry::ResourceDef;

/// Sets `obj[key] = v` when absent or null.
fn set(obj: &mut Value, key: &str, v: Value) {
    if let Some(m) = obj.as_object_mut() {
        match m.get(key) {
            Some(x) if !x.is_null() => {}
            _ => {
                m.insert(key.to_string(), v);
            }
        }
    }
}

/// Sets `obj[key]` when it is absent, null, 0 or "" (a Go defaulter's `if x == 0` test).
fn set_unless_zero(obj: &mut Value, key: &str, v: Value) {
    let zero = obj
        .get(key)
        .is_none_or(|x| x.is_null() || x.as_i64() == Some(0) || x.as_str() == Some(""));
    if zero && let Some(m) = obj.as_object_mut() {
        m.insert(key.to_string(), v);
    }
}

/// `SetDefaults_HTTPGetAction` on a probe's or a hook's `httpGet`.
fn http_get_defaults(handler: &mut Value) {
    if let Some(h) = handler.get_mut("httpGet").filter(|h| h.is_object()) {
        set_unless_zero(h, "path", json!("/"));
        set_unless_zero(h, "scheme", json!("HTTP"));
    }
}

/// `obj[key]` as an object, created when absent.
fn child<'a>(obj: &'a mut Value, key: &str) -> &'a mut Value {
    set(obj, key, json!({}));
    obj.get_mut(key).expect("just set")
}

fn each<'a>(obj: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    obj.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten()
}

/// Fills defaults for a new or updated object of `def`.
pub fn apply(def: &ResourceDef, obj: &mut Value) {
    if let Some(custom) = def.custom {
        super::crd::defaults::apply(&custom.schema, obj);
        return;
    }
    match (def.group, def.plural) {
        (super::crd::GROUP, "customresourcedefinitions") => super::crd::default_crd(obj),
        (super::webhook::config::GROUP, "mutatingwebhookconfigurations") => super::webhook::config::default(obj, true),
        (super::webhook::config::GROUP, "validatingwebhookconfigurations") => {
            super::webhook::config::default(obj, false);
        }
        (super::vap::GROUP, super::vap::POLICIES) => super::vap::config::default_policy(obj),
        (super::vap::GROUP, super::vap::BINDINGS) => super::vap::config::default_binding(obj),
        ("", "pods") => {
            if let Some(spec) = obj.get_mut("spec") {
                pod_spec(spec);
                let pc = spec
                    .get("priorityClassName")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if pc.is_empty() {
                    set(spec, "priority", json!(0));
                }
                set(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
                set(spec, "serviceAccountName", json!("default"));
                let sa = spec["serviceAccountName"].clone();
                set(spec, "serviceAccount", sa);
                default_tolerations(spec);
            }
        }
        ("", "services") => service(obj),
        ("", "secrets") => {
            set(obj, "type", json!("Opaque"));
            if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
                use base64::Engine;
                let data = child(obj, "data");
                for (k, v) in sd {
                    let text = v.as_str().unwrap_or_default();
                    data[k] = json!(base64::engine::general_purpose::STANDARD.encode(text));
                }
            }
        }
        ("", "endpoints") => {
            for s in each(obj, "subsets") {
                for p in each(s, "ports") {
                    set(p, "protocol", json!("TCP"));
                }
            }
        }
        ("discovery.k8s.io", "endpointslices") => {
            for p in each(obj, "ports") {
                set(p, "protocol", json!("TCP"));
            }
        }
        ("", "persistentvolumeclaims") => {
            if let Some(spec) = obj.get_mut("spec") {
                set(spec, "volumeMode", json!("Filesystem"));
            }
        }
        ("", "persistentvolumes") => {
            // SetDefaults_PersistentVolume.
            if let Some(spec) = obj.get_mut("spec") {
                set(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
                set(spec, "volumeMode", json!("Filesystem"));
            }
        }
        ("apps", "deployments") => {
            let spec = child(obj, "spec");
            set(spec, "replicas", json!(1));
            set(spec, "revisionHistoryLimit", json!(10));
            set(spec, "progressDeadlineSeconds", json!(600));
            let strategy = child(spec, "strategy");
            set(strategy, "type", json!("RollingUpdate"));
            if strategy["type"] == "RollingUpdate" {
                let ru = child(strategy, "rollingUpdate");
                set(ru, "maxSurge", json!("25%"));
                set(ru, "maxUnavailable", json!("25%"));
            }
            template(spec);
        }
        ("apps", "replicasets") => {
            let spec = child(obj, "spec");
            set(spec, "replicas", json!(1));
            template(spec);
        }
        ("apps", "daemonsets") => {
            let spec = child(obj, "spec");
            set(spec, "revisionHistoryLimit", json!(10));
            let us = child(spec, "updateStrategy");
            set(us, "type", json!("RollingUpdate"));
            if us["type"] == "RollingUpdate" {
                let ru = child(us, "rollingUpdate");
                set(ru, "maxUnavailable", json!(1));
                set(ru, "maxSurge", json!(0));
            }
            template(spec);
        }
        ("apps", "statefulsets") => {
            let spec = child(obj, "spec");
            set(spec, "replicas", json!(1));
            set(spec, "revisionHistoryLimit", json!(10));
            set(spec, "podManagementPolicy", json!("OrderedReady"));
            let us = child(spec, "updateStrategy");
            set(us, "type", json!("RollingUpdate"));
            if us["type"] == "RollingUpdate" {
                set(child(us, "rollingUpdate"), "partition", json!(0));
            }
            let ret = child(spec, "persistentVolumeClaimRetentionPolicy");
            set(ret, "whenDeleted", json!("Retain"));
            set(ret, "whenScaled", json!("Retain"));
            template(spec);
        }
        ("batch", "jobs") => {
            let spec = child(obj, "spec");
            job_spec(spec);
        }
        ("batch", "cronjobs") => {
            let spec = child(obj, "spec");
            set(spec, "concurrencyPolicy", json!("Allow"));
            set(spec, "suspend", json!(false));
            set(spec, "successfulJobsHistoryLimit", json!(3));
            set(spec, "failedJobsHistoryLimit", json!(1));
            if let Some(jt) = spec.get_mut("jobTemplate").and_then(|j| j.get_mut("spec")) {
                template(jt);
            }
        }
        ("scheduling.k8s.io", "priorityclasses") => set(obj, "preemptionPolicy", json!("PreemptLowerPriority")),
        ("autoscaling", "horizontalpodautoscalers") => hpa_spec(child(obj, "spec")),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => rbac_binding(obj),
        ("", "podtemplates") => {
            if let Some(ps) = obj.get_mut("template").and_then(|t| t.get_mut("spec")) {
                pod_spec(ps);
            }
        }
        _ => cluster_kinds(def, obj),
    }
}

/// rbac/v1 `SetDefaults_RoleBinding`, `SetDefaults_ClusterRoleBinding` and
/// `SetDefaults_Subject`: an empty `roleRef.apiGroup` (and a User or Group subject's) is the
/// RBAC group, so `apiGroup: ""` in a manifest (upstream's Aggregator case writes it) is valid.
fn rbac_binding(obj: &mut Value) {
    const RBAC: &str = "rbac.authorization.k8s.io";
    let empty = |v: &Value| v.get("apiGroup").and_then(Value::as_str).is_none_or(str::is_empty);
    if let Some(r) = obj.get_mut("roleRef").filter(|r| r.is_object())
        && empty(r)
    {
        r["apiGroup"] = json!(RBAC);
    }
    for s in each(obj, "subjects") {
        if matches!(s.get("kind").and_then(Value::as_str), Some("User" | "Group")) && empty(s) {
            s["apiGroup"] = json!(RBAC);
        }
    }
}

/// Defaults of the networking, storage and flowcontrol kinds (`SetDefaults_*` of
/// `pkg/apis/{networking,storage,flowcontrol}/v1/defaults.go`).
fn cluster_kinds(def: &ResourceDef, obj: &mut Value) {
    match (def.group, def.plural) {
        ("networking.k8s.io", "networkpolicies") => {
            let spec = child(obj, "spec");
            for dir in ["ingress", "egress"] {
                for rule in each(spec, dir) {
                    for p in each(rule, "ports") {
                        set(p, "protocol", json!("TCP"));
                    }
                }
            }
            if spec
                .get("policyTypes")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                let egress = spec
                    .get("egress")
                    .and_then(Value::as_array)
                    .is_some_and(|e| !e.is_empty());
                spec["policyTypes"] = if egress {
                    json!(["Ingress", "Egress"])
                } else {
                    json!(["Ingress"])
                };
            }
        }
        ("networking.k8s.io", "ingressclasses") => {
            if let Some(p) = obj.pointer_mut("/spec/parameters").filter(|p| p.is_object()) {
                set(p, "scope", json!("Cluster"));
            }
        }
        ("storage.k8s.io", "storageclasses") => {
            set(obj, "reclaimPolicy", json!("Delete"));
            set(obj, "volumeBindingMode", json!("Immediate"));
        }
        ("storage.k8s.io", "csidrivers") => {
            let spec = child(obj, "spec");
            set(spec, "attachRequired", json!(true));
            set(spec, "podInfoOnMount", json!(false));
            set(spec, "storageCapacity", json!(false));
            set(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
            set(spec, "requiresRepublish", json!(false));
            set(spec, "seLinuxMount", json!(false));
            if spec
                .get("volumeLifecycleModes")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                spec["volumeLifecycleModes"] = json!(["Persistent"]);
            }
        }
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => {
            let spec = child(obj, "spec");
            if spec.get("matchingPrecedence").and_then(Value::as_i64).unwrap_or(0) == 0 {
                spec["matchingPrecedence"] = json!(1000);
            }
        }
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => {
            let spec = child(obj, "spec");
            for (key, shares) in [("limited", 30), ("exempt", 0)] {
                if let Some(l) = spec.get_mut(key).filter(|l| l.is_object()) {
                    set(l, "nominalConcurrencyShares", json!(shares));
                    set(l, "lendablePercent", json!(0));
                    if let Some(q) = l.pointer_mut("/limitResponse/queuing").filter(|q| q.is_object()) {
                        set(q, "queues", json!(64));
                        set(q, "handSize", json!(8));
                        set(q, "queueLengthLimit", json!(50));
                    }
                }
            }
        }
        _ => {}
    }
}

/// autoscaling/v2 `SetDefaults_HorizontalPodAutoscaler`: one replica minimum, 80% CPU when no
/// metric is named, and the scale-up/scale-down rules every HPA read back shows.
fn hpa_spec(spec: &mut Value) {
    set(spec, "minReplicas", json!(1));
    if spec.get("metrics").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        spec["metrics"] = json!([{"type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]);
    }
    let behavior = child(spec, "behavior");
    let up = child(behavior, "scaleUp");
    set(up, "stabilizationWindowSeconds", json!(0));
    set(up, "selectPolicy", json!("Max"));
    set(
        up,
        "policies",
        json!([{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]),
    );
    let down = child(behavior, "scaleDown");
    // No scale-down window: the controller's --horizontal-pod-autoscaler-downscale-stabilization
    // applies, so the server leaves it unset.
    set(down, "selectPolicy", json!("Max"));
    set(
        down,
        "policies",
        json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
    );
}

/// Job defaults (`SetDefaults_Job`).
fn job_spec(spec: &mut Value) {
    let completions = spec.get("completions").filter(|v| !v.is_null()).cloned();
    let parallelism = spec.get("parallelism").filter(|v| !v.is_null()).cloned();
    match (completions, parallelism) {
        (None, None) => {
            set(spec, "completions", json!(1));
            set(spec, "parallelism", json!(1));
        }
        (_, None) => set(spec, "parallelism", json!(1)),
        _ => {}
    }
    set(spec, "backoffLimit", json!(6));
    set(spec, "completionMode", json!("NonIndexed"));
    set(spec, "suspend", json!(false));
    set(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    template(spec);
}

fn template(spec: &mut Value) {
    if let Some(ps) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
        pod_spec(ps);
    }
}

/// The tolerations the DefaultTolerationSeconds admission plugin adds to every pod.
fn default_tolerations(spec: &mut Value) {
    set(spec, "tolerations", json!([]));
    let Some(list) = spec.get_mut("tolerations").and_then(Value::as_array_mut) else {
        return;
    };
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        let covered = list.iter().any(|t| {
            (t["key"] == key || (t.get("key").is_none() && t["operator"] == "Exists"))
                && (t.get("effect").is_none() || t["effect"] == "NoExecute" || t["effect"] == "")
        });
        if !covered {
            list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
}

/// Pod spec defaults (`SetDefaults_PodSpec` and friends), for pods and pod templates.
pub fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set(spec, "restartPolicy", json!("Always"));
    set(spec, "dnsPolicy", json!("ClusterFirst"));
    set(spec, "terminationGracePeriodSeconds", json!(30));
    set(spec, "schedulerName", json!("default-scheduler"));
    set(spec, "securityContext", json!({}));
    set(spec, "enableServiceLinks", json!(true));
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        for c in each(spec, key) {
            container(c);
        }
    }
    for v in each(spec, "volumes") {
        volume(v);
    }
}

fn container(c: &mut Value) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default().to_string();
    set(c, "imagePullPolicy", json!(default_pull_policy(&image)));
    set(c, "terminationMessagePath", json!("/dev/termination-log"));
    set(c, "terminationMessagePolicy", json!("File"));
    set(c, "resources", json!({}));
    for p in each(c, "ports") {
        set(p, "protocol", json!("TCP"));
    }
    for e in each(c, "env") {
        if let Some(fr) = e.get_mut("valueFrom").and_then(|v| v.get_mut("fieldRef")) {
            set(fr, "apiVersion", json!("v1"));
        }
    }
    // `SetDefaults_Probe` and `SetDefaults_HTTPGetAction` test Go zero values, so an explicit
    // 0 or "" is defaulted like an absent field.
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).filter(|p| p.is_object()) {
            set_unless_zero(p, "timeoutSeconds", json!(1));
            set_unless_zero(p, "periodSeconds", json!(10));
            set_unless_zero(p, "successThreshold", json!(1));
            set_unless_zero(p, "failureThreshold", json!(3));
            http_get_defaults(p);
        }
    }
    if let Some(lifecycle) = c.get_mut("lifecycle").filter(|l| l.is_object()) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = lifecycle.get_mut(hook).filter(|h| h.is_object()) {
                http_get_defaults(h);
            }
        }
    }
    // Requests default to limits (`SetDefaults_ResourceRequirements` on pods).
    if let Some(limits) = c.pointer("/resources/limits").and_then(Value::as_object).cloned() {
        let req = child(child(c, "resources"), "requests");
        for (k, v) in limits {
            set(req, &k, v);
        }
    }
}

fn volume(v: &mut Value) {
    for (src, mode_key) in [
        ("configMap", "defaultMode"),
        ("secret", "defaultMode"),
        ("projected", "defaultMode"),
        ("downwardAPI", "defaultMode"),
    ] {
        if let Some(s) = v.get_mut(src).filter(|s| s.is_object()) {
            set(s, mode_key, json!(420));
            if src == "downwardAPI" {
                for item in each(s, "items") {
                    if let Some(fr) = item.get_mut("fieldRef") {
                        set(fr, "apiVersion", json!("v1"));
                    }
                }
            }
        }
    }
    if let Some(h) = v.get_mut("hostPath").filter(|s| s.is_object()) {
        set(h, "type", json!(""));
    }
}

/// `Always` for `:latest` or untagged images (digests excepted), else `IfNotPresent`.
pub fn default_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, tag)) if tag != "latest" => "IfNotPresent",
        _ => "Always",
    }
}

fn service(obj: &mut Value) {
    let spec = child(obj, "spec");
    set(spec, "type", json!("ClusterIP"));
    let ty = spec["type"].as_str().unwrap_or_default().to_string();
    set(spec, "sessionAffinity", json!("None"));
    for p in each(spec, "ports") {
        set(p, "protocol", json!("TCP"));
        let port = p.get("port").cloned().unwrap_or(Value::Null);
        if ty != "ExternalName" {
            set(p, "targetPort", port);
        }
    }
    if ty != "ExternalName" {
        set(spec, "ipFamilies", json!(["IPv4"]));
        set(spec, "ipFamilyPolicy", json!("SingleStack"));
        set(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        set(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        set(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if let Some(m) = obj.as_object_mut() {
        m.entry("status").or_insert_with(|| json!({"loadBalancer": {}}));
    }
}

/// Upstream's QoS class of a pod spec.
pub fn qos_class(spec: &Value) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    let containers = ["containers", "initContainers"]
        .iter()
        .flat_map(|k| spec.get(*k).and_then(Value::as_array).cloned().unwrap_or_default())
        .collect::<Vec<_>>();
    for c in &containers {
        let req = c
            .pointer("/resources/requests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let lim = c
            .pointer("/resources/limits")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let relevant = |m: &Map<String, Value>| m.keys().any(|k| k == "cpu" || k == "memory");
        if relevant(&req) || relevant(&lim) {
            any = true;
        }
        for r in ["cpu", "memory"] {
            match (req.get(r), lim.get(r)) {
                (_, None) => guaranteed = false,
                (Some(a), Some(b)) if a != b => guaranteed = false,
                _ => {}
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::registry::find;

    #[test]
    fn rbac_bindings_default_the_empty_api_group() {
        let def = crate::api::registry::builtin()
            .into_iter()
            .find(|d| d.plural == "rolebindings")
            .unwrap();
        let mut rb = json!({"roleRef": {"apiGroup": "", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "default", "namespace": "n", "apiGroup": ""}]});
        apply(def, &mut rb);
        assert_eq!(rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
        assert_eq!(rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
        assert_eq!(rb["subjects"][1]["apiGroup"], "");
    }

    #[test]
    fn pod_defaults_like_upstream() {
        let mut p = json!({"spec": {"containers": [
            {"name": "a", "image": "busybox", "ports": [{"containerPort": 80}]},
            {"name": "b", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        apply(find("", "v1", "pods").unwrap(), &mut p);
        let s = &p["spec"];
        assert_eq!(s["restartPolicy"], "Always");
        assert_eq!(s["dnsPolicy"], "ClusterFirst");
        assert_eq!(s["terminationGracePeriodSeconds"], 30);
        assert_eq!(s["schedulerName"], "default-scheduler");
        assert_eq!(s["serviceAccountName"], "default");
        assert_eq!(s["enableServiceLinks"], true);
        assert_eq!(s["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(s["containers"][1]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(s["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(s["containers"][0]["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(s["containers"][1]["resources"]["requests"]["cpu"], "1");
        assert_eq!(s["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(qos_class(s), "Burstable");
    }

    #[test]
    fn pull_policy_by_tag() {
        assert_eq!(default_pull_policy("nginx"), "Always");
        assert_eq!(default_pull_policy("nginx:latest"), "Always");
        assert_eq!(default_pull_policy("localhost:5000/nginx"), "Always");
        assert_eq!(default_pull_policy("localhost:5000/nginx:1.2"), "IfNotPresent");
        assert_eq!(default_pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn workload_defaults() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:1"}]}}}});
        apply(find("apps", "v1", "deployments").unwrap(), &mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(d["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
        let mut j = json!({"spec": {"template": {"spec": {"containers": []}}}});
        apply(find("batch", "v1", "jobs").unwrap(), &mut j);
        assert_eq!(
            (j["spec"]["completions"].clone(), j["spec"]["backoffLimit"].clone()),
            (json!(1), json!(6))
        );
        let mut svc = json!({"spec": {"ports": [{"port": 80}]}});
        apply(find("", "v1", "services").unwrap(), &mut svc);
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(svc["spec"]["type"], "ClusterIP");
    }
}
