//! Raw watch notifications, for the cases that check the watch protocol itself (upstream
//! apimachinery/watch.go): which ADDED, MODIFIED and DELETED events a label-selected watch
//! delivers, from which resourceVersion, in which order.
//!
//! The main type is [`EventWatch`]. [`Framework::wait_for`] only needs the latest state, so
//! kube's watcher may re-list under it; these cases need the events themselves, so a watch the
//! server ends (a `--min-request-timeout` expiry, a restart, a load balancer cut) is resumed from
//! the last resourceVersion seen, as client-go's `RetryWatcher` does. A resume answered 410
//! (the history was compacted past it) either fails, naming the compaction, or, for watches
//! opened with [`Resume::Relist`], lists again and delivers the difference from what was seen
//! before, as a reflector does (coalesced, but nothing lost).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::{self, Debug};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::{CaseError, Framework, render_kube_error};
use crate::cluster::retry::{Trouble, backoff, journal};

/// The type of a delivered notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        })
    }
}

/// One delivered notification: its type and the object it carried.
#[derive(Debug, Clone)]
pub struct Notification<K> {
    /// ADDED, MODIFIED or DELETED.
    pub kind: EventType,
    /// The object as the event carried it.
    pub object: K,
}

impl<K: Resource> Notification<K> {
    /// The object's resourceVersion.
    pub fn resource_version(&self) -> String {
        self.object.resource_version().unwrap_or_default()
    }

    /// `MODIFIED cm-1@123`, for messages.
    pub fn describe(&self) -> String {
        format!("{} {}@{}", self.kind, self.object.name_any(), self.resource_version())
    }
}

/// What a watch does when the server answers its resume with 410 Gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Fail: the case checks exact history (events from a given resourceVersion, their order).
    Exact,
    /// List again and deliver the difference from what was seen (a reflector's relist).
    Relist,
}

/// A label-selected watch of `K` that resumes after the server ends it.
pub struct EventWatch<K> {
    api: Api<K>,
    selector: Selector,
    resume: Resume,
    rv: String,
    stream: Option<BoxStream<'static, kube::Result<WatchEvent<K>>>>,
    /// Objects seen alive, by name, for a relist's difference.
    known: BTreeMap<String, K>,
    queued: VecDeque<Notification<K>>,
    /// Every notification delivered so far, for failure messages.
    seen: Vec<String>,
    /// Whether a resume met 410 Gone under [`Resume::Exact`] (the history is lost).
    expired: bool,
}

/// What a watch selects on: a label selector, or a field selector (upstream's CRD watch
/// selects `metadata.name=NAME`).
#[derive(Debug, Clone)]
enum Selector {
    Labels(String),
    Fields(String),
}

impl Selector {
    fn apply_list(&self, p: ListParams) -> ListParams {
        match self {
            Selector::Labels(s) => p.labels(s),
            Selector::Fields(s) => p.fields(s),
        }
    }

    fn apply_watch(&self, p: WatchParams) -> WatchParams {
        match self {
            Selector::Labels(s) => p.labels(s),
            Selector::Fields(s) => p.fields(s),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Labels(s) => write!(f, "labels {s}"),
            Selector::Fields(s) => write!(f, "fields {s}"),
        }
    }
}

impl Framework {
    /// Opens a watch of `K` through `api` with label selector `selector`, from `from` (a
    /// resourceVersion) or, with `None`, from now: a list with the selector gives the starting
    /// resourceVersion and the objects already there are not notified (upstream's watches start
    /// in namespaces that hold no matching object).
    ///
    /// # Errors
    /// When the first list fails.
    pub async fn watch_events<K>(
        &self,
        api: &Api<K>,
        selector: &str,
        from: Option<&str>,
        resume: Resume,
    ) -> Result<EventWatch<K>, CaseError>
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    {
        self.open_event_watch(api, Selector::Labels(selector.to_string()), from, resume)
            .await
    }

