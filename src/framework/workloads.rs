//! Framework helpers for workload and configuration objects.
//!
//! Cases describe *what* they run with a [`PodBuilder`]; this module turns that pod into the
//! template of a Deployment, ReplicaSet, ReplicationController, StatefulSet, DaemonSet, Job or
//! CronJob, builds ConfigMaps, Secrets and the volumes that consume them, and waits on sets of
//! objects (every pod of a controller, every job of a CronJob) through one watch.
//!
//! The object builders are pure functions (unit-tested below); [`Framework::create`] stamps the
//! run-id label and the case namespace on whatever it creates, and [`Framework::wait_list`] is
//! the list counterpart of [`Framework::wait_for`]: it watches everything matching a label
//! selector and returns once a predicate over the whole set holds.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, ReplicaSetSpec, StatefulSet,
    StatefulSetSpec,
};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, Job, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapProjection, ConfigMapVolumeSource, DownwardAPIProjection, DownwardAPIVolumeFile,
    DownwardAPIVolumeSource, EmptyDirVolumeSource, KeyToPath, ObjectFieldSelector, Pod, PodTemplateSpec,
    ProjectedVolumeSource, ReplicationController, ReplicationControllerSpec, ResourceFieldSelector, Secret,
    SecretProjection, SecretVolumeSource, Volume, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::pods::PodBuilder;
use super::{CaseError, Framework, RUN_ID_LABEL};
use crate::os::Os;

// ---------------------------------------------------------------------------------------------
// Pod templates and controller objects (pure).
// ---------------------------------------------------------------------------------------------

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

fn meta(name: &str) -> ObjectMeta {
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

// ---------------------------------------------------------------------------------------------
// ConfigMaps, Secrets and the volumes that consume them (pure).
// ---------------------------------------------------------------------------------------------

/// A ConfigMap with string `data`.
pub fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: meta(name),
        data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..Default::default()
    }
}

/// A Secret (type Opaque) whose `data` holds the bytes of the given strings.
pub fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: meta(name),
        type_: Some("Opaque".into()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

fn key_paths(items: &[(&str, &str)]) -> Option<Vec<KeyToPath>> {
    (!items.is_empty()).then(|| {
        items
            .iter()
            .map(|(key, path)| KeyToPath {
                key: key.to_string(),
                path: path.to_string(),
                mode: None,
            })
            .collect()
    })
}

/// A volume `volume` showing ConfigMap `config_map`; `items` maps keys to file paths (empty:
/// every key as a file of its own name).
pub fn config_map_volume(volume: &str, config_map: &str, items: &[(&str, &str)]) -> Volume {
    Volume {
        name: volume.into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.into(),
            items: key_paths(items),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A volume `volume` showing Secret `secret`; `items` as for [`config_map_volume`].
pub fn secret_volume(volume: &str, secret: &str, items: &[(&str, &str)]) -> Volume {
    Volume {
        name: volume.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.into()),
            items: key_paths(items),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An emptyDir volume on the default medium.
pub fn empty_dir_volume(volume: &str) -> Volume {
    Volume {
        name: volume.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    }
}

/// One downward API file: a pod field (`metadata.name`, `metadata.labels`…) or a container
/// resource (`limits.cpu`, `requests.memory`… of container `container`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownwardItem {
    /// `path` shows pod field `field_path`.
    Field {
        /// File path inside the volume.
        path: String,
        /// The pod field, e.g. `metadata.name`.
        field_path: String,
    },
    /// `path` shows `resource` of `container`.
    Resource {
        /// File path inside the volume.
        path: String,
        /// The container whose resources are shown.
        container: String,
        /// `limits.cpu`, `requests.memory`…
        resource: String,
    },
}

impl DownwardItem {
    /// A pod field item.
    pub fn field(path: &str, field_path: &str) -> DownwardItem {
        DownwardItem::Field {
            path: path.into(),
            field_path: field_path.into(),
        }
    }

    /// A container resource item.
    pub fn resource(path: &str, container: &str, resource: &str) -> DownwardItem {
        DownwardItem::Resource {
            path: path.into(),
            container: container.into(),
            resource: resource.into(),
        }
    }

    fn to_file(&self) -> DownwardAPIVolumeFile {
        match self {
            DownwardItem::Field { path, field_path } => DownwardAPIVolumeFile {
                path: path.clone(),
                field_ref: Some(ObjectFieldSelector {
                    field_path: field_path.clone(),
                    api_version: Some("v1".into()),
                }),
                ..Default::default()
            },
            DownwardItem::Resource {
                path,
                container,
                resource,
            } => DownwardAPIVolumeFile {
                path: path.clone(),
                resource_field_ref: Some(ResourceFieldSelector {
                    container_name: Some(container.clone()),
                    resource: resource.clone(),
                    divisor: None,
                }),
                ..Default::default()
            },
        }
    }
}

/// A downward API volume with `items`.
pub fn downward_volume(volume: &str, items: &[DownwardItem]) -> Volume {
    Volume {
        name: volume.into(),
        downward_api: Some(DownwardAPIVolumeSource {
            items: Some(items.iter().map(DownwardItem::to_file).collect()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// One source of a projected volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Projection {
    /// A ConfigMap with key→path items (empty: every key).
    ConfigMap(String, Vec<(String, String)>),
    /// A Secret with key→path items (empty: every key).
    Secret(String, Vec<(String, String)>),
    /// Downward API items.
    Downward(Vec<DownwardItem>),
}

/// A projected volume combining `sources`.
pub fn projected_volume(volume: &str, sources: &[Projection]) -> Volume {
    let items = |pairs: &Vec<(String, String)>| {
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, p)| (k.as_str(), p.as_str())).collect();
        key_paths(&borrowed)
    };
    let sources = sources
        .iter()
        .map(|s| match s {
            Projection::ConfigMap(name, pairs) => VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: name.clone(),
                    items: items(pairs),
                    optional: None,
                }),
                ..Default::default()
            },
            Projection::Secret(name, pairs) => VolumeProjection {
                secret: Some(SecretProjection {
                    name: name.clone(),
                    items: items(pairs),
                    optional: None,
                }),
                ..Default::default()
            },
            Projection::Downward(list) => VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: Some(list.iter().map(DownwardItem::to_file).collect()),
                }),
                ..Default::default()
            },
        })
        .collect();
    Volume {
        name: volume.into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(sources),
            default_mode: None,
        }),
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Reading what containers print.
// ---------------------------------------------------------------------------------------------

