//! The CronJob controller: creates a Job named `<cronjob>-<scheduled time in minutes>` at each
//! scheduled time (croner schedules in the CronJob's time zone, UTC by default), honouring
//! suspend, concurrencyPolicy Allow/Forbid/Replace, startingDeadlineSeconds and the history
//! limits, and keeps status.active, lastScheduleTime and lastSuccessfulTime. As upstream, a
//! run that Forbid holds back is announced with a `JobAlreadyActive` event and does not move
//! lastScheduleTime, so it starts once the active Job ends.
//!
//! Fault switches: `cronjob-concurrency-forced=POLICY` applies POLICY to every CronJob,
//! `cronjob-suspend-ignored` keeps starting Jobs of suspended CronJobs.
//!
//! Time comes from the control plane's [`super::clock::Clock`], so an accelerated or manual
//! clock drives schedules.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use croner::Cron;
use croner::time::{CivilDate, CivilDateTime, CivilTime, CronDateTime, Resolution, Weekday};
use futures::FutureExt;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp, Zoned};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{ApiContext, Error, Result, is_conflict, is_not_found};
use super::events::{EventType, Recorder};
use super::informer::{Informer, Requeue, reconcile_each};
use super::job::is_finished;
use super::plane::{Component, Ctx};
use super::util::{controlled_by, owner_ref};
use super::writes::patch_status;

/// The annotation recording the scheduled time a Job was created for.
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// A zoned time croner can search over (croner is built here without its jiff backend).
#[derive(Debug, Clone)]
struct CronTime(Zoned);

impl CronDateTime for CronTime {
    fn to_civil(&self) -> CivilDateTime {
        let d = self.0.datetime();
        CivilDateTime::new(
            CivilDate::from_parts_unchecked(i32::from(d.year()), d.month() as u32, d.day() as u32),
            CivilTime::from_parts_unchecked(d.hour() as u32, d.minute() as u32, d.second() as u32),
        )
    }

    fn civil_weekday(&self) -> Weekday {
        Weekday::from_days_from_sunday(self.0.weekday().to_sunday_zero_offset() as u32)
    }

    fn resolve_civil(&self, civil: CivilDateTime) -> std::result::Result<Resolution<Self>, croner::errors::CronError> {
        use croner::errors::CronError;
        let year = i16::try_from(civil.year()).map_err(|_| CronError::InvalidDate)?;
        let dt = jiff::civil::DateTime::new(
            year,
            civil.month() as i8,
            civil.day() as i8,
            civil.hour() as i8,
            civil.minute() as i8,
            civil.second() as i8,
            0,
        )
        .map_err(|_| CronError::InvalidDate)?;
        let amb = self.0.time_zone().to_ambiguous_zoned(dt);
        Ok(match amb.offset() {
            AmbiguousOffset::Unambiguous { .. } => {
                Resolution::Single(CronTime(amb.unambiguous().map_err(|_| CronError::InvalidTime)?))
            }
            AmbiguousOffset::Fold { .. } => Resolution::Ambiguous(
                CronTime(amb.clone().earlier().map_err(|_| CronError::InvalidTime)?),
                CronTime(amb.later().map_err(|_| CronError::InvalidTime)?),
            ),
            AmbiguousOffset::Gap { .. } => Resolution::Gap,
        })
    }

    fn checked_add_seconds(&self, seconds: i64) -> Option<Self> {
        self.0
            .checked_add(SignedDuration::from_secs(seconds))
            .ok()
            .map(CronTime)
    }

    fn cmp_instant(&self, other: &Self) -> Ordering {
        self.0.timestamp().cmp(&other.0.timestamp())
    }
}

/// A parsed CronJob schedule in its time zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    tz: TimeZone,
}

impl Schedule {
    /// Parses a standard five-field schedule (or `@hourly`-style macro) in `time_zone`
    /// (an IANA name; UTC when `None`).
    ///
    /// # Errors
    ///
    /// [`Error::Schedule`] for a bad schedule, [`Error::TimeZone`] for an unknown zone.
    pub fn parse(schedule: &str, time_zone: Option<&str>) -> Result<Self> {
        let cron = Cron::from_str(schedule).map_err(|source| Error::Schedule {
            schedule: schedule.into(),
            source,
        })?;
        let tz = match time_zone {
            Some(z) => TimeZone::get(z).map_err(|source| Error::TimeZone { zone: z.into(), source })?,
            None => TimeZone::UTC,
        };
        Ok(Self { cron, tz })
    }

