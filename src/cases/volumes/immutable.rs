//! Immutable Secrets (upstream `test/e2e/common/storage/secrets_volume.go`): once
//! `immutable: true`, the API server refuses data changes and un-marking, while metadata still
//! changes and the Secret can be deleted.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::workloads::secret;
use crate::framework::{CaseError, CaseResult, Framework};
use crate::{ensure, fail};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(SECRET_IMMUTABLE, Kind::Adapted, secret_immutable)]
}

/// Upstream secrets_volume.go "should be immutable if `immutable` field is set".
pub(crate) const SECRET_IMMUTABLE: &str =
    "[sig-storage] Secrets should be immutable if `immutable` field is set [Conformance]";

fn b64(value: &str) -> Result<serde_json::Value, CaseError> {
    serde_json::to_value(ByteString(value.as_bytes().to_vec()))
        .map_err(|e| CaseError::failed(format!("encoding {value:?}: {e}")))
}

/// Upstream's steps: add data-4 (accepted), mark immutable (accepted), add data-5 and clear
/// `immutable` (both 422 Invalid), add a label (accepted, data unchanged), delete (accepted).
async fn secret_immutable(f: &Framework) -> CaseResult {
    let name = "immutable";
    f.create(&secret(
        name,
        &[("data-1", "value-1"), ("data-2", "value-2"), ("data-3", "value-3")],
    ))
    .await?;
    let api = f.api::<Secret>();
    let pp = PatchParams::default();
    api.patch(
        name,
        &pp,
        &Patch::Merge(&serde_json::json!({"data": {"data-4": b64("value-4")?}})),
    )
    .await?;
    api.patch(name, &pp, &Patch::Merge(&serde_json::json!({"immutable": true})))
        .await?;
    for (what, patch) in [
        (
            "changing data",
            serde_json::json!({"data": {"data-5": b64("value-5")?}}),
        ),
        ("clearing immutable", serde_json::json!({"immutable": false})),
    ] {
        match api.patch(name, &pp, &Patch::Merge(&patch)).await {
            Err(kube::Error::Api(s)) if s.code == 422 => {}
            Err(e) => fail!("{what} of an immutable Secret: expected 422 Invalid, got {e}"),
            Ok(_) => fail!("{what} of immutable Secret `{name}` was accepted; expected 422 Invalid"),
        }
    }
    let labelled = api
        .patch(
            name,
            &pp,
            &Patch::Merge(&serde_json::json!({"metadata": {"labels": {"label1": "value1"}}})),
        )
        .await?;
    let data = labelled.data.unwrap_or_default();
    let keys: Vec<&String> = data.keys().collect();
    ensure!(
        labelled.immutable == Some(true) && keys == ["data-1", "data-2", "data-3", "data-4"],
        "immutable Secret `{name}` changed: immutable={:?}, keys {keys:?} (expected data-1..data-4)",
        labelled.immutable
    );
    api.delete(name, &DeleteParams::default()).await?;
    Ok(())
}
