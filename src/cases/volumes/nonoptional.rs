//! A non-optional Secret volume whose Secret, or one of whose `items` keys, does not exist
//! (upstream `common/storage/projected_secret.go`, the two `[Slow]` "Should fail non-optional
//! pod creation" cases, whose pods upstream builds with plain Secret volumes through
//! `secrets_volume.go`'s helpers): the kubelet refuses to set the volume up, reports
//! `FailedMount`, and the pod stays Pending.
//!
//! Departure from upstream: upstream watches the pod stay Pending for the whole pod start
//! timeout (5 minutes). Here the case waits for the positive evidence a real kubelet gives, a
//! `FailedMount` event naming the missing Secret or key, and then checks the pod stays Pending
//! for [`STAYS_PENDING_FOR`]. The container is agnhost `pause` rather than upstream's
//! `mounttest`, which never runs in either case.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};

use crate::case;
use crate::cases::config::mount_path;
use crate::catalog::{Case, Kind};
use crate::framework::services::describe_event;
use crate::framework::workloads::{secret, secret_volume};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(SECRET_MISSING, Kind::Adapted, secret_missing),
        case!(SECRET_KEY_MISSING, Kind::Adapted, secret_key_missing),
    ]
}

/// How long the kubelet may take to report the refused mount (upstream
/// `framework.PodStartShortTimeout`).
const REFUSED_WITHIN: Duration = Duration::from_secs(120);

/// How long the pod must then stay Pending (upstream: the 5-minute pod start timeout).
const STAYS_PENDING_FOR: Duration = Duration::from_secs(8);

/// Upstream's container and volume names.
const CONTAINER: &str = "creates-volume-test";
const VOLUME: &str = "creates-volume";

/// Upstream projected_secret.go "Should fail non-optional pod creation due to secret object
/// does not exist".
pub(crate) const SECRET_MISSING: &str = "[sig-storage] Projected secret Should fail non-optional pod creation due to secret object does not exist [Slow] [NodeConformance]";

async fn secret_missing(f: &Framework) -> CaseResult {
    let missing = "s-test-opt-create-missing";
    let refusal = format!("secret \"{missing}\" not found");
    expect_refused(
        f,
        "pod-secrets-missing",
        "projected-secret-volumes",
        missing,
        &[],
        &refusal,
    )
    .await
}

/// Upstream projected_secret.go "Should fail non-optional pod creation due to the key in the
/// secret object does not exist".
pub(crate) const SECRET_KEY_MISSING: &str = "[sig-storage] Projected secret Should fail non-optional pod creation due to the key in the secret object does not exist [Slow] [NodeConformance]";

async fn secret_key_missing(f: &Framework) -> CaseResult {
    let name = "s-test-opt-create-key";
    // Upstream `secretForTest`: three keys, none of them the `data_4` the volume asks for.
    f.create(&secret(
        name,
        &[("data-1", "value-1"), ("data-2", "value-2"), ("data-3", "value-3")],
    ))
    .await?;
    let refusal = "references non-existent secret key: data_4";
    // Upstream maps the key to the path "value-4\n"; the kubelet never gets to write it.
    expect_refused(
        f,
        "pod-secrets-key",
        "secret-volumes",
        name,
        &[("data_4", "value-4\n")],
        refusal,
    )
    .await
}

/// Creates pod `pod` mounting Secret `secret` (non-optional, with `items`) under `root`, waits
/// for a `FailedMount` event containing `refusal` (failing at once if the pod leaves Pending
/// first), then requires the pod to stay Pending.
async fn expect_refused(
    f: &Framework,
    pod: &str,
    root: &str,
    secret: &str,
    items: &[(&str, &str)],
    refusal: &str,
) -> CaseResult {
    let os = f.target_os();
    let mut volume = secret_volume(VOLUME, secret, items);
    if let Some(s) = volume.secret.as_mut() {
        s.optional = Some(false);
    }
    let at = os.join(&mount_path(f, root), "create");
    let builder = f.pod(pod).restart_policy("Never").volume(volume).container(
        ContainerBuilder::new(CONTAINER, "agnhost")
            .args(["pause"])
            .mount(VOLUME, &at, true),
    );
    f.create_pod(&builder).await?;

    let pods = f.api::<Pod>();
    let awaited = format!("FailedMount \"{refusal}\"");
    let refused = f.wait_pod_event(pod, &awaited, REFUSED_WITHIN, |e: &Event| {
        e.reason.as_deref() == Some("FailedMount") && e.message.as_deref().is_some_and(|m| m.contains(refusal))
    });
    let started = f.wait_for_within(
        &pods,
        pod,
        |p: Option<&Pod>| phase(p) != "Pending",
        "to leave phase Pending",
        REFUSED_WITHIN,
    );
    tokio::select! {
        event = refused => {
            let event = event?;
            f.step(format!("kubelet refused the mount: {}", describe_event(&event)));
        }
        seen = started => {
            let seen = seen?;
            return Err(CaseError::failed(format!(
                "pod {pod} on node {}: expected it to stay Pending with FailedMount \"{refusal}\" (non-optional Secret volume {VOLUME} of Secret {secret}), but it reached phase {}",
                seen.as_ref().map(pod_node).unwrap_or_default(),
                phase(seen.as_ref())
            )));
        }
    }
    f.consistently(
        &f.api::<Pod>(),
        pod,
        |p: &Pod| phase(Some(p)) == "Pending",
        &format!("Pending (its non-optional Secret volume cannot be set up: {refusal})"),
        STAYS_PENDING_FOR,
    )
    .await?;
    Ok(())
}

/// A pod's phase ("" when it has none yet, "absent" when it is gone).
fn phase(p: Option<&Pod>) -> String {
    match p {
        None => "absent".into(),
        Some(p) => p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".into()),
    }
}
