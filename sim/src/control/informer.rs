//! Shared informers ([`Informers`]): one watch-backed cache per resource type, shared by every
//! controller of the control plane, like client-go's SharedInformerFactory.
//!
//! Controllers here are level-triggered loops ([`Wake`]): any change in a cache they read wakes
//! them, they reconcile every object they own from the caches, and they write to the API. A
//! write is followed by [`Informer::wait_for`] on the cache, so the next pass sees its own
//! writes and never creates the same pod twice (what client-go's "expectations" achieve).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::error::{Error, Result};
use super::plane::Ctx;

/// The bound every cached type meets.
pub(crate) trait Cached:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}
impl<K> Cached for K where K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static {}

/// One watch-backed cache of every object of type `K` in the cluster.
pub(crate) struct Informer<K: Cached> {
    store: Store<K>,
    changes: watch::Receiver<u64>,
    listed: watch::Receiver<bool>,
}

impl<K: Cached> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            changes: self.changes.clone(),
            listed: self.listed.clone(),
        }
    }
}

impl<K: Cached> Informer<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    /// Every cached object.
    pub(crate) fn list(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// The cached objects in `namespace`.
    pub(crate) fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.store
            .state_filter(|o| o.meta().namespace.as_deref() == Some(namespace))
    }

    /// The cached object `namespace/name` (namespace `None` for cluster-scoped kinds).
    pub(crate) fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let mut r = reflector::ObjectRef::<K>::new(name);
        if let Some(ns) = namespace {
            r = r.within(ns);
        }
        self.store.get(&r)
    }

    /// A receiver that changes whenever the cache does.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// Waits until the first list has arrived.
    ///
    /// Tracked with our own flag, set by the task that drives the reflector once it has
    /// applied the first `InitDone`: waiting on kube's `Store::wait_until_ready` from several
    /// tasks at once was seen to miss its wake-up.
    pub(crate) async fn ready(&self) -> Result<()> {
        let mut listed = self.listed.clone();
        listed
            .wait_for(|l| *l)
            .await
            .map(|_| ())
            .map_err(|_| Error::InformerStopped {
                resource: K::plural(&()).into_owned(),
            })
    }

    /// Waits (up to `timeout`) until `cond` holds on the cache; returns whether it did.
    ///
    /// Used after a write so the caller's next pass sees what it wrote.
    pub(crate) async fn wait_for(&self, timeout: Duration, cond: impl Fn(&Store<K>) -> bool) -> bool {
        let mut rx = self.changes.clone();
        let wait = async {
            loop {
                if cond(&self.store) {
                    return true;
                }
                if rx.changed().await.is_err() {
                    return cond(&self.store);
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.unwrap_or(false)
    }

    /// Waits until the object with `uid` is in the cache at `resource_version` or later, or gone.
    pub(crate) async fn wait_for_write(&self, written: &K) {
        let meta = written.meta();
        let (ns, name) = (meta.namespace.clone(), meta.name.clone().unwrap_or_default());
        let uid = meta.uid.clone();
        let rv: Option<u64> = meta.resource_version.as_deref().and_then(|v| v.parse().ok());
        let seen = self
            .wait_for(WRITE_VISIBLE_TIMEOUT, |s| {
                let mut r = reflector::ObjectRef::<K>::new(&name);
                if let Some(ns) = &ns {
                    r = r.within(ns);
                }
                match s.get(&r) {
                    Some(o) if o.meta().uid == uid => {
                        let have: Option<u64> = o.meta().resource_version.as_deref().and_then(|v| v.parse().ok());
                        match (have, rv) {
                            (Some(h), Some(w)) => h >= w,
                            _ => true,
                        }
                    }
                    _ => false,
                }
            })
            .await;
        if !seen {
            tracing::debug!(kind = %K::kind(&()), %name, "write not yet visible in the cache");
        }
    }

    /// Waits until no object named `namespace/name` with `uid` is in the cache, or it is deleting.
    pub(crate) async fn wait_for_delete(&self, namespace: Option<&str>, name: &str, uid: Option<&str>) {
        let _ = self
            .wait_for(WRITE_VISIBLE_TIMEOUT, |s| {
                let mut r = reflector::ObjectRef::<K>::new(name);
                if let Some(ns) = namespace {
                    r = r.within(ns);
                }
                match s.get(&r) {
                    Some(o) => o.meta().uid.as_deref() != uid || o.meta().deletion_timestamp.is_some(),
                    None => true,
                }
            })
            .await;
    }
}

/// How long a controller waits for its own write to show in a cache before moving on.
const WRITE_VISIBLE_TIMEOUT: Duration = Duration::from_secs(5);

/// The shared informers of one control plane, created on first use.
#[derive(Clone)]
pub(crate) struct Informers {
    client: Client,
    cancel: CancellationToken,
    started: Arc<Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>>,
}

impl Informers {
    /// Informers over `client`, whose watch tasks stop when `cancel` fires.
    pub(crate) fn new(client: Client, cancel: CancellationToken) -> Self {
        Self {
            client,
            cancel,
            started: Arc::default(),
        }
    }

    /// Whether the API serves `K` at all (a 404 on a one-item list says it does not), so a
    /// loop over an optional resource can stay idle instead of retrying a watch forever.
    pub(crate) async fn served<K: Cached>(&self) -> bool {
        let api: Api<K> = Api::all(self.client.clone());
        match api.list_metadata(&kube::api::ListParams::default().limit(1)).await {
            Ok(_) => true,
            Err(e) if super::error::is_not_found(&e) => false,
            Err(e) => {
                tracing::debug!(resource = %K::plural(&()), error = %e, "could not tell whether the resource is served");
                true
            }
        }
    }

    /// The informer for `K`, started on first request.
    pub(crate) fn get<K: Cached>(&self) -> Informer<K> {
        let mut started = self.started.lock().expect("informer registry poisoned");
        if let Some(i) = started.get(&TypeId::of::<K>()) {
            return i
                .downcast_ref::<Informer<K>>()
                .expect("informer type matches its key")
                .clone();
        }
        let informer = spawn::<K>(Api::all(self.client.clone()), self.cancel.clone());
        started.insert(TypeId::of::<K>(), Box::new(informer.clone()));
        informer
    }
}

fn spawn<K: Cached>(api: Api<K>, cancel: CancellationToken) -> Informer<K> {
    let (store, writer) = reflector::store::<K>();
    let (tx, rx) = watch::channel(0u64);
    let (listed_tx, listed_rx) = watch::channel(false);
    let resource = K::plural(&()).into_owned();
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()).default_backoff());
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                ev = stream.next() => match ev {
                    Some(Ok(ev)) => {
                        if matches!(ev, watcher::Event::InitDone) && !*listed_tx.borrow() {
                            tracing::trace!(%resource, "informer listed");
                            listed_tx.send_replace(true);
                        }
                        tx.send_modify(|n| *n = n.wrapping_add(1));
                    }
                    // A 410 is the API server's history having moved on (compaction): the
                    // watcher lists again, which client-go logs only at V(4).
                    Some(Err(watcher::Error::WatchError(s))) if s.code == 410 => {
                        tracing::debug!(%resource, message = %s.message, "watch expired; listing again");
                    }
                    Some(Err(e)) => tracing::warn!(%resource, error = %e, "watch failed; retrying"),
                    None => break,
                },
            }
        }
        tracing::debug!(%resource, "informer stopped");
    });
    Informer {
        store,
        changes: rx,
        listed: listed_rx,
    }
}

