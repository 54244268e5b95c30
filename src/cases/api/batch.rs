//! `[sig-apps]` CronJob and Job API-operation cases (upstream test/e2e/apps/cronjob.go,
//! job.go): create, get, list (in the namespace and across namespaces), watch, patch and update
//! the object and its `/status`, and delete one by one and by collection.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job, JobCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::ops::{update_retrying, update_status_retrying};
use super::{delete_collection_and_check, find_in_all_namespaces, names_in_ns};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{JobOpts, conditions as wl, cron_job, job, job_spec, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};
use crate::{ensure, fail};

/// Upstream cronjob.go "should support CronJob API operations".
pub(crate) const CRONJOB_API: &str = "[sig-apps] CronJob should support CronJob API operations [Conformance]";
/// Upstream job.go "should apply changes to a job status".
pub(crate) const JOB_STATUS: &str = "[sig-apps] Job should apply changes to a job status [Conformance]";
/// Upstream job.go "should manage the lifecycle of a job".
pub(crate) const JOB_LIFECYCLE: &str = "[sig-apps] Job should manage the lifecycle of a job [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(CRONJOB_API, Kind::Adapted, cronjob_api),
        case!(JOB_STATUS, Kind::Adapted, job_status),
        case!(JOB_LIFECYCLE, Kind::Adapted, job_lifecycle),
    ]
}

/// A Job pod template whose container runs `script` in the target OS's shell.
fn shell_template(f: &Framework, script: &str) -> Result<k8s_openapi::api::core::v1::PodTemplateSpec, CaseError> {
    let pod = f
        .pod("c")
        .restart_policy("Never")
        .container(ContainerBuilder::new("c", "agnhost").command(f.target_os().shell(script)));
    Ok(template_of(pod.build(f)?))
}

/// A Job pod template that never ends (agnhost `pause`), upstream's "notTerminate".
fn forever_template(f: &Framework) -> Result<k8s_openapi::api::core::v1::PodTemplateSpec, CaseError> {
    let pod = f
        .pod("c")
        .restart_policy("Never")
        .container(ContainerBuilder::new("c", "agnhost").args(["pause"]));
    Ok(template_of(pod.build(f)?))
}

/// Now, to the second (upstream's `Rfc3339Copy`: the wire format drops fractions).
fn now_seconds() -> Time {
    Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now()))
}

/// Upstream cronjob.go: a CronJob is created, read, listed in its namespace and in all, patched
/// and updated (annotations a watch must see), its `/status` patched, updated and read; one
/// more is deleted (gone, or held by a finalizer) and the rest deleted by collection.
async fn cronjob_api(f: &Framework) -> CaseResult {
    let label = ("special-label", f.ns().to_string());
    let selector = format!("{}={}", label.0, label.1);
    let opts = JobOpts {
        completions: Some(1),
        parallelism: Some(1),
        backoff_limit: Some(1),
        ..Default::default()
    };
    let mut template = cron_job(
        "test-api",
        "* */1 * * ?",
        "Allow",
        job_spec(shell_template(f, "exit 0")?, opts),
    );
    template.labels_mut().insert(label.0.into(), label.1.clone());
    if let Some(s) = template.spec.as_mut() {
        s.successful_jobs_history_limit = Some(1);
        s.failed_jobs_history_limit = Some(0);
    }
    let api = f.api::<CronJob>();
    let created = f.create(&template).await?;
    let name = created.name_any();

    f.step("getting, listing");
    let got = api.get(&name).await?;
    ensure!(
        got.uid() == created.uid(),
        "CronJob {name} read back with uid {:?}, created with {:?}",
        got.uid(),
        created.uid()
    );
    let listed = names_in_ns::<CronJob>(f, &selector).await?;
    ensure!(
        listed == [name.clone()],
        "listing CronJobs with labels {selector}: expected [{name}], got {listed:?}"
    );
    find_in_all_namespaces::<CronJob>(f, &selector, f.ns(), &name).await?;

    f.step("patching and updating the annotations");
    let patched = api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"patched": "true"}}})),
        )
        .await?;
    expect_annotation(&patched, "patched", "the patch's answer")?;
    let updated = update_retrying(&api, &name, |cj: &mut CronJob| {
        cj.annotations_mut().insert("updated".into(), "true".into());
    })
    .await?;
    expect_annotation(&updated, "updated", "the update's answer")?;
    f.wait_for(
        &api,
        &name,
        |cj: Option<&CronJob>| {
            cj.is_some_and(|cj| {
                let a = cj.annotations();
                a.get("patched").is_some_and(|v| v == "true") && a.get("updated").is_some_and(|v| v == "true")
            })
        },
        "to be seen by a watch with annotations patched=true and updated=true",
    )
    .await?;

    cronjob_status_ops(f, &name, created.uid()).await?;
    cronjob_deletes(f, template, &selector).await
}