    /// The latest scheduled time at or before `now`.
    pub fn previous(&self, now: Timestamp) -> Option<Timestamp> {
        let t = CronTime(now.to_zoned(self.tz.clone()));
        self.cron
            .find_previous_occurrence(&t, true)
            .ok()
            .map(|z| z.0.timestamp())
    }

    /// The first scheduled time after `now`.
    pub fn next(&self, now: Timestamp) -> Option<Timestamp> {
        let t = CronTime(now.to_zoned(self.tz.clone()));
        self.cron.find_next_occurrence(&t, false).ok().map(|z| z.0.timestamp())
    }

    /// The scheduled time rendered in the schedule's zone (for the scheduled-timestamp annotation).
    fn render(&self, at: Timestamp) -> String {
        at.to_zoned(self.tz.clone())
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
    }
}

/// The name of the Job for a scheduled time: `<cronjob>-<minutes since the epoch>`.
pub fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
    format!("{cronjob}-{}", scheduled.as_second().div_euclid(60))
}

/// Runs the CronJob controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let cronjobs = ctx.informers.get::<CronJob>();
    let jobs = ctx.informers.get::<Job>();
    let recorder = ctx.recorder(Component::CronJob);
    let caches = async {
        cronjobs.ready().await?;
        jobs.ready().await
    };
    let changes = vec![cronjobs.subscribe(), jobs.subscribe()];
    reconcile_each(&ctx, caches, &cronjobs, changes, |cj, pass| {
        sync(&ctx, &recorder, &jobs, cj, pass.requeue).boxed()
    })
    .await
}

/// The concurrency policy the controller applies: the CronJob's own (Allow when unset), unless
/// the `cronjob-concurrency-forced=POLICY` fault makes the controller apply POLICY to every
/// CronJob (an Allow-only controller that ignores Forbid and Replace, or one that serialises
/// every CronJob).
fn effective_policy<'a>(ctx: &Ctx, own: Option<&'a str>) -> &'a str {
    for forced in ["Allow", "Forbid", "Replace"] {
        if ctx.cfg.faults.applies_to("cronjob-concurrency-forced", forced) {
            return forced;
        }
    }
    own.unwrap_or("Allow")
}

/// Deletes the Job `name` of `cj` (in the background, its pods after it) and records upstream's
/// `SuccessfulDelete` ("Deleted job NAME"); a Job already gone is no error. Both the Replace
/// policy and the history limits delete Jobs this way.
async fn delete_job(recorder: &Recorder, api: &Api<Job>, cj: &CronJob, name: &str) -> Result<()> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {
            recorder
                .record(cj, EventType::Normal, "SuccessfulDelete", format!("Deleted job {name}"))
                .await;
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e).ctx("delete", || {
            format!("job {}/{name}", cj.namespace().unwrap_or_default())
        }),
    }
}

fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        field_path: None,
    }
}

fn finished_condition(job: &Job) -> Option<&str> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.type_.as_str())
}