/// What a controller loop waits on between passes: cache changes, a resync period, a requeue
/// deadline, or cancellation.
pub(crate) struct Wake {
    receivers: Vec<watch::Receiver<u64>>,
    resync: Duration,
    debounce: Duration,
}

impl Wake {
    /// A wake-up over `receivers`, at least every `resync`.
    pub(crate) fn new(receivers: Vec<watch::Receiver<u64>>, resync: Duration) -> Self {
        Self {
            receivers,
            resync,
            debounce: Duration::from_millis(15),
        }
    }

    /// Waits for the next pass; `requeue` shortens the wait. Returns `false` once cancelled.
    pub(crate) async fn next(&mut self, requeue: Option<Duration>, cancel: &CancellationToken) -> bool {
        let timeout = requeue.map_or(self.resync, |r| r.min(self.resync));
        self.receivers.retain(|r| r.has_changed().is_ok());
        let changed = futures::future::select_all(self.receivers.iter_mut().map(|r| r.changed().boxed()).chain(
            std::iter::once(futures::future::pending::<std::result::Result<(), watch::error::RecvError>>().boxed()),
        ));
        tokio::select! {
            () = cancel.cancelled() => return false,
            _ = changed => {}
            () = tokio::time::sleep(timeout) => {}
        }
        // Let a burst of events (a list, a controller's batch of writes) land before the pass.
        tokio::select! {
            () = cancel.cancelled() => return false,
            () = tokio::time::sleep(self.debounce) => {}
        }
        for r in &mut self.receivers {
            r.mark_unchanged();
        }
        true
    }
}

