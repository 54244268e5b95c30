//! Whether an exited container is restarted (KEP-5307 `ContainerRestartRules`, the kubelet
//! side): upstream's `podutil.ContainerShouldRestart` (pkg/api/v1/pod/util.go). A container
//! with its own `restartPolicy` is restarted when its exit code matches one of its
//! `restartPolicyRules` with action Restart, else as its own policy says; a container without
//! one follows the pod's `restartPolicy`.
//!
//! Separate from `restart` (the supervisor loop) because the decision is a pure function the
//! pod status (phase) uses too. The typed pods the kubelet watches are k8s-openapi's 1.33 types,
//! which have no `restartPolicyRules`: [`load`] reads them from the raw pod once, before any
//! container starts (a pod's containers are immutable, so once is enough).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use serde_json::Value;
use tracing::debug;

use super::{Kubelet, PodRt, sleep_or};
use crate::faults::Faults;

/// One `restartPolicyRules` entry with action Restart: exit codes `In` (or `NotIn`) `values`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExitCodeRule {
    not_in: bool,
    values: Vec<i64>,
}

impl ExitCodeRule {
    fn matches(&self, code: i32) -> bool {
        self.values.contains(&i64::from(code)) != self.not_in
    }
}

/// The rules of each container of a pod, by container name (names are unique across the
/// init and app containers).
pub(crate) type PodRules = BTreeMap<String, Vec<ExitCodeRule>>;

/// The Restart rules of container `c` (raw JSON); other actions and operators are not acted
/// on, as upstream's `FindMatchingContainerRestartRule` skips what it does not know.
fn parse(c: &Value) -> Vec<ExitCodeRule> {
    c.get("restartPolicyRules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| r.get("action").and_then(Value::as_str) == Some("Restart"))
        .filter_map(|r| {
            let codes = r.get("exitCodes")?;
            let not_in = match codes.get("operator").and_then(Value::as_str)? {
                "In" => false,
                "NotIn" => true,
                _ => return None,
            };
            let values = codes
                .get("values")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default();
            Some(ExitCodeRule { not_in, values })
        })
        .collect()
}

/// Every container's rules in the raw pod `raw`.
fn parse_pod(raw: &Value) -> PodRules {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|key| raw.pointer(&format!("/spec/{key}")).and_then(Value::as_array))
        .flatten()
        .filter_map(|c| Some((c.get("name")?.as_str()?.to_string(), parse(c))))
        .filter(|(_, rules)| !rules.is_empty())
        .collect()
}

/// Whether `pod` may carry rules: the API server requires a container-level `restartPolicy`
/// beside them, and sidecars (init containers with `Always`) have none to act on.
fn may_have_rules(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return false };
    spec.containers.iter().any(|c| c.restart_policy.is_some())
        || spec
            .init_containers
            .iter()
            .flatten()
            .any(|c| c.restart_policy.as_deref().is_some_and(|p| p != "Always"))
}

/// Reads the rules of `rt`'s pod into `rt.rules` (empty when no container may carry any);
/// false when the pod was halted first.
pub(super) async fn load(kl: &Kubelet, rt: &PodRt) -> bool {
    if !may_have_rules(&rt.pod()) {
        let _ = rt.rules.set(PodRules::new());
        return true;
    }
    let api: Api<DynamicObject> =
        Api::namespaced_with(kl.client.clone(), &rt.namespace, &ApiResource::erase::<Pod>(&()));
    let mut n = 0;
    loop {
        match api.get(&rt.name).await {
            Ok(obj) => {
                let rules = obj
                    .data
                    .get("spec")
                    .map_or_else(PodRules::new, |spec| parse_pod(&serde_json::json!({ "spec": spec })));
                debug!(node = %kl.cfg.name, pod = %rt.name, containers = rules.len(), "container restart rules read");
                let _ = rt.rules.set(rules);
                return true;
            }
            Err(e) => {
                debug!(node = %kl.cfg.name, pod = %rt.name, error = %e, "reading the pod's restart rules");
                if !sleep_or(kl.cfg.profile.backoff(n).max(Duration::from_millis(100)), &rt.halted).await {
                    return false;
                }
                n += 1;
            }
        }
    }
}

