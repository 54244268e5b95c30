//! Adapted cases: a probe's own `terminationGracePeriodSeconds` (`[sig-node] Probing container
//! should override timeoutGracePeriodSeconds when ... field is set`).
//!
//! Separate from [`super::probes`] because what they check is the kill, not the probe: the pod
//! asks for 500 s of grace, the failing probe for 5 s, and the container (busybox
//! `sh -c 'sleep 1000'`, which as a Linux PID 1 ignores SIGTERM) must be restarted after the
//! probe's 5 s. A kubelet that used the pod's period would leave it running for 500 s. On
//! Windows the stop signal ends the process at once, so there the cases check the restart only,
//! as upstream's Windows jobs do when they run these `[NodeConformance]` cases.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ExecAction, Pod, Probe};
use kube::api::DeleteParams;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::delete_with;
use crate::framework::wait::conditions as wc;
use crate::framework::workloads::restart_count;
use crate::framework::{CaseResult, ContainerBuilder, Framework, PodBuilder};

use super::probes::http_probe;

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        case!(LIVENESS_GRACE, Kind::Adapted, liveness_grace),
        case!(STARTUP_GRACE, Kind::Adapted, startup_grace),
    ]
}

/// The pod-level grace period upstream sets: far longer than any wait here.
const POD_GRACE: i64 = 500;
/// The probe-level grace period upstream sets.
const PROBE_GRACE: i64 = 5;
/// The failing probe's initial delay (upstream's 10 s).
const PROBE_DELAY: i32 = 10;

/// How long the restart may take: upstream's arithmetic ("10s delay + 10s period + 5s grace
/// period = 25s < 30s << pod-level timeout 500") plus the restart itself and room for a slow
/// node, still far below [`POD_GRACE`], so a kill after the pod's period cannot pass.
const RESTART_WAIT: Duration = Duration::from_secs(90);

/// Upstream common/node/container_probe.go, probe-level grace period on a liveness probe.
pub(crate) const LIVENESS_GRACE: &str = "[sig-node] Probing container should override timeoutGracePeriodSeconds \
     when LivenessProbe field is set [NodeConformance]";

/// Upstream: the liveness probe asks `/healthz` on 8080 of a pod that serves nothing, so it
/// fails once its 10 s delay is over; the container must be restarted after the probe's 5 s,
/// not the pod's 500 s.
async fn liveness_grace(f: &Framework) -> CaseResult {
    let mut probe = http_probe("/healthz", 8080);
    probe.initial_delay_seconds = Some(PROBE_DELAY);
    probe.termination_grace_period_seconds = Some(PROBE_GRACE);
    let pod = sleeper(f, "busybox-liveness-grace", move |c| {
        c.liveness_probe = Some(probe.clone())
    });
    expect_restart_within_probe_grace(f, &pod, "liveness").await
}

/// Upstream common/node/container_probe.go, probe-level grace period on a startup probe.
pub(crate) const STARTUP_GRACE: &str = "[sig-node] Probing container should override timeoutGracePeriodSeconds \
     when StartupProbe field is set [NodeConformance]";

/// Upstream: the startup probe `cat`s `/tmp/startup`, which never exists, so it fails once its
/// 10 s delay is over; a liveness probe (`/bin/true`, 15 s delay) that always passes sits behind
/// it. The container must be restarted after the startup probe's 5 s, not the pod's 500 s.
async fn startup_grace(f: &Framework) -> CaseResult {
    let startup = Probe {
        exec: Some(ExecAction {
            command: Some(vec!["/bin/cat".into(), "/tmp/startup".into()]),
        }),
        initial_delay_seconds: Some(PROBE_DELAY),
        failure_threshold: Some(1),
        termination_grace_period_seconds: Some(PROBE_GRACE),
        ..Default::default()
    };
    let live = Probe {
        exec: Some(ExecAction {
            command: Some(vec!["/bin/true".into()]),
        }),
        initial_delay_seconds: Some(15),
        failure_threshold: Some(1),
        ..Default::default()
    };
    let pod = sleeper(f, "busybox-startup-grace", move |c| {
        c.startup_probe = Some(startup.clone());
        c.liveness_probe = Some(live.clone());
    });
    expect_restart_within_probe_grace(f, &pod, "startup").await
}

/// Upstream `busyBoxPodSpec` with `sh -c 'sleep 1000'` and the pod-level grace period of
/// [`POD_GRACE`]; `probes` sets the container's probes.
fn sleeper(f: &Framework, name: &str, probes: impl Fn(&mut Container) + Clone + Send + Sync + 'static) -> PodBuilder {
    f.pod(name).grace_period(POD_GRACE).container(
        ContainerBuilder::new("busybox", "busybox")
            .command(["/bin/sh", "-c", "sleep 1000"])
            .with(probes),
    )
}

/// Creates `pod` and waits [`RESTART_WAIT`] for the restart its failing `probe` probe causes.
/// As upstream's `RunLivenessTest`, the pod is deleted with no grace period afterwards (its
/// own 500 s would hold the namespace's deletion that long).
async fn expect_restart_within_probe_grace(f: &Framework, pod: &PodBuilder, probe: &str) -> CaseResult {
    f.create_pod(pod).await?;
    f.defer_cleanup(
        format!("pod {} (grace period 0)", pod.name()),
        delete_with(
            f.api::<Pod>(),
            pod.name().to_string(),
            format!("pod {}", pod.name()),
            DeleteParams::default().grace_period(0),
        ),
    );
    let restarted = f
        .wait_for_within(
            &f.api::<Pod>(),
            pod.name(),
            wc::restarted_at_least(1),
            &format!(
                "to be restarted by its failing {probe} probe after the probe's {PROBE_GRACE} s grace period \
                 (the pod's is {POD_GRACE} s)"
            ),
            RESTART_WAIT,
        )
        .await?
        .unwrap_or_default();
    f.property("restarts", restart_count(&restarted));
    Ok(())
}
