//! Job and CronJob cases.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};
use kube::runtime::wait::conditions::is_deleted;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::workloads::{JobOpts, conditions as wl, cron_job, empty_dir_volume, job, job_spec, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};

pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(JOB_COMPLETES, Kind::Adapted, job_completes),
        case!(JOB_LOCAL_RESTARTS, Kind::Adapted, job_local_restarts),
        case!(JOB_BACKOFF, Kind::Adapted, job_backoff),
        case!(JOB_DELETE, Kind::Adapted, job_delete),
        case!(JOB_INDEXED_HOSTNAME, Kind::Adapted, job_indexed_hostname),
        case!(CRON_CONCURRENT, Kind::Adapted, cron_concurrent).with_timeout(Duration::from_secs(8 * 60)),
        case!(CRON_REPLACE, Kind::Adapted, cron_replace).with_timeout(Duration::from_secs(8 * 60)),
        case!(CRON_FORBID, Kind::Adapted, cron_forbid),
        case!(CRON_SUSPENDED, Kind::Adapted, cron_suspended),
    ]
}

/// A job pod template running `script` in the OS's shell.
fn shell_template(
    f: &Framework,
    name: &str,
    script: &str,
) -> Result<k8s_openapi::api::core::v1::PodTemplateSpec, CaseError> {
    let pod = f
        .pod(name)
        .container(ContainerBuilder::new("c", "agnhost").command(f.target_os().shell(script)));
    Ok(template_of(pod.build(f)?))
}

/// A job pod template that never finishes (agnhost `pause`).
fn forever_template(f: &Framework, name: &str) -> Result<k8s_openapi::api::core::v1::PodTemplateSpec, CaseError> {
    let pod = f
        .pod(name)
        .container(ContainerBuilder::new("c", "agnhost").args(["pause"]));
    Ok(template_of(pod.build(f)?))
}

/// The pods of Job `name` (selected by the `job-name` label the controller sets).
async fn job_pods(f: &Framework, name: &str) -> Result<Vec<Pod>, CaseError> {
    Ok(f.api::<Pod>()
        .list(&ListParams::default().labels(&format!("job-name={name}")))
        .await?
        .items)
}

/// `name=Phase` for each pod, for failure messages that show what was counted.
fn phases(pods: &[Pod]) -> String {
    let list: Vec<String> = pods
        .iter()
        .map(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("<none>");
            let deleting = if p.metadata.deletion_timestamp.is_some() {
                " (deleting)"
            } else {
                ""
            };
            format!("{}={phase}{deleting}", p.metadata.name.as_deref().unwrap_or("?"))
        })
        .collect();
    list.join(", ")
}

fn count_phase(pods: &[Pod], phase: &str) -> usize {
    pods.iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(phase))
        .count()
}

/// The `(reason, message)` of the Job's true condition of `type_`, if it has one.
fn job_condition(job: &Job, type_: &str) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// Whether the Job has finished, either way (Complete or Failed).
fn job_finished(j: Option<&Job>) -> bool {
    j.is_some_and(|j| job_condition(j, "Complete").is_some() || job_condition(j, "Failed").is_some())
}

/// Waits for Job `name` to finish and fails, naming the reason, unless it completed.
async fn wait_job_complete(f: &Framework, name: &str) -> Result<Job, CaseError> {
    let done = f
        .wait_for(&f.api::<Job>(), name, job_finished, "to finish (Complete or Failed)")
        .await?
        .unwrap_or_default();
    if let Some((reason, message)) = job_condition(&done, "Failed") {
        crate::fail!(
            "job {name} failed ({reason}: {message}) instead of completing; status {}",
            crate::framework::wait::summarize(&serde_json::to_value(&done).unwrap_or_default())
        );
    }
    Ok(done)
}

// --- Job -------------------------------------------------------------------------------------

/// Upstream apps/job.go "should run a job to completion when tasks succeed".
pub(crate) const JOB_COMPLETES: &str = "[sig-apps] Job should run a job to completion when tasks succeed";

