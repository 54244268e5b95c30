//! Waits built on watches, never on polling loops or fixed sleeps.
//!
//! [`Framework::wait_for`] watches one object (kube's `watch_object`) until a
//! [`kube::runtime::wait::Condition`] holds, bounded by the case deadline, and on timeout fails
//! with what it waited for and the last state it saw. Reusing kube's `Condition` trait means
//! kube's own conditions (`is_pod_running`, `is_deleted`) and ours in [`conditions`] compose with
//! `.and()` / `.or()` / `.not()`.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::wait::Condition;
use kube::runtime::watcher;
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{CaseError, Framework};

impl Framework {
    /// Waits until `cond` holds for object `name`, at most until the case deadline.
    ///
    /// # Errors
    /// A failure "timed out after … waiting for <kind> <name> <why>; last seen: …" on timeout,
    /// or when the watch itself fails.
    pub async fn wait_for<K>(
        &self,
        api: &Api<K>,
        name: &str,
        cond: impl Condition<K>,
        why: &str,
    ) -> Result<Option<K>, CaseError>
    where
        K: Clone + Debug + Send + DeserializeOwned + Resource + Serialize + 'static,
        K::DynamicType: Default,
    {
        self.wait_for_within(api, name, cond, why, self.remaining()).await
    }

    /// Like [`Framework::wait_for`] with a bound shorter than the case deadline.
    ///
    /// # Errors
    /// As [`Framework::wait_for`].
    pub async fn wait_for_within<K>(
        &self,
        api: &Api<K>,
        name: &str,
        cond: impl Condition<K>,
        why: &str,
        within: Duration,
    ) -> Result<Option<K>, CaseError>
    where
        K: Clone + Debug + Send + DeserializeOwned + Resource + Serialize + 'static,
        K::DynamicType: Default,
    {
        let within = within.min(self.remaining());
        wait_object(api, name, cond, why, within).await
    }
}

/// Watches `name` through `api` until `cond` holds or `within` passes.
///
/// # Errors
/// See [`Framework::wait_for`].
pub async fn wait_object<K>(
    api: &Api<K>,
    name: &str,
    cond: impl Condition<K>,
    why: &str,
    within: Duration,
) -> Result<Option<K>, CaseError>
where
    K: Clone + Debug + Send + DeserializeOwned + Resource + Serialize + 'static,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let start = Instant::now();
    let mut last: Option<Option<K>> = None;
    let mut stream = watcher::watch_object(api.clone(), name).default_backoff().boxed();
    let result = tokio::time::timeout(within, async {
        while let Some(event) = stream.next().await {
            match event {
                Ok(obj) => {
                    if cond.matches_object(obj.as_ref()) {
                        return Ok(obj);
                    }
                    last = Some(obj);
                }
                // The watcher retries transient errors itself; one reaching us is logged and
                // the stream continues, the deadline bounds the wait.
                Err(e) => {
                    crate::cluster::retry::journal().record(crate::cluster::retry::Trouble::WatchRestart);
                    tracing::debug!(kind, name, error = %e, "watch error while waiting");
                }
            }
        }
        Err(CaseError::Failed(format!(
            "watch on {kind} {name} ended while waiting for {why}"
        )))
    })
    .await;
    match result {
        Ok(r) => r,
        Err(_) => {
            let mut message = format!(
                "timed out after {:.1?} waiting for {kind} {name} {why}; last seen: {}",
                start.elapsed(),
                describe_last(last.as_ref())
            );
            let node = last
                .as_ref()
                .and_then(|o| o.as_ref())
                .and_then(|o| serde_json::to_value(o).ok())
                .and_then(|v| v["spec"]["nodeName"].as_str().map(str::to_string));
            // Bounded: the message is due at the case deadline, and the API may be in trouble.
            if let Some(node) = node
                && let Ok(Some(trouble)) = tokio::time::timeout(
                    Duration::from_secs(2),
                    super::health::node_not_ready(&api.clone().into_client(), &node, false),
                )
                .await
            {
                message.push_str(&format!("; node {node} is {trouble}"));
            }
            Err(CaseError::Failed(super::health::with_transient_note(message, start)))
        }
    }
}

fn describe_last<K: Serialize>(last: Option<&Option<K>>) -> String {
    match last {
        None => "nothing (no watch event arrived)".into(),
        Some(None) => "absent".into(),
        Some(Some(obj)) => {
            let value = serde_json::to_value(obj).unwrap_or_default();
            summarize(&value)
        }
    }
}

