//! Graceful termination: preStop hooks, the stop signal and a kill at the grace deadline.
//! Separate because it is the one path that ends every container of a pod.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use tokio_util::sync::CancellationToken;

use crate::node::programs::Ctx;
use crate::node::runtime::CState;

use super::hooks::run_handler;
use super::{Kubelet, PodRt, Role, with_ctr};

fn grace_of(pod: &Pod) -> Duration {
    let secs = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
        .unwrap_or(30)
        .max(0);
    Duration::from_secs(secs as u64)
}

/// Why the kubelet stops one container of a running pod: the probe-level
/// `terminationGracePeriodSeconds` of a liveness or startup probe overrides the pod's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KillReason {
    /// A failed liveness probe.
    Liveness,
    /// A failed startup probe.
    Startup,
    /// A failed postStart hook.
    PostStartHook,
}

/// The kubelet's floor for a container kill without an override ("always give containers a
/// minimal shutdown window to avoid unnecessary SIGKILLs").
const MINIMUM_GRACE: Duration = Duration::from_secs(2);

/// The grace period of a kill for `reason`, as the kubelet's `setTerminationGracePeriod`: the
/// pod's deletion grace period if it is being deleted; else the probe's own
/// `terminationGracePeriodSeconds` for a probe kill when set (even when longer than the pod's);
/// else the pod's; never under [`MINIMUM_GRACE`]. A kubelet with the `probe-grace-ignored`
/// fault uses the pod's period for probe kills too.
fn kill_grace(pod: &Pod, container: &str, reason: KillReason, probe_grace_ignored: bool) -> Duration {
    let spec = pod.spec.as_ref();
    let probe = spec
        .and_then(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
                .find(|c| c.name == container)
        })
        .and_then(|c| match reason {
            KillReason::Liveness => c.liveness_probe.as_ref(),
            KillReason::Startup => c.startup_probe.as_ref(),
            KillReason::PostStartHook => None,
        })
        .and_then(|p| p.termination_grace_period_seconds)
        .filter(|_| !probe_grace_ignored);
    let secs = match (
        pod.metadata.deletion_grace_period_seconds,
        spec.and_then(|s| s.termination_grace_period_seconds),
    ) {
        (Some(d), _) => d,
        (None, Some(pod_grace)) => probe.unwrap_or(pod_grace),
        (None, None) => 2,
    };
    Duration::from_secs(secs.max(0) as u64).max(MINIMUM_GRACE)
}

/// Sends the stop signal to container `(role, idx)`, then kills it after the grace period of
/// `reason` ([`kill_grace`]): a process that ignores the signal (a Linux PID 1 without a
/// handler) runs until then.
pub(super) async fn stop_with_grace(
    kl: &Kubelet,
    rt: &PodRt,
    (role, idx): (Role, usize),
    stop: &CancellationToken,
    reason: KillReason,
) {
    stop.cancel();
    let (kill, name) = with_ctr(rt, role, idx, |ct| (ct.run_kill.clone(), ct.name.clone()));
    let grace = kill_grace(&rt.pod(), &name, reason, kl.net.faults().is_on("probe-grace-ignored"));
    if let Some(kill) = kill {
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            kill.cancel();
        });
    }
}

/// A running container as termination sees it: (role, index, name, context, stop, kill).
type RunningCtr = (
    Role,
    usize,
    String,
    Option<Ctx>,
    Option<CancellationToken>,
    Option<CancellationToken>,
);

/// Stops one running container: its preStop hook (bounded by the grace deadline), the stop
/// signal, and a kill at the deadline.
fn stop_container(
    kl: &Arc<Kubelet>,
    rt: &Arc<PodRt>,
    spec: &PodSpec,
    (role, _i, name, ctx, stop, kill): RunningCtr,
    deadline: Instant,
) -> tokio::task::JoinHandle<()> {
    kl.pod_event(
        rt,
        Some((&name, role)),
        "Normal",
        "Killing",
        &format!("Stopping container {name}"),
    );
    let c = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .cloned();
    let kl2 = kl.clone();
    let rt2 = rt.clone();
    tokio::spawn(async move {
        if let (Some(c), Some(ctx)) = (&c, &ctx)
            && let Some(h) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.clone())
            && !kl2.net.faults().is_on("hooks-ignored")
        {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, run_handler(&kl2, ctx, &h, c)).await {
                Ok(Err(msg)) => kl2.pod_event(&rt2, Some((&c.name, role)), "Warning", "FailedPreStopHook", &msg),
                Ok(Ok(())) => {}
                Err(_) => kl2.pod_event(
                    &rt2,
                    Some((&c.name, role)),
                    "Warning",
                    "FailedPreStopHook",
                    "PreStopHook did not finish within the grace period",
                ),
            }
        }
        if let Some(s) = stop {
            s.cancel();
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(left).await;
        if let Some(k) = kill {
            k.cancel();
        }
    })
}