/// Upstream job.go: parallelism 2, completions 4, every task exits 0; the Job completes with
/// exactly 4 succeeded pods.
async fn job_completes(f: &Framework) -> CaseResult {
    let opts = JobOpts {
        completions: Some(4),
        parallelism: Some(2),
        ..Default::default()
    };
    f.create(&job("all-succeed", shell_template(f, "all-succeed", "exit 0")?, opts))
        .await?;
    let done = wait_job_complete(f, "all-succeed").await?;
    let succeeded = done.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
    ensure!(
        succeeded == 4,
        "job all-succeed reports {succeeded} succeeded pods, expected 4"
    );
    let pods = job_pods(f, "all-succeed").await?;
    ensure!(
        count_phase(&pods, "Succeeded") == 4,
        "job all-succeed has {} Succeeded pods, expected 4: {}",
        count_phase(&pods, "Succeeded"),
        phases(&pods)
    );
    Ok(())
}

/// Upstream apps/job.go "should run a job to completion when tasks sometimes fail and are
/// locally restarted".
pub(crate) const JOB_LOCAL_RESTARTS: &str =
    "[sig-apps] Job should run a job to completion when tasks sometimes fail and are locally restarted [Conformance]";

/// Upstream job.go: each task fails on its first run and succeeds when the kubelet restarts it
/// in place (restartPolicy OnFailure); a marker file in an emptyDir, which survives container
/// restarts, tells the two runs apart. The Job must complete.
async fn job_local_restarts(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let dir = os.join(os.volume_root(), "data");
    let marker = os.join(&dir, "marker");
    // `cat && exit 0 || write && exit 1` reads the same in sh and cmd (both chain `&&` and `||`
    // left to right) and needs no subshell or sequence operator, whose syntax differs.
    let script = format!(
        "{} && exit 0 || {} && exit 1",
        os.cat(&marker),
        os.write_file(&marker, "ran")
    );
    let pod = f
        .pod("fail-once-local")
        .restart_policy("OnFailure")
        .volume(empty_dir_volume("data"))
        .container(
            ContainerBuilder::new("c", "agnhost")
                .command(os.shell(&script))
                .mount("data", &dir, false),
        );
    let opts = JobOpts {
        completions: Some(4),
        parallelism: Some(2),
        ..Default::default()
    };
    f.create(&job("fail-once-local", template_of(pod.build(f)?), opts))
        .await?;
    wait_job_complete(f, "fail-once-local").await?;
    let pods = job_pods(f, "fail-once-local").await?;
    let restarts: i32 = pods.iter().map(crate::framework::workloads::restart_count).sum();
    f.property("restarts", restarts);
    ensure!(
        restarts >= 4,
        "job fail-once-local completed with {restarts} local restarts, expected every task to fail once (>= 4)"
    );
    Ok(())
}

/// Upstream apps/job.go "should fail to exceed backoffLimit".
pub(crate) const JOB_BACKOFF: &str = "[sig-apps] Job should fail to exceed backoffLimit";

/// Upstream job.go: with backoffLimit 1 and tasks that always fail (restartPolicy Never), the
/// Job fails with reason BackoffLimitExceeded after exactly 2 failed pods.
async fn job_backoff(f: &Framework) -> CaseResult {
    let mut template = shell_template(f, "backofflimit", "exit 1")?;
    if let Some(spec) = template.spec.as_mut() {
        spec.restart_policy = Some("Never".into());
    }
    f.create(&job(
        "backofflimit",
        template,
        JobOpts {
            backoff_limit: Some(1),
            ..Default::default()
        },
    ))
    .await?;
    // Stop at the Job's end, or as soon as it has failed more pods than the limit allows (a
    // controller that ignores backoffLimit would keep it running forever).
    let over_limit = |j: Option<&Job>| j.and_then(|j| j.status.as_ref()).and_then(|s| s.failed).unwrap_or(0) > 2;
    let failed = f
        .wait_for(
            &f.api::<Job>(),
            "backofflimit",
            |j: Option<&Job>| job_finished(j) || over_limit(j),
            "to fail (BackoffLimitExceeded after 2 failed pods)",
        )
        .await?
        .unwrap_or_default();
    let summary = crate::framework::wait::summarize(&serde_json::to_value(&failed).unwrap_or_default());
    ensure!(
        job_condition(&failed, "Complete").is_none(),
        "job backofflimit completed although every task exits 1: status {summary}"
    );
    let Some((reason, _)) = job_condition(&failed, "Failed") else {
        crate::fail!("job backofflimit is still running with more failed pods than backoffLimit 1 allows: {summary}");
    };
    ensure!(
        reason == "BackoffLimitExceeded",
        "job backofflimit failed with reason {reason:?}, expected BackoffLimitExceeded"
    );
    let pods = job_pods(f, "backofflimit").await?;
    ensure!(
        count_phase(&pods, "Failed") == 2,
        "job backofflimit left {} Failed pods, expected backoffLimit+1 = 2: {}",
        count_phase(&pods, "Failed"),
        phases(&pods)
    );
    Ok(())
}