    /// [`Framework::watch_events`] with a field selector (`metadata.name=NAME`) instead of a
    /// label selector, from now.
    ///
    /// # Errors
    /// When the first list fails.
    pub async fn watch_events_by_fields<K>(
        &self,
        api: &Api<K>,
        fields: &str,
        resume: Resume,
    ) -> Result<EventWatch<K>, CaseError>
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    {
        self.open_event_watch(api, Selector::Fields(fields.to_string()), None, resume)
            .await
    }

    async fn open_event_watch<K>(
        &self,
        api: &Api<K>,
        selector: Selector,
        from: Option<&str>,
        resume: Resume,
    ) -> Result<EventWatch<K>, CaseError>
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    {
        let (rv, known) = match from {
            Some(rv) => (rv.to_string(), BTreeMap::new()),
            None => list_state(api, &selector).await?,
        };
        self.step(format!("watching with {selector} from resourceVersion {rv}"));
        // Opened now, as upstream's watch is: what happens from here on is the watch's to see.
        // A failed first attempt is retried by the first `next`.
        let stream = match open(api, &selector, &rv).await {
            Ok(s) => Some(s),
            Err(e) => {
                journal().record(Trouble::WatchRestart);
                tracing::debug!(%selector, error = %e, "watch failed to open; retrying on first read");
                None
            }
        };
        Ok(EventWatch {
            api: api.clone(),
            selector,
            resume,
            rv,
            stream,
            known,
            queued: VecDeque::new(),
            seen: Vec::new(),
            expired: false,
        })
    }
}

/// The resourceVersion of a list with `selector` and the objects it held, by name.
async fn list_state<K>(api: &Api<K>, selector: &Selector) -> Result<(String, BTreeMap<String, K>), CaseError>
where
    K: Resource + Clone + Debug + DeserializeOwned,
{
    let list = api.list(&selector.apply_list(ListParams::default())).await?;
    let rv = list.metadata.resource_version.unwrap_or_default();
    let known = list.items.into_iter().map(|o| (o.name_any(), o)).collect();
    Ok((rv, known))
}

