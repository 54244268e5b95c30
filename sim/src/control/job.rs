//! The Job controller (with the TTL-after-finished controller): runs pods until `completions`
//! succeed with at most `parallelism` at once, counts failures against `backoffLimit` (pod
//! restarts too under `restartPolicy: OnFailure`), enforces `activeDeadlineSeconds`, supports
//! suspend and the Indexed completion mode, and writes upstream's conditions and status.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::FutureExt;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{ApiContext, Result, is_not_found};
use super::events::{EventType, Recorder};
use super::informer::{Informer, Requeue, reconcile_each};
use super::job_failure_policy::{Verdict, match_pod_failure_policy};
use super::job_tracking::{
    RemovalExpectations, TRACKING_FINALIZER, has_tracking_finalizer, parse_indexes, release_orphans,
    remove_tracking_finalizer,
};
use super::plane::{Component, Ctx};
use super::replicaset::claim_pods_adding;
use super::util::{generate_name_prefix, is_ready, owner_ref, phase, pod_from_template, set_condition};
use super::writes::{create_owned_pod, delete_owned_pod, patch_status, patch_status_at};

/// The annotation and label carrying an Indexed Job pod's index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// Upstream's initial pod-failure backoff, doubled per failure up to [`MAX_BACKOFF`].
const INITIAL_BACKOFF: SignedDuration = SignedDuration::from_secs(10);
const MAX_BACKOFF: SignedDuration = SignedDuration::from_secs(360);

/// Runs the Job controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let jobs = ctx.informers.get::<Job>();
    let pods = ctx.informers.get::<Pod>();
    let recorder = ctx.recorder(Component::Job);
    let caches = async {
        jobs.ready().await?;
        pods.ready().await
    };
    let changes = vec![jobs.subscribe(), pods.subscribe()];
    let expectations = RemovalExpectations::default();
    let syncs = reconcile_each(&ctx, caches, &jobs, changes, |job, pass| {
        sync(&ctx, &recorder, &pods, &expectations, job, pass.requeue).boxed()
    });
    futures::try_join!(syncs, release_orphans(&ctx, &jobs, &pods)).map(|_| ())
}