/// How long a deleted Job and its pods may take to go: upstream's pod deletion budget
/// (`framework.PodDeleteTimeout`, covering a Windows container's graceful stop) plus a margin.
const JOB_GONE_TIMEOUT: Duration = Duration::from_secs(90);

/// Upstream apps/job.go "should delete a job".
pub(crate) const JOB_DELETE: &str = "[sig-apps] Job should delete a job [Conformance]";

/// Upstream job.go: a Job with parallelism 2 has 2 active pods; deleting it removes the Job and
/// its pods.
async fn job_delete(f: &Framework) -> CaseResult {
    let opts = JobOpts {
        parallelism: Some(2),
        completions: Some(2),
        ..Default::default()
    };
    let created = f.create(&job("foo", forever_template(f, "foo")?, opts)).await?;
    f.wait_for(
        &f.api::<Job>(),
        "foo",
        wl::job_active_at_least(2),
        "to have 2 active pods",
    )
    .await?;
    let running = job_pods(f, "foo").await?;
    ensure!(
        running.len() == 2,
        "job foo has {} pods, expected 2 (its parallelism)",
        running.len()
    );
    f.step("deleting job foo");
    f.api::<Job>().delete("foo", &DeleteParams::foreground()).await?;
    // Foreground deletion: the garbage collector deletes the pods, then the Job.
    f.wait_for_within(
        &f.api::<Job>(),
        "foo",
        is_deleted(&created.uid().unwrap_or_default()),
        "to be deleted with its pods (foreground deletion by the garbage collector)",
        JOB_GONE_TIMEOUT,
    )
    .await?;
    f.wait_list(
        &f.api::<Pod>(),
        "job-name=foo",
        |p: &[Pod]| p.is_empty(),
        "the job's pods to be gone",
    )
    .await?;
    Ok(())
}

/// Upstream apps/job.go "should create pods for an Indexed job with completion indexes and
/// specified hostname".
pub(crate) const JOB_INDEXED_HOSTNAME: &str = "[sig-apps] Job should create pods for an Indexed job with completion \
     indexes and specified hostname [Conformance]";

/// Upstream job.go: an Indexed Job of 4 completions (parallelism 2) completes; its succeeded pods
/// carry completion indexes 0 to 3 and each is named `<job>-<index>` as host.
async fn job_indexed_hostname(f: &Framework) -> CaseResult {
    let name = "indexed-job";
    let opts = JobOpts {
        completions: Some(4),
        parallelism: Some(2),
        backoff_limit: Some(6),
        ..Default::default()
    };
    let mut indexed = job(name, shell_template(f, name, "exit 0")?, opts);
    if let Some(s) = indexed.spec.as_mut() {
        s.completion_mode = Some("Indexed".into());
    }
    f.create(&indexed).await?;
    wait_job_complete(f, name).await?;
    let mut indexes = BTreeSet::new();
    for pod in job_pods(f, name).await? {
        if pod.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Succeeded") {
            continue;
        }
        let index = pod
            .annotations()
            .get("batch.kubernetes.io/job-completion-index")
            .cloned();
        let Some(i) = index.as_deref().and_then(|i| i.parse::<i32>().ok()) else {
            crate::fail!(
                "succeeded pod {} has completion index annotation {index:?}",
                pod.name_any()
            );
        };
        let want = format!("{name}-{i}");
        let host = pod.spec.as_ref().and_then(|s| s.hostname.clone());
        ensure!(
            host.as_deref() == Some(want.as_str()),
            "succeeded pod {} of index {i}: expected hostname {want}, got {host:?}",
            pod.name_any()
        );
        indexes.insert(i);
    }
    ensure!(
        indexes == BTreeSet::from([0, 1, 2, 3]),
        "Indexed Job {name}: expected completed indexes [0, 1, 2, 3], got {indexes:?}"
    );
    Ok(())
}

