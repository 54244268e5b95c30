//! Creating objects and waiting on sets of them: [`Framework::create`] stamps the run-id label
//! and the case namespace, [`Framework::wait_list`] watches everything matching a selector
//! until a predicate over the whole set holds, and small readers of pod state.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::output::parse_env;
use crate::framework::pods::PodBuilder;
use crate::framework::{CaseError, Framework, RUN_ID_LABEL};
use crate::os::Os;

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
        // Keyed by namespace and name: a cluster-wide `api` sees the same name in many namespaces.
        let key = |o: &K| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
        let config = watcher::Config::default().labels(selector);
        let mut stream = watcher::watcher(api.clone(), config).default_backoff().boxed();
        let mut current: BTreeMap<String, K> = BTreeMap::new();
        let mut buffer: BTreeMap<String, K> = BTreeMap::new();
        let mut listed = false;
        let result = tokio::time::timeout(within, async {
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Init) => buffer.clear(),
                    Ok(watcher::Event::InitApply(o)) => {
                        buffer.insert(key(&o), o);
                    }
                    Ok(watcher::Event::InitDone) => {
                        current = std::mem::take(&mut buffer);
                        listed = true;
                    }
                    Ok(watcher::Event::Apply(o)) => {
                        current.insert(key(&o), o);
                    }
                    Ok(watcher::Event::Delete(o)) => {
                        current.remove(&key(&o));
                    }
                    Err(e) => {
                        crate::cluster::retry::journal().record(crate::cluster::retry::Trouble::WatchRestart);
                        tracing::debug!(selector, error = %e, "watch error while waiting on a list");
                    }
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
                        format!("{} [{}]", o.name_any(), crate::framework::wait::summarize(&v))
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
        let ready = crate::framework::wait::conditions::is_pod_ready();
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
                crate::framework::pod_node(&done),
                crate::framework::wait::summarize(&v)
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
        let mut stream = watcher::watch_object(api.clone(), name).default_backoff().boxed();
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
                    Err(e) => {
                        crate::cluster::retry::journal().record(crate::cluster::retry::Trouble::WatchRestart);
                        tracing::debug!(kind, name, error = %e, "watch error while checking consistently");
                    }
                }
            }
            None
        })
        .await;
        match broke {
            Err(_) => Ok(last),
            Ok(Some(state)) => {
                let seen = match &state {
                    Some(obj) => crate::framework::wait::summarize(&serde_json::to_value(obj).unwrap_or_default()),
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

    /// Watches every `K` matching `selector` in the case namespace for `within` and fails as
    /// soon as `holds` stops being true for the whole set (the initial list included): upstream's
    /// `Consistently` over a list, built on a watch.
    ///
    /// # Errors
    /// "<why> stopped holding after …: <names and summaries>" when the predicate broke, a failure
    /// when the case's budget is shorter than `within`, or a watch failure.
    pub async fn consistently_list<K, C>(
        &self,
        api: &Api<K>,
        selector: &str,
        holds: C,
        why: &str,
        within: Duration,
    ) -> Result<(), CaseError>
    where
        K: Resource + Clone + Debug + Send + DeserializeOwned + Serialize + 'static,
        K::DynamicType: Default,
        C: Fn(&[K]) -> bool,
    {
        let budget = self.remaining();
        if budget < within {
            return Err(CaseError::failed(format!(
                "{why} must hold for {within:?}, but the case has only {budget:.1?} left; raise --test-timeout"
            )));
        }
        let start = Instant::now();
        // The inner wait looks for the predicate breaking and would outlast `within`; the
        // outer bound ending first means it held throughout.
        let broke = tokio::time::timeout(
            within,
            self.wait_list_within(api, selector, |items: &[K]| !holds(items), why, budget),
        )
        .await;
        match broke {
            Err(_) => Ok(()),
            Ok(Err(e)) => Err(e),
            Ok(Ok(items)) => {
                let seen: Vec<String> = items
                    .iter()
                    .map(|o| {
                        let v = serde_json::to_value(o).unwrap_or_default();
                        format!("{} [{}]", o.name_any(), crate::framework::wait::summarize(&v))
                    })
                    .collect();
                Err(CaseError::failed(format!(
                    "{why} stopped holding after {:.1?} (selector {selector}); saw {} object(s): {}",
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
