//! preStop hooks with the sleep action (upstream `test/e2e/common/node/lifecycle_hook.go`,
//! "Lifecycle Sleep Hook" and "Lifecycle sleep action zero value"): the time a pod takes to go
//! away after its deletion shows whether the kubelet slept, for how long, and whether the grace
//! period bounded it.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Lifecycle, LifecycleHandler, Pod, SleepAction};
use kube::api::DeleteParams;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(SLEEP_VALID, Kind::Adapted, sleep_valid),
        case!(SLEEP_REDUCED_GRACE, Kind::Adapted, sleep_reduced_grace),
        case!(SLEEP_ZERO, Kind::Adapted, sleep_zero),
        case!(SLEEP_IGNORE_TERMINATED, Kind::Adapted, sleep_ignore_terminated),
    ]
}

/// Upstream `DefaultPodDeletionTimeout` is 3 minutes; every bound checked here is below 31 s.
const DELETION_WITHIN: Duration = Duration::from_secs(45);

/// Upstream `getPodWithHook`: one container named after the pod, of `image`, with a preStop
/// sleep of `seconds`.
fn pod_with_sleep_hook(f: &Framework, name: &str, image: &str, seconds: i32) -> PodBuilder {
    let lifecycle = Lifecycle {
        pre_stop: Some(LifecycleHandler {
            sleep: Some(SleepAction {
                seconds: seconds.into(),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    f.pod(name).container(
        ContainerBuilder::new(name, image).with(move |c: &mut Container| c.lifecycle = Some(lifecycle.clone())),
    )
}

/// Deletes `pod` (with `grace`, or the pod's own) and checks that it is gone after between
/// `low` and `high` seconds (upstream `validDuration`).
async fn expect_deletion_between(
    f: &Framework,
    pod: &Pod,
    grace: Option<u32>,
    low: u64,
    high: u64,
    why: &str,
) -> CaseResult {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let params = DeleteParams {
        grace_period_seconds: grace,
        ..Default::default()
    };
    let start = Instant::now();
    f.delete_pod_and_wait(pod, &params, DELETION_WITHIN).await?;
    let cost = start.elapsed();
    f.property("deletion_seconds", format!("{:.1}", cost.as_secs_f64()));
    ensure!(
        cost >= Duration::from_secs(low) && cost <= Duration::from_secs(high),
        "pod {name} on node {}: expected its deletion to take between {low} s and {high} s ({why}), it took {:.1} s",
        pod_node(pod),
        cost.as_secs_f64()
    );
    Ok(())
}

/// Upstream lifecycle_hook.go "valid prestop hook using sleep action".
pub(crate) const SLEEP_VALID: &str = "[sig-node] Lifecycle Sleep Hook [NodeConformance] when create a pod with \
     lifecycle hook using sleep action valid prestop hook using sleep action";

/// A 5 s preStop sleep delays the deletion by at least 5 s and at most the 30 s grace period.
async fn sleep_valid(f: &Framework) -> CaseResult {
    let b = pod_with_sleep_hook(f, "pod-with-prestop-sleep-hook", "pause", 5);
    let pod = f.create_pod_ready(&b).await?;
    expect_deletion_between(
        f,
        &pod,
        None,
        5,
        30,
        "the 5 s preStop sleep, within the default 30 s grace",
    )
    .await
}

/// Upstream lifecycle_hook.go "reduce GracePeriodSeconds during runtime".
pub(crate) const SLEEP_REDUCED_GRACE: &str = "[sig-node] Lifecycle Sleep Hook [NodeConformance] when create a pod \
     with lifecycle hook using sleep action reduce GracePeriodSeconds during runtime";

/// Deleting with a 2 s grace period cuts a 15 s preStop sleep short.
async fn sleep_reduced_grace(f: &Framework) -> CaseResult {
    let b = pod_with_sleep_hook(f, "pod-with-prestop-sleep-hook", "pause", 15);
    let pod = f.create_pod_ready(&b).await?;
    expect_deletion_between(
        f,
        &pod,
        Some(2),
        2,
        15,
        "a 2 s grace period cutting the 15 s preStop sleep",
    )
    .await
}

/// Upstream lifecycle_hook.go "prestop hook using sleep action with zero duration".
pub(crate) const SLEEP_ZERO: &str = "[sig-node] Lifecycle sleep action zero value [NodeConformance] when create a \
     pod with lifecycle hook using sleep action with a duration of zero seconds prestop hook using sleep action \
     with zero duration";

/// A zero-second sleep is accepted and returns at once: the deletion stays within the grace.
async fn sleep_zero(f: &Framework) -> CaseResult {
    let b = pod_with_sleep_hook(f, "pod-with-prestop-sleep-hook-zero-duration", "pause", 0);
    let pod = f.create_pod_ready(&b).await?;
    expect_deletion_between(f, &pod, None, 0, 30, "a zero-second preStop sleep").await
}

/// Upstream lifecycle_hook.go "ignore terminated container" (the v1.34 form).
pub(crate) const SLEEP_IGNORE_TERMINATED: &str = "[sig-node] Lifecycle Sleep Hook [NodeConformance] when create a \
     pod with lifecycle hook using sleep action ignore terminated container";

/// A container that exits on its own (`sleep 3`, restartPolicy Never) is not held back by its
/// 10 s preStop sleep: preStop runs only when the kubelet stops a container, so the container's
/// finishedAt comes less than 10 s after its startedAt.
async fn sleep_ignore_terminated(f: &Framework) -> CaseResult {
    const SLEEP_SECONDS: i32 = 10;
    let name = "pod-with-prestop-sleep-hook";
    let b = pod_with_sleep_hook(f, name, "busybox", SLEEP_SECONDS)
        .restart_policy("Never")
        .grace_period(30)
        .edit_spec(|spec| {
            if let Some(c) = spec.containers.first_mut() {
                c.command = Some(vec!["sh".into(), "-c".into(), "sleep 3".into()]);
            }
        });
    f.create_pod(&b).await?;
    let terminated = |p: &Pod| {
        p.status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .first()?
            .state
            .as_ref()?
            .terminated
            .clone()
    };
    let pod = f
        .wait_for_within(
            &f.api::<Pod>(),
            name,
            move |p: Option<&Pod>| p.and_then(terminated).is_some(),
            "to report its container terminated",
            Duration::from_secs(30),
        )
        .await?
        .ok_or_else(|| CaseError::failed(format!("pod {name} vanished")))?;
    let node = pod_node(&pod);
    let t = terminated(&pod).ok_or_else(|| CaseError::failed(format!("pod {name}: no terminated state")))?;
    let started = t
        .started_at
        .ok_or_else(|| CaseError::failed(format!("pod {name} on node {node}: terminated state without startedAt")))?;
    let finished = t.finished_at.ok_or_else(|| {
        CaseError::failed(format!(
            "pod {name} on node {node}: terminated state without finishedAt"
        ))
    })?;
    let cost = finished.0.duration_since(started.0);
    f.property("run_seconds", format!("{:.1}", cost.as_secs_f64()));
    ensure!(
        cost.as_secs_f64() >= 0.0 && cost.as_secs_f64() < f64::from(SLEEP_SECONDS),
        "pod {name} on node {node}: expected its container (sh -c \"sleep 3\") to finish less than {SLEEP_SECONDS} s after it started, \
         the preStop sleep ignored for a container that exits on its own; it ran {:.1} s (startedAt {}, finishedAt {})",
        cost.as_secs_f64(),
        started.0,
        finished.0
    );
    Ok(())
}