// --- CronJob ---------------------------------------------------------------------------------

/// Upstream cronjob.go schedules every minute.
const EVERY_MINUTE: &str = "*/1 * * * ?";

/// The names of the Jobs a CronJob lists as active.
fn active_jobs(cj: &CronJob) -> BTreeSet<String> {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .map(|a| a.iter().filter_map(|r| r.name.clone()).collect())
        .unwrap_or_default()
}

async fn create_cron(f: &Framework, name: &str, concurrency: &str, suspend: bool) -> CaseResult {
    let spec = job_spec(forever_template(f, name)?, JobOpts::default());
    let mut cj = cron_job(name, EVERY_MINUTE, concurrency, spec);
    if let Some(s) = cj.spec.as_mut() {
        s.suspend = Some(suspend);
    }
    f.create(&cj).await.map(|_| ())
}

/// How long a CronJob scheduled every minute may take to start its next Job: one schedule
/// period plus the controller's reaction. Every CronJob wait is bounded by it, so a controller
/// that never starts the expected run fails the case with the wait's name instead of eating the
/// case's whole budget; on a cluster whose clock runs faster (`--time-scale`) runs come sooner.
const OVER_A_PERIOD: Duration = Duration::from_secs(75);

/// Waits at most [`OVER_A_PERIOD`] until the set of Jobs CronJob `name` lists as active
/// satisfies `done`; returns the CronJob then.
async fn wait_active(
    f: &Framework,
    name: &str,
    done: impl Fn(&BTreeSet<String>) -> bool,
    why: &str,
) -> Result<CronJob, CaseError> {
    f.wait_for_within(
        &f.api::<CronJob>(),
        name,
        move |c: Option<&CronJob>| c.is_some_and(|c| done(&active_jobs(c))),
        why,
        OVER_A_PERIOD,
    )
    .await?
    .ok_or_else(|| CaseError::failed(format!("CronJob {name} vanished")))
}

/// The Jobs CronJob `name` created (those it controls), by name.
async fn owned_jobs(f: &Framework, name: &str) -> Result<BTreeSet<String>, CaseError> {
    let jobs = f.api::<Job>().list(&ListParams::default()).await?;
    Ok(jobs
        .items
        .iter()
        .filter(|j| j.owner_references().iter().any(|o| o.name == name))
        .map(ResourceExt::name_any)
        .collect())
}

/// Resolves once CronJob `name` has an event with `reason` (polled once a second: a rate
/// limit on the list, not a fixed sleep); never resolves otherwise.
async fn cron_event(f: &Framework, name: &str, reason: &str) {
    let events = f.api::<Event>();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let Ok(list) = events.list(&ListParams::default()).await else {
            continue;
        };
        if list.items.iter().any(|e| {
            e.involved_object.kind.as_deref() == Some("CronJob")
                && e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some(reason)
        }) {
            return;
        }
    }
}

/// Upstream apps/cronjob.go "should schedule multiple jobs concurrently".
pub(crate) const CRON_CONCURRENT: &str = "[sig-apps] CronJob should schedule multiple jobs concurrently [Conformance]";

/// Upstream cronjob.go: with AllowConcurrent and jobs that never end, at least two Jobs are
/// active at once, each with a running pod.
async fn cron_concurrent(f: &Framework) -> CaseResult {
    create_cron(f, "concurrent", "Allow", false).await?;
    wait_active(f, "concurrent", |a| !a.is_empty(), "to start its first job").await?;
    let cj = wait_active(
        f,
        "concurrent",
        |a| a.len() >= 2,
        "to start a second job while the first runs (concurrencyPolicy Allow)",
    )
    .await?;
    for name in active_jobs(&cj) {
        f.wait_for(
            &f.api::<Job>(),
            &name,
            wl::job_active_at_least(1),
            "to have an active pod",
        )
        .await?;
    }
    Ok(())
}

/// Upstream apps/cronjob.go "should replace jobs when ReplaceConcurrent".
pub(crate) const CRON_REPLACE: &str = "[sig-apps] CronJob should replace jobs when ReplaceConcurrent [Conformance]";