#[expect(clippy::too_many_lines, reason = "one pass of upstream's syncCronJob, kept together")]
async fn sync(
    ctx: &Ctx,
    recorder: &Recorder,
    jobs: &Informer<Job>,
    cj: &Arc<CronJob>,
    requeue: &mut Requeue,
) -> Result<()> {
    let ns = cj.namespace().unwrap_or_default();
    let name = cj.name_any();
    let uid = cj.metadata.uid.clone().unwrap_or_default();
    let Some(spec) = cj.spec.as_ref() else { return Ok(()) };
    if cj.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let now = ctx.now();
    let job_api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let status = cj.status.clone().unwrap_or_default();
    let mut owned: Vec<Arc<Job>> = jobs
        .in_namespace(&ns)
        .into_iter()
        .filter(|j| controlled_by(&j.metadata, &uid))
        .collect();
    owned.sort_by_key(|j| j.metadata.creation_timestamp.clone());

    let mut last_successful = status.last_successful_time.clone();
    let mut active: Vec<ObjectReference> = Vec::new();
    let previously_active: Vec<String> = status.active.iter().flatten().filter_map(|r| r.uid.clone()).collect();
    for j in &owned {
        if !is_finished(j) {
            if j.metadata.deletion_timestamp.is_none() {
                active.push(job_ref(j));
            }
            continue;
        }
        let was_active = j.metadata.uid.as_ref().is_some_and(|u| previously_active.contains(u));
        if was_active {
            let cond = finished_condition(j).unwrap_or("Complete");
            recorder
                .record(
                    cj.as_ref(),
                    EventType::Normal,
                    "SawCompletedJob",
                    format!("Saw completed job: {}, condition: {cond}", j.name_any()),
                )
                .await;
        }
        if finished_condition(j) == Some("Complete") {
            let done = j.status.as_ref().and_then(|s| s.completion_time.clone());
            if done.as_ref().map(|t| t.0) > last_successful.as_ref().map(|t| t.0) {
                last_successful = done;
            }
        }
    }

    let mut last_schedule = status.last_schedule_time.clone();
    let schedule = match Schedule::parse(&spec.schedule, spec.time_zone.as_deref()) {
        Ok(s) => Some(s),
        Err(e) => {
            recorder
                .record(
                    cj.as_ref(),
                    EventType::Warning,
                    "InvalidSchedule",
                    format!("invalid schedule: {}: {}", spec.schedule, super::error::chain(&e)),
                )
                .await;
            None
        }
    };
    // `cronjob-suspend-ignored`: a controller that does not read spec.suspend.
    let suspended = spec.suspend == Some(true) && !ctx.cfg.faults.is_on("cronjob-suspend-ignored");
    if let Some(schedule) = &schedule
        && !suspended
    {
        let earliest = last_schedule
            .as_ref()
            .map(|t| t.0)
            .or_else(|| cj.metadata.creation_timestamp.as_ref().map(|t| t.0))
            .unwrap_or(now);
        let due = schedule.previous(now).filter(|t| *t > earliest);
        let too_late = |t: Timestamp| {
            spec.starting_deadline_seconds
                .is_some_and(|d| now.duration_since(t) > SignedDuration::from_secs(d))
        };
        if let Some(scheduled) = due {
            let policy = effective_policy(ctx, spec.concurrency_policy.as_deref());
            // Upstream leaves lastScheduleTime alone when Forbid holds a run back, so the held
            // run starts as soon as the active Job ends (if still within its starting deadline).
            let mut record_schedule = true;
            if too_late(scheduled) {
                recorder
                    .record(
                        cj.as_ref(),
                        EventType::Warning,
                        "MissSchedule",
                        format!("Missed scheduled time to start a job: {}", schedule.render(scheduled)),
                    )
                    .await;
            } else if policy == "Forbid" && !active.is_empty() {
                tracing::debug!(cronjob = %name, "not starting a job: one is still active and concurrencyPolicy is Forbid");
                recorder
                    .record(
                        cj.as_ref(),
                        EventType::Normal,
                        "JobAlreadyActive",
                        "Not starting job because prior execution is running and concurrency policy is Forbid",
                    )
                    .await;
                record_schedule = false;
            } else {
                if policy == "Replace" {
                    for r in std::mem::take(&mut active) {
                        delete_job(recorder, &job_api, cj, &r.name.clone().unwrap_or_default()).await?;
                    }
                }
                let jt = &spec.job_template;
                let jm = jt.metadata.clone().unwrap_or_default();
                let mut annotations = jm.annotations.unwrap_or_default();
                annotations.insert(SCHEDULED_TIMESTAMP.into(), schedule.render(scheduled));
                let job = Job {
                    metadata: ObjectMeta {
                        name: Some(job_name(&name, scheduled)),
                        namespace: Some(ns.clone()),
                        labels: jm.labels,
                        annotations: Some(annotations),
                        owner_references: Some(vec![owner_ref(cj.as_ref())]),
                        ..ObjectMeta::default()
                    },
                    spec: jt.spec.clone(),
                    status: None,
                };
                match job_api.create(&PostParams::default(), &job).await {
                    Ok(created) => {
                        recorder
                            .record(
                                cj.as_ref(),
                                EventType::Normal,
                                "SuccessfulCreate",
                                format!("Created job {}", created.name_any()),
                            )
                            .await;
                        jobs.wait_for_write(&created).await;
                        active.push(job_ref(&created));
                    }
                    Err(e) if is_conflict(&e) => {
                        // Already created for this time (by an earlier pass): record the time only.
                        tracing::debug!(cronjob = %name, "job for this schedule already exists");
                    }
                    Err(e) => {
                        recorder
                            .record(
                                cj.as_ref(),
                                EventType::Warning,
                                "FailedCreate",
                                format!("Error creating job: {e}"),
                            )
                            .await;
                        return Err(e).ctx("create", || format!("job for cronjob {ns}/{name}"));
                    }
                }
            }
            if record_schedule {
                last_schedule = Some(Time(scheduled));
            }
        }
        if let Some(next) = schedule.next(now) {
            requeue.after(
                ctx.cfg
                    .clock
                    .real_delay(next.duration_since(now))
                    .max(Duration::from_millis(50)),
            );
        }
    }

    // History limits: the oldest finished jobs beyond the limits go.
    let mut by_outcome: BTreeMap<&str, Vec<&Arc<Job>>> = BTreeMap::new();
    for j in owned.iter().filter(|j| j.metadata.deletion_timestamp.is_none()) {
        if let Some(c) = finished_condition(j) {
            by_outcome
                .entry(if c == "Complete" { "Complete" } else { "Failed" })
                .or_default()
                .push(j);
        }
    }
    for (outcome, limit) in [
        ("Complete", spec.successful_jobs_history_limit.unwrap_or(3)),
        ("Failed", spec.failed_jobs_history_limit.unwrap_or(1)),
    ] {
        let list = by_outcome.remove(outcome).unwrap_or_default();
        let excess = list.len().saturating_sub(limit.max(0) as usize);
        for j in list.into_iter().take(excess) {
            delete_job(recorder, &job_api, cj, &j.name_any()).await?;
        }
    }

    let active_json = if active.is_empty() {
        serde_json::Value::Null
    } else {
        json!(active)
    };
    let desired = json!({
        "active": active_json,
        "lastScheduleTime": last_schedule,
        "lastSuccessfulTime": last_successful,
    });
    let current = serde_json::to_value(&status).unwrap_or_default();
    let strip_rv = |v: &serde_json::Value| -> serde_json::Value {
        let mut v = v.clone();
        if let Some(a) = v.as_array_mut() {
            for r in a {
                if let Some(o) = r.as_object_mut() {
                    o.remove("resourceVersion");
                }
            }
        }
        v
    };
    let differs = strip_rv(current.get("active").unwrap_or(&serde_json::Value::Null)) != strip_rv(&desired["active"])
        || current.get("lastScheduleTime").unwrap_or(&serde_json::Value::Null) != &desired["lastScheduleTime"]
        || current.get("lastSuccessfulTime").unwrap_or(&serde_json::Value::Null) != &desired["lastSuccessfulTime"];
    if differs {
        let api: Api<CronJob> = Api::namespaced(ctx.client.clone(), &ns);
        patch_status(&api, &name, desired, || format!("cronjob {ns}/{name}")).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn schedules_find_previous_and_next_times() {
        let s = Schedule::parse("*/5 * * * *", None).unwrap();
        assert_eq!(s.previous(ts("2026-01-01T10:07:30Z")), Some(ts("2026-01-01T10:05:00Z")));
        assert_eq!(s.next(ts("2026-01-01T10:07:30Z")), Some(ts("2026-01-01T10:10:00Z")));
        assert_eq!(s.previous(ts("2026-01-01T10:05:00Z")), Some(ts("2026-01-01T10:05:00Z")));
        let daily = Schedule::parse("@daily", None).unwrap();
        assert_eq!(daily.next(ts("2026-01-01T10:07:30Z")), Some(ts("2026-01-02T00:00:00Z")));
    }

    #[test]
    fn time_zones_shift_the_schedule() {
        let s = Schedule::parse("0 9 * * *", Some("Europe/Berlin")).unwrap();
        // 09:00 in Berlin in winter is 08:00 UTC.
        assert_eq!(s.next(ts("2026-01-01T00:00:00Z")), Some(ts("2026-01-01T08:00:00Z")));
        assert!(matches!(
            Schedule::parse("0 9 * * *", Some("Mars/Olympus")),
            Err(Error::TimeZone { .. })
        ));
        assert!(matches!(
            Schedule::parse("not a schedule", None),
            Err(Error::Schedule { .. })
        ));
    }

    #[test]
    fn job_names_use_minutes_since_the_epoch() {
        assert_eq!(
            job_name("backup", ts("2026-01-01T00:00:00Z")),
            format!("backup-{}", 1_767_225_600 / 60)
        );
    }
}
