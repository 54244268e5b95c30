//! One container's supervisor: start, wait for exit, and restart per the restart policy with
//! the kubelet's back-off (CrashLoopBackOff). Separate because the restart and back-off
//! rules are their own state machine around a single container run.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;

use crate::node::runtime::CState;

use super::container::start_container;
use super::restart_rules::should_restart;
use super::{Kubelet, PodRt, Role, sleep_or, with_ctr};

/// Why a container could not be started this time.
pub(super) enum StartFailure {
    /// Waiting with this reason and message; retry after a back-off.
    Waiting { reason: &'static str, message: String },
    /// Started and failed at once (exit code 128, StartError).
    StartError(String),
}

/// Runs one container until it should not be restarted any more (or the pod is deleted).
/// Returns whether it finished successfully (for init containers).
pub(super) async fn supervise(
    kl: Arc<Kubelet>,
    rt: Arc<PodRt>,
    c: Container,
    role: Role,
    idx: usize,
    policy: String,
) -> bool {
    let mut backoff_n = 0u32;
    let mut pull_n = 0u32;
    loop {
        // A machine that is down (rebooting) starts nothing until it is up.
        tokio::select! {
            () = kl.power.wait_up() => {}
            () = rt.halted.cancelled() => return false,
        }
        if rt.halted.is_cancelled() {
            return false;
        }
        let run = match start_container(&kl, &rt, &c, role, idx).await {
            Ok(run) => run,
            Err(StartFailure::Waiting { reason, message }) => {
                let is_pull = reason == "ErrImagePull" || reason == "ErrImageNeverPull";
                with_ctr(&rt, role, idx, |ct| {
                    ct.state = CState::waiting(reason, Some(message.clone()))
                });
                rt.touch();
                let wait = kl.cfg.profile.backoff(pull_n).max(Duration::from_millis(100));
                pull_n += 1;
                if reason == "ErrImagePull" {
                    // The kubelet shows ErrImagePull once, then ImagePullBackOff while waiting.
                    if !sleep_or(Duration::from_millis(300).min(wait), &rt.halted).await {
                        return false;
                    }
                    let image = c.image.clone().unwrap_or_default();
                    kl.pod_event(
                        &rt,
                        Some((&c.name, role)),
                        "Normal",
                        "BackOff",
                        &format!("Back-off pulling image \"{image}\""),
                    );
                    kl.pod_event(
                        &rt,
                        Some((&c.name, role)),
                        "Warning",
                        "Failed",
                        "Error: ImagePullBackOff",
                    );
                    with_ctr(&rt, role, idx, |ct| {
                        ct.state = CState::waiting(
                            "ImagePullBackOff",
                            Some(format!("Back-off pulling image \"{image}\": ErrImagePull: {message}")),
                        )
                    });
                    rt.touch();
                }
                let _ = is_pull;
                if !sleep_or(wait, &rt.halted).await {
                    return false;
                }
                continue;
            }
            Err(StartFailure::StartError(msg)) => {
                let cid = format!("containerd://{:064x}", rand::random::<u128>());
                let now = jiff::Timestamp::now();
                with_ctr(&rt, role, idx, |ct| {
                    ct.container_id = Some(cid.clone());
                    ct.state = CState::Terminated {
                        exit_code: 128,
                        reason: "StartError".into(),
                        message: Some(msg.clone()),
                        started_at: None,
                        finished_at: now,
                        container_id: cid.clone(),
                    };
                });
                kl.pod_event(
                    &rt,
                    Some((&c.name, role)),
                    "Warning",
                    "Failed",
                    &format!("Error: {msg}"),
                );
                rt.touch();
                128
            }
        };
        let code = if run == 128
            && with_ctr(
                &rt,
                role,
                idx,
                |ct| matches!(&ct.state, CState::Terminated { reason, .. } if reason == "StartError"),
            ) {
            128
        } else {
            run
        };
        if rt.halted.is_cancelled() {
            return false;
        }
        // `policy` is the pod's (OnFailure or Never for a regular init container, which a
        // success ends); the container's own policy and rules come first.
        let rules = rt
            .rules
            .get()
            .and_then(|r| r.get(&c.name))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let restart = !(role == Role::Init && code == 0 && c.restart_policy.as_deref() != Some("Always"))
            && should_restart(&c, rules, &policy, code, kl.net.faults());
        if !restart {
            if code != 0 && role == Role::Init {
                let mut st = rt.state.lock().expect("state lock");
                st.failed = Some((
                    "Failed".into(),
                    format!("init container {} failed with exit code {code}", c.name),
                ));
            }
            rt.touch();
            return code == 0;
        }
        // As the kubelet's doBackOff: the first exit has no back-off entry yet, so the
        // container restarts at once; later exits wait in CrashLoopBackOff for the back-off
        // (10 s, 20 s, ... scaled by the profile).
        backoff_n += 1;
        if backoff_n == 1 {
            with_ctr(&rt, role, idx, |ct| {
                ct.last = Some(ct.state.clone());
                ct.state = CState::waiting("ContainerCreating", None);
                ct.ready = false;
                ct.started = false;
                ct.restart_count += 1;
            });
            rt.touch();
            continue;
        }
        let wait = kl.cfg.profile.backoff(backoff_n - 2);
        let msg = format!(
            "back-off {} restarting failed container={} pod={}",
            fmt_secs(wait),
            c.name,
            rt.label()
        );
        with_ctr(&rt, role, idx, |ct| {
            ct.last = Some(ct.state.clone());
            ct.state = CState::waiting("CrashLoopBackOff", Some(msg));
            ct.ready = false;
            ct.started = false;
        });
        kl.pod_event(
            &rt,
            Some((&c.name, role)),
            "Warning",
            "BackOff",
            &format!("Back-off restarting failed container {} in pod {}", c.name, rt.label()),
        );
        rt.touch();
        if !sleep_or(wait, &rt.halted).await {
            return false;
        }
        with_ctr(&rt, role, idx, |ct| ct.restart_count += 1);
    }
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 60.0 {
        format!("{}m{}s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else if s >= 1.0 {
        format!("{}s", s as u64)
    } else {
        format!("{}ms", d.as_millis())
    }
}