fn condition_true(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// Whether the Job has finished (Complete or Failed).
pub fn is_finished(job: &Job) -> bool {
    condition_true(job, "Complete") || condition_true(job, "Failed")
}

fn index_of(pod: &Pod) -> Option<i32> {
    pod.annotations()
        .get(COMPLETION_INDEX)
        .or_else(|| pod.labels().get(COMPLETION_INDEX))?
        .parse()
        .ok()
}

/// Renders completed indexes as upstream does: `"0-2,4"`.
pub fn format_indexes(indexes: &BTreeSet<i32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut it = indexes.iter().copied().peekable();
    while let Some(start) = it.next() {
        let mut end = start;
        while it.peek() == Some(&(end + 1)) {
            end = it.next().expect("peeked");
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    out.join(",")
}

fn finished_at(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref().map(|t| t.0))
        .max()
}

/// The wait before creating a replacement after `failures` failures (10 s doubling, capped).
pub fn backoff(failures: i32) -> SignedDuration {
    if failures <= 0 {
        return SignedDuration::ZERO;
    }
    let mut d = INITIAL_BACKOFF;
    for _ in 1..failures {
        d = d.checked_mul(2).unwrap_or(MAX_BACKOFF);
        if d >= MAX_BACKOFF {
            return MAX_BACKOFF;
        }
    }
    d
}

/// What one pass decided about the pods that finished since the last one (upstream's
/// `trackJobStatusAndRemoveFinalizers`): the UIDs to record in `uncountedTerminatedPods`
/// before their finalizers go, and the pods whose finalizer can go.
#[derive(Default)]
struct Tracking<'p> {
    /// Already recorded as uncounted by an earlier pass: `(succeeded, failed)` UIDs.
    uncounted: (Vec<String>, Vec<String>),
    /// Newly finished and counted by this pass.
    new_succeeded: Vec<String>,
    new_failed: Vec<String>,
    /// Whose tracking finalizer this pass removes.
    release: Vec<&'p Arc<Pod>>,
}

fn uid_of(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

fn uid_list(v: Option<&Vec<String>>) -> Vec<String> {
    v.cloned().unwrap_or_default()
}

/// `uncountedTerminatedPods` as the status carries it: an empty list is left out, as
/// upstream's `omitempty` does (and `null` removes the key in the merge patch).
fn uncounted_json(succeeded: &[String], failed: &[String]) -> serde_json::Value {
    let list = |v: &[String]| {
        if v.is_empty() {
            serde_json::Value::Null
        } else {
            json!(v)
        }
    };
    json!({"succeeded": list(succeeded), "failed": list(failed)})
}

#[expect(
    clippy::too_many_lines,
    reason = "one pass of the job state machine, kept in one place like upstream's syncJob"
)]
async fn sync(
    ctx: &Ctx,
    recorder: &Recorder,
    pods: &Informer<Pod>,
    expectations: &RemovalExpectations,
    job: &Arc<Job>,
    requeue: &mut Requeue,
) -> Result<()> {
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let job_uid = job.metadata.uid.clone().unwrap_or_default();
    let Some(spec) = job.spec.as_ref() else { return Ok(()) };
    let now = ctx.now();
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    if is_finished(job) {
        expectations.forget(&job_uid);
        return ttl_after_finished(ctx, job, requeue).await;
    }
    if job.metadata.deletion_timestamp.is_some() {
        // Its pods lose their tracking finalizers in `release_orphans`.
        expectations.forget(&job_uid);
        return Ok(());
    }
    let owned = claim_pods_adding(
        ctx,
        job.as_ref(),
        spec.selector.as_ref(),
        pods.in_namespace(&ns),
        &[TRACKING_FINALIZER],
    )
    .await?;
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let status = job.status.clone().unwrap_or_default();
    // podFailurePolicy: a FailJob rule fails the Job at once; failures an Ignore rule matches
    // do not count. `job-pod-failure-policy-ignored`: a controller that counts every failure
    // against backoffLimit, whatever the policy says.
    let policy = spec
        .pod_failure_policy
        .as_ref()
        .filter(|_| !ctx.cfg.faults.is_on("job-pod-failure-policy-ignored"));
    // Upstream `onlyReplaceFailedPods`: with a failure policy (or podReplacementPolicy Failed)
    // a terminating pod is neither failed nor replaced until it is Failed, so the policy can
    // see its final conditions and exit codes.
    let only_replace_failed = policy.is_some() || spec.pod_replacement_policy.as_deref() == Some("Failed");
    let terminal = |p: &Pod| matches!(phase(p), "Succeeded" | "Failed");
    // Upstream `isPodFailed`: deleted pods count as failures (an orphan may never reach
    // Failed), unless only Failed pods are replaced.
    let is_failed = |p: &Pod| {
        phase(p) == "Failed"
            || (!only_replace_failed && p.metadata.deletion_timestamp.is_some() && phase(p) != "Succeeded")
    };
    let active: Vec<&Arc<Pod>> = owned
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !terminal(p))
        .collect();
    let terminating = owned
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some() && !terminal(p))
        .count() as i32;
    let failed_pods: Vec<&Arc<Pod>> = owned.iter().filter(|p| phase(p) == "Failed").collect();
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    // `job-completions-ignored`: a controller that runs every Job as a work queue.
    let completions = spec
        .completions
        .filter(|_| !ctx.cfg.faults.is_on("job-completions-ignored"));
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let suspended = spec.suspend == Some(true);
    let restart_on_failure = spec.template.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");

    // Pods whose finalizer an earlier pass removed, though the pod cache does not show it yet:
    // they were counted then, and hold no finalizer as far as counting goes (upstream
    // `expectedRmFinalizers`).
    let removed = expectations.pending(&job_uid, &owned);
    let tracked = |p: &Pod| has_tracking_finalizer(p) && !removed.contains(&uid_of(p));
    // Counting (upstream `cleanUncountedPodsWithoutFinalizers`): a UID recorded as uncounted
    // whose pod no longer has the finalizer (or is gone) is counted now.
    let with_finalizer: BTreeSet<String> = owned.iter().filter(|p| tracked(p)).map(|p| uid_of(p)).collect();
    let prev = status.uncounted_terminated_pods.clone().unwrap_or_default();
    let (prev_s, prev_f) = (uid_list(prev.succeeded.as_ref()), uid_list(prev.failed.as_ref()));
    let mut counted_succeeded = status.succeeded.unwrap_or(0);
    let mut counted_failed = status.failed.unwrap_or(0);
    let mut track = Tracking::default();
    for (prev, counter, kept) in [
        (&prev_s, &mut counted_succeeded, &mut track.uncounted.0),
        (&prev_f, &mut counted_failed, &mut track.uncounted.1),
    ] {
        for uid in prev {
            if with_finalizer.contains(uid) {
                kept.push(uid.clone());
            } else {
                *counter += 1;
            }
        }
    }
    let mut completed_indexes: BTreeSet<i32> = if indexed {
        parse_indexes(
            status.completed_indexes.as_deref().unwrap_or(""),
            completions.unwrap_or(0),
        )
    } else {
        BTreeSet::new()
    };
    // The pods that finished since: counted once, by UID (by index for an Indexed Job).
    let mut verdicts: Vec<Verdict> = Vec::new();
    for p in owned.iter().filter(|p| tracked(p)) {
        let uid = uid_of(p);
        if track.uncounted.0.contains(&uid) || track.uncounted.1.contains(&uid) {
            // Recorded by an earlier pass whose finalizer removal did not get through.
            track.release.push(p);
            continue;
        }
        let index = index_of(p).filter(|i| completions.is_some_and(|c| *i < c));
        if phase(p) == "Succeeded" {
            track.release.push(p);
            if indexed {
                if let Some(i) = index {
                    completed_indexes.insert(i);
                }
            } else {
                track.new_succeeded.push(uid);
            }
        } else if is_failed(p) {
            track.release.push(p);
            if indexed && index.is_none() {
                continue;
            }
            let verdict = if phase(p) == "Failed" {
                policy.and_then(|policy| match_pod_failure_policy(policy, p))
            } else {
                None
            };
            let counts = verdict.as_ref().is_none_or(|v| v.action != "Ignore");
            if let Some(v) = verdict {
                verdicts.push(v);
            }
            if counts {
                track.new_failed.push(uid);
            }
        }
    }
    let succeeded = if indexed {
        completed_indexes.len() as i32
    } else {
        counted_succeeded + (track.uncounted.0.len() + track.new_succeeded.len()) as i32
    };
    let failed = counted_failed + (track.uncounted.1.len() + track.new_failed.len()) as i32;
    // A FailJob verdict, or a finish decided by an earlier pass whose pods were not all
    // counted yet (upstream keeps it in the FailureTarget / SuccessCriteriaMet condition).
    let fail_job_message = verdicts
        .iter()
        .find(|v| v.action == "FailJob")
        .map(|v| v.message.clone());
    let decided = |type_: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_ && c.status == "True")
            .map(|c| {
                (
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            })
    };

    let mut conditions = status.conditions.clone().unwrap_or_default();
    let cond = |type_: &str, st: &str, reason: &str, message: &str| JobCondition {
        type_: type_.into(),
        status: st.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    let mut start_time = status.start_time.clone();
    let mut completion_time = status.completion_time.clone();
    let mut finish: Option<(&str, String, String)> = None;
    let mut to_delete: Vec<&Arc<Pod>> = Vec::new();

    let restarts: i32 = active
        .iter()
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
        })
        .map(|c| c.restart_count)
        .sum();

    if suspended {
        to_delete.extend(active.iter().copied());
        if !condition_true(job, "Suspended") {
            set_condition(
                &mut conditions,
                cond("Suspended", "True", "JobSuspended", "Job suspended"),
                |c| &c.type_,
            );
            recorder
                .record(job.as_ref(), EventType::Normal, "Suspended", "Job suspended")
                .await;
        }
        start_time = None;
    } else {
        if condition_true(job, "Suspended") {
            set_condition(
                &mut conditions,
                cond("Suspended", "False", "JobResumed", "Job resumed"),
                |c| &c.type_,
            );
            recorder
                .record(job.as_ref(), EventType::Normal, "Resumed", "Job resumed")
                .await;
            start_time = None;
        }
        if start_time.is_none() {
            start_time = Some(Time(now));
        }
        let started = start_time.as_ref().expect("set above").0;
        let past_deadline = spec.active_deadline_seconds.is_some_and(|ads| {
            let deadline = started
                .saturating_add(SignedDuration::from_secs(ads))
                .unwrap_or(started);
            if now >= deadline {
                true
            } else {
                requeue.after(ctx.cfg.clock.real_delay(deadline.duration_since(now)));
                false
            }
        });
        // Upstream: failed pods beyond the limit, or (OnFailure) container restarts reaching it.
        let past_backoff = !ctx.cfg.faults.is_on("job-backoff-ignored")
            && (failed > backoff_limit
                || (restart_on_failure
                    && if backoff_limit == 0 {
                        restarts > 0
                    } else {
                        restarts >= backoff_limit
                    }));
        let complete = match completions {
            Some(c) => succeeded >= c,
            None => succeeded > 0 && active.is_empty(),
        };
        if let Some((reason, message)) = decided("FailureTarget") {
            finish = Some(("Failed", reason, message));
        } else if let Some((reason, message)) = decided("SuccessCriteriaMet") {
            finish = Some(("Complete", reason, message));
        } else if let Some(message) = fail_job_message {
            finish = Some(("Failed", "PodFailurePolicy".into(), message));
        } else if complete {
            finish = Some((
                "Complete",
                "CompletionsReached".into(),
                "Reached expected number of succeeded pods".into(),
            ));
        } else if past_backoff {
            finish = Some((
                "Failed",
                "BackoffLimitExceeded".into(),
                "Job has reached the specified backoff limit".into(),
            ));
        } else if past_deadline {
            finish = Some((
                "Failed",
                "DeadlineExceeded".into(),
                "Job was active longer than specified deadline".into(),
            ));
        } else {
            // How many pods should run now; a terminating pod holds its place while only
            // failed pods are replaced.
            let want_active = match completions {
                None if succeeded > 0 => active.len() as i32,
                None => parallelism,
                Some(c) => (c - succeeded).min(parallelism),
            }
            .max(0);
            let active_n = active.len() as i32;
            let held = active_n + if only_replace_failed { terminating } else { 0 };
            if active_n > want_active {
                let mut extra: Vec<&Arc<Pod>> = active.clone();
                extra.sort_by(|a, b| super::replicaset::deletion_rank(a, b));
                to_delete.extend(extra.into_iter().take((active_n - want_active) as usize));
            } else if held < want_active {
                // Back off after failures, measured from the latest one.
                let last_failure = failed_pods.iter().filter_map(|p| finished_at(p)).max();
                let wait = last_failure.map_or(SignedDuration::ZERO, |t| {
                    let until = t.saturating_add(backoff(failed)).unwrap_or(t);
                    if until > now {
                        until.duration_since(now)
                    } else {
                        SignedDuration::ZERO
                    }
                });
                if wait > SignedDuration::ZERO {
                    requeue.after(ctx.cfg.clock.real_delay(wait));
                } else {
                    // Indexes a running pod holds (a terminating one too while only failed
                    // pods are replaced) or that completed are not handed out again.
                    let busy: BTreeSet<i32> = owned
                        .iter()
                        .filter(|p| !terminal(p) && (p.metadata.deletion_timestamp.is_none() || only_replace_failed))
                        .filter_map(|p| index_of(p))
                        .collect();
                    let mut free_indexes =
                        (0..completions.unwrap_or(0)).filter(|i| !completed_indexes.contains(i) && !busy.contains(i));
                    for _ in 0..(want_active - held) {
                        let index = if indexed {
                            match free_indexes.next() {
                                Some(i) => Some(i),
                                None => break,
                            }
                        } else {
                            None
                        };
                        create_pod(ctx, recorder, pods, job, &pod_api, index).await?;
                    }
                }
            }
        }
        if finish.is_some() {
            // Upstream: once the Job is finished every pod not yet terminated counts as failed.
            to_delete.extend(active.iter().copied());
            let unfinished: Vec<&Arc<Pod>> = owned
                .iter()
                .filter(|p| tracked(p) && !terminal(p) && !track.release.iter().any(|r| Arc::ptr_eq(r, p)))
                .collect();
            for p in unfinished {
                track.release.push(p);
                track.new_failed.push(uid_of(p));
            }
        }
    }

    for p in &to_delete {
        delete_owned_pod(recorder, &pod_api, job.as_ref(), p, &DeleteParams::background(), None)
            .await
            .ctx("delete", || format!("pod {ns}/{}", p.name_any()))?;
    }
    let failed = counted_failed + (track.uncounted.1.len() + track.new_failed.len()) as i32;
    if let Some((type_, reason, message)) = finish.as_ref().map(|(t, r, m)| (*t, r.as_str(), m.as_str())) {
        let interim = if type_ == "Complete" {
            "SuccessCriteriaMet"
        } else {
            "FailureTarget"
        };
        if !condition_true(job, interim) {
            set_condition(&mut conditions, cond(interim, "True", reason, message), |c| &c.type_);
        }
    }
    let still_active = if finish.is_some() || suspended { 0 } else { active.len() };
    let ready = if finish.is_some() || suspended {
        0
    } else {
        active.iter().filter(|p| is_ready(p)).count()
    };
    // First record every newly finished pod as uncounted (with the interim condition), so
    // that a pass that dies after removing finalizers still counts them.
    let new_s: Vec<String> = track.uncounted.0.iter().chain(&track.new_succeeded).cloned().collect();
    let new_f: Vec<String> = track.uncounted.1.iter().chain(&track.new_failed).cloned().collect();
    let mut desired = json!({
        "active": still_active,
        "ready": ready,
        "terminating": terminating,
        "succeeded": if indexed { succeeded } else { counted_succeeded },
        "failed": counted_failed,
        "startTime": start_time,
        "conditions": if conditions.is_empty() { serde_json::Value::Null } else { json!(conditions) },
        "uncountedTerminatedPods": uncounted_json(&new_s, &new_f),
    });
    if indexed {
        desired["completedIndexes"] = json!(format_indexes(&completed_indexes));
    }
    if !track.new_succeeded.is_empty() || !track.new_failed.is_empty() {
        let rv = job.metadata.resource_version.as_deref();
        patch_status_at(&api, &name, rv, desired.clone(), || format!("job {ns}/{name}")).await?;
    }
    // Then let the pods go, and count those whose finalizer went.
    let mut kept: BTreeSet<String> = BTreeSet::new();
    for p in &track.release {
        if let Err(e) = remove_tracking_finalizer(&pod_api, p).await {
            tracing::warn!(pod = %p.name_any(), error = %super::error::chain(&e), "tracking finalizer not removed");
            kept.insert(uid_of(p));
            requeue.after(std::time::Duration::from_secs(1));
        } else {
            expectations.removed(&job_uid, &uid_of(p));
        }
    }
    let left_s: Vec<String> = new_s.iter().filter(|u| kept.contains(*u)).cloned().collect();
    let left_f: Vec<String> = new_f.iter().filter(|u| kept.contains(*u)).cloned().collect();
    if !indexed {
        desired["succeeded"] = json!(counted_succeeded + (new_s.len() - left_s.len()) as i32);
    }
    desired["failed"] = json!(failed - left_f.len() as i32);
    desired["uncountedTerminatedPods"] = uncounted_json(&left_s, &left_f);
    // The terminal condition once every finished pod is counted.
    if let Some((type_, reason, message)) = finish.as_ref().map(|(t, r, m)| (*t, r.as_str(), m.as_str()))
        && left_s.is_empty()
        && left_f.is_empty()
    {
        if type_ == "Complete" {
            completion_time = Some(Time(now));
            recorder
                .record(job.as_ref(), EventType::Normal, "Completed", "Job completed")
                .await;
        } else {
            recorder.record(job.as_ref(), EventType::Warning, reason, message).await;
        }
        set_condition(&mut conditions, cond(type_, "True", reason, message), |c| &c.type_);
        desired["conditions"] = json!(conditions);
    }
    desired["completionTime"] = json!(completion_time);
    let current = serde_json::to_value(&status).unwrap_or_default();
    let differs = desired.as_object().expect("object").iter().any(|(k, v)| {
        let have = current.get(k).cloned().unwrap_or(serde_json::Value::Null);
        match (k.as_str(), v) {
            ("uncountedTerminatedPods", _) => {
                let list = |o: &serde_json::Value, f: &str| o.get(f).cloned().unwrap_or(serde_json::Value::Null);
                have.is_null()
                    || ["succeeded", "failed"].iter().any(|f| {
                        let (h, w) = (list(&have, f), list(v, f));
                        h != w && !(h == json!([]) && w.is_null())
                    })
            }
            (_, serde_json::Value::Number(n)) if n.as_i64() == Some(0) => !(have.is_null() || have == json!(0)),
            _ => have != *v,
        }
    });
    if differs {
        if !track.new_succeeded.is_empty() || !track.new_failed.is_empty() {
            // The first write moved the resourceVersion on; this one is ours alone.
            patch_status(&api, &name, desired, || format!("job {ns}/{name}")).await?;
        } else {
            let rv = job.metadata.resource_version.as_deref();
            patch_status_at(&api, &name, rv, desired, || format!("job {ns}/{name}")).await?;
        }
    }
    Ok(())
}