/// The loop of a controller that reconciles every object of one kind: once `caches` (the
/// first lists of the informers it reads) have arrived, each pass calls `sync` on every object
/// in `objects`, then waits on `changes` (see [`Wake`]) until cancelled. A failed sync is logged
/// (a NotFound quietly: the object went away meanwhile) and retried within a second. The
/// ReplicaSet, Deployment, DaemonSet, StatefulSet, Job and CronJob controllers all run it.
pub(crate) async fn reconcile_each<'env, K: Cached>(
    ctx: &Ctx,
    caches: impl Future<Output = Result<()>>,
    objects: &Informer<K>,
    changes: Vec<watch::Receiver<u64>>,
    mut sync: impl for<'a> FnMut(&'a Arc<K>, Pass<'a, 'env>) -> BoxFuture<'a, Result<()>>,
) -> Result<()> {
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = caches => r?,
    }
    let mut wake = Wake::new(changes, ctx.cfg.resync);
    let mut requeue = Requeue::default();
    loop {
        for object in objects.list() {
            let pass = Pass {
                requeue: &mut requeue,
                env: PhantomData,
            };
            if let Err(e) = sync(&object, pass).await {
                if !e.is_not_found() {
                    tracing::warn!(kind = %K::kind(&()), name = %object.name_any(), error = %super::error::chain(&e), "sync failed");
                }
                requeue.after(Duration::from_secs(1));
            }
        }
        if !wake.next(requeue.take(), &ctx.cancel).await {
            return Ok(());
        }
    }
}

/// What [`reconcile_each`] hands a sync besides the object: the pass's requeue tracker.
///
/// Why the marker: a sync returns its future boxed as `Send` (an `async` closure there trips
/// rustc's "implementation of `Send` is not general enough" once the loop is spawned), and that
/// future borrows what the closure captured (the context, recorder and caches, alive for
/// `'env`). `&'a &'env ()` makes every `'a` the closure is called with shorter than `'env`,
/// which is what lets it return such a future for any `'a`.
pub(crate) struct Pass<'a, 'env> {
    pub(crate) requeue: &'a mut Requeue,
    env: PhantomData<&'a &'env ()>,
}

/// Tracks when each object's requeue is due, so a pass can ask for the earliest.
#[derive(Debug, Default)]
pub(crate) struct Requeue(Option<Duration>);

impl Requeue {
    /// Asks for another pass within `after`.
    pub(crate) fn after(&mut self, after: Duration) {
        self.0 = Some(self.0.map_or(after, |d| d.min(after)));
    }

    /// The earliest requested pass, resetting the tracker.
    pub(crate) fn take(&mut self) -> Option<Duration> {
        self.0.take()
    }
}
