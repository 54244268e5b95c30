//! Pod templates and the controller objects built from them (pure): Deployment, ReplicaSet,
//! ReplicationController, StatefulSet, DaemonSet, Job and CronJob, with selectors that leave
//! out the run-id label so a controller's selector matches only its own pods.

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, ReplicaSetSpec, StatefulSet,
    StatefulSetSpec,
};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, Job, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec, ReplicationController, ReplicationControllerSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;

use crate::framework::RUN_ID_LABEL;

/// Turns a built pod into a pod template: the name and namespace go, labels and spec stay.
pub fn template_of(pod: Pod) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: pod.metadata.labels,
            annotations: pod.metadata.annotations,
            ..Default::default()
        }),
        spec: pod.spec,
    }
}

/// The labels a controller selects its pods by: the template's labels without the run-id label
/// (every object of a run carries that one, so selecting on it would adopt other cases' pods).
pub fn selector_labels(template: &PodTemplateSpec) -> BTreeMap<String, String> {
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.remove(RUN_ID_LABEL);
    labels
}

/// A `matchLabels` selector over the template's own labels (see [`selector_labels`]).
pub fn label_selector(template: &PodTemplateSpec) -> LabelSelector {
    LabelSelector {
        match_labels: Some(selector_labels(template)),
        ..Default::default()
    }
}

/// `k=v,k2=v2` for list calls and watches.
pub fn selector_string(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

pub(super) fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

/// A Deployment of `replicas` pods from `template` (default RollingUpdate strategy).
pub fn deployment(name: &str, replicas: i32, template: PodTemplateSpec) -> Deployment {
    Deployment {
        metadata: meta(name),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: label_selector(&template),
            template,
            ..Default::default()
        }),
        status: None,
    }
}

/// A Deployment with strategy `Recreate`.
pub fn recreate_deployment(name: &str, replicas: i32, template: PodTemplateSpec) -> Deployment {
    let mut d = deployment(name, replicas, template);
    if let Some(spec) = d.spec.as_mut() {
        spec.strategy = Some(DeploymentStrategy {
            type_: Some("Recreate".into()),
            rolling_update: None,
        });
    }
    d
}

/// A ReplicaSet of `replicas` pods from `template`.
pub fn replica_set(name: &str, replicas: i32, template: PodTemplateSpec) -> ReplicaSet {
    ReplicaSet {
        metadata: meta(name),
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: label_selector(&template),
            template: Some(template),
            ..Default::default()
        }),
        status: None,
    }
}

/// A ReplicationController of `replicas` pods from `template` (its selector is a plain map).
pub fn replication_controller(name: &str, replicas: i32, template: PodTemplateSpec) -> ReplicationController {
    ReplicationController {
        metadata: meta(name),
        spec: Some(ReplicationControllerSpec {
            replicas: Some(replicas),
            selector: Some(selector_labels(&template)),
            template: Some(template),
            ..Default::default()
        }),
        status: None,
    }
}

/// A StatefulSet of `replicas` pods governed by headless Service `service` (OrderedReady).
pub fn stateful_set(name: &str, service: &str, replicas: i32, template: PodTemplateSpec) -> StatefulSet {
    StatefulSet {
        metadata: meta(name),
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            service_name: Some(service.into()),
            selector: label_selector(&template),
            template,
            pod_management_policy: Some("OrderedReady".into()),
            ..Default::default()
        }),
        status: None,
    }
}

/// A DaemonSet from `template`; the template's node selector (added by the pod builder) keeps
/// it on nodes of the template's OS.
pub fn daemon_set(name: &str, template: PodTemplateSpec) -> DaemonSet {
    DaemonSet {
        metadata: meta(name),
        spec: Some(DaemonSetSpec {
            selector: label_selector(&template),
            template,
            ..Default::default()
        }),
        status: None,
    }
}