async fn create_pod(
    ctx: &Ctx,
    recorder: &Recorder,
    pods: &Informer<Pod>,
    job: &Job,
    api: &Api<Pod>,
    index: Option<i32>,
) -> Result<()> {
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let spec = job.spec.as_ref().expect("checked by the caller");
    let prefix = match index {
        Some(i) => generate_name_prefix(&format!("{name}-{i}")),
        None => generate_name_prefix(&name),
    };
    let mut pod = pod_from_template(&spec.template, &ns, owner_ref(job), None, Some(prefix));
    // Upstream: every Job pod is created with the tracking finalizer.
    pod.metadata
        .finalizers
        .get_or_insert_default()
        .push(TRACKING_FINALIZER.to_owned());
    let labels = pod.metadata.labels.get_or_insert_default();
    for (k, v) in [
        ("batch.kubernetes.io/controller-uid", uid.as_str()),
        ("batch.kubernetes.io/job-name", name.as_str()),
        ("controller-uid", uid.as_str()),
        ("job-name", name.as_str()),
    ] {
        labels.entry(k.to_owned()).or_insert_with(|| v.to_owned());
    }
    if let Some(i) = index {
        labels.insert(COMPLETION_INDEX.into(), i.to_string());
        pod.metadata
            .annotations
            .get_or_insert_default()
            .insert(COMPLETION_INDEX.into(), i.to_string());
        if let Some(ps) = pod.spec.as_mut() {
            // `job-index-hostname-dropped`: a controller from before Indexed Jobs named their
            // pods' hosts after the index.
            if !ctx.cfg.faults.is_on("job-index-hostname-dropped") {
                ps.hostname = Some(format!("{name}-{i}"));
            }
            for c in ps.containers.iter_mut().chain(ps.init_containers.iter_mut().flatten()) {
                c.env.get_or_insert_default().push(EnvVar {
                    name: "JOB_COMPLETION_INDEX".into(),
                    value: Some(i.to_string()),
                    value_from: None,
                });
            }
        }
    }
    create_owned_pod(recorder, pods, api, job, &pod)
        .await
        .ctx("create", || format!("pod for job {ns}/{name}"))?;
    Ok(())
}