/// Upstream `ContainerShouldRestart` for container `c` of a pod whose policy is `pod_policy`,
/// exited with `code`; `rules` are the container's. Faults: `container-restart-policy-ignored`
/// (a kubelet without the feature: the pod's policy only), `restart-rules-match-any` (every
/// Restart rule matches whatever the code), `restart-policy-fallback-never` (a container without
/// its own policy is never restarted instead of following the pod's).
pub(crate) fn should_restart(
    c: &Container,
    rules: &[ExitCodeRule],
    pod_policy: &str,
    code: i32,
    faults: &Faults,
) -> bool {
    let own = c
        .restart_policy
        .as_deref()
        .filter(|_| !faults.is_on("container-restart-policy-ignored"));
    let policy = match own {
        Some(own) => {
            let any = faults.is_on("restart-rules-match-any");
            if rules.iter().any(|r| any || r.matches(code)) {
                return true;
            }
            own
        }
        None if faults.is_on("restart-policy-fallback-never") => "Never",
        None => pod_policy,
    };
    match policy {
        "Always" => true,
        "OnFailure" => code != 0,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctr(policy: Option<&str>) -> Container {
        Container {
            name: "c".into(),
            restart_policy: policy.map(Into::into),
            ..Default::default()
        }
    }

    fn rules(raw: Value) -> Vec<ExitCodeRule> {
        parse(&json!({ "restartPolicyRules": raw }))
    }

    #[test]
    fn a_matching_rule_restarts_whatever_the_policies() {
        let faults = Faults::default();
        let r = rules(json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]));
        assert!(should_restart(&ctr(Some("Never")), &r, "Never", 42, &faults));
        assert!(!should_restart(&ctr(Some("Never")), &r, "Always", 1, &faults));
        let not_in = rules(json!([{"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0, 2]}}]));
        assert!(should_restart(&ctr(Some("Never")), &not_in, "Never", 1, &faults));
        assert!(!should_restart(&ctr(Some("Never")), &not_in, "Never", 2, &faults));
    }

    #[test]
    fn the_container_policy_comes_before_the_pods() {
        let faults = Faults::default();
        assert!(should_restart(&ctr(Some("Always")), &[], "Never", 0, &faults));
        assert!(!should_restart(&ctr(Some("Never")), &[], "Always", 1, &faults));
        assert!(should_restart(&ctr(Some("OnFailure")), &[], "Never", 1, &faults));
        assert!(!should_restart(&ctr(Some("OnFailure")), &[], "Always", 0, &faults));
        assert!(should_restart(&ctr(None), &[], "Always", 0, &faults));
        assert!(!should_restart(&ctr(None), &[], "OnFailure", 0, &faults));
        assert!(!should_restart(&ctr(None), &[], "Never", 1, &faults));
    }

    #[test]
    fn faults_break_each_step() {
        let r = rules(json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]));
        let ignored = Faults::parse("container-restart-policy-ignored").unwrap();
        assert!(!should_restart(&ctr(Some("Never")), &r, "Never", 42, &ignored));
        assert!(should_restart(&ctr(Some("Never")), &[], "Always", 1, &ignored));
        let any = Faults::parse("restart-rules-match-any").unwrap();
        assert!(should_restart(&ctr(Some("Never")), &r, "Never", 1, &any));
        let never = Faults::parse("restart-policy-fallback-never").unwrap();
        assert!(!should_restart(&ctr(None), &[], "Always", 1, &never));
        assert!(should_restart(&ctr(Some("Always")), &[], "Never", 1, &never));
    }

    #[test]
    fn only_restart_rules_with_a_known_operator_are_read() {
        assert_eq!(
            rules(json!([
                {"action": "Restart", "exitCodes": {"operator": "In", "values": [1, 2]}},
                {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [3]}},
                {"action": "Restart", "exitCodes": {"operator": "Between", "values": [4]}},
                {"action": "Restart"}
            ])),
            [ExitCodeRule {
                not_in: false,
                values: vec![1, 2]
            }]
        );
        let pod = json!({"spec": {
            "initContainers": [{"name": "i", "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0]}}]}],
            "containers": [{"name": "a"}, {"name": "b", "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [9]}}]}]
        }});
        let all = parse_pod(&pod);
        assert_eq!(all.keys().collect::<Vec<_>>(), ["b", "i"]);
    }
}
