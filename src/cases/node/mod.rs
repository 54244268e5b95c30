//! What a Windows node does with a pod: kubelet stats, image pulls and pull policies, image
//! compatibility, CPU and memory limits, allocatable memory, start-up latency (density) and the
//! container lifecycle (exit codes, grace period, preStop).
//!
//! One submodule per area; each owns its case names, bodies and registration, and this
//! module keeps the catalogue order and the helper they share.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::wait::Condition;

use crate::catalog::Case;
use crate::framework::{CaseError, Framework};

mod admission;
mod containers;
mod density;
mod ephemeral;
mod etc_hosts;
mod host_aliases;
mod images;
mod init_containers;
mod lifecycle;
mod prestop;
pub(crate) mod resources;
mod restart_rules;
mod rootfs;
mod runtimeclass;
mod sidecar_hooks;
mod sleep_hooks;
pub(crate) mod stats;
mod subpath_expr;
mod termination;

pub use density::DENSITY;
pub use images::{
    COMPAT_LINUX_IMAGE, COMPAT_OTHER_BUILD, POLICY_ALWAYS, POLICY_IF_NOT_PRESENT, POLICY_NEVER_CACHED,
    POLICY_NEVER_UNCACHED, PULL_IMAGE, PULL_INVALID_REGISTRY, PULL_PRIVATE_NO_SECRET, PULL_PRIVATE_WITH_SECRET,
};
pub use lifecycle::{EXIT_CODES, GRACE_PERIOD, PRE_STOP};
pub use resources::{CPU_LIMITS, MEMORY_ALLOCATABLE, MEMORY_PAST_ALLOCATABLE};
pub use stats::{STATS_3_PODS, STATS_10_PODS, STATS_BOOT_ID, STATS_FIGURES};
pub(crate) use termination::run_as;

/// The cases of this area, in catalogue order.
pub fn cases() -> Vec<Case> {
    [
        stats::cases(),
        images::cases(),
        resources::cases(),
        density::cases(),
        lifecycle::cases(),
        containers::cases(),
        termination::cases(),
        init_containers::cases(),
        admission::cases(),
        sleep_hooks::cases(),
        sidecar_hooks::cases(),
        runtimeclass::cases(),
        rootfs::cases(),
        host_aliases::cases(),
        subpath_expr::cases(),
        etc_hosts::cases(),
        prestop::cases(),
        ephemeral::cases(),
        restart_rules::cases(),
    ]
    .concat()
}

/// Waits, at most `within`, until `cond` holds for pod `name`; returns the pod.
///
/// The waits of this module all want the pod itself afterwards and fail the same way when it
/// is gone; this is that wait.
async fn wait_pod(
    f: &Framework,
    name: &str,
    cond: impl Condition<Pod>,
    why: &str,
    within: Duration,
) -> Result<Pod, CaseError> {
    f.wait_for_within(&f.api::<Pod>(), name, cond, why, within)
        .await?
        .ok_or_else(|| CaseError::failed(format!("pod {name} vanished")))
}