/// Fails unless `cj` carries annotation `key=true`.
fn expect_annotation(cj: &CronJob, key: &str, seen: &str) -> CaseResult {
    ensure!(
        cj.annotations().get(key).is_some_and(|v| v == "true"),
        "CronJob {} in {seen}: expected annotation {key}=true, got {:?}",
        cj.name_any(),
        cj.annotations()
    );
    Ok(())
}

/// The lastScheduleTime of a CronJob, if set.
fn last_schedule(cj: &CronJob) -> Option<Timestamp> {
    cj.status.as_ref()?.last_schedule_time.as_ref().map(|t| t.0)
}

/// The `/status` part of the CronJob API case: patch (with an annotation), update, read.
async fn cronjob_status_ops(f: &Framework, name: &str, uid: Option<String>) -> CaseResult {
    let api = f.api::<CronJob>();
    f.step("patching /status");
    let now1 = now_seconds();
    let patch = json!({"metadata": {"annotations": {"patchedstatus": "true"}}, "status": {"lastScheduleTime": now1}});
    let patched = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    ensure!(
        last_schedule(&patched) == Some(now1.0),
        "the patch of CronJob {name}'s /status answered lastScheduleTime {:?}, expected {}",
        last_schedule(&patched),
        now1.0
    );
    expect_annotation(&patched, "patchedstatus", "the /status patch's answer")?;

    f.step("updating /status");
    let now2 = Time(now1.0 + jiff::SignedDuration::from_secs(1));
    let updated = update_status_retrying(&api, name, |cj: &mut CronJob| {
        cj.status.get_or_insert_with(Default::default).last_schedule_time = Some(now2.clone());
    })
    .await?;
    ensure!(
        last_schedule(&updated) == Some(now2.0),
        "the update of CronJob {name}'s /status answered lastScheduleTime {:?}, expected {}",
        last_schedule(&updated),
        now2.0
    );

    f.step("getting /status");
    let read = api.get_status(name).await?;
    ensure!(
        read.uid() == uid,
        "CronJob {name} read through /status has uid {:?}, expected {uid:?}",
        read.uid()
    );
    Ok(())
}

/// Fails unless `cj`, still present after a DELETE, is held by a finalizer.
fn expect_finalizer(cj: &CronJob, step: &str) -> CaseResult {
    ensure!(
        cj.metadata.deletion_timestamp.is_some() && !cj.finalizers().is_empty(),
        "CronJob {} still exists after {step} without deletionTimestamp and finalizers (got {:?} and {:?})",
        cj.name_any(),
        cj.metadata.deletion_timestamp,
        cj.finalizers()
    );
    Ok(())
}

/// The delete part of the CronJob API case: one more CronJob is deleted by name, then the
/// labelled ones by collection.
async fn cronjob_deletes(f: &Framework, mut template: CronJob, selector: &str) -> CaseResult {
    let api = f.api::<CronJob>();
    template.metadata.name = Some("for-removal".into());
    f.create(&template).await?;
    f.step("deleting CronJob for-removal");
    api.delete("for-removal", &DeleteParams::default()).await?;
    if let Some(cj) = api.get_opt("for-removal").await? {
        expect_finalizer(&cj, "its DELETE")?;
    }

    f.step(format!("deleting the collection of CronJobs with labels {selector}"));
    api.delete_collection(&DeleteParams::default(), &ListParams::default().labels(selector))
        .await?;
    let left = api.list(&ListParams::default().labels(selector)).await?.items;
    ensure!(
        left.len() <= 2,
        "after the DELETE of the collection, {} CronJobs with labels {selector} remain: {:?}",
        left.len(),
        left.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
    );
    for cj in &left {
        expect_finalizer(cj, "the DELETE of the collection")?;
    }
    Ok(())
}

