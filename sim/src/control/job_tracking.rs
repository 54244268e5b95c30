//! Upstream's Job tracking with finalizers (pkg/controller/job/job_controller.go,
//! `trackJobStatusAndRemoveFinalizers`): every pod a Job creates (or adopts) carries the
//! `batch.kubernetes.io/job-tracking` finalizer, so a finished pod cannot vanish before the
//! controller has counted it. The controller first records a finished pod's UID in
//! `status.uncountedTerminatedPods`, then removes the finalizer, then moves the UID into
//! `succeeded`/`failed`. Without it an evicted pod (Failed with `DisruptionTarget`) was gone
//! before the controller saw the condition its `podFailurePolicy` matches on.
//!
//! Pods whose Job is gone, finished or being deleted, or which no Job controls any more, lose
//! the finalizer here (upstream's `syncOrphanPod`), else they would stay Terminating forever.
//!
//! [`RemovalExpectations`] is upstream's `finalizerExpectations`: the Job cache can run ahead
//! of the pod cache, and a pass that sees its own counted status but a pod still carrying the
//! finalizer it already removed would count that pod twice (a Job "complete" with one pod
//! still running, seen in CI under load).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{ApiContext, Result, is_not_found};
use super::informer::{Informer, Wake};
use super::plane::Ctx;
use super::util::controller_of;

/// The finalizer that keeps a Job's pod until the controller has counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

/// Whether `pod` still carries the tracking finalizer.
pub fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.finalizers().iter().any(|f| f == TRACKING_FINALIZER)
}

/// Removes the tracking finalizer from `pod` with upstream's strategic merge patch
/// (`$deleteFromPrimitiveList`), which leaves any other finalizer alone; a pod already gone
/// is no error.
pub async fn remove_tracking_finalizer(api: &Api<Pod>, pod: &Pod) -> Result<()> {
    let patch = json!({
        "metadata": {
            "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER],
            "uid": pod.metadata.uid,
        }
    });
    match api
        .patch(&pod.name_any(), &PatchParams::default(), &Patch::Strategic(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e).ctx("remove the tracking finalizer of", || {
            format!("pod {}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
        }),
    }
}

/// The pods whose tracking finalizer a Job's pass removed and whose removal the pod cache
/// does not show yet, by Job UID (upstream `finalizerExpectations`). Such a pod was counted
/// by the pass that removed the finalizer; later passes treat it as finalizer-free.
#[derive(Clone, Default)]
pub(crate) struct RemovalExpectations(Arc<Mutex<HashMap<String, BTreeSet<String>>>>);

impl RemovalExpectations {
    /// Records that the finalizer of pod `pod_uid` of Job `job_uid` was removed.
    pub(crate) fn removed(&self, job_uid: &str, pod_uid: &str) {
        let mut map = self.0.lock().expect("removal expectations lock");
        map.entry(job_uid.to_owned()).or_default().insert(pod_uid.to_owned());
    }

    /// The UIDs still expected for `job_uid`: those `owned` (the pod cache's view of the Job's
    /// pods) still shows with the finalizer. The rest were observed and are forgotten.
    pub(crate) fn pending(&self, job_uid: &str, owned: &[Arc<Pod>]) -> BTreeSet<String> {
        let mut map = self.0.lock().expect("removal expectations lock");
        let Some(set) = map.get_mut(job_uid) else {
            return BTreeSet::new();
        };
        set.retain(|uid| {
            owned
                .iter()
                .any(|p| p.metadata.uid.as_deref() == Some(uid.as_str()) && has_tracking_finalizer(p))
        });
        let out = set.clone();
        if set.is_empty() {
            map.remove(job_uid);
        }
        out
    }

    /// Forgets a Job that counts no more pods (finished or deleted).
    pub(crate) fn forget(&self, job_uid: &str) {
        self.0.lock().expect("removal expectations lock").remove(job_uid);
    }
}

/// Parses `status.completedIndexes` (`"0-2,4"`); malformed parts are skipped, as upstream's
/// `parseIndexesFromString` logs and skips them.
pub fn parse_indexes(s: &str, completions: i32) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<i32>(), b.parse::<i32>()),
            None => (part.parse::<i32>(), part.parse::<i32>()),
        };
        if let (Ok(lo), Ok(hi)) = (lo, hi) {
            out.extend((lo..=hi).filter(|i| *i >= 0 && *i < completions));
        }
    }
    out
}