/// The shell script that prints the container's environment, one `NAME=value` per line.
///
/// Linux `env`; Windows `cmd /c set`. This belongs in the OS profile (`Os::print_env`); it lives
/// here until the profile grows that method, and nothing outside this module calls it.
pub fn print_env_script(os: Os) -> &'static str {
    match os {
        Os::Linux => "env",
        Os::Windows => "set",
    }
}

/// Parses `NAME=value` lines (what `env` and `set` print) into a map; other lines are ignored.
/// Windows line ends are accepted.
pub fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_end_matches('\r');
            let (k, v) = line.split_once('=')?;
            (!k.is_empty() && !k.contains(' ')).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// Checks that `env` holds every `(name, value)` of `expected`; the error lists what differs.
///
/// # Errors
/// A message naming each missing or different variable, and `where_` (pod, node).
pub fn expect_env(env: &BTreeMap<String, String>, expected: &[(&str, &str)], where_: &str) -> Result<(), CaseError> {
    let wrong: Vec<String> = expected
        .iter()
        .filter(|(k, v)| env.get(*k).map(String::as_str) != Some(*v))
        .map(|(k, v)| format!("{k}: expected {v:?}, got {:?}", env.get(*k)))
        .collect();
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(CaseError::failed(format!(
            "environment of {where_} is wrong: {} (saw {} variables)",
            wrong.join("; "),
            env.len()
        )))
    }
}

// ---------------------------------------------------------------------------------------------
// Creating objects and waiting on sets of them.
// ---------------------------------------------------------------------------------------------

/// A bound for the short "it should stay this way" checks (upstream `framework.Poll` windows).
pub const CONSISTENTLY: Duration = Duration::from_secs(10);

impl Framework {
    /// Creates `obj` in the case namespace, adding the run-id label (so `cleanup` finds it).
    ///
    /// # Errors
    /// The API's refusal, naming the object.
    pub async fn create<K>(&self, obj: &K) -> Result<K, CaseError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + Serialize + DeserializeOwned,
        <K as Resource>::DynamicType: Default,
    {
        let mut obj = obj.clone();
        let kind = K::kind(&K::DynamicType::default()).to_string();
        obj.meta_mut().namespace = Some(self.ns().to_string());
        obj.meta_mut()
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(RUN_ID_LABEL.into(), self.run().run_id.clone());
        let name = obj.name_any();
        self.step(format!("creating {kind} {name}"));
        self.api::<K>()
            .create(&PostParams::default(), &obj)
            .await
            .map_err(|e| CaseError::from(e).context(format!("creating {kind} {name}")))
    }

