//! Conditions over controller objects for [`Framework::wait_for`](crate::framework::Framework::wait_for).

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ReplicationController;
use kube::runtime::wait::Condition;

/// The ReplicaSet has `n` ready replicas and observed its latest generation.
#[must_use]
pub fn replica_set_ready(n: i32) -> impl Condition<ReplicaSet> {
    move |rs: Option<&ReplicaSet>| {
        rs.is_some_and(|rs| {
            rs.status.as_ref().is_some_and(|s| {
                s.ready_replicas.unwrap_or(0) == n && s.replicas == n && s.observed_generation >= rs.metadata.generation
            })
        })
    }
}

/// The ReplicationController has `n` ready replicas.
#[must_use]
pub fn replication_controller_ready(n: i32) -> impl Condition<ReplicationController> {
    move |rc: Option<&ReplicationController>| {
        rc.and_then(|rc| rc.status.as_ref())
            .is_some_and(|s| s.ready_replicas.unwrap_or(0) == n && s.replicas == n)
    }
}

/// The StatefulSet reports exactly `n` replicas, all ready.
#[must_use]
pub fn stateful_set_at(n: i32) -> impl Condition<StatefulSet> {
    move |s: Option<&StatefulSet>| {
        s.and_then(|s| s.status.as_ref())
            .is_some_and(|st| st.replicas == n && st.ready_replicas.unwrap_or(0) == n)
    }
}

/// The Job has the condition `type_` (`Complete`, `Failed`, `SuccessCriteriaMet`…) True.
#[must_use]
pub fn job_has_condition(type_: &'static str) -> impl Condition<Job> {
    move |j: Option<&Job>| {
        j.and_then(|j| j.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
    }
}

/// The Job reports at least `n` active pods.
#[must_use]
pub fn job_active_at_least(n: i32) -> impl Condition<Job> {
    move |j: Option<&Job>| {
        j.and_then(|j| j.status.as_ref())
            .is_some_and(|s| s.active.unwrap_or(0) >= n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn job_condition_needs_true_status() {
        let done: Job =
            serde_json::from_value(json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}))
                .unwrap();
        let not: Job =
            serde_json::from_value(json!({"status": {"conditions": [{"type": "Complete", "status": "False"}]}}))
                .unwrap();
        assert!(job_has_condition("Complete").matches_object(Some(&done)));
        assert!(!job_has_condition("Complete").matches_object(Some(&not)));
        assert!(!job_has_condition("Failed").matches_object(Some(&done)));
        assert!(!job_has_condition("Complete").matches_object(None));
    }

    #[test]
    fn replica_set_ready_needs_observed_generation() {
        let stale: ReplicaSet = serde_json::from_value(json!({"metadata": {"generation": 2},
            "status": {"replicas": 2, "readyReplicas": 2, "observedGeneration": 1}}))
        .unwrap();
        let fresh: ReplicaSet = serde_json::from_value(json!({"metadata": {"generation": 2},
            "status": {"replicas": 2, "readyReplicas": 2, "observedGeneration": 2}}))
        .unwrap();
        assert!(!replica_set_ready(2).matches_object(Some(&stale)));
        assert!(replica_set_ready(2).matches_object(Some(&fresh)));
        assert!(!replica_set_ready(3).matches_object(Some(&fresh)));
    }
}