/// Upstream cronjob.go: with Replace, when the next run is due the running Job is deleted and a
/// new one takes its place; there is never more than one active Job.
async fn cron_replace(f: &Framework) -> CaseResult {
    create_cron(f, "replace", "Replace", false).await?;
    let first = wait_active(f, "replace", |a| a.len() == 1, "to start its first job").await?;
    let first = active_jobs(&first);
    let first_job = first.iter().next().cloned().unwrap_or_default();
    let next = wait_active(
        f,
        "replace",
        |a| !a.is_empty() && *a != first,
        &format!("to start its next run in place of job {first_job}"),
    )
    .await?;
    let active = active_jobs(&next);
    ensure!(
        active.len() == 1 && !active.contains(&first_job),
        "CronJob replace (concurrencyPolicy Replace) ran {active:?} at once: job {first_job} was not replaced"
    );
    let old = f.api::<Job>().get_opt(&first_job).await?;
    ensure!(
        old.is_none() || old.as_ref().is_some_and(|j| j.metadata.deletion_timestamp.is_some()),
        "replaced job {first_job} still exists and is not being deleted"
    );
    Ok(())
}

/// Upstream apps/cronjob.go "should not schedule new jobs when ForbidConcurrent".
pub(crate) const CRON_FORBID: &str =
    "[sig-apps] CronJob should not schedule new jobs when ForbidConcurrent [Slow] [Conformance]";

/// Upstream cronjob.go: with Forbid and a Job that never ends, the CronJob keeps exactly that
/// one Job active through the next due time. Upstream watches for five minutes; here the watch
/// ends once the controller reports that it held the next run back (the `JobAlreadyActive`
/// event upstream's controller records), or after a schedule period on a cluster that does not
/// record it.
async fn cron_forbid(f: &Framework) -> CaseResult {
    create_cron(f, "forbid", "Forbid", false).await?;
    let api = f.api::<CronJob>();
    let first = wait_active(f, "forbid", |a| a.len() == 1, "to start its first job").await?;
    let only = active_jobs(&first);
    f.step(format!(
        "watching CronJob forbid through its next scheduled time with {only:?} still running"
    ));
    let started = std::time::Instant::now();
    let why = format!("running only {only:?} (concurrencyPolicy Forbid)");
    let watch = f.consistently(
        &api,
        "forbid",
        |c: &CronJob| active_jobs(c) == only,
        &why,
        OVER_A_PERIOD,
    );
    let held_back = tokio::select! {
        r = watch => { r?; false }
        () = cron_event(f, "forbid", "JobAlreadyActive") => true,
    };
    if held_back {
        f.step("the controller held the next run back (JobAlreadyActive)");
    } else {
        ensure!(
            started.elapsed() + Duration::from_secs(1) >= OVER_A_PERIOD,
            "the case budget ran out {:.0?} into watching CronJob forbid, before its next run was due \
             (the watch needs up to {OVER_A_PERIOD:?} after the first job)",
            started.elapsed()
        );
    }
    let owned = owned_jobs(f, "forbid").await?;
    ensure!(
        owned == only,
        "CronJob forbid created jobs {owned:?} under ForbidConcurrent, expected only {only:?}"
    );
    Ok(())
}

/// Upstream apps/cronjob.go "should not schedule jobs when suspended".
pub(crate) const CRON_SUSPENDED: &str =
    "[sig-apps] CronJob should not schedule jobs when suspended [Slow] [Conformance]";

/// Upstream cronjob.go: a suspended CronJob starts no Job through its due times.
async fn cron_suspended(f: &Framework) -> CaseResult {
    create_cron(f, "suspended", "Allow", true).await?;
    let started = std::time::Instant::now();
    f.consistently(
        &f.api::<CronJob>(),
        "suspended",
        |c: &CronJob| active_jobs(c).is_empty(),
        "without active jobs while suspended",
        OVER_A_PERIOD,
    )
    .await?;
    ensure!(
        started.elapsed() + Duration::from_secs(1) >= OVER_A_PERIOD,
        "the case budget ran out {:.0?} into watching suspended CronJob suspended, before a run was due \
         (the watch needs {OVER_A_PERIOD:?})",
        started.elapsed()
    );
    let owned = owned_jobs(f, "suspended").await?;
    ensure!(owned.is_empty(), "suspended CronJob suspended created jobs {owned:?}");
    Ok(())
}
