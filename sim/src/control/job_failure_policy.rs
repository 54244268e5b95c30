//! A Job's `podFailurePolicy` (upstream pkg/controller/job/pod_failure_policy.go
//! `matchPodFailurePolicy`): the first rule a failed pod matches decides what its failure does:
//! `FailJob` fails the whole Job at once (reason `PodFailurePolicy`), `Ignore` does not count it
//! against `backoffLimit`, `Count` counts it as usual.
//!
//! A rule matches on the exit codes of the pod's terminated containers (init containers first;
//! exit code 0 never matches, `In`/`NotIn` over the values, optionally one container by name) or
//! on the pod's conditions (`DisruptionTarget=True` after an eviction).

use k8s_openapi::api::batch::v1::PodFailurePolicy;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

/// What a matched rule says about one failed pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The rule's action: `FailJob`, `Ignore`, `Count` or `FailIndex`.
    pub action: String,
    /// Upstream's message for it (the Job's `Failed` condition message under `FailJob`).
    pub message: String,
}

/// The verdict of the first rule of `policy` that failed pod `pod` matches, if any.
pub fn match_pod_failure_policy(policy: &PodFailurePolicy, pod: &Pod) -> Option<Verdict> {
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let status = pod.status.as_ref();
    let containers = status
        .and_then(|s| s.init_container_statuses.as_ref())
        .into_iter()
        .flatten()
        .chain(status.and_then(|s| s.container_statuses.as_ref()).into_iter().flatten());
    let exits: Vec<(&str, i32)> = containers
        .filter_map(|c| {
            let code = c.state.as_ref()?.terminated.as_ref()?.exit_code;
            Some((c.name.as_str(), code))
        })
        .filter(|(_, code)| *code != 0)
        .collect();
    let conditions = status.and_then(|s| s.conditions.as_ref());
    for (index, rule) in policy.rules.iter().enumerate() {
        if let Some(req) = &rule.on_exit_codes {
            let hit = exits.iter().find(|(container, code)| {
                req.container_name.as_deref().is_none_or(|n| n == *container)
                    && match req.operator.as_str() {
                        "In" => req.values.contains(code),
                        "NotIn" => !req.values.contains(code),
                        _ => false,
                    }
            });
            if let Some((container, code)) = hit {
                return Some(Verdict {
                    action: rule.action.clone(),
                    message: format!(
                        "Container {container} for pod {ns}/{name} failed with exit code {code} matching {} rule at index {index}",
                        rule.action
                    ),
                });
            }
        }
        for pattern in rule.on_pod_conditions.iter().flatten() {
            let held = conditions
                .into_iter()
                .flatten()
                .any(|c| c.type_ == pattern.type_ && c.status == pattern.status);
            if held {
                return Some(Verdict {
                    action: rule.action.clone(),
                    message: format!(
                        "Pod {ns}/{name} has condition {} matching {} rule at index {index}",
                        pattern.type_, rule.action
                    ),
                });
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(rules: serde_json::Value) -> PodFailurePolicy {
        serde_json::from_value(json!({ "rules": rules })).unwrap()
    }

    fn failed_pod(exit: i32, conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Failed", "conditions": conditions, "containerStatuses": [{
                "name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": exit}}}]}
        }))
        .unwrap()
    }

    #[test]
    fn fail_job_on_a_listed_exit_code() {
        let p = policy(json!([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}]));
        let v = match_pod_failure_policy(&p, &failed_pod(1, json!([]))).unwrap();
        assert_eq!(v.action, "FailJob");
        assert_eq!(
            v.message,
            "Container c for pod ns/p failed with exit code 1 matching FailJob rule at index 0"
        );
        assert_eq!(match_pod_failure_policy(&p, &failed_pod(2, json!([]))), None);
        let not_in = policy(json!([{"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [1]}}]));
        assert_eq!(
            match_pod_failure_policy(&not_in, &failed_pod(2, json!([])))
                .unwrap()
                .action,
            "Ignore"
        );
        // Exit code 0 never matches, even NotIn.
        assert_eq!(match_pod_failure_policy(&not_in, &failed_pod(0, json!([]))), None);
        let other = policy(json!([{"action": "FailJob",
            "onExitCodes": {"containerName": "other", "operator": "In", "values": [1]}}]));
        assert_eq!(match_pod_failure_policy(&other, &failed_pod(1, json!([]))), None);
    }

    #[test]
    fn ignore_on_the_disruption_target_condition_and_first_rule_wins() {
        let p = policy(json!([
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [137]}}
        ]));
        let evicted = failed_pod(137, json!([{"type": "DisruptionTarget", "status": "True"}]));
        let v = match_pod_failure_policy(&p, &evicted).unwrap();
        assert_eq!(v.action, "Ignore");
        assert!(
            v.message
                .contains("has condition DisruptionTarget matching Ignore rule at index 0")
        );
        assert_eq!(
            match_pod_failure_policy(&p, &failed_pod(137, json!([])))
                .unwrap()
                .action,
            "FailJob"
        );
    }
}