    /// Pods of the case namespace matching `selector` (`k=v,…`), terminating ones left out.
    ///
    /// # Errors
    /// When listing fails.
    pub async fn pods_matching(&self, selector: &str) -> Result<Vec<Pod>, CaseError> {
        let list = self.api::<Pod>().list(&ListParams::default().labels(selector)).await?;
        Ok(list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect())
    }

    /// Watches every `K` matching `selector` in the case namespace until `cond` holds for the
    /// whole set (after the initial list completed), at most until the case deadline.
    ///
    /// # Errors
    /// On timeout: "timed out after … waiting for <why>; last seen: <names and summaries>".
    pub async fn wait_list<K, C>(&self, api: &Api<K>, selector: &str, cond: C, why: &str) -> Result<Vec<K>, CaseError>
    where
        K: Resource + Clone + Debug + Send + DeserializeOwned + Serialize + 'static,
        K::DynamicType: Default,
        C: Fn(&[K]) -> bool,
    {
        self.wait_list_within(api, selector, cond, why, self.remaining()).await
    }

    /// Like [`Framework::wait_list`] with a bound shorter than the case deadline.
    ///
    /// # Errors
    /// As [`Framework::wait_list`].
    pub async fn wait_list_within<K, C>(
        &self,
        api: &Api<K>,
        selector: &str,
        cond: C,
        why: &str,
        within: Duration,
    ) -> Result<Vec<K>, CaseError>
    where
        K: Resource + Clone + Debug + Send + DeserializeOwned + Serialize + 'static,
        K::DynamicType: Default,
        C: Fn(&[K]) -> bool,
    {
        let within = within.min(self.remaining());
        let start = Instant::now();
        let config = watcher::Config::default().labels(selector);
        let mut stream = watcher::watcher(api.clone(), config).boxed();
        let mut current: BTreeMap<String, K> = BTreeMap::new();
        let mut buffer: BTreeMap<String, K> = BTreeMap::new();
        let mut listed = false;
        let result = tokio::time::timeout(within, async {
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Init) => buffer.clear(),
                    Ok(watcher::Event::InitApply(o)) => {
                        buffer.insert(o.name_any(), o);
                    }
                    Ok(watcher::Event::InitDone) => {
                        current = std::mem::take(&mut buffer);
                        listed = true;
                    }
                    Ok(watcher::Event::Apply(o)) => {
                        current.insert(o.name_any(), o);
                    }
                    Ok(watcher::Event::Delete(o)) => {
                        current.remove(&o.name_any());
                    }
                    Err(e) => tracing::debug!(selector, error = %e, "watch error while waiting on a list"),
                }
                if listed {
                    let items: Vec<K> = current.values().cloned().collect();
                    if cond(&items) {
                        return Ok(items);
                    }
                }
            }
            Err(CaseError::failed(format!(
                "watch on {selector} ended while waiting for {why}"
            )))
        })
        .await;
        match result {
            Ok(r) => r,
            Err(_) => {
                let seen: Vec<String> = current
                    .values()
                    .map(|o| {
                        let v = serde_json::to_value(o).unwrap_or_default();
                        format!("{} [{}]", o.name_any(), super::wait::summarize(&v))
                    })
                    .collect();
                Err(CaseError::failed(format!(
                    "timed out after {:.1?} waiting for {why} (selector {selector}); last seen {} object(s): {}",
                    start.elapsed(),
                    seen.len(),
                    if seen.is_empty() {
                        "none".to_string()
                    } else {
                        seen.join("; ")
                    }
                )))
            }
        }
    }

    /// Waits until exactly `n` non-terminating pods match `selector` and all are Running and
    /// Ready; returns them sorted by name.
    ///
    /// # Errors
    /// On timeout, with every matching pod's state.
    pub async fn wait_pods_ready(&self, selector: &str, n: usize) -> Result<Vec<Pod>, CaseError> {
        let ready = super::wait::conditions::is_pod_ready();
        let api = self.api::<Pod>();
        let pods = self
            .wait_list(
                &api,
                selector,
                |pods: &[Pod]| {
                    let live: Vec<&Pod> = pods
                        .iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_none())
                        .collect();
                    live.len() == n
                        && live
                            .iter()
                            .all(|p| kube::runtime::wait::Condition::matches_object(&ready, Some(*p)))
                },
                &format!("{n} running and ready pod(s)"),
            )
            .await?;
        let mut live: Vec<Pod> = pods
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        live.sort_by_key(ResourceExt::name_any);
        Ok(live)
    }

    /// Runs `pod` to completion, requires phase Succeeded, and returns the logs of `container`
    /// (upstream `TestContainerOutput`).
    ///
    /// # Errors
    /// When the pod fails (the message carries its logs and state) or does not finish in time.
    pub async fn container_output(&self, pod: &PodBuilder, container: &str) -> Result<String, CaseError> {
        let done = self.run_pod_to_completion(pod).await?;
        let phase = done.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        let logs = self
            .logs(pod.name(), Some(container))
            .await
            .unwrap_or_else(|e| format!("<no logs: {e}>"));
        if phase != "Succeeded" {
            let v = serde_json::to_value(&done).unwrap_or_default();
            return Err(CaseError::failed(format!(
                "pod {} on node {} ended {phase}, expected Succeeded ({}); logs: {logs:?}",
                pod.name(),
                super::pod_node(&done),
                super::wait::summarize(&v)
            )));
        }
        Ok(logs)
    }

    /// The environment `container` of a run-to-completion pod sees: the pod's command is
    /// replaced by the OS's print-environment script, and its output parsed.
    ///
    /// # Errors
    /// As [`Framework::container_output`].
    pub async fn container_env(
        &self,
        pod: &PodBuilder,
        container: &str,
    ) -> Result<BTreeMap<String, String>, CaseError> {
        Ok(parse_env(&self.container_output(pod, container).await?))
    }

    /// Asserts that the file at `path` in `container` of running pod `pod` eventually reads
    /// `expected` (trimmed), re-reading until `within` (bounded by the case deadline), like
    /// upstream's `Eventually(pollLogs)`. Volume updates reach the kubelet asynchronously, hence
    /// the retry.
    ///
    /// # Errors
    /// A failure with the last content read.
    pub async fn eventually_file_reads(
        &self,
        pod: &str,
        container: Option<&str>,
        os: Os,
        path: &str,
        expected: &str,
        within: Duration,
    ) -> Result<(), CaseError> {
        self.eventually_file_matches(
            pod,
            container,
            os,
            path,
            |text| text == expected,
            &format!("read {expected:?}"),
            within,
        )
        .await
        .map(|_| ())
    }

    /// Re-reads the file at `path` in `container` of running pod `pod` (once a second) until its
    /// trimmed content satisfies `pred`, at most `within`; returns the content. A missing file
    /// (non-zero exit) never satisfies the predicate.
    ///
    /// # Errors
    /// A failure naming `what` was expected and the last read.
    #[expect(
        clippy::too_many_arguments,
        reason = "pod, container, OS, path, predicate, description and bound are all needed"
    )]
    pub async fn eventually_file_matches(
        &self,
        pod: &str,
        container: Option<&str>,
        os: Os,
        path: &str,
        pred: impl Fn(&str) -> bool,
        what: &str,
        within: Duration,
    ) -> Result<String, CaseError> {
        // A few seconds short of the case deadline, so this failure (naming the file and the
        // last read) is reported instead of the bare case timeout.
        let deadline = Instant::now() + within.min(self.remaining().saturating_sub(Duration::from_secs(3)));
        let mut last;
        // One real read per second: a rate limit on repeated requests, not a fixed sleep.
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let out = self.exec_shell(pod, container, os, &os.cat(path)).await?;
            let text = out.out();
            if out.exit_code == 0 && pred(&text) {
                return Ok(text);
            }
            last = format!("exit {} stdout {text:?} stderr {:?}", out.exit_code, out.stderr.trim());
            if Instant::now() >= deadline {
                break;
            }
        }
        Err(CaseError::failed(format!(
            "file {path} in pod {pod} should {what} within {within:?}; last read: {last}"
        )))
    }

    /// Watches object `name` for `within` and fails as soon as `holds` stops being true (the
    /// object vanishing counts as not holding); returns the last state seen. This is upstream's
    /// `Consistently`, built on a watch instead of a poll.
    ///
    /// # Errors
    /// "<kind> <name> stopped <why> after …: <state>" when the predicate broke, or a watch failure.
    pub async fn consistently<K>(
        &self,
        api: &Api<K>,
        name: &str,
        holds: impl Fn(&K) -> bool,
        why: &str,
        within: Duration,
    ) -> Result<Option<K>, CaseError>
    where
        K: Clone + Debug + Send + DeserializeOwned + Resource + Serialize + 'static,
        K::DynamicType: Default,
    {
        let kind = K::kind(&K::DynamicType::default()).to_string();
        // An observation the case's budget cannot cover proves nothing: say so rather than
        // report a shortened watch as a pass (upstream's Consistently would hit the test timeout).
        let budget = self.remaining();
        if budget < within {
            return Err(CaseError::failed(format!(
                "{kind} {name} must stay {why} for {within:?}, but the case has only {budget:.1?} left; raise --test-timeout"
            )));
        }
        let start = Instant::now();
        let mut last: Option<K> = None;
        let mut stream = watcher::watch_object(api.clone(), name).boxed();
        let broke = tokio::time::timeout(within, async {
            while let Some(event) = stream.next().await {
                match event {
                    Ok(Some(obj)) => {
                        if !holds(&obj) {
                            return Some(Some(obj));
                        }
                        last = Some(obj);
                    }
                    Ok(None) => return Some(None),
                    Err(e) => tracing::debug!(kind, name, error = %e, "watch error while checking consistently"),
                }
            }
            None
        })
        .await;
        match broke {
            Err(_) => Ok(last),
            Ok(Some(state)) => {
                let seen = match &state {
                    Some(obj) => super::wait::summarize(&serde_json::to_value(obj).unwrap_or_default()),
                    None => "absent".into(),
                };
                Err(CaseError::failed(format!(
                    "{kind} {name} stopped {why} after {:.1?}: {seen}",
                    start.elapsed()
                )))
            }
            Ok(None) => Err(CaseError::failed(format!(
                "watch on {kind} {name} ended while checking it stays {why}"
            ))),
        }
    }

    /// Re-reads the logs of `container` of `pod` (once a second) until they contain `needle`,
    /// at most `within` (bounded by the case deadline); returns them.
    ///
    /// # Errors
    /// A failure with the end of the last logs read.
    pub async fn eventually_logs_contain(
        &self,
        pod: &str,
        container: Option<&str>,
        needle: &str,
        within: Duration,
    ) -> Result<String, CaseError> {
        let deadline = Instant::now() + within.min(self.remaining());
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut last;
        loop {
            tick.tick().await;
            match self.logs(pod, container).await {
                Ok(text) if text.contains(needle) => return Ok(text),
                Ok(text) => last = text,
                Err(e) => last = e.to_string(),
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        let tail: String = last
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join(" | ");
        Err(CaseError::failed(format!(
            "logs of pod {pod} did not contain {needle:?} within {within:?}; last lines: {tail:?}"
        )))
    }
}

/// The names of `objs`, sorted.
pub fn names<K: Resource>(objs: &[K]) -> BTreeSet<String> {
    objs.iter().map(|o| o.meta().name.clone().unwrap_or_default()).collect()
}

/// Whether `pod` has a controller owner reference with `uid`.
pub fn is_controlled_by(pod: &Pod, uid: &str) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// The restart count summed over the pod's containers.
pub fn restart_count(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .map(|s| s.container_statuses.iter().flatten().map(|c| c.restart_count).sum())
        .unwrap_or(0)
}

/// Whether the pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Conditions over controller objects for [`Framework::wait_for`].
pub mod conditions {
    use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::ReplicationController;
    use kube::runtime::wait::Condition;

    /// The ReplicaSet has `n` ready replicas and observed its latest generation.
    #[must_use]
    pub fn replica_set_ready(n: i32) -> impl Condition<ReplicaSet> {
        move |rs: Option<&ReplicaSet>| {
            rs.is_some_and(|rs| {
                rs.status.as_ref().is_some_and(|s| {
                    s.ready_replicas.unwrap_or(0) == n
                        && s.replicas == n
                        && s.observed_generation >= rs.metadata.generation
                })
            })
        }
    }

    /// The ReplicationController has `n` ready replicas.
    #[must_use]
    pub fn replication_controller_ready(n: i32) -> impl Condition<ReplicationController> {
        move |rc: Option<&ReplicationController>| {
            rc.and_then(|rc| rc.status.as_ref())
                .is_some_and(|s| s.ready_replicas.unwrap_or(0) == n && s.replicas == n)
        }
    }

    /// The StatefulSet reports exactly `n` replicas, all ready.
    #[must_use]
    pub fn stateful_set_at(n: i32) -> impl Condition<StatefulSet> {
        move |s: Option<&StatefulSet>| {
            s.and_then(|s| s.status.as_ref())
                .is_some_and(|st| st.replicas == n && st.ready_replicas.unwrap_or(0) == n)
        }
    }

    /// The Job has the condition `type_` (`Complete`, `Failed`, `SuccessCriteriaMet`…) True.
    #[must_use]
    pub fn job_has_condition(type_: &'static str) -> impl Condition<Job> {
        move |j: Option<&Job>| {
            j.and_then(|j| j.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
        }
    }

    /// The Job reports at least `n` active pods.
    #[must_use]
    pub fn job_active_at_least(n: i32) -> impl Condition<Job> {
        move |j: Option<&Job>| {
            j.and_then(|j| j.status.as_ref())
                .is_some_and(|s| s.active.unwrap_or(0) >= n)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use serde_json::json;

        #[test]
        fn job_condition_needs_true_status() {
            let done: Job =
                serde_json::from_value(json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}))
                    .unwrap();
            let not: Job =
                serde_json::from_value(json!({"status": {"conditions": [{"type": "Complete", "status": "False"}]}}))
                    .unwrap();
            assert!(job_has_condition("Complete").matches_object(Some(&done)));
            assert!(!job_has_condition("Complete").matches_object(Some(&not)));
            assert!(!job_has_condition("Failed").matches_object(Some(&done)));
            assert!(!job_has_condition("Complete").matches_object(None));
        }

        #[test]
        fn replica_set_ready_needs_observed_generation() {
            let stale: ReplicaSet = serde_json::from_value(json!({"metadata": {"generation": 2},
                "status": {"replicas": 2, "readyReplicas": 2, "observedGeneration": 1}}))
            .unwrap();
            let fresh: ReplicaSet = serde_json::from_value(json!({"metadata": {"generation": 2},
                "status": {"replicas": 2, "readyReplicas": 2, "observedGeneration": 2}}))
            .unwrap();
            assert!(!replica_set_ready(2).matches_object(Some(&stale)));
            assert!(replica_set_ready(2).matches_object(Some(&fresh)));
            assert!(!replica_set_ready(3).matches_object(Some(&fresh)));
        }
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
    fn secrets_hold_bytes_and_config_maps_strings() {
        let s = secret("s", &[("data-1", "value-1")]);
        assert_eq!(s.data.unwrap()["data-1"].0, b"value-1");
        let c = config_map("c", &[("k", "v")]);
        assert_eq!(c.data.unwrap()["k"], "v");
    }

    #[test]
    fn volumes_map_items() {
        let v = config_map_volume("vol", "cm", &[("data-2", "path/to/data-2")]);
        let items = v.config_map.unwrap().items.unwrap();
        assert_eq!(
            (items[0].key.as_str(), items[0].path.as_str()),
            ("data-2", "path/to/data-2")
        );
        assert!(secret_volume("v", "s", &[]).secret.unwrap().items.is_none());
        let p = projected_volume(
            "p",
            &[
                Projection::ConfigMap("cm".into(), vec![]),
                Projection::Downward(vec![DownwardItem::resource("cpu", "c", "limits.cpu")]),
            ],
        );
        let sources = p.projected.unwrap().sources.unwrap();
        assert_eq!(sources.len(), 2);
        let file = &sources[1].downward_api.as_ref().unwrap().items.as_ref().unwrap()[0];
        assert_eq!(file.resource_field_ref.as_ref().unwrap().resource, "limits.cpu");
    }

    #[test]
    fn env_output_parses_on_both_shells() {
        let env = parse_env("PATH=/bin\nCONFIG_DATA_1=value-1\r\nnot a line\nEMPTY=\nA=b=c\n");
        assert_eq!(env["CONFIG_DATA_1"], "value-1");
        assert_eq!(env["EMPTY"], "");
        assert_eq!(env["A"], "b=c");
        assert!(!env.contains_key("not a line"));
        assert!(expect_env(&env, &[("CONFIG_DATA_1", "value-1")], "pod p").is_ok());
        let err = expect_env(&env, &[("CONFIG_DATA_1", "value-2"), ("MISSING", "x")], "pod p").unwrap_err();
        let CaseError::Failed(msg) = err else {
            panic!("not a failure")
        };
        assert!(
            msg.contains("CONFIG_DATA_1: expected \"value-2\", got Some(\"value-1\")"),
            "{msg}"
        );
        assert!(msg.contains("MISSING"), "{msg}");
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
