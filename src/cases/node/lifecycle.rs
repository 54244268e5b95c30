//! The container lifecycle on Windows: exit codes and the phase they imply, stopping within
//! the grace period, and preStop hooks before the container stops.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, HTTPGetAction, Lifecycle, LifecycleHandler, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::DeleteParams;

use crate::catalog::{Case, Kind};
use crate::framework::netexec::{HTTP_PORT, netexec_pod};
use crate::framework::services::POLL_INTERVAL;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, pod_ip, pod_node};

/// Exit codes reported.
pub const EXIT_CODES: &str =
    "[sig-windows] Pod lifecycle should report a container's exit code and the pod phase it implies";
/// Termination within the grace period.
pub const GRACE_PERIOD: &str =
    "[sig-windows] Pod lifecycle should stop a deleted pod within its terminationGracePeriodSeconds";
/// preStop hooks run before the container stops.
pub const PRE_STOP: &str = "[sig-windows] Pod lifecycle should run a preStop http hook before the container stops";

/// The cases of this group, in catalogue order.
pub(super) fn cases() -> Vec<Case> {
    vec![
        crate::case!(EXIT_CODES, Kind::Substitute, exit_codes),
        crate::case!(GRACE_PERIOD, Kind::Substitute, grace_period),
        crate::case!(PRE_STOP, Kind::Substitute, pre_stop),
    ]
}

fn terminated_exit_code(pod: &Pod) -> Option<i32> {
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find_map(|c| c.state.as_ref()?.terminated.as_ref().map(|t| t.exit_code))
}

/// Exit codes: `exit 0` gives Succeeded with exit code 0, `exit 3` gives Failed with 3.
async fn exit_codes(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    for (name, code, phase) in [("exit-zero", 0, "Succeeded"), ("exit-three", 3, "Failed")] {
        let b = PodBuilder::new(name, os)
            .container(ContainerBuilder::new("c", "agnhost").command(os.shell(&format!("exit {code}"))));
        let pod = f.run_pod_to_completion(&b).await?;
        let got_phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        let got_code = terminated_exit_code(&pod);
        crate::ensure!(
            got_phase == phase && got_code == Some(code),
            "pod {name} on node {}: expected phase {phase} with exit code {code}, got {got_phase} with {got_code:?}",
            pod_node(&pod)
        );
    }
    Ok(())
}

/// Deletes `pod` and waits until it is gone; returns how long that took.
async fn delete_and_wait(f: &Framework, pod: &Pod, within: Duration) -> Result<Duration, CaseError> {
    let start = Instant::now();
    f.delete_pod_and_wait(pod, &DeleteParams::default(), within).await?;
    Ok(start.elapsed())
}

/// Graceful termination: a pod with `terminationGracePeriodSeconds: 5` is gone within the
/// grace period plus 20 s of API and kubelet latency.
async fn grace_period(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let grace = 5;
    let b = PodBuilder::new("graceful", os)
        .grace_period(grace)
        .container(ContainerBuilder::new("c", "agnhost").args(["pause"]));
    let pod = f.create_pod_ready(&b).await?;
    let bound = Duration::from_secs(u64::try_from(grace).unwrap_or(5) + 20);
    let took = delete_and_wait(f, &pod, Duration::from_secs(60)).await?;
    f.property("termination_seconds", format!("{:.1}", took.as_secs_f64()));
    crate::ensure!(
        took <= bound,
        "pod graceful on node {} took {took:?} to terminate, expected at most {bound:?} (grace period {grace}s)",
        pod_node(&pod)
    );
    Ok(())
}

/// preStop: a pod whose preStop hook GETs `/echo?msg=prestop` on a netexec handler pod; after
/// deleting it, the handler has logged the request (upstream container_lifecycle_hook.go).
async fn pre_stop(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let handler = f.create_pod_ready(&netexec_pod("pod-handle-http-request", os)).await?;
    let handler_ip = pod_ip(&handler)?;
    let hooked = PodBuilder::new("pod-with-prestop-http-hook", os)
        .grace_period(30)
        .container(
            ContainerBuilder::new("c", "agnhost")
                .args(["pause"])
                .with(move |c: &mut Container| {
                    c.lifecycle = Some(Lifecycle {
                        pre_stop: Some(LifecycleHandler {
                            http_get: Some(HTTPGetAction {
                                host: Some(handler_ip.clone()),
                                path: Some("/echo?msg=prestop".into()),
                                port: IntOrString::Int(i32::from(HTTP_PORT)),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    });
                }),
        );
    let pod = f.create_pod_ready(&hooked).await?;
    delete_and_wait(f, &pod, Duration::from_secs(60)).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    loop {
        tick.tick().await;
        let logs = f.logs("pod-handle-http-request", None).await?;
        if logs.contains("GET /echo?msg=prestop") {
            return Ok(());
        }
        crate::ensure!(
            Instant::now() < deadline,
            "preStop hook of pod pod-with-prestop-http-hook (node {}) never reached handler pod-handle-http-request; handler log ends: {:?}",
            pod_node(&pod),
            logs.lines().rev().take(5).collect::<Vec<_>>()
        );
    }
}
