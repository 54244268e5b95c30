//! Deferred clean-up, as ginkgo's `DeferCleanup`: a case registers the removal of what lives
//! outside its namespace (cluster-scoped objects, bindings in `kube-system`) the moment it
//! creates it, and the executor runs those removals after the body however the body ended —
//! passed, failed, or cut off by the case timeout.
//!
//! Why not a clean-up call at the end of the body: a timed-out body is a dropped future, so
//! its last lines never run. An APIService left behind that way points at a backend its
//! namespace's deletion removes; aggregated discovery then fails for that group, and a namespace
//! controller that cannot discover every group holds every terminating namespace (upstream's
//! `NamespaceDeletionDiscoveryFailure`) — one timed-out case would stall the whole run's
//! clean-up. The run-wide label sweep (`run::cleanup`) comes only at the end of the run.

use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;

use super::{CaseError, CaseResult, Framework};

/// One registered clean-up: what it removes (for the step log) and the removal.
type Deferred = (String, BoxFuture<'static, CaseResult>);

/// The clean-ups a case attempt registered, in registration order.
#[derive(Default)]
pub(crate) struct DeferredCleanups(Mutex<Vec<Deferred>>);

impl DeferredCleanups {
    fn push(&self, what: String, cleanup: BoxFuture<'static, CaseResult>) {
        self.0.lock().expect("deferred clean-up lock").push((what, cleanup));
    }

    /// Runs and forgets every registered clean-up, newest first, each bounded by `within`;
    /// `step` hears each one's name before it starts.
    async fn run(&self, within: Duration, step: impl Fn(&str)) -> CaseResult {
        let pending: Vec<Deferred> = std::mem::take(&mut *self.0.lock().expect("deferred clean-up lock"));
        let mut failures = Vec::new();
        for (what, cleanup) in pending.into_iter().rev() {
            step(&what);
            match tokio::time::timeout(within, cleanup).await {
                Ok(Ok(()) | Err(CaseError::Skipped(_))) => {}
                Ok(Err(CaseError::Failed(m))) => failures.push(format!("{what}: {m}")),
                Err(_) => failures.push(format!("{what}: did not finish within {within:?}")),
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(CaseError::failed(format!(
                "deferred clean-up failed: {}",
                failures.join("; ")
            )))
        }
    }
}

impl std::fmt::Debug for DeferredCleanups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .0
            .lock()
            .map(|l| l.iter().map(|(w, _)| w.clone()).collect())
            .unwrap_or_default();
        f.debug_tuple("DeferredCleanups").field(&names).finish()
    }
}

impl Framework {
    /// Registers `cleanup` to run after the body, whatever its outcome. Clean-ups run last
    /// registered first (objects are removed in the reverse order of their creation); each
    /// should treat "already gone" (404) as done, since the body may have removed it itself.
    pub fn defer_cleanup(
        &self,
        what: impl Into<String>,
        cleanup: impl std::future::Future<Output = CaseResult> + Send + 'static,
    ) {
        self.deferred.push(what.into(), Box::pin(cleanup));
    }

    /// Runs the registered clean-ups (newest first), each bounded by `within`; every one runs
    /// even when an earlier one failed. Called by the executor once the body has ended.
    ///
    /// # Errors
    /// The failures, joined into one message naming each clean-up.
    pub async fn run_deferred_cleanups(&self, within: Duration) -> CaseResult {
        self.deferred
            .run(within, |what| self.step(format!("deferred clean-up: {what}")))
            .await
    }
}

/// Deletes a named object, where "already gone" counts as done: the shape of nearly every
/// deferred clean-up.
///
/// # Errors
/// The API's refusal, with `what` in front.
pub async fn delete_ignoring_absent<K>(api: kube::Api<K>, name: String, what: String) -> CaseResult
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    delete_with(api, name, what, kube::api::DeleteParams::default()).await
}

/// [`delete_ignoring_absent`] with delete options (a grace period of 0 for a pod whose own
/// period would hold its namespace's deletion).
///
/// # Errors
/// The API's refusal, with `what` in front.
pub async fn delete_with<K>(
    api: kube::Api<K>,
    name: String,
    what: String,
    params: kube::api::DeleteParams,
) -> CaseResult
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(&name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(CaseError::from(e).context(format!("deleting {what}"))),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[tokio::test]
    async fn clean_ups_run_newest_first_and_all_run_despite_a_failure() {
        let d = DeferredCleanups::default();
        let order = Arc::new(Mutex::new(Vec::new()));
        for i in 0..3 {
            let order = order.clone();
            d.push(
                format!("step {i}"),
                Box::pin(async move {
                    order.lock().unwrap().push(i);
                    if i == 1 {
                        Err(CaseError::failed("refused"))
                    } else {
                        Ok(())
                    }
                }),
            );
        }
        let steps = Mutex::new(Vec::new());
        let err = d
            .run(Duration::from_secs(5), |w| steps.lock().unwrap().push(w.to_string()))
            .await
            .unwrap_err();
        assert_eq!(*order.lock().unwrap(), vec![2, 1, 0]);
        assert_eq!(*steps.lock().unwrap(), vec!["step 2", "step 1", "step 0"]);
        assert_eq!(err, CaseError::failed("deferred clean-up failed: step 1: refused"));
        // Each runs once: a second call has nothing left.
        d.run(Duration::from_secs(5), |_| {}).await.unwrap();
    }

    #[tokio::test]
    async fn a_hung_clean_up_is_cut_off_and_named() {
        let d = DeferredCleanups::default();
        d.push("the hung one".into(), Box::pin(futures::future::pending()));
        let err = d.run(Duration::from_millis(50), |_| {}).await.unwrap_err();
        assert!(err.to_string().contains("the hung one: did not finish within"), "{err}");
    }
}
