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

use std::collections::BTreeMap;
use std::fmt::{self, Debug};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

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
///
/// A task of its own reads the stream and resumes it the moment it ends, as a reflector does,
/// not when the case next asks for a notification: a case often writes for a while before it
/// reads (upstream's watch cases create, update and relabel, then expect the events), and a
/// watch left ended meanwhile would resume from a resourceVersion the server may have compacted
/// by then. Notifications wait in a queue until the case reads them.
pub struct EventWatch<K> {
    selector: String,
    rx: mpsc::UnboundedReceiver<Item<K>>,
    driver: tokio::task::JoinHandle<()>,
    /// Every notification delivered so far, for failure messages.
    seen: Vec<String>,
    /// Whether a resume met 410 Gone under [`Resume::Exact`] (the history is lost).
    expired: bool,
    /// Why the driver stopped, once it has (returned again on later reads).
    ended: Option<String>,
}

impl<K> Drop for EventWatch<K> {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// What the driver hands the case.
enum Item<K> {
    Note(Notification<K>),
    /// A resume met 410 under [`Resume::Exact`]: the server's message and the version asked for.
    Expired {
        message: String,
        rv: String,
    },
    /// The server answered the watch (or a relist) with an error other than a cut.
    Failed(String),
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
        // A failed first attempt is retried by the driver.
        let stream = match open(api, &selector, &rv).await {
            Ok(s) => Some(s),
            Err(e) => {
                journal().record(Trouble::WatchRestart);
                tracing::debug!(%selector, error = %e, "watch failed to open; retrying");
                None
            }
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let driver = Driver {
            api: api.clone(),
            selector: selector.clone(),
            resume,
            rv,
            known,
            tx,
        };
        Ok(EventWatch {
            selector: selector.to_string(),
            rx,
            driver: tokio::spawn(driver.run(stream)),
            seen: Vec::new(),
            expired: false,
            ended: None,
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

type Stream<K> = BoxStream<'static, kube::Result<WatchEvent<K>>>;

/// Reads one watch for an [`EventWatch`], resuming it whenever it ends.
struct Driver<K> {
    api: Api<K>,
    selector: Selector,
    resume: Resume,
    /// The resourceVersion to resume from: the last one received.
    rv: String,
    /// Objects received alive, by name, for a relist's difference.
    known: BTreeMap<String, K>,
    tx: mpsc::UnboundedSender<Item<K>>,
}

impl<K> Driver<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    /// Runs until the watch fails for good or its [`EventWatch`] is dropped.
    async fn run(mut self, mut stream: Option<Stream<K>>) {
        let mut failures = 0u32;
        loop {
            let current = match stream.as_mut() {
                Some(s) => s,
                None => match open(&self.api, &self.selector, &self.rv).await {
                    Ok(s) => stream.insert(s),
                    Err(e) => {
                        failures += 1;
                        journal().record(Trouble::WatchRestart);
                        tracing::debug!(selector = %self.selector, error = %e, "watch failed to open; retrying");
                        pause(backoff(failures)).await;
                        continue;
                    }
                },
            };
            let event = tokio::select! {
                () = self.tx.closed() => return,
                e = current.next() => e,
            };
            let item = match event {
                // Ended (cut, timeout) or broken (reset, restart): resume from the last version.
                None | Some(Err(_)) => {
                    journal().record(Trouble::WatchRestart);
                    stream = None;
                    continue;
                }
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    self.rv = b.metadata.resource_version;
                    continue;
                }
                Some(Ok(WatchEvent::Error(status))) if status.code == 410 => {
                    stream = None;
                    if self.resume == Resume::Exact {
                        let rv = self.rv.clone();
                        let _ = self.tx.send(Item::Expired {
                            message: status.message,
                            rv,
                        });
                        return;
                    }
                    if let Err(e) = self.relist().await {
                        let _ = self.tx.send(Item::Failed(e.to_string()));
                        return;
                    }
                    continue;
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    let _ = self.tx.send(Item::Failed(format!(
                        "the watch with {} answered an error: {} ({} {})",
                        self.selector, status.message, status.code, status.reason
                    )));
                    return;
                }
                Some(Ok(WatchEvent::Added(o))) => notification(EventType::Added, o),
                Some(Ok(WatchEvent::Modified(o))) => notification(EventType::Modified, o),
                Some(Ok(WatchEvent::Deleted(o))) => notification(EventType::Deleted, o),
            };
            failures = 0;
            self.receive(item);
        }
    }

    /// Notes a received notification (its version, the objects alive) and queues it.
    fn receive(&mut self, n: Notification<K>) {
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
        let _ = self.tx.send(Item::Note(n));
    }

    /// After 410 under [`Resume::Relist`]: lists again and queues the difference from what was
    /// received before, as a reflector does (coalesced, but nothing lost).
    async fn relist(&mut self) -> Result<(), CaseError> {
        tracing::debug!(selector = %self.selector, rv = %self.rv, "watch expired; listing again");
        let (rv, now) = list_state(&self.api, &self.selector).await?;
        let mut diff = Vec::new();
        for (name, old) in &self.known {
            if !now.contains_key(name) {
                diff.push(notification(EventType::Deleted, old.clone()));
            }
        }
        for (name, obj) in &now {
            match self.known.get(name) {
                None => diff.push(notification(EventType::Added, obj.clone())),
                Some(old) if old.resource_version() != obj.resource_version() => {
                    diff.push(notification(EventType::Modified, obj.clone()));
                }
                Some(_) => {}
            }
        }
        for n in diff {
            self.receive(n);
        }
        self.rv = rv;
        Ok(())
    }
}

impl<K> EventWatch<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    /// The next notification, or `None` when `within` passes without one.
    ///
    /// # Errors
    /// When the server answered the watch with an error other than a cut, or (with
    /// [`Resume::Exact`]) a resume with 410 Gone.
    pub async fn next(&mut self, within: Duration) -> Result<Option<Notification<K>>, CaseError> {
        if let Some(why) = &self.ended {
            return Err(CaseError::failed(why.clone()));
        }
        let item = match tokio::time::timeout(within, self.rx.recv()).await {
            Err(_) => return Ok(None),
            Ok(item) => item,
        };
        let why = match item {
            Some(Item::Note(n)) => {
                self.seen.push(n.describe());
                return Ok(Some(n));
            }
            Some(Item::Expired { message, rv }) => {
                self.expired = true;
                format!(
                    "the watch with {} could not go on from resourceVersion {rv}: the server compacted \
                     its history ({message}); events delivered so far: {:?}",
                    self.selector, self.seen
                )
            }
            Some(Item::Failed(why)) => why,
            None => format!("the watch with {} stopped", self.selector),
        };
        self.ended = Some(why.clone());
        Err(CaseError::failed(why))
    }

    /// Whether the server compacted the history this [`Resume::Exact`] watch needed: a case that
    /// can start over (with new watches from a new resourceVersion) may do so, as upstream's
    /// callers of client-go's `RetryWatcher` do when it reports the same.
    pub fn history_lost(&self) -> bool {
        self.expired
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

/// Starts a watch of `api` with labels `selector` from resourceVersion `rv`.
async fn open<K>(api: &Api<K>, selector: &Selector, rv: &str) -> Result<Stream<K>, String>
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
