//! Events the kubelet records for its Node and its pods, correlated as the kubelet's event
//! correlator does (a repeat bumps `count`). Separate because every other part reports
//! through it.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use tracing::debug;

use super::{Kubelet, PodRt, Role};

/// client-go's `maxTriesPerEvent`.
const MAX_TRIES_PER_EVENT: u32 = 12;
/// client-go's `defaultSleepDuration` between tries of one event.
const RETRY_SLEEP: std::time::Duration = std::time::Duration::from_secs(10);

impl Kubelet {
    pub(super) fn node_event(&self, type_: &str, reason: &str, message: &str) {
        let obj = ObjectReference {
            kind: Some("Node".into()),
            name: Some(self.cfg.name.clone()),
            uid: Some(self.cfg.name.clone()),
            api_version: Some("v1".into()),
            ..Default::default()
        };
        self.emit("default", obj, type_, reason, message);
    }

    pub(super) fn emit(&self, ns: &str, obj: ObjectReference, type_: &str, reason: &str, message: &str) {
        // A lost node (`node-lost`) reaches no API server.
        if self.health.is_lost() {
            return;
        }
        let now = jiff::Timestamp::now();
        let base = obj.name.clone().unwrap_or_default();
        let key = format!(
            "{ns}\0{}\0{}\0{reason}\0{message}",
            obj.uid.clone().unwrap_or_default(),
            obj.field_path.clone().unwrap_or_default()
        );
        let api: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let (name, repeat) = {
            let mut seen = self.events.lock().expect("events lock");
            match seen.get_mut(&key) {
                Some((name, count)) => {
                    *count += 1;
                    (name.clone(), Some(*count))
                }
                None => {
                    // Upstream names events `<object>.<hex nanoseconds>`, so a listing in name
                    // order (what `kubectl describe` shows) is in time order; strictly increasing
                    // here so two events in one nanosecond cannot collide.
                    static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                    let nanos = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64);
                    let stamp = LAST
                        .fetch_update(
                            std::sync::atomic::Ordering::SeqCst,
                            std::sync::atomic::Ordering::SeqCst,
                            |last| Some(nanos.max(last + 1)),
                        )
                        .map_or(nanos, |last| nanos.max(last + 1));
                    let name = format!("{base}.{stamp:x}");
                    seen.insert(key, (name.clone(), 1));
                    (name, None)
                }
            }
        };
        if let Some(count) = repeat {
            let patch = serde_json::json!({"count": count, "lastTimestamp": Time(now)});
            tokio::spawn(async move {
                if let Err(e) = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    debug!(error = %e, %name, "event count not updated");
                }
            });
            return;
        }
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            involved_object: obj,
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some(type_.into()),
            source: Some(EventSource {
                component: Some("kubelet".into()),
                host: Some(self.cfg.name.clone()),
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            reporting_component: Some("kubelet".into()),
            reporting_instance: Some(self.cfg.name.clone()),
            ..Default::default()
        };
        let reason = reason.to_string();
        tokio::spawn(async move {
            // As client-go's event broadcaster (`recordToSink`): a failed write is tried again,
            // up to 12 times, 10 s apart, so an API server answering 500 or 429 for a moment
            // delays an event rather than losing it. An event that already exists (the write
            // went through but its answer was lost) or a namespace that is gone ends it.
            for attempt in 1..=MAX_TRIES_PER_EVENT {
                match api.create(&PostParams::default(), &ev).await {
                    Ok(_) => return,
                    Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 || s.code == 403 => return,
                    Err(e) if attempt == MAX_TRIES_PER_EVENT => {
                        debug!(error = %e, %reason, "event not recorded");
                    }
                    Err(e) => {
                        debug!(error = %e, %reason, attempt, "event write failed; retrying");
                        tokio::time::sleep(RETRY_SLEEP).await;
                    }
                }
            }
        });
    }

    pub(super) fn pod_event(
        &self,
        rt: &PodRt,
        container: Option<(&str, Role)>,
        type_: &str,
        reason: &str,
        message: &str,
    ) {
        let obj = ObjectReference {
            kind: Some("Pod".into()),
            name: Some(rt.name.clone()),
            namespace: Some(rt.namespace.clone()),
            uid: Some(rt.uid.clone()),
            api_version: Some("v1".into()),
            field_path: container.map(|(c, role)| format!("spec.{}{{{c}}}", role.spec_field())),
            ..Default::default()
        };
        self.emit(&rt.namespace, obj, type_, reason, message);
    }
}