/// A one-line summary of an object's state for timeout messages: a pod's phase, conditions and
/// container waiting/terminated reasons, or any object's `status`, cut to a readable length.
pub fn summarize(value: &serde_json::Value) -> String {
    let status = &value["status"];
    if value["kind"] == "Pod" || status.get("phase").is_some() && status.get("containerStatuses").is_some() {
        let mut parts = vec![format!("phase={}", status["phase"].as_str().unwrap_or("?"))];
        if let Some(node) = value["spec"]["nodeName"].as_str() {
            parts.push(format!("node={node}"));
        }
        for c in status["conditions"].as_array().into_iter().flatten() {
            if c["status"] != "True" {
                let mut s = format!(
                    "{}={}",
                    c["type"].as_str().unwrap_or("?"),
                    c["status"].as_str().unwrap_or("?")
                );
                if let Some(r) = c["reason"].as_str() {
                    s.push_str(&format!("({r}: {})", c["message"].as_str().unwrap_or("")));
                }
                parts.push(s);
            }
        }
        for key in ["initContainerStatuses", "containerStatuses"] {
            for cs in status[key].as_array().into_iter().flatten() {
                let name = cs["name"].as_str().unwrap_or("?");
                if let Some(w) = cs["state"]["waiting"].as_object() {
                    parts.push(format!(
                        "{name} waiting {}: {}",
                        w.get("reason").and_then(|r| r.as_str()).unwrap_or(""),
                        w.get("message").and_then(|r| r.as_str()).unwrap_or("")
                    ));
                } else if let Some(t) = cs["state"]["terminated"].as_object() {
                    parts.push(format!(
                        "{name} terminated {} exit {}",
                        t.get("reason").and_then(|r| r.as_str()).unwrap_or(""),
                        t.get("exitCode").and_then(|r| r.as_i64()).unwrap_or(-1)
                    ));
                } else if cs["ready"] == false {
                    parts.push(format!("{name} not ready (restarts {})", cs["restartCount"]));
                }
            }
        }
        return parts.join(", ");
    }
    let mut text = if status.is_null() {
        value["spec"].to_string()
    } else {
        format!("status {status}")
    };
    if text.len() > 400 {
        let mut cut = 400;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Small predicates for [`Framework::wait_for`], each a [`Condition`].
pub mod conditions {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::runtime::wait::Condition;

    /// The pod is Running and its Ready condition is True.
    #[must_use]
    pub fn is_pod_ready() -> impl Condition<Pod> {
        |pod: Option<&Pod>| {
            pod.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.phase.as_deref() == Some("Running")
                    && s.conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        }
    }

    /// The pod reached phase `phase` (`Succeeded`, `Failed`, `Running`…).
    #[must_use]
    pub fn is_pod_phase(phase: &'static str) -> impl Condition<Pod> {
        move |pod: Option<&Pod>| pod.and_then(|p| p.status.as_ref()).and_then(|s| s.phase.as_deref()) == Some(phase)
    }

    /// The pod finished (Succeeded or Failed).
    #[must_use]
    pub fn is_pod_finished() -> impl Condition<Pod> {
        |pod: Option<&Pod>| {
            matches!(
                pod.and_then(|p| p.status.as_ref()).and_then(|s| s.phase.as_deref()),
                Some("Succeeded") | Some("Failed")
            )
        }
    }

    /// Some container (init or regular) of the pod is waiting with `reason`
    /// (`ErrImagePull`, `ImagePullBackOff`, `CreateContainerError`…).
    #[must_use]
    pub fn has_waiting_reason(reason: &'static str) -> impl Condition<Pod> {
        move |pod: Option<&Pod>| {
            pod.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.container_statuses
                    .iter()
                    .flatten()
                    .chain(s.init_container_statuses.iter().flatten())
                    .any(|cs| {
                        cs.state
                            .as_ref()
                            .and_then(|st| st.waiting.as_ref())
                            .and_then(|w| w.reason.as_deref())
                            == Some(reason)
                    })
            })
        }
    }

    /// The pod's PodScheduled condition is False with reason `Unschedulable`.
    #[must_use]
    pub fn is_unschedulable() -> impl Condition<Pod> {
        |pod: Option<&Pod>| {
            pod.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.conditions.iter().flatten().any(|c| {
                    c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
                })
            })
        }
    }

    /// The pod's containers restarted at least `n` times in total.
    #[must_use]
    pub fn restarted_at_least(n: i32) -> impl Condition<Pod> {
        move |pod: Option<&Pod>| {
            pod.and_then(|p| p.status.as_ref())
                .map(|s| {
                    s.container_statuses
                        .iter()
                        .flatten()
                        .map(|c| c.restart_count)
                        .sum::<i32>()
                })
                .is_some_and(|total| total >= n)
        }
    }

    /// The EndpointSlice lists at least `n` ready endpoints.
    #[must_use]
    pub fn has_ready_endpoints(n: usize) -> impl Condition<EndpointSlice> {
        move |slice: Option<&EndpointSlice>| {
            slice.is_some_and(|s| {
                s.endpoints
                    .iter()
                    .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false))
                    .count()
                    >= n
            })
        }
    }

    /// The Deployment rolled out: observed the latest generation and every replica is updated
    /// and available (what `kubectl rollout status` waits for).
    #[must_use]
    pub fn is_deployment_rolled_out() -> impl Condition<Deployment> {
        |d: Option<&Deployment>| {
            let Some(d) = d else { return false };
            let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let Some(s) = d.status.as_ref() else { return false };
            s.observed_generation >= d.metadata.generation
                && s.updated_replicas.unwrap_or(0) == want
                && s.available_replicas.unwrap_or(0) == want
                && s.replicas.unwrap_or(0) == want
        }
    }

    /// Every desired DaemonSet pod is scheduled and ready (and at least one is desired).
    #[must_use]
    pub fn is_daemonset_ready() -> impl Condition<DaemonSet> {
        |d: Option<&DaemonSet>| {
            d.and_then(|d| d.status.as_ref()).is_some_and(|s| {
                s.desired_number_scheduled > 0
                    && s.number_ready == s.desired_number_scheduled
                    && s.current_number_scheduled == s.desired_number_scheduled
            })
        }
    }

    /// The StatefulSet has `n` ready replicas.
    #[must_use]
    pub fn statefulset_ready(n: i32) -> impl Condition<StatefulSet> {
        move |s: Option<&StatefulSet>| {
            s.and_then(|s| s.status.as_ref())
                .is_some_and(|st| st.ready_replicas.unwrap_or(0) == n)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use serde_json::json;

        fn pod(status: serde_json::Value) -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).unwrap()
        }

        #[test]
        fn ready_needs_running_and_ready_condition() {
            let ready = pod(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}));
            let running = pod(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}));
            assert!(is_pod_ready().matches_object(Some(&ready)));
            assert!(!is_pod_ready().matches_object(Some(&running)));
            assert!(!is_pod_ready().matches_object(None));
        }

        #[test]
        fn waiting_reason_looks_at_init_and_regular_containers() {
            let p = pod(
                json!({"phase": "Pending", "initContainerStatuses": [{"name": "i", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ErrImagePull"}}}]}),
            );
            assert!(has_waiting_reason("ErrImagePull").matches_object(Some(&p)));
            assert!(!has_waiting_reason("ImagePullBackOff").matches_object(Some(&p)));
        }

        #[test]
        fn restarts_are_summed() {
            let p = pod(json!({"containerStatuses": [
                {"name": "a", "image": "x", "imageID": "", "ready": true, "restartCount": 1},
                {"name": "b", "image": "x", "imageID": "", "ready": true, "restartCount": 2}]}));
            assert!(restarted_at_least(3).matches_object(Some(&p)));
            assert!(!restarted_at_least(4).matches_object(Some(&p)));
        }

        #[test]
        fn unschedulable_needs_reason() {
            let p =
                pod(json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}));
            assert!(is_unschedulable().matches_object(Some(&p)));
            let q = pod(json!({"conditions": [{"type": "PodScheduled", "status": "False"}]}));
            assert!(!is_unschedulable().matches_object(Some(&q)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_summary_names_waiting_reasons() {
        let v = json!({"kind": "Pod", "spec": {"nodeName": "win-1"}, "status": {"phase": "Pending",
            "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "x"}],
            "containerStatuses": [{"name": "c", "ready": false, "state": {"waiting": {"reason": "ErrImagePull", "message": "not found"}}}]}});
        let s = summarize(&v);
        assert!(s.contains("phase=Pending"), "{s}");
        assert!(s.contains("node=win-1"), "{s}");
        assert!(s.contains("c waiting ErrImagePull: not found"), "{s}");
    }

    #[test]
    fn long_status_is_cut() {
        let v = json!({"status": {"x": "y".repeat(1000)}});
        assert!(summarize(&v).chars().count() < 420);
    }
}
