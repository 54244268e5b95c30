//! `[Feature:ContainerStopSignals]` on Windows (upstream test/e2e/windows/
//! container_stop_signals.go, DescribeTable "should validate stop signals for Windows pods"):
//! the API server accepts only SIGTERM and SIGKILL as a Windows container's
//! `lifecycle.stopSignal` (KEP-4960: hcsshim maps those two to a container stop) and refuses
//! any other with an Invalid error on `spec.containers[0].lifecycle.stopSignal`.
//!
//! The feature gate is alpha and off by default in 1.33; an API server with it off drops the
//! field on write, so the case skips naming the gate when the answer comes back without it
//! (upstream leaves that to the job's gate selection and would fail).

use k8s_openapi::api::core::v1::{Lifecycle, Pod};
use kube::api::PostParams;

use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder};
use crate::os::Os;
use crate::{ensure, fail};

const TABLE: &str = "[sig-windows] [Feature:Windows] [Feature:ContainerStopSignals] Container Stop Signals \
    [FeatureGate:ContainerStopSignals] [Alpha] [Feature:OffByDefault] should validate stop signals for Windows pods ";
/// Upstream Entry("accepts SIGTERM").
pub const ACCEPTS_SIGTERM: &str = "[sig-windows] [Feature:Windows] [Feature:ContainerStopSignals] Container Stop Signals [FeatureGate:ContainerStopSignals] [Alpha] [Feature:OffByDefault] should validate stop signals for Windows pods accepts SIGTERM";
/// Upstream Entry("accepts SIGKILL").
pub const ACCEPTS_SIGKILL: &str = "[sig-windows] [Feature:Windows] [Feature:ContainerStopSignals] Container Stop Signals [FeatureGate:ContainerStopSignals] [Alpha] [Feature:OffByDefault] should validate stop signals for Windows pods accepts SIGKILL";
/// Upstream Entry("rejects SIGQUIT").
pub const REJECTS_SIGQUIT: &str = "[sig-windows] [Feature:Windows] [Feature:ContainerStopSignals] Container Stop Signals [FeatureGate:ContainerStopSignals] [Alpha] [Feature:OffByDefault] should validate stop signals for Windows pods rejects SIGQUIT";
/// Upstream Entry("rejects SIGUSR1").
pub const REJECTS_SIGUSR1: &str = "[sig-windows] [Feature:Windows] [Feature:ContainerStopSignals] Container Stop Signals [FeatureGate:ContainerStopSignals] [Alpha] [Feature:OffByDefault] should validate stop signals for Windows pods rejects SIGUSR1";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    debug_assert!(
        [ACCEPTS_SIGTERM, ACCEPTS_SIGKILL, REJECTS_SIGQUIT, REJECTS_SIGUSR1]
            .iter()
            .all(|n| n.starts_with(TABLE))
    );
    vec![
        crate::case!(ACCEPTS_SIGTERM, Kind::WindowsSpecific, accepts_sigterm),
        crate::case!(ACCEPTS_SIGKILL, Kind::WindowsSpecific, accepts_sigkill),
        crate::case!(REJECTS_SIGQUIT, Kind::WindowsSpecific, rejects_sigquit),
        crate::case!(REJECTS_SIGUSR1, Kind::WindowsSpecific, rejects_sigusr1),
    ]
}

/// The field upstream expects the refusal to name.
const FIELD: &str = "spec.containers[0].lifecycle.stopSignal";

async fn accepts_sigterm(f: &Framework) -> CaseResult {
    validate(f, "SIGTERM", true).await
}

async fn accepts_sigkill(f: &Framework) -> CaseResult {
    validate(f, "SIGKILL", true).await
}

async fn rejects_sigquit(f: &Framework) -> CaseResult {
    validate(f, "SIGQUIT", false).await
}

async fn rejects_sigusr1(f: &Framework) -> CaseResult {
    validate(f, "SIGUSR1", false).await
}

/// The skip when the API server dropped the field: its ContainerStopSignals gate is off.
fn gate_off(f: &Framework, signal: &str) -> CaseError {
    f.skip(format!(
        "FeatureGate:ContainerStopSignals: the API server dropped lifecycle.stopSignal {signal} from a \
         dry-run Windows pod, so its ContainerStopSignals feature gate (alpha, off by default) is off; \
         turn it on (kube-apiserver --feature-gates ContainerStopSignals=true; the simulator: \
         --feature-gates ContainerStopSignals=true)"
    ))
}

/// Upstream's table body: a dry-run create of a Windows pause pod whose container stops with
/// `signal`; accepted ones come back with the signal kept, refused ones fail Invalid with a
/// cause on [`FIELD`].
async fn validate(f: &Framework, signal: &str, accepted: bool) -> CaseResult {
    f.skip_unless(
        f.target_os() == Os::Windows,
        "Container stop signals for Windows pods are checked on a Windows target",
    )?;
    let stop = signal.to_string();
    let pod = PodBuilder::new("windows-container-stop-signal", Os::Windows)
        .container(ContainerBuilder::new("test-container", "pause").with(move |c| {
            c.lifecycle = Some(Lifecycle {
                stop_signal: Some(stop.clone()),
                ..Default::default()
            });
        }))
        .build(f)?;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    f.step(format!("dry-run create of a Windows pod with stop signal {signal}"));
    match f.api::<Pod>().create(&dry_run, &pod).await {
        Ok(created) => {
            let kept = created
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.lifecycle.as_ref())
                .and_then(|l| l.stop_signal.clone());
            let Some(kept) = kept else {
                return Err(gate_off(f, signal));
            };
            ensure!(
                accepted,
                "the API server accepted a Windows pod with stop signal {signal}; expected an Invalid error on \
                 {FIELD} (Windows supports only SIGKILL and SIGTERM)"
            );
            ensure!(
                kept == signal,
                "the API server accepted the Windows pod with stop signal {signal} but answered with {FIELD} = {kept:?}"
            );
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 422 => {
            let causes: Vec<String> = status
                .details
                .as_ref()
                .map(|d| d.causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect())
                .unwrap_or_default();
            if accepted {
                fail!(
                    "the API server refused a Windows pod with stop signal {signal}, which Windows supports: {} ({})",
                    status.message,
                    causes.join("; ")
                );
            }
            ensure!(
                status.reason == "Invalid",
                "refusing stop signal {signal}: reason {:?}, expected Invalid ({})",
                status.reason,
                status.message
            );
            ensure!(
                causes.iter().any(|c| c.starts_with(&format!("{FIELD}: "))),
                "the API server refused stop signal {signal} but no cause names {FIELD}; causes: {causes:?}"
            );
            Ok(())
        }
        Err(e) => Err(CaseError::from(e).context(format!("dry-run create of a Windows pod with stop signal {signal}"))),
    }
}
