//! The object store: JSON objects keyed by resource, namespace and name, one global
//! resourceVersion, and a bounded history of changes that watches replay from.
//!
//! The main structure is [`Store`]. It knows nothing of Kubernetes semantics beyond
//! `metadata.resourceVersion`; defaulting, validation and deletion rules live in the handlers.
//! A `std` mutex guards it: every critical section is a map operation, never an await.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::broadcast;

/// Default number of changes kept for watch resumption (upstream's watch cache keeps a window
/// of similar size; older resourceVersions get 410 Gone).
pub const DEFAULT_HISTORY: usize = 10_000;

/// What kind of change an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// The watch wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change in the store.
#[derive(Debug, Clone)]
pub struct Change {
    /// The resourceVersion the change produced.
    pub rv: u64,
    /// Storage key (`group/plural`).
    pub key: String,
    /// Namespace (empty for cluster-scoped).
    pub namespace: String,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for deletions: the last state, with the deletion's rv),
    /// shared with the stored copy: the history costs a pointer a change, not an object.
    pub object: Arc<Value>,
    /// The object before the change (modifications), so selector-filtered watches can tell an
    /// object leaving the selection.
    pub old: Option<Arc<Value>>,
}

/// Why a store write failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// Create of an existing object.
    Exists,
    /// Update or delete of a missing object.
    NotFound,
    /// The precondition resourceVersion is not the stored one.
    Conflict,
}

/// Why a watch could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    /// The requested resourceVersion.
    pub requested: u64,
    /// The oldest resourceVersion a watch can still start from.
    pub oldest: u64,
}

/// What a watch starts with: the changes to replay and a receiver for the live ones.
pub type WatchStart = (Vec<Arc<Change>>, broadcast::Receiver<Arc<Change>>);

/// Stored objects are shared (`Arc`) between the data and the watch history, and a list
/// copies pointers under the lock, then the objects after releasing it.
type Objects = BTreeMap<(String, String), Arc<Value>>;

struct Inner {
    rv: u64,
    data: HashMap<String, Objects>,
    history: VecDeque<Arc<Change>>,
    /// Highest rv no longer in `history`; starting a watch below it is 410.
    compacted: u64,
}

impl Inner {
    /// The stored object at `id`.
    fn stored(&self, key: &str, id: &(String, String)) -> Option<Arc<Value>> {
        self.data.get(key).and_then(|m| m.get(id)).cloned()
    }

    /// The stored object a write replaces: NotFound when absent, Conflict when `precondition`
    /// is not its resourceVersion (update and remove check alike).
    fn current(&self, key: &str, id: &(String, String), precondition: Option<u64>) -> Result<Arc<Value>, StoreError> {
        let old = self.stored(key, id).ok_or(StoreError::NotFound)?;
        if precondition.is_some_and(|p| p != rv_of(&old)) {
            return Err(StoreError::Conflict);
        }
        Ok(old)
    }
}

/// The store shared by every request.
pub struct Store {
    inner: Mutex<Inner>,
    /// Writes to RBAC objects so far: the authorizer's cache is valid while this is unchanged.
    rbac_writes: std::sync::atomic::AtomicU64,
    history_cap: usize,
    tx: broadcast::Sender<Arc<Change>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("rv", &self.lock().rv)
            .finish_non_exhaustive()
    }
}

