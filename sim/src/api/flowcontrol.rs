//! The API Priority and Fairness configuration a 1.33 API server creates at start: the
//! mandatory and suggested PriorityLevelConfigurations and FlowSchemas of upstream's
//! `staging/src/k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap/default.go`.
//!
//! The simulated server does not queue or reject by these objects (its requests are never
//! throttled); they exist because clients and suites list them (`kubectl get flowschemas`, the
//! APF conformance tests that read and patch the bootstrap objects).

use serde_json::{Value, json};

/// `apf.kubernetes.io/autoupdate-spec`: the server keeps the spec of objects carrying "true".
const AUTOUPDATE: &str = "apf.kubernetes.io/autoupdate-spec";

fn meta(name: &str) -> Value {
    json!({"name": name, "annotations": {AUTOUPDATE: "true"}, "generation": 1})
}

/// A Limited level with queuing: (name, nominal shares, lendable %, queues, hand size, queue length).
const QUEUING: &[(&str, i64, i64, i64, i64, i64)] = &[
    ("system", 30, 33, 64, 6, 50),
    ("node-high", 40, 25, 64, 6, 50),
    ("leader-election", 10, 0, 16, 4, 50),
    ("workload-high", 40, 50, 128, 6, 50),
    ("workload-low", 100, 90, 128, 6, 50),
    ("global-default", 20, 50, 128, 6, 50),
];

/// Every bootstrap PriorityLevelConfiguration.
pub fn priority_levels() -> Vec<Value> {
    let mut out = vec![
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
               "metadata": meta("exempt"),
               "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}}),
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
               "metadata": meta("catch-all"),
               "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0,
                        "limitResponse": {"type": "Reject"}}}}),
    ];
    for (name, shares, lendable, queues, hand, len) in QUEUING {
        out.push(json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": meta(name),
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": shares, "lendablePercent": lendable,
                "limitResponse": {"type": "Queue",
                    "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": len}}}}
        }));
    }
    out
}

fn groups(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|g| json!({"kind": "Group", "group": {"name": g}}))
        .collect()
}

fn users(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|u| json!({"kind": "User", "user": {"name": u}}))
        .collect()
}

fn kube_system_sa(name: &str) -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"name": name, "namespace": "kube-system"}})
}

/// The rule of `NewFSAll`: every verb on every resource and non-resource URL.
fn everything(subjects: Vec<Value>) -> Value {
    json!([{"subjects": subjects,
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}])
}

fn resource_rule(verbs: &[&str], group: &str, resources: &[&str], namespaces: &[&str], cluster: bool) -> Value {
    let mut r = json!({"verbs": verbs, "apiGroups": [group], "resources": resources, "namespaces": namespaces});
    if cluster {
        r["clusterScope"] = json!(true);
    }
    r
}

fn flow_schema(name: &str, level: &str, precedence: i64, distinguisher: Option<&str>, rules: Value) -> Value {
    let mut spec =
        json!({"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence, "rules": rules});
    if let Some(d) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": d});
    }
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": meta(name), "spec": spec})
}

/// Every bootstrap FlowSchema, in matching precedence order.
pub fn flow_schemas() -> Vec<Value> {
    const RW: &[&str] = &["get", "create", "update"];
    let all_users = groups(&["system:unauthenticated", "system:authenticated"]);
    let mut leader_subjects = users(&["system:kube-controller-manager", "system:kube-scheduler"]);
    leader_subjects.push(kube_system_sa("*"));
    vec![
        flow_schema("exempt", "exempt", 1, None, everything(groups(&["system:masters"]))),
        flow_schema(
            "probes",
            "exempt",
            2,
            None,
            json!([{"subjects": all_users.clone(),
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}]),
        ),
        flow_schema(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            json!([{"subjects": leader_subjects,
                "resourceRules": [resource_rule(RW, "coordination.k8s.io", &["leases"], &["*"], false)]}]),
        ),
        flow_schema(
            "endpoint-controller",
            "workload-high",
            150,
            Some("ByUser"),
            json!([{"subjects": [users(&["system:kube-controller-manager"])[0].clone(), kube_system_sa("endpoint-controller")],
                "resourceRules": [resource_rule(&["get", "create", "update"], "", &["endpoints"], &["*"], false)]}]),
        ),
        flow_schema(
            "workload-leader-election",
            "leader-election",
            200,
            Some("ByUser"),
            json!([{"subjects": [kube_system_sa("*")],
                "resourceRules": [resource_rule(RW, "coordination.k8s.io", &["leases"], &["*"], false)]}]),
        ),
        flow_schema(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            json!([{"subjects": groups(&["system:nodes"]),
                "resourceRules": [
                    resource_rule(&["*"], "", &["nodes", "nodes/status"], &["*"], true),
                    resource_rule(&["*"], "coordination.k8s.io", &["leases"], &["*"], false)]}]),
        ),
        flow_schema(
            "system-nodes",
            "system",
            500,
            Some("ByUser"),
            everything(groups(&["system:nodes"])),
        ),
        flow_schema(
            "kube-controller-manager",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(users(&["system:kube-controller-manager"])),
        ),
        flow_schema(
            "kube-scheduler",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(users(&["system:kube-scheduler"])),
        ),
        flow_schema(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some("ByNamespace"),
            everything(vec![kube_system_sa("*")]),
        ),
        flow_schema(
            "service-accounts",
            "workload-low",
            9000,
            Some("ByUser"),
            everything(groups(&["system:serviceaccounts"])),
        ),
        flow_schema(
            "global-default",
            "global-default",
            9900,
            Some("ByUser"),
            everything(all_users.clone()),
        ),
        flow_schema("catch-all", "catch-all", 10000, Some("ByUser"), everything(all_users)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flow_schema_names_a_bootstrap_level() {
        let levels: Vec<String> = priority_levels()
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(levels.len(), 8);
        let schemas = flow_schemas();
        assert_eq!(schemas.len(), 13);
        for fs in &schemas {
            let pl = fs["spec"]["priorityLevelConfiguration"]["name"].as_str().unwrap();
            assert!(levels.iter().any(|l| l == pl), "{pl}");
        }
        let precedences: Vec<i64> = schemas
            .iter()
            .map(|f| f["spec"]["matchingPrecedence"].as_i64().unwrap())
            .collect();
        assert!(precedences.windows(2).all(|w| w[0] <= w[1]));
    }
}