impl<K> EventWatch<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    /// The next notification, or `None` when `within` passes without one.
    ///
    /// # Errors
    /// When the server answers the watch with an error other than a cut, or (with
    /// [`Resume::Exact`]) a resume with 410 Gone.
    pub async fn next(&mut self, within: Duration) -> Result<Option<Notification<K>>, CaseError> {
        let until = Instant::now() + within;
        let mut failures = 0u32;
        loop {
            if let Some(n) = self.queued.pop_front() {
                return Ok(Some(self.deliver(n)));
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let stream = match self.stream.as_mut() {
                Some(s) => s,
                None => match open(&self.api, &self.selector, &self.rv).await {
                    Ok(s) => self.stream.insert(s),
                    Err(e) => {
                        failures += 1;
                        journal().record(Trouble::WatchRestart);
                        tracing::debug!(selector = %self.selector, error = %e, "watch failed to open; retrying");
                        pause(backoff(failures).min(left)).await;
                        continue;
                    }
                },
            };
            let event = match tokio::time::timeout(left, stream.next()).await {
                Err(_) => return Ok(None),
                Ok(e) => e,
            };
            match event {
                // Ended (cut, timeout) or broken (reset, restart): resume from the last version.
                None | Some(Err(_)) => {
                    journal().record(Trouble::WatchRestart);
                    self.stream = None;
                }
                Some(Ok(WatchEvent::Bookmark(b))) => self.rv = b.metadata.resource_version,
                Some(Ok(WatchEvent::Error(status))) if status.code == 410 => {
                    self.stream = None;
                    self.expired(&status.message).await?;
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    return Err(CaseError::failed(format!(
                        "the watch with {} answered an error: {} ({} {})",
                        self.selector, status.message, status.code, status.reason
                    )));
                }
                Some(Ok(WatchEvent::Added(o))) => self.queued.push_back(notification(EventType::Added, o)),
                Some(Ok(WatchEvent::Modified(o))) => self.queued.push_back(notification(EventType::Modified, o)),
                Some(Ok(WatchEvent::Deleted(o))) => self.queued.push_back(notification(EventType::Deleted, o)),
            }
        }
    }

    /// A resume answered 410: fail, or relist and queue the difference.
    async fn expired(&mut self, message: &str) -> Result<(), CaseError> {
        if self.resume == Resume::Exact {
            self.expired = true;
            return Err(CaseError::failed(format!(
                "the watch with {} could not go on from resourceVersion {}: the server compacted \
                 its history ({message}); events delivered so far: {:?}",
                self.selector, self.rv, self.seen
            )));
        }
        tracing::debug!(selector = %self.selector, rv = %self.rv, "watch expired; listing again");
        let (rv, now) = list_state(&self.api, &self.selector).await?;
        for (name, old) in &self.known {
            if !now.contains_key(name) {
                self.queued.push_back(notification(EventType::Deleted, old.clone()));
            }
        }
        for (name, obj) in &now {
            match self.known.get(name) {
                None => self.queued.push_back(notification(EventType::Added, obj.clone())),
                Some(old) if old.resource_version() != obj.resource_version() => {
                    self.queued.push_back(notification(EventType::Modified, obj.clone()));
                }
                Some(_) => {}
            }
        }
        self.rv = rv;
        Ok(())
    }

    /// Whether the server compacted the history this [`Resume::Exact`] watch needed: a case that
    /// can start over (with new watches from a new resourceVersion) may do so, as upstream's
    /// callers of client-go's `RetryWatcher` do when it reports the same.
    pub fn history_lost(&self) -> bool {
        self.expired
    }

    /// Records a notification as seen and hands it out.
    fn deliver(&mut self, n: Notification<K>) -> Notification<K> {
        let rv = n.resource_version();
        if !rv.is_empty() {
            self.rv = rv;
        }
        match n.kind {
            EventType::Deleted => {
                self.known.remove(&n.object.name_any());
            }
            _ => {
                self.known.insert(n.object.name_any(), n.object.clone());
            }
        }
        self.seen.push(n.describe());
        n
    }

    /// Waits up to `within` for a `kind` notification whose object satisfies `matches`
    /// (upstream `expectEvent`); other notifications are passed over.
    ///
    /// # Errors
    /// A failure naming what was expected and every notification seen on this watch.
    pub async fn expect(
        &mut self,
        kind: EventType,
        what: &str,
        matches: impl Fn(&K) -> bool,
        within: Duration,
    ) -> Result<Notification<K>, CaseError> {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.next(left).await? {
                Some(n) if n.kind == kind && matches(&n.object) => return Ok(n),
                Some(_) => {}
                None => {
                    return Err(CaseError::failed(format!(
                        "the watch with {} delivered no {kind} notification for {what} within {within:?}; \
                         it delivered {:?}",
                        self.selector, self.seen
                    )));
                }
            }
        }
    }

    /// Checks that no `kind` notification whose object satisfies `matches` arrives within
    /// `within` (upstream `expectNoEvent`).
    ///
    /// # Errors
    /// A failure naming the notification that arrived.
    pub async fn expect_none(
        &mut self,
        kind: EventType,
        what: &str,
        matches: impl Fn(&K) -> bool,
        within: Duration,
    ) -> Result<(), CaseError> {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.next(left).await? {
                Some(n) if n.kind == kind && matches(&n.object) => {
                    return Err(CaseError::failed(format!(
                        "the watch with {} delivered {} for {what}, which it must not see",
                        self.selector,
                        n.describe()
                    )));
                }
                Some(_) => {}
                None => return Ok(()),
            }
        }
    }
}

/// Starts a watch of `api` with `selector` from resourceVersion `rv`.
async fn open<K>(
    api: &Api<K>,
    selector: &Selector,
    rv: &str,
) -> Result<BoxStream<'static, kube::Result<WatchEvent<K>>>, String>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    let params = selector.apply_watch(WatchParams::default());
    let stream = api.watch(&params, rv).await.map_err(|e| render_kube_error(&e))?;
    Ok(stream.boxed())
}

/// Waits between attempts to open a watch the server refused.
#[expect(
    clippy::disallowed_methods,
    reason = "back-off between watch attempts, not a wait for state"
)]
async fn pause(d: Duration) {
    tokio::time::sleep(d).await;
}

fn notification<K>(kind: EventType, object: K) -> Notification<K> {
    Notification { kind, object }
}
