//! `[sig-api-machinery] ResourceQuota` API cases of upstream
//! test/e2e/apimachinery/resource_quota.go: the lifecycle of a quota object (created, listed
//! across namespaces, patched, deleted by collection) and writes to its `status` subresource,
//! which the quota controller sets back from the spec.
//!
//! Only API calls, so one body serves both OSes.

use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::case;
use crate::cases::policy::quota;
use crate::catalog::{Case, Kind};
use crate::framework::watch_events::{EventType, Resume};
use crate::framework::{CaseError, CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream "should manage the lifecycle of a ResourceQuota".
pub(crate) const LIFECYCLE: &str =
    "[sig-api-machinery] ResourceQuota should manage the lifecycle of a ResourceQuota [Conformance]";
/// Upstream "should apply changes to a resourcequota status".
pub(crate) const STATUS: &str =
    "[sig-api-machinery] ResourceQuota should apply changes to a resourcequota status [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(LIFECYCLE, Kind::Adapted, lifecycle),
        case!(STATUS, Kind::Adapted, status),
    ]
}

/// `hard[resource]` of the spec (`spec`) or status (`status`) of a quota, as text.
fn hard(q: &ResourceQuota, part: &str, resource: &str) -> Option<String> {
    let map = match part {
        "spec" => q.spec.as_ref().and_then(|s| s.hard.as_ref()),
        _ => q.status.as_ref().and_then(|s| s.hard.as_ref()),
    };
    map.and_then(|m| m.get(resource)).map(|v| v.0.clone())
}

/// Checks that `part.hard` of `q` holds `cpu` and `memory`, after `step`.
fn expect_hard(q: &ResourceQuota, part: &str, cpu: &str, memory: &str, step: &str) -> CaseResult {
    let (c, m) = (hard(q, part, "cpu"), hard(q, part, "memory"));
    ensure!(
        c.as_deref() == Some(cpu) && m.as_deref() == Some(memory),
        "ResourceQuota {} {step}: {part}.hard has cpu={c:?} memory={m:?}, expected cpu={cpu} memory={memory}",
        q.name_any()
    );
    Ok(())
}

/// A labelled quota of `cpu` and `memory`.
fn labelled_quota(name: &str, cpu: &str, memory: &str) -> ResourceQuota {
    let mut q = quota(name, &[("cpu", cpu), ("memory", memory)], &[]);
    q.labels_mut().insert("e2e-rq-label".into(), name.into());
    q
}

/// Upstream: create a labelled quota of 1 CPU / 500Mi, read it, find it listing all namespaces
/// by its label, patch a label and 750Mi in, delete it by collection, and find it gone.
async fn lifecycle(f: &Framework) -> CaseResult {
    let name = "e2e-quota-lifecycle";
    let selector = format!("e2e-rq-label={name}");
    f.create(&labelled_quota(name, "1", "500Mi")).await?;
    let api = f.api::<ResourceQuota>();
    expect_hard(&api.get(name).await?, "spec", "1", "500Mi", "as created")?;

    f.step(format!(
        "listing ResourceQuotas in all namespaces with labels {selector}"
    ));
    let listed = f
        .api_all::<ResourceQuota>()
        .list(&ListParams::default().labels(&selector))
        .await?;
    let found: Vec<String> = listed
        .items
        .iter()
        .filter(|q| q.namespace().as_deref() == Some(f.ns()))
        .map(ResourceExt::name_any)
        .collect();
    ensure!(
        found == [name],
        "listing ResourceQuotas with labels {selector} found {found:?} in {}, expected [{name}]",
        f.ns()
    );

    f.step(format!("patching ResourceQuota {name}"));
    let body = json!({"metadata": {"labels": {name: "patched"}}, "spec": {"hard": {"memory": "750Mi"}}});
    let patched = api
        .patch(name, &PatchParams::default(), &Patch::Strategic(&body))
        .await?;
    let label = patched.labels().get(name).cloned();
    ensure!(
        label.as_deref() == Some("patched"),
        "ResourceQuota {name} after the patch has label {name}={label:?}, expected \"patched\""
    );
    expect_hard(&patched, "spec", "1", "750Mi", "after the patch")?;

    f.step(format!(
        "deleting the collection of ResourceQuotas with labels {selector}"
    ));
    api.delete_collection(&DeleteParams::default(), &ListParams::default().labels(&selector))
        .await?;
    if let Some(q) = api.get_opt(name).await? {
        fail!(
            "ResourceQuota {name} can still be read after the DELETE of its collection (labels {:?})",
            q.labels()
        );
    }
    Ok(())
}