/// Whether `pod` must lose its tracking finalizer because no live, unfinished Job (in the
/// `jobs` cache) controls it.
fn orphaned(pod: &Pod, jobs: &Informer<Job>) -> bool {
    let Some(owner) = controller_of(&pod.metadata) else {
        return true;
    };
    if owner.kind != "Job" || owner.api_version != "batch/v1" {
        // Another controller's pod: its finalizers are not ours to touch.
        return false;
    }
    let job = jobs
        .get(pod.metadata.namespace.as_deref(), &owner.name)
        .filter(|j| j.metadata.uid.as_deref() == Some(owner.uid.as_str()));
    match job {
        None => true,
        Some(j) => j.metadata.deletion_timestamp.is_some() || super::job::is_finished(&j),
    }
}

/// Upstream's orphan-pod sync: removes the tracking finalizer of every pod whose Job is gone,
/// finished or being deleted, or that lost its controller reference. Runs beside the Job
/// sync loop until cancelled.
pub(crate) async fn release_orphans(ctx: &Ctx, jobs: &Informer<Job>, pods: &Informer<Pod>) -> Result<()> {
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = async { jobs.ready().await?; pods.ready().await } => r?,
    }
    let mut wake = Wake::new(vec![jobs.subscribe(), pods.subscribe()], ctx.cfg.resync);
    loop {
        let mut retry = None;
        let orphans: Vec<Arc<Pod>> = pods
            .list()
            .into_iter()
            .filter(|p| has_tracking_finalizer(p) && orphaned(p, jobs))
            .collect();
        for pod in orphans {
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
            if let Err(e) = remove_tracking_finalizer(&api, &pod).await {
                tracing::warn!(pod = %pod.name_any(), error = %super::error::chain(&e), "orphan pod keeps its finalizer");
                retry = Some(std::time::Duration::from_secs(1));
            } else {
                tracing::debug!(pod = %pod.name_any(), "removed the tracking finalizer of an orphan pod");
            }
        }
        if !wake.next(retry, &ctx.cancel).await {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_indexes_parse_back() {
        let s: BTreeSet<i32> = [0, 1, 2, 4].into_iter().collect();
        assert_eq!(parse_indexes("0-2,4", 5), s);
        assert_eq!(parse_indexes("", 3), BTreeSet::new());
        // Out of range and malformed parts are dropped.
        assert_eq!(parse_indexes("1,x,7,2-3", 3), [1, 2].into_iter().collect());
    }

    fn pod(uid: &str, finalizer: bool) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        if finalizer {
            p.metadata.finalizers = Some(vec![TRACKING_FINALIZER.into()]);
        }
        Arc::new(p)
    }

    #[test]
    fn a_removal_is_expected_until_the_cache_shows_it() {
        let exp = RemovalExpectations::default();
        exp.removed("job", "a");
        exp.removed("job", "b");
        // The cache still shows both with the finalizer: both pending.
        let stale = [pod("a", true), pod("b", true)];
        assert_eq!(exp.pending("job", &stale), ["a".to_owned(), "b".to_owned()].into());
        // `a` observed without it, `b` gone: neither is pending any more, for good.
        assert_eq!(exp.pending("job", &[pod("a", false)]), BTreeSet::new());
        assert_eq!(exp.pending("job", &stale), BTreeSet::new());
        assert_eq!(exp.pending("other", &stale), BTreeSet::new());
        exp.removed("job", "c");
        exp.forget("job");
        assert_eq!(exp.pending("job", &[pod("c", true)]), BTreeSet::new());
    }

    #[test]
    fn only_the_tracking_finalizer_counts() {
        let mut pod = Pod::default();
        assert!(!has_tracking_finalizer(&pod));
        pod.metadata.finalizers = Some(vec!["example.com/other".into()]);
        assert!(!has_tracking_finalizer(&pod));
        pod.metadata.finalizers = Some(vec!["example.com/other".into(), TRACKING_FINALIZER.into()]);
        assert!(has_tracking_finalizer(&pod));
    }
}