/// The resourceVersion stored in an object, 0 when absent or unparsable.
pub fn rv_of(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

impl Store {
    /// An empty store keeping `history` changes for watches.
    pub fn new(history: usize) -> Self {
        let (tx, _) = broadcast::channel(history.max(16));
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                data: HashMap::new(),
                history: VecDeque::new(),
                compacted: 0,
            }),
            history_cap: history.max(1),
            tx,
            rbac_writes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves maps consistent (each write is one insert), so
        // recovering the guard is sound.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current global resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// How many writes RBAC objects (Roles, ClusterRoles and their bindings) have had: a
    /// counter the authorizer keys its cache on. Bumped under the store lock, before the write
    /// is visible to readers, so a reader never pairs new data with an old count.
    pub fn rbac_writes(&self) -> u64 {
        self.rbac_writes.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// One object.
    pub fn get(&self, key: &str, ns: &str, name: &str) -> Option<Value> {
        let shared = self.lock().stored(key, &(ns.to_string(), name.to_string()));
        shared.map(|v| Value::clone(&v))
    }

    /// Objects of a resource, in one namespace or all, sorted by namespace then name, with the
    /// resourceVersion the list is consistent with.
    pub fn list(&self, key: &str, ns: Option<&str>) -> (Vec<Value>, u64) {
        let (shared, rv) = self.list_shared(key, ns);
        (shared.iter().map(|v| Value::clone(v)).collect(), rv)
    }

    /// As [`Store::list`], the objects shared rather than copied.
    pub fn list_shared(&self, key: &str, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let g = self.lock();
        let items = match g.data.get(key) {
            None => Vec::new(),
            Some(m) => match ns {
                Some(ns) => m
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(_, v)| v.clone())
                    .collect(),
                None => m.values().cloned().collect(),
            },
        };
        (items, g.rv)
    }

    /// How many objects a resource has in a namespace (or all).
    pub fn count(&self, key: &str, ns: Option<&str>) -> usize {
        let g = self.lock();
        g.data.get(key).map_or(0, |m| match ns {
            Some(ns) => m.keys().filter(|(n, _)| n == ns).count(),
            None => m.len(),
        })
    }

    fn record(&self, g: &mut Inner, change: Change) {
        let change = Arc::new(change);
        g.history.push_back(change.clone());
        while g.history.len() > self.history_cap {
            if let Some(old) = g.history.pop_front() {
                g.compacted = old.rv;
            }
        }
        // No receivers is normal (no watches open).
        let _ = self.tx.send(change);
    }

    /// Commits one write under the lock: the next resourceVersion, stamped on `obj`, which is
    /// stored under `id` (or, for a deletion, removed from it), and the change recorded for
    /// watches. Create, update, remove and modify all end here, so the global resourceVersion,
    /// the data and the watch history move together.
    fn write(
        &self,
        g: &mut Inner,
        key: &str,
        id: (String, String),
        kind: EventType,
        mut obj: Value,
        old: Option<Arc<Value>>,
    ) -> Value {
        g.rv += 1;
        let rv = g.rv;
        if key.starts_with("rbac.authorization.k8s.io/") {
            self.rbac_writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        set_rv(&mut obj, rv);
        let namespace = id.0.clone();
        let shared = Arc::new(obj.clone());
        if kind == EventType::Deleted {
            if let Some(m) = g.data.get_mut(key) {
                m.remove(&id);
            }
        } else {
            g.data.entry(key.to_string()).or_default().insert(id, shared.clone());
        }
        let change = Change {
            rv,
            key: key.into(),
            namespace,
            kind,
            object: shared,
            old,
        };
        self.record(g, change);
        obj
    }

    /// Stores a new object, stamping its resourceVersion.
    pub fn create(&self, key: &str, ns: &str, name: &str, obj: Value) -> Result<Value, StoreError> {
        let mut g = self.lock();
        let id = (ns.to_string(), name.to_string());
        if g.data.get(key).is_some_and(|m| m.contains_key(&id)) {
            return Err(StoreError::Exists);
        }
        Ok(self.write(&mut g, key, id, EventType::Added, obj, None))
    }

    /// Replaces an object; `precondition` is the resourceVersion the caller read (None: any).
    pub fn update(
        &self,
        key: &str,
        ns: &str,
        name: &str,
        obj: Value,
        precondition: Option<u64>,
    ) -> Result<Value, StoreError> {
        let mut g = self.lock();
        let id = (ns.to_string(), name.to_string());
        let old = g.current(key, &id, precondition)?;
        Ok(self.write(&mut g, key, id, EventType::Modified, obj, Some(old)))
    }

    /// Removes an object; the returned copy carries the deletion's resourceVersion.
    pub fn remove(&self, key: &str, ns: &str, name: &str, precondition: Option<u64>) -> Result<Value, StoreError> {
        let mut g = self.lock();
        let id = (ns.to_string(), name.to_string());
        let old = g.current(key, &id, precondition)?;
        let last = Value::clone(&old);
        Ok(self.write(&mut g, key, id, EventType::Deleted, last, None))
    }

    /// Changes after `from` still in history plus a receiver for later ones, taken atomically so
    /// nothing falls between them.
    pub fn watch_from(&self, from: u64) -> Result<WatchStart, Expired> {
        let g = self.lock();
        if from < g.compacted {
            return Err(Expired {
                requested: from,
                oldest: g.compacted,
            });
        }
        let replay = g.history.iter().filter(|c| c.rv > from).cloned().collect();
        Ok((replay, self.tx.subscribe()))
    }

    /// Whether the state at `rv` can still be read exactly (etcd has not compacted it away); a
    /// list at an exact compacted version, or continuing a list from one, is 410 upstream.
    pub fn readable_at(&self, rv: u64) -> Result<(), Expired> {
        let g = self.lock();
        if rv < g.compacted {
            return Err(Expired {
                requested: rv,
                oldest: g.compacted,
            });
        }
        Ok(())
    }

    /// Drops the whole watch history, so any watch resuming from an older resourceVersion gets
    /// 410 Gone (fault injection; upstream compaction does the same).
    pub fn compact(&self) {
        let rv = self.current_rv();
        self.compact_to(rv);
    }

    /// Drops the history up to and including `rv`: a watch may still start at `rv` or later,
    /// one from before it gets 410 Gone. Never moves the compacted point back.
    pub fn compact_to(&self, rv: u64) {
        let mut g = self.lock();
        while g.history.front().is_some_and(|c| c.rv <= rv) {
            g.history.pop_front();
        }
        g.compacted = g.compacted.max(rv.min(g.rv));
    }

    /// Every storage key that has objects (for namespace content checks).
    pub fn keys_in_namespace(&self, ns: &str) -> Vec<String> {
        let g = self.lock();
        g.data
            .iter()
            .filter(|(_, m)| m.keys().any(|(n, _)| n == ns))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Atomically changes an object with `f`, retrying is not needed because the lock is held;
    /// `f` returns None to leave it unchanged.
    pub fn modify<E>(
        &self,
        key: &str,
        ns: &str,
        name: &str,
        f: impl FnOnce(&Value) -> Result<Option<Value>, E>,
    ) -> Result<Option<Value>, ModifyError<E>> {
        let mut g = self.lock();
        let id = (ns.to_string(), name.to_string());
        let old = g.stored(key, &id).ok_or(ModifyError::NotFound)?;
        let Some(obj) = f(&old).map_err(ModifyError::Rejected)? else {
            return Ok(None);
        };
        Ok(Some(self.write(&mut g, key, id, EventType::Modified, obj, Some(old))))
    }
}

/// Why [`Store::modify`] failed.
#[derive(Debug)]
pub enum ModifyError<E> {
    /// No such object.
    NotFound,
    /// The closure refused.
    Rejected(E),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name}})
    }

    #[test]
    fn rv_increases_and_conflicts_are_detected() {
        let s = Store::new(4);
        let a = s.create("/pods", "ns", "a", obj("a")).unwrap();
        assert_eq!(s.create("/pods", "ns", "a", obj("a")), Err(StoreError::Exists));
        let rv = rv_of(&a);
        let b = s.update("/pods", "ns", "a", obj("a"), Some(rv)).unwrap();
        assert!(rv_of(&b) > rv);
        assert_eq!(
            s.update("/pods", "ns", "a", obj("a"), Some(rv)),
            Err(StoreError::Conflict)
        );
        let d = s.remove("/pods", "ns", "a", None).unwrap();
        assert!(rv_of(&d) > rv_of(&b));
        assert_eq!(s.remove("/pods", "ns", "a", None), Err(StoreError::NotFound));
    }

    #[test]
    fn list_is_scoped_and_sorted() {
        let s = Store::new(10);
        for (ns, n) in [("b", "x"), ("a", "z"), ("a", "y"), ("ab", "q")] {
            s.create("/cm", ns, n, obj(n)).unwrap();
        }
        let (items, _) = s.list("/cm", Some("a"));
        let names: Vec<_> = items.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["y", "z"]);
        assert_eq!(s.list("/cm", None).0.len(), 4);
    }

    #[test]
    fn history_window_expires_old_versions() {
        let s = Store::new(2);
        let first = s.current_rv();
        for i in 0..5 {
            s.create("/cm", "a", &i.to_string(), obj("x")).unwrap();
        }
        assert!(s.watch_from(first).is_err());
        let (replay, _) = s.watch_from(s.current_rv() - 2).unwrap();
        assert_eq!(replay.len(), 2);
        let mid = s.current_rv() - 1;
        s.compact_to(mid);
        assert!(s.watch_from(mid - 1).is_err());
        assert_eq!(
            s.watch_from(mid).unwrap().0.len(),
            1,
            "the change after the point stays"
        );
        s.compact_to(1);
        assert!(s.watch_from(mid - 1).is_err(), "compaction never moves back");
        s.compact();
        assert!(s.watch_from(s.current_rv() - 1).is_err());
        assert!(s.watch_from(s.current_rv()).is_ok());
    }
}
