//! Container restart rules (upstream test/e2e/node/pods.go, "Pod Extended (container restart
//! policy)" > "Container Restart Rules"; KEP-5307, feature gate `ContainerRestartRules`): a
//! container's own `restartPolicy` overrides the pod's, and a `restartPolicyRules` entry
//! matching the exit code restarts it whatever the policies say.
//!
//! Each case runs one busybox container that exits at once (`/bin/sh -c "exit N"`; the
//! Windows busybox image brings `sh` too, and nothing in the flow is OS-specific, so the
//! cases run on both OSes) and checks, as upstream's `createAndValidateRestartableContainer`
//! / `createAndValidateNonRestartableContainer` do, that the container restarted, or that the
//! pod finished with a restart count of 0.
//!
//! k8s-openapi's 1.33 types have no `restartPolicyRules`, so the pod is written as JSON. An
//! API server without the gate (every 1.33 server) prunes the rules and refuses a
//! `restartPolicy` on a regular container; a dry-run probe finds that first and the case skips
//! naming the gate (upstream leaves that to the job's `[FeatureGate:...]` selection).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::runtime::wait::Condition;
use serde_json::{Value, json};

use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, pod_node};
use crate::{ensure, fail};

const DESCRIBE: &str = "[sig-node] Pod Extended (container restart policy) [NodeConformance] \
    [FeatureGate:ContainerRestartRules] [Beta] Container Restart Rules ";
/// Upstream It("should restart container on rule match").
pub const RULE_MATCH: &str = "[sig-node] Pod Extended (container restart policy) [NodeConformance] [FeatureGate:ContainerRestartRules] [Beta] Container Restart Rules should restart container on rule match";
/// Upstream It("should not restart container on rule mismatch, container restart policy Never").
pub const RULE_MISMATCH: &str = "[sig-node] Pod Extended (container restart policy) [NodeConformance] [FeatureGate:ContainerRestartRules] [Beta] Container Restart Rules should not restart container on rule mismatch, container restart policy Never";
/// Upstream It("should restart container on container-level restart policy Never") (the name
/// says "restart"; the body checks that the container does not).
pub const CONTAINER_NEVER: &str = "[sig-node] Pod Extended (container restart policy) [NodeConformance] [FeatureGate:ContainerRestartRules] [Beta] Container Restart Rules should restart container on container-level restart policy Never";
/// Upstream It("should restart container on container-level restart policy Always").
pub const CONTAINER_ALWAYS: &str = "[sig-node] Pod Extended (container restart policy) [NodeConformance] [FeatureGate:ContainerRestartRules] [Beta] Container Restart Rules should restart container on container-level restart policy Always";
/// Upstream It("should restart container on pod-level restart policy Always when no
/// container-level restart policy").
pub const POD_ALWAYS: &str = "[sig-node] Pod Extended (container restart policy) [NodeConformance] [FeatureGate:ContainerRestartRules] [Beta] Container Restart Rules should restart container on pod-level restart policy Always when no container-level restart policy";

/// Upstream's wait for the restart, or for the pod to finish.
const WAIT: Duration = Duration::from_secs(600);

/// The container every case runs.
const CONTAINER: &str = "main-container";

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    debug_assert!(
        [RULE_MATCH, RULE_MISMATCH, CONTAINER_NEVER, CONTAINER_ALWAYS, POD_ALWAYS]
            .iter()
            .all(|n| n.starts_with(DESCRIBE))
    );
    // Upstream's 10-minute wait plus the gate probe and pod start.
    let timeout = WAIT + Duration::from_secs(60);
    vec![
        crate::case!(RULE_MATCH, Kind::Adapted, rule_match).with_timeout(timeout),
        crate::case!(RULE_MISMATCH, Kind::Adapted, rule_mismatch).with_timeout(timeout),
        crate::case!(CONTAINER_NEVER, Kind::Adapted, container_never).with_timeout(timeout),
        crate::case!(CONTAINER_ALWAYS, Kind::Adapted, container_always).with_timeout(timeout),
        crate::case!(POD_ALWAYS, Kind::Adapted, pod_always).with_timeout(timeout),
    ]
}

