//! Events as the controllers and the scheduler record them ([`Recorder`]).
//!
//! Written as `core/v1` Events (what `kubectl describe` and `kubectl get events` read), with
//! client-go's correlation: a repeat of the same reason and message on the same object within
//! ten minutes bumps `count` and `lastTimestamp` of the existing Event instead of adding one.
//! Recording is best effort, as upstream's recorder: a failure is logged, never fails a reconcile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};

use super::clock::Clock;

/// `Normal` or `Warning`, the two event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Expected progress (SuccessfulCreate, Scheduled…).
    Normal,
    /// Something a user should look at (FailedScheduling, BackoffLimitExceeded…).
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// How long a repeated event is folded into the previous one (client-go's correlator window).
const CORRELATION_WINDOW: SignedDuration = SignedDuration::from_mins(10);

type Key = (String, EventType, String, String);
/// Where a recorded event lives and how often it was seen: (namespace, name, count, last time).
type Seen = (String, String, i32, Timestamp);

/// Records events on behalf of one component (`default-scheduler`, `replicaset-controller`…).
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    component: &'static str,
    clock: Arc<dyn Clock>,
    seen: Arc<Mutex<HashMap<Key, Seen>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("component", &self.component)
            .finish_non_exhaustive()
    }
}

/// The reference an event points at, built from any typed object.
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    let meta = obj.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

impl Recorder {
    /// A recorder for `component`, stamping events with `clock`'s time.
    pub fn new(client: Client, component: &'static str, clock: Arc<dyn Clock>) -> Self {
        Self {
            client,
            component,
            clock,
            seen: Arc::default(),
        }
    }

    /// Records an event about `obj`.
    pub async fn record<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.record_ref(reference(obj), type_, reason, message.into()).await;
    }

    /// Records an event about the object `involved` refers to.
    pub async fn record_ref(&self, involved: ObjectReference, type_: EventType, reason: &str, message: String) {
        let now = self.clock.now();
        // Cluster-scoped objects (nodes, namespaces) get their events in `default`, as upstream.
        let namespace = involved.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let key: Key = (
            involved.uid.clone().unwrap_or_default(),
            type_,
            reason.to_owned(),
            message.clone(),
        );
        let previous = {
            let seen = self.seen.lock().expect("event cache poisoned");
            seen.get(&key).cloned()
        };
        if let Some((ns, name, count, last)) = previous
            && now.duration_since(last) < CORRELATION_WINDOW
        {
            let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
            let patch = serde_json::json!({
                "count": count + 1,
                "lastTimestamp": Time(now),
            });
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => {
                    self.remember(key, ns, name, count + 1, now);
                    return;
                }
                Err(e) => tracing::debug!(event = %name, error = %e, "event update failed; recording anew"),
            }
        }
        let involved_name = involved.name.clone().unwrap_or_default();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{involved_name}.{:x}", now.as_nanosecond() as u64)),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: involved,
            reason: Some(reason.to_owned()),
            message: Some(message),
            type_: Some(type_.as_str().to_owned()),
            source: Some(EventSource {
                component: Some(self.component.to_owned()),
                host: None,
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            reporting_component: Some(self.component.to_owned()),
            reporting_instance: Some(self.component.to_owned()),
            ..Event::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        match api.create(&PostParams::default(), &event).await {
            Ok(created) => self.remember(key, namespace, created.name_any(), 1, now),
            Err(e) => tracing::warn!(
                component = self.component,
                reason,
                object = %involved_name,
                error = %e,
                "failed to record event"
            ),
        }
    }

    fn remember(&self, key: Key, ns: String, name: String, count: i32, at: Timestamp) {
        let mut seen = self.seen.lock().expect("event cache poisoned");
        if seen.len() > 4096 {
            seen.retain(|_, v| at.duration_since(v.3) < CORRELATION_WINDOW);
        }
        seen.insert(key, (ns, name, count, at));
    }
}