/// The condition of `type_` in a Job's status.
fn job_condition<'a>(j: &'a Job, type_: &str) -> Option<&'a JobCondition> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Upstream job.go: a running Job's `/status` is patched (a custom condition and an
/// annotation), updated (the condition's transition time) and read.
async fn job_status(f: &Framework) -> CaseResult {
    let name = "suspend-false-to-true";
    let opts = JobOpts {
        completions: Some(4),
        parallelism: Some(2),
        backoff_limit: Some(6),
        ..Default::default()
    };
    let created = f.create(&job(name, forever_template(f)?, opts)).await?;
    let api = f.api::<Job>();
    f.wait_for(&api, name, wl::job_active_at_least(2), "to have 2 active pods")
        .await?;

    f.step("patching /status");
    let now1 = now_seconds();
    let patch = json!({
        "metadata": {"annotations": {"patchedstatus": "true"}},
        "status": {"conditions": [{"type": "CustomConditionType", "status": "True", "lastTransitionTime": now1}]}
    });
    let patched = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let Some(cond) = job_condition(&patched, "CustomConditionType") else {
        fail!(
            "the patch of Job {name}'s /status answered conditions {:?}, without CustomConditionType",
            patched.status.as_ref().and_then(|s| s.conditions.as_ref())
        );
    };
    ensure!(
        cond.last_transition_time.as_ref().map(|t| t.0) == Some(now1.0),
        "Job {name}'s patched condition has lastTransitionTime {:?}, expected {}",
        cond.last_transition_time,
        now1.0
    );
    ensure!(
        patched.annotations().get("patchedstatus").is_some_and(|v| v == "true"),
        "the patch of Job {name}'s /status answered annotations {:?}, without patchedstatus=true",
        patched.annotations()
    );

    f.step("updating /status");
    let now2 = Time(now1.0 + jiff::SignedDuration::from_secs(1));
    let updated = update_status_retrying(&api, name, |j: &mut Job| {
        let conds = j.status.as_mut().and_then(|s| s.conditions.as_mut());
        if let Some(c) = conds.and_then(|cs| cs.iter_mut().find(|c| c.type_ == "CustomConditionType")) {
            c.last_transition_time = Some(now2.clone());
        }
    })
    .await?;
    let seen = job_condition(&updated, "CustomConditionType").and_then(|c| c.last_transition_time.as_ref());
    ensure!(
        seen.map(|t| t.0) == Some(now2.0),
        "the update of Job {name}'s /status answered CustomConditionType lastTransitionTime {seen:?}, expected {}",
        now2.0
    );

    f.step("getting /status");
    let read = api.get_status(name).await?;
    ensure!(
        read.uid() == created.uid(),
        "Job {name} read through /status has uid {:?}, expected {:?}",
        read.uid(),
        created.uid()
    );
    Ok(())
}

/// Upstream job.go: a suspended Job is patched (a label a watch must see), updated (resumed,
/// with an annotation a watch must see), listed across namespaces, runs to completion, and is
/// deleted by collection.
async fn job_lifecycle(f: &Framework) -> CaseResult {
    let name = "e2e-lifecycle";
    let selector = format!("e2e-job-label={name}");
    let opts = JobOpts {
        completions: Some(4),
        parallelism: Some(2),
        backoff_limit: Some(6),
        ..Default::default()
    };
    let mut j = job(name, shell_template(f, "exit 0")?, opts);
    j.labels_mut().insert("e2e-job-label".into(), name.into());
    if let Some(s) = j.spec.as_mut() {
        s.suspend = Some(true);
    }
    let created = f.create(&j).await?;
    let api = f.api::<Job>();

    f.step("patching the Job's labels");
    let patched = api
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {name: "patched"}}})),
        )
        .await?;
    ensure!(
        patched.resource_version() != created.resource_version(),
        "the patch of Job {name} kept resourceVersion {:?}",
        created.resource_version()
    );
    f.wait_for(
        &api,
        name,
        |j: Option<&Job>| j.is_some_and(|j| j.labels().get(name).is_some_and(|v| v == "patched")),
        "to be seen by a watch with label e2e-lifecycle=patched",
    )
    .await?;

    f.step("resuming the Job with an update that adds an annotation");
    update_retrying(&api, name, |j: &mut Job| {
        j.annotations_mut().insert("updated".into(), "true".into());
        if let Some(s) = j.spec.as_mut() {
            s.suspend = Some(false);
        }
    })
    .await?;
    f.wait_for(
        &api,
        name,
        |j: Option<&Job>| j.is_some_and(|j| j.annotations().get("updated").is_some_and(|v| v == "true")),
        "to be seen by a watch with annotation updated=true",
    )
    .await?;

    find_in_all_namespaces::<Job>(f, &selector, f.ns(), name).await?;
    let done = f
        .wait_for(&api, name, wl::job_has_condition("Complete"), "to complete")
        .await?
        .unwrap_or_default();
    let succeeded = done.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
    ensure!(
        succeeded == 4,
        "Job {name} completed with {succeeded} succeeded pods, expected 4"
    );
    delete_collection_and_check::<Job>(f, &selector, &[name.to_string()]).await
}