/// One case's pod: the pod's and the container's policies, the exit code and the rule.
struct Scenario {
    pod: &'static str,
    pod_policy: &'static str,
    container_policy: Option<&'static str>,
    exit: i32,
    /// A Restart rule on exit codes `In [code]`.
    rule_in: Option<i32>,
}

async fn rule_match(f: &Framework) -> CaseResult {
    let s = Scenario {
        pod: "restart-rules-exit-code",
        pod_policy: "Never",
        container_policy: Some("Never"),
        exit: 42,
        rule_in: Some(42),
    };
    expect_restart(f, &s).await
}

async fn rule_mismatch(f: &Framework) -> CaseResult {
    let s = Scenario {
        pod: "restart-rules-no-restart",
        pod_policy: "Never",
        container_policy: Some("Never"),
        exit: 1,
        rule_in: Some(42),
    };
    expect_no_restart(f, &s).await
}

async fn container_never(f: &Framework) -> CaseResult {
    let s = Scenario {
        pod: "restart-rules-no-restart",
        pod_policy: "Always",
        container_policy: Some("Never"),
        exit: 1,
        rule_in: None,
    };
    expect_no_restart(f, &s).await
}

async fn container_always(f: &Framework) -> CaseResult {
    let s = Scenario {
        pod: "restart-rules-no-restart",
        pod_policy: "Never",
        container_policy: Some("Always"),
        exit: 1,
        rule_in: None,
    };
    expect_restart(f, &s).await
}

async fn pod_always(f: &Framework) -> CaseResult {
    let s = Scenario {
        pod: "restart-rules-no-match",
        pod_policy: "Always",
        container_policy: None,
        exit: 1,
        rule_in: None,
    };
    expect_restart(f, &s).await
}

/// A rule matching exit code `code` with action Restart, as upstream writes it.
fn rule_in(code: i32) -> Value {
    json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [code]}}])
}

/// The pod of `s` as JSON, rules included.
fn pod_json(f: &Framework, name: &str, s: &Scenario) -> Result<Value, CaseError> {
    let policy = s.container_policy;
    let builder = f.pod(name).restart_policy(s.pod_policy).container(
        ContainerBuilder::new(CONTAINER, "busybox")
            .command(["/bin/sh", "-c"])
            .args([format!("exit {}", s.exit)])
            .with(move |c: &mut Container| c.restart_policy = policy.map(Into::into)),
    );
    let mut pod =
        serde_json::to_value(builder.build(f)?).map_err(|e| CaseError::failed(format!("encoding pod {name}: {e}")))?;
    if let Some(code) = s.rule_in {
        let Some(c) = pod.pointer_mut("/spec/containers/0").and_then(Value::as_object_mut) else {
            fail!("pod {name} has no container to carry restartPolicyRules");
        };
        c.insert("restartPolicyRules".into(), rule_in(code));
    }
    Ok(pod)
}

fn pods(f: &Framework) -> Api<DynamicObject> {
    Api::namespaced_with(f.client(), f.ns(), &ApiResource::erase::<Pod>(&()))
}

/// The skip when the API server lacks the gate, with what it did instead.
fn gate_off(f: &Framework, what: &str) -> CaseError {
    f.skip(format!(
        "FeatureGate:ContainerRestartRules: {what}, so the API server's ContainerRestartRules feature gate \
         (alpha in 1.34, beta from 1.35; absent from 1.33) is off; turn it on on the API server and the \
         kubelets (--feature-gates ContainerRestartRules=true; the simulator: --feature-gates \
         ContainerRestartRules=true)"
    ))
}