/// Upstream's TTL-after-finished controller: a finished Job with `ttlSecondsAfterFinished` is
/// deleted (foreground, so its pods go first) once the TTL has passed.
async fn ttl_after_finished(ctx: &Ctx, job: &Job, requeue: &mut Requeue) -> Result<()> {
    let Some(ttl) = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished) else {
        return Ok(());
    };
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let status = job.status.as_ref();
    let finished = status
        .and_then(|s| s.completion_time.as_ref())
        .map(|t| t.0)
        .or_else(|| {
            status?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")?
                .last_transition_time
                .as_ref()
                .map(|t| t.0)
        });
    let Some(finished) = finished else { return Ok(()) };
    let expires = finished
        .saturating_add(SignedDuration::from_secs(i64::from(ttl)))
        .unwrap_or(finished);
    let now = ctx.now();
    if now < expires {
        requeue.after(ctx.cfg.clock.real_delay(expires.duration_since(now)));
        return Ok(());
    }
    let ns = job.namespace().unwrap_or_default();
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    match api.delete(&job.name_any(), &DeleteParams::foreground()).await {
        Ok(_) => {
            tracing::info!(job = %job.name_any(), "deleted finished job after its ttl");
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e).ctx("delete", || format!("job {ns}/{}", job.name_any())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_render_as_ranges() {
        let s: BTreeSet<i32> = [0, 1, 2, 4, 6, 7].into_iter().collect();
        assert_eq!(format_indexes(&s), "0-2,4,6-7");
        assert_eq!(format_indexes(&BTreeSet::new()), "");
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(0), SignedDuration::ZERO);
        assert_eq!(backoff(1), SignedDuration::from_secs(10));
        assert_eq!(backoff(3), SignedDuration::from_secs(40));
        assert_eq!(backoff(20), MAX_BACKOFF);
    }
}
