//! `[sig-node] Lease lease API should be available` (upstream test/e2e/common/node/lease.go):
//! a coordination.k8s.io Lease created, updated and patched with its spec read back unchanged,
//! a second one deleted by collection, the first deleted and gone.
//!
//! Only API calls, so one body serves both OSes.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp, civil};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::{delete_collection_and_check, names_in_ns};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::update::replace_retrying;
use crate::framework::{CaseError, CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream lease.go "lease API should be available".
pub(crate) const LEASE_API: &str = "[sig-node] Lease lease API should be available [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(LEASE_API, Kind::Adapted, lease_api)]
}

/// Go's zero `time.Time` (0001-01-01T00:00:00Z) plus `secs`, as upstream's lease times are.
fn zero_plus(secs: i64) -> Result<MicroTime, CaseError> {
    let zero = civil::date(1, 1, 1)
        .at(0, 0, 0, 0)
        .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
        .map_err(|e| CaseError::failed(format!("building the zero time: {e}")))?
        .timestamp();
    let t: Timestamp = zero
        .checked_add(SignedDuration::from_secs(secs))
        .map_err(|e| CaseError::failed(format!("adding {secs}s to the zero time: {e}")))?;
    Ok(MicroTime(t))
}

/// A lease spec held by `holder` for `duration` seconds, acquired and renewed `acquire` and
/// `renew` seconds after the zero time, after `transitions` changes of holder.
fn spec(holder: &str, duration: i32, acquire: i64, renew: i64, transitions: i32) -> Result<LeaseSpec, CaseError> {
    Ok(LeaseSpec {
        holder_identity: Some(holder.into()),
        lease_duration_seconds: Some(duration),
        acquire_time: Some(zero_plus(acquire)?),
        renew_time: Some(zero_plus(renew)?),
        lease_transitions: Some(transitions),
        ..Default::default()
    })
}

fn lease(name: &str, labels: &[(&str, &str)], spec: LeaseSpec) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        },
        spec: Some(spec),
    }
}

/// Reads lease `name` and checks its spec is `want`, after `step`.
async fn expect_spec(f: &Framework, name: &str, want: &LeaseSpec, step: &str) -> CaseResult {
    let read = f.api::<Lease>().get(name).await?;
    let got = read.spec.unwrap_or_default();
    ensure!(
        &got == want,
        "Lease {}/{name} read after the {step} has spec {got:?}, expected {want:?}",
        f.ns()
    );
    Ok(())
}

/// Upstream: create, read, update, read, patch, read (the spec as written each time); a second
/// labelled lease; two listed; the labelled one deleted by collection; the first deleted and
/// then not found; leases listed in all namespaces.
async fn lease_api(f: &Framework) -> CaseResult {
    let name = "lease";
    let created = spec("holder", 30, 2, 5, 0)?;
    f.create(&lease(name, &[], created.clone())).await?;
    expect_spec(f, name, &created, "create").await?;

    let updated = spec("holder2", 30, 20, 50, 1)?;
    f.step(format!("updating Lease {name}"));
    let to_write = updated.clone();
    replace_retrying(&f.api::<Lease>(), name, |l: &mut Lease| l.spec = Some(to_write.clone())).await?;
    expect_spec(f, name, &updated, "update").await?;

    let patched = spec("holder3", 60, 50, 70, 2)?;
    f.step(format!("patching Lease {name}"));
    let body = json!({"spec": serde_json::to_value(&patched).map_err(|e| CaseError::failed(e.to_string()))?});
    f.api::<Lease>()
        .patch(name, &PatchParams::default(), &Patch::Strategic(&body))
        .await?;
    expect_spec(f, name, &patched, "patch").await?;

    let second = "lease2";
    f.create(&lease(
        second,
        &[("deletecollection", "true")],
        spec("holder", 30, 2, 5, 0)?,
    ))
    .await?;
    let mut all = names_in_ns::<Lease>(f, "").await?;
    all.sort();
    ensure!(
        all == [name, second],
        "listing the Leases of {}: expected [{name}, {second}], got {all:?}",
        f.ns()
    );
    delete_collection_and_check::<Lease>(f, "deletecollection=true", &[second.to_string()]).await?;
    let left = names_in_ns::<Lease>(f, "").await?;
    ensure!(
        left == [name],
        "after deleting the collection, the Leases of {} are {left:?}, expected only {name}",
        f.ns()
    );

    f.step(format!("deleting Lease {name}"));
    f.api::<Lease>().delete(name, &DeleteParams::default()).await?;
    match f.api::<Lease>().get_opt(name).await? {
        None => {}
        Some(l) => fail!(
            "Lease {}/{name} can still be read after its deletion: {:?}",
            f.ns(),
            l.spec
        ),
    }
    f.step("listing Leases in all namespaces");
    f.api_all::<Lease>().list(&Default::default()).await?;
    Ok(())
}