/// Whether the API server takes container restart rules: a dry-run create of a pod whose
/// container has `restartPolicy: Never` and a rule must come back with the rule kept.
async fn require_gate(f: &Framework) -> CaseResult {
    let probe = Scenario {
        pod: "restart-rules-gate-probe",
        pod_policy: "Never",
        container_policy: Some("Never"),
        exit: 42,
        rule_in: Some(42),
    };
    let body: DynamicObject = serde_json::from_value(pod_json(f, probe.pod, &probe)?)
        .map_err(|e| CaseError::failed(format!("the probe pod is not an object: {e}")))?;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    f.step("dry-run create of a pod whose container has restartPolicy Never and a restart rule");
    match pods(f).create(&dry_run, &body).await {
        Ok(created) => {
            let kept = created.data.pointer("/spec/containers/0/restartPolicyRules");
            if kept.is_none_or(Value::is_null) {
                return Err(gate_off(
                    f,
                    "the API server dropped restartPolicyRules from a dry-run pod",
                ));
            }
            Ok(())
        }
        Err(kube::Error::Api(status))
            if status.code == 422
                && status.details.as_ref().is_some_and(|d| {
                    d.causes.iter().any(|c| {
                        c.field == "spec.containers[0].restartPolicy" && c.message.contains("non-init containers")
                    })
                }) =>
        {
            Err(gate_off(
                f,
                &format!(
                    "the API server refused restartPolicy on a regular container ({})",
                    status.message
                ),
            ))
        }
        Err(e) => Err(CaseError::from(e).context("dry-run create of the restart-rules probe pod")),
    }
}

/// Creates the pod of `s` after the gate probe; returns its name.
async fn create(f: &Framework, s: &Scenario) -> Result<&'static str, CaseError> {
    require_gate(f).await?;
    let body: DynamicObject = serde_json::from_value(pod_json(f, s.pod, s)?)
        .map_err(|e| CaseError::failed(format!("pod {} is not an object: {e}", s.pod)))?;
    f.step(format!(
        "creating pod {} (restartPolicy {}, container restartPolicy {:?}, exits {}, rule In {:?})",
        s.pod, s.pod_policy, s.container_policy, s.exit, s.rule_in
    ));
    pods(f)
        .create(&PostParams::default(), &body)
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating pod {}", s.pod)))?;
    Ok(s.pod)
}

fn restarts(pod: &Pod) -> Option<i32> {
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == CONTAINER)
        .map(|c| c.restart_count)
}

fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

fn finished(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Upstream `createAndValidateRestartableContainer`: the container's restart count goes above
/// 0. A pod that finishes first never restarts it, so that fails at once.
async fn expect_restart(f: &Framework, s: &Scenario) -> CaseResult {
    let name = create(f, s).await?;
    f.step(format!("waiting for container {CONTAINER} of pod {name} to restart"));
    let cond = |p: Option<&Pod>| p.is_some_and(|p| restarts(p).is_some_and(|n| n > 0) || finished(p));
    let pod = wait(f, name, cond, "to restart its container or finish").await?;
    let count = restarts(&pod).unwrap_or_default();
    ensure!(
        count > 0,
        "pod {name} (node {}) ended {} with container {CONTAINER} restarted {count} times; expected the \
         container (exit code {}, restartPolicy {:?}, pod restartPolicy {}) to restart",
        pod_node(&pod),
        phase(&pod),
        s.exit,
        s.container_policy,
        s.pod_policy
    );
    Ok(())
}

/// Upstream `createAndValidateNonRestartableContainer`: the pod stops running and the
/// container's restart count is 0. A restart already breaks that, so it fails at once.
async fn expect_no_restart(f: &Framework, s: &Scenario) -> CaseResult {
    let name = create(f, s).await?;
    f.step(format!("waiting for pod {name} to terminate"));
    let cond = |p: Option<&Pod>| p.is_some_and(|p| finished(p) || restarts(p).is_some_and(|n| n > 0));
    let pod = wait(f, name, cond, "to terminate").await?;
    let count = restarts(&pod);
    ensure!(
        count == Some(0),
        "pod {name} (node {}, phase {}): container {CONTAINER} restart count {count:?}, expected 0 (exit code {}, \
         restartPolicy {:?}, rule In {:?}, pod restartPolicy {})",
        pod_node(&pod),
        phase(&pod),
        s.exit,
        s.container_policy,
        s.rule_in,
        s.pod_policy
    );
    Ok(())
}

async fn wait(f: &Framework, name: &str, cond: impl Condition<Pod>, why: &str) -> Result<Pod, CaseError> {
    super::wait_pod(f, name, cond, why, WAIT).await
}
