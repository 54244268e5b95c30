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
use super::plane::{Component, Ctx};
use super::replicaset::claim_pods;
use super::util::{generate_name_prefix, is_ready, owner_ref, phase, pod_from_template, set_condition};
use super::writes::{create_owned_pod, delete_owned_pod, patch_status_at};

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
    reconcile_each(&ctx, caches, &jobs, changes, |job, pass| {
        sync(&ctx, &recorder, &pods, job, pass.requeue).boxed()
    })
    .await
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

#[expect(
    clippy::too_many_lines,
    reason = "one pass of the job state machine, kept in one place like upstream's syncJob"
)]
async fn sync(
    ctx: &Ctx,
    recorder: &Recorder,
    pods: &Informer<Pod>,
    job: &Arc<Job>,
    requeue: &mut Requeue,
) -> Result<()> {
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let Some(spec) = job.spec.as_ref() else { return Ok(()) };
    let now = ctx.now();
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    if is_finished(job) {
        return ttl_after_finished(ctx, job, requeue).await;
    }
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let owned = claim_pods(ctx, job.as_ref(), spec.selector.as_ref(), pods.in_namespace(&ns)).await?;
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let active: Vec<&Arc<Pod>> = owned
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !matches!(phase(p), "Succeeded" | "Failed"))
        .collect();
    let succeeded_pods: Vec<&Arc<Pod>> = owned.iter().filter(|p| phase(p) == "Succeeded").collect();
    let failed_pods: Vec<&Arc<Pod>> = owned.iter().filter(|p| phase(p) == "Failed").collect();
    let status = job.status.clone().unwrap_or_default();
    let succeeded = (succeeded_pods.len() as i32).max(status.succeeded.unwrap_or(0));
    // podFailurePolicy: a FailJob rule fails the Job at once; failures an Ignore rule matches
    // do not count. `job-pod-failure-policy-ignored`: a controller that counts every failure
    // against backoffLimit, whatever the policy says.
    let policy = spec
        .pod_failure_policy
        .as_ref()
        .filter(|_| !ctx.cfg.faults.is_on("job-pod-failure-policy-ignored"));
    let verdicts: Vec<Option<Verdict>> = failed_pods
        .iter()
        .map(|p| policy.and_then(|policy| match_pod_failure_policy(policy, p)))
        .collect();
    let fail_job_message = verdicts
        .iter()
        .flatten()
        .find(|v| v.action == "FailJob")
        .map(|v| v.message.clone());
    let ignored = verdicts.iter().flatten().filter(|v| v.action == "Ignore").count();
    let failed = ((failed_pods.len() - ignored) as i32).max(status.failed.unwrap_or(0));
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    // `job-completions-ignored`: a controller that runs every Job as a work queue.
    let completions = spec
        .completions
        .filter(|_| !ctx.cfg.faults.is_on("job-completions-ignored"));
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let suspended = spec.suspend == Some(true);
    let restart_on_failure = spec.template.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");

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
    let mut finish: Option<(&str, &str, String)> = None;
    let mut to_delete: Vec<&Arc<Pod>> = Vec::new();

    let completed_indexes: BTreeSet<i32> = succeeded_pods.iter().filter_map(|p| index_of(p)).collect();
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
            Some(c) if indexed => completed_indexes.len() as i32 >= c,
            Some(c) => succeeded >= c,
            None => succeeded > 0 && active.is_empty(),
        };
        if let Some(message) = fail_job_message {
            finish = Some(("Failed", "PodFailurePolicy", message));
            to_delete.extend(active.iter().copied());
        } else if complete {
            finish = Some((
                "Complete",
                "CompletionsReached",
                "Reached expected number of succeeded pods".into(),
            ));
            to_delete.extend(active.iter().copied());
        } else if past_backoff {
            finish = Some((
                "Failed",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit".into(),
            ));
            to_delete.extend(active.iter().copied());
        } else if past_deadline {
            finish = Some((
                "Failed",
                "DeadlineExceeded",
                "Job was active longer than specified deadline".into(),
            ));
            to_delete.extend(active.iter().copied());
        } else {
            // How many pods should run now.
            let want_active = match completions {
                None if succeeded > 0 => active.len() as i32,
                None => parallelism,
                Some(c) if indexed => (c - completed_indexes.len() as i32).min(parallelism),
                Some(c) => (c - succeeded).min(parallelism),
            }
            .max(0);
            let active_n = active.len() as i32;
            if active_n > want_active {
                let mut extra: Vec<&Arc<Pod>> = active.clone();
                extra.sort_by(|a, b| super::replicaset::deletion_rank(a, b));
                to_delete.extend(extra.into_iter().take((active_n - want_active) as usize));
            } else if active_n < want_active {
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
                    let busy: BTreeSet<i32> = active.iter().filter_map(|p| index_of(p)).collect();
                    let mut free_indexes =
                        (0..completions.unwrap_or(0)).filter(|i| !completed_indexes.contains(i) && !busy.contains(i));
                    for _ in 0..(want_active - active_n) {
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
    }

    for p in &to_delete {
        delete_owned_pod(recorder, &pod_api, job.as_ref(), p, &DeleteParams::background(), None)
            .await
            .ctx("delete", || format!("pod {ns}/{}", p.name_any()))?;
    }
    if let Some((type_, reason, message)) = finish.as_ref().map(|(t, r, m)| (*t, *r, m.as_str())) {
        if type_ == "Complete" {
            set_condition(
                &mut conditions,
                cond("SuccessCriteriaMet", "True", reason, message),
                |c| &c.type_,
            );
            completion_time = Some(Time(now));
            recorder
                .record(job.as_ref(), EventType::Normal, "Completed", "Job completed")
                .await;
        } else {
            set_condition(&mut conditions, cond("FailureTarget", "True", reason, message), |c| {
                &c.type_
            });
            recorder.record(job.as_ref(), EventType::Warning, reason, message).await;
        }
        set_condition(&mut conditions, cond(type_, "True", reason, message), |c| &c.type_);
    }
    let still_active = if finish.is_some() || suspended { 0 } else { active.len() };
    let ready = if finish.is_some() || suspended {
        0
    } else {
        active.iter().filter(|p| is_ready(p)).count()
    };
    let mut desired = json!({
        "active": still_active,
        "ready": ready,
        "succeeded": succeeded,
        "failed": failed,
        "startTime": start_time,
        "completionTime": completion_time,
        "conditions": if conditions.is_empty() { serde_json::Value::Null } else { json!(conditions) },
        "uncountedTerminatedPods": {},
    });
    if indexed {
        desired["completedIndexes"] = json!(format_indexes(&completed_indexes));
    }
    let current = serde_json::to_value(&status).unwrap_or_default();
    let differs = desired.as_object().expect("object").iter().any(|(k, v)| {
        let have = current.get(k).cloned().unwrap_or(serde_json::Value::Null);
        match (k.as_str(), v) {
            ("uncountedTerminatedPods", _) => have.is_null(),
            (_, serde_json::Value::Number(n)) if n.as_i64() == Some(0) => !(have.is_null() || have == json!(0)),
            _ => have != *v,
        }
    });
    if differs {
        let rv = job.metadata.resource_version.as_deref();
        patch_status_at(&api, &name, rv, desired, || format!("job {ns}/{name}")).await?;
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