/// Waits until the containers `which` (every container when empty) have exited, or `until`.
async fn wait_exited(rt: &PodRt, which: &[(Role, usize)], until: Instant) {
    loop {
        let any_running = {
            let st = rt.state.lock().expect("state lock");
            let running = |c: &super::Ctr| c.state.is_running() || c.run_stop.is_some();
            if which.is_empty() {
                st.init
                    .iter()
                    .chain(st.main.iter())
                    .chain(st.ephemeral.iter())
                    .any(running)
            } else {
                which.iter().any(|&(role, i)| running(st.ctr(role, i)))
            }
        };
        if !any_running || Instant::now() > until {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Graceful termination: preStop hooks, the stop signal, and a kill at the grace deadline.
pub(super) async fn terminate(kl: &Arc<Kubelet>, rt: &Arc<PodRt>) {
    terminate_within(kl, rt, None).await;
}

/// [`terminate`] with `grace` instead of the pod's own grace period when given (the node
/// shutdown manager's per-group period).
pub(super) async fn terminate_within(kl: &Arc<Kubelet>, rt: &Arc<PodRt>, grace: Option<Duration>) {
    let pod = rt.pod();
    // As the pod worker's `calculateEffectiveGracePeriod`: "no matter what, we always supply a
    // grace period of 1", a pod force-deleted from the API included (only a process that ignores
    // the stop signal notices).
    let grace = if kl.cancel.is_cancelled() {
        Duration::ZERO
    } else if rt.gone.is_cancelled() {
        Duration::from_secs(1)
    } else {
        grace.unwrap_or_else(|| grace_of(&pod)).max(Duration::from_secs(1))
    };
    let deadline = Instant::now() + grace;
    let spec = pod.spec.clone().unwrap_or_default();
    let running: Vec<RunningCtr> = {
        let st = rt.state.lock().expect("state lock");
        st.init
            .iter()
            .enumerate()
            .map(|(i, c)| (Role::Init, i, c))
            .chain(st.main.iter().enumerate().map(|(i, c)| (Role::App, i, c)))
            .chain(st.ephemeral.iter().enumerate().map(|(i, c)| (Role::Ephemeral, i, c)))
            // A container whose postStart hook is still running is not reported Running yet,
            // but its process is: it has a stop token.
            .filter(|(_, _, c)| c.state.is_running() || c.run_stop.is_some())
            .map(|(role, i, c)| {
                (
                    role,
                    i,
                    c.name.clone(),
                    c.exec.clone(),
                    c.run_stop.clone(),
                    c.run_kill.clone(),
                )
            })
            .collect()
    };
    // Upstream (KEP-753): the app containers (and a regular init container still running) stop
    // first; the sidecars (restartable init containers) only once those have exited, one at a
    // time in the reverse of their order, all within the one grace period.
    let is_sidecar = |role: Role, name: &str| {
        role == Role::Init
            && spec
                .init_containers
                .iter()
                .flatten()
                .any(|c| c.name == name && c.restart_policy.as_deref() == Some("Always"))
    };
    let (mut sidecars, others): (Vec<RunningCtr>, Vec<RunningCtr>) =
        running.into_iter().partition(|r| is_sidecar(r.0, &r.2));
    sidecars.sort_by_key(|r| std::cmp::Reverse(r.1));
    let mut waits = Vec::new();
    let until = deadline + Duration::from_secs(2);
    let mut stages: Vec<Vec<RunningCtr>> = vec![others];
    stages.extend(sidecars.into_iter().map(|s| vec![s]));
    for stage in stages {
        let names: Vec<(Role, usize)> = stage.iter().map(|r| (r.0, r.1)).collect();
        for r in stage {
            waits.push(stop_container(kl, rt, &spec, r, deadline));
        }
        wait_exited(rt, &names, until).await;
    }
    // Wait until every container has exited (or been killed at the deadline).
    wait_exited(rt, &[], until).await;
    for w in waits {
        w.abort();
    }
    // Containers that never ran are reported as terminated too, as the kubelet does.
    let now = jiff::Timestamp::now();
    let mut guard = rt.state.lock().expect("state lock");
    let st = &mut *guard;
    for c in st
        .init
        .iter_mut()
        .chain(st.main.iter_mut())
        .chain(st.ephemeral.iter_mut())
    {
        if let CState::Waiting { .. } = c.state
            && c.container_id.is_some()
        {
            c.state = CState::Terminated {
                exit_code: 137,
                reason: "ContainerStatusUnknown".into(),
                message: Some("The container could not be located when the pod was deleted.".into()),
                started_at: None,
                finished_at: now,
                container_id: c.container_id.clone().unwrap_or_default(),
            };
        }
        c.ready = false;
    }
}