/// Completion settings of a Job; `Default` is upstream's `NewTestJob` shape minus the counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobOpts {
    /// `spec.completions` (unset: one).
    pub completions: Option<i32>,
    /// `spec.parallelism` (unset: one).
    pub parallelism: Option<i32>,
    /// `spec.backoffLimit` (unset: the API default, 6).
    pub backoff_limit: Option<i32>,
    /// `spec.activeDeadlineSeconds`.
    pub active_deadline_seconds: Option<i64>,
}

/// A Job's spec from `template`. A template without a restart policy gets `OnFailure`, as a
/// Job refuses `Always`. The selector is left to the API server (generated from the Job's uid).
pub fn job_spec(mut template: PodTemplateSpec, opts: JobOpts) -> JobSpec {
    if let Some(spec) = template.spec.as_mut()
        && spec.restart_policy.is_none()
    {
        spec.restart_policy = Some("OnFailure".into());
    }
    JobSpec {
        template,
        completions: opts.completions,
        parallelism: opts.parallelism,
        backoff_limit: opts.backoff_limit,
        active_deadline_seconds: opts.active_deadline_seconds,
        ..Default::default()
    }
}

/// A Job from `template` with `opts`.
pub fn job(name: &str, template: PodTemplateSpec, opts: JobOpts) -> Job {
    Job {
        metadata: meta(name),
        spec: Some(job_spec(template, opts)),
        status: None,
    }
}

/// A CronJob running `job_spec` on `schedule` with `concurrency` (`Allow`, `Forbid`, `Replace`).
pub fn cron_job(name: &str, schedule: &str, concurrency: &str, job_spec: JobSpec) -> CronJob {
    CronJob {
        metadata: meta(name),
        spec: Some(CronJobSpec {
            schedule: schedule.into(),
            concurrency_policy: Some(concurrency.into()),
            successful_jobs_history_limit: Some(10),
            failed_jobs_history_limit: Some(10),
            job_template: JobTemplateSpec {
                metadata: None,
                spec: Some(job_spec),
            },
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn template(labels: &[(&str, &str)]) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            }),
            spec: Some(PodSpec::default()),
        }
    }

    #[test]
    fn selectors_leave_out_the_run_id_label() {
        let t = template(&[("app", "web"), (RUN_ID_LABEL, "r1")]);
        assert_eq!(
            selector_labels(&t),
            BTreeMap::from([("app".to_string(), "web".to_string())])
        );
        let d = deployment("d", 3, t.clone());
        let spec = d.spec.unwrap();
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.selector.match_labels.unwrap().len(), 1);
        let rc = replication_controller("rc", 1, t);
        assert_eq!(
            rc.spec.unwrap().selector.unwrap().get("app").map(String::as_str),
            Some("web")
        );
    }

    #[test]
    fn template_of_drops_name_and_namespace() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                labels: Some(BTreeMap::from([("a".into(), "b".into())])),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            status: None,
        };
        let t = template_of(pod);
        let m = t.metadata.unwrap();
        assert!(m.name.is_none() && m.namespace.is_none());
        assert_eq!(m.labels.unwrap().len(), 1);
    }

    #[test]
    fn jobs_default_to_on_failure_and_keep_explicit_policy() {
        let j = job(
            "j",
            template(&[("app", "j")]),
            JobOpts {
                completions: Some(3),
                ..Default::default()
            },
        );
        let spec = j.spec.unwrap();
        assert_eq!(spec.completions, Some(3));
        assert_eq!(spec.template.spec.unwrap().restart_policy.as_deref(), Some("OnFailure"));
        let mut t = template(&[]);
        t.spec.as_mut().unwrap().restart_policy = Some("Never".into());
        assert_eq!(
            job_spec(t, JobOpts::default())
                .template
                .spec
                .unwrap()
                .restart_policy
                .as_deref(),
            Some("Never")
        );
    }

    #[test]
    fn cron_jobs_carry_policy_and_schedule() {
        let c = cron_job(
            "c",
            "*/1 * * * ?",
            "Forbid",
            job_spec(template(&[]), JobOpts::default()),
        );
        let spec = c.spec.unwrap();
        assert_eq!(spec.schedule, "*/1 * * * ?");
        assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"));
    }
}