/// Writes `status.hard` of quota `name` with a PUT of the status subresource, retried on
/// conflict (the quota controller writes the status too).
async fn update_status_hard(
    api: &Api<ResourceQuota>,
    name: &str,
    cpu: &str,
    memory: &str,
) -> Result<ResourceQuota, CaseError> {
    let mut attempt = 1;
    loop {
        let mut q = api.get_status(name).await?;
        let status = q.status.get_or_insert_with(Default::default);
        status.hard = Some(crate::cases::policy::quantities(&[("cpu", cpu), ("memory", memory)]));
        match api.replace_status(name, &PostParams::default(), &q).await {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 5 => attempt += 1,
            other => return Ok(other?),
        }
    }
}

/// Upstream: a quota's `status.hard` written through `/status` (a PUT, then patches) is
/// delivered to a watch and read back from `/status`; patching `/status` leaves the spec alone,
/// and the quota controller sets `status.hard` back to the spec's.
async fn status(f: &Framework) -> CaseResult {
    let name = "e2e-rq-status";
    let selector = format!("e2e-rq-label={name}");
    let api = f.api::<ResourceQuota>();
    let mut watch = f.watch_events(&api, &selector, None, Resume::Relist).await?;
    f.create(&labelled_quota(name, "500m", "500Mi")).await?;
    expect_hard(&api.get(name).await?, "spec", "500m", "500Mi", "as created")?;

    f.step(format!("updating the /status of ResourceQuota {name}"));
    update_status_hard(&api, name, "500m", "500Mi").await?;
    let status_is = |cpu: &'static str, memory: &'static str| {
        move |q: &ResourceQuota| {
            hard(q, "status", "cpu").as_deref() == Some(cpu) && hard(q, "status", "memory").as_deref() == Some(memory)
        }
    };
    let within = crate::framework::POD_START_TIMEOUT.min(f.remaining());
    watch
        .expect(
            EventType::Modified,
            "status.hard cpu=500m memory=500Mi",
            status_is("500m", "500Mi"),
            within,
        )
        .await?;

    f.step(format!("patching the spec of ResourceQuota {name} to cpu=1 memory=1Gi"));
    let spec = json!({"spec": {"hard": {"cpu": "1", "memory": "1Gi"}}});
    let patched = api
        .patch(name, &PatchParams::default(), &Patch::Strategic(&spec))
        .await?;
    expect_hard(&patched, "spec", "1", "1Gi", "after the spec patch")?;

    f.step(format!(
        "patching the /status of ResourceQuota {name} to cpu=1 memory=1Gi"
    ));
    let to_status = |cpu: &str, memory: &str| json!({"status": {"hard": {"cpu": cpu, "memory": memory}}});
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&to_status("1", "1Gi")))
        .await?;
    watch
        .expect(
            EventType::Modified,
            "status.hard cpu=1 memory=1Gi",
            status_is("1", "1Gi"),
            within,
        )
        .await?;
    expect_hard(&api.get_status(name).await?, "status", "1", "1Gi", "read from /status")?;

    f.step(format!(
        "patching the /status of ResourceQuota {name} to cpu=2 memory=2Gi"
    ));
    let repatched = api
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&to_status("2", "2Gi")))
        .await?;
    expect_hard(&repatched, "status", "2", "2Gi", "in the answer to the /status patch")?;
    expect_hard(&repatched, "spec", "1", "1Gi", "after the /status patch")?;
    watch
        .expect(
            EventType::Modified,
            "status.hard cpu=2 memory=2Gi",
            status_is("2", "2Gi"),
            within,
        )
        .await?;

    f.step("waiting for the quota controller to set status.hard back to the spec");
    f.wait_for(
        &api,
        name,
        |q: Option<&ResourceQuota>| {
            q.is_some_and(|q| {
                hard(q, "status", "cpu") == hard(q, "spec", "cpu")
                    && hard(q, "status", "cpu").as_deref() == Some("1")
                    && hard(q, "status", "memory").as_deref() == Some("1Gi")
            })
        },
        "to have status.hard set back to its spec (cpu=1 memory=1Gi) by the quota controller",
    )
    .await?;
    Ok(())
}
