//! The sample-apiserver's objects: Flunders (namespaced) and Fischers (cluster-scoped) of
//! `wardle.example.com`, with resourceVersions, label-selected lists and a watch feed, kept
//! the way its generic registry keeps them (what etcd would hold).

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{Value, json};
use tokio::sync::broadcast;

/// The API group.
pub const GROUP: &str = "wardle.example.com";

/// One served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// URL segment.
    pub plural: &'static str,
    /// Singular name.
    pub singular: &'static str,
    /// Kind of one object.
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
}

/// `flunders`.
pub const FLUNDERS: Kind = Kind {
    plural: "flunders",
    singular: "flunder",
    kind: "Flunder",
    namespaced: true,
};
/// `fischers` (v1alpha1 only).
pub const FISCHERS: Kind = Kind {
    plural: "fischers",
    singular: "fischer",
    kind: "Fischer",
    namespaced: false,
};

/// The resources of `version`, as the sample-apiserver installs them.
pub fn kinds(version: &str) -> &'static [Kind] {
    match version {
        "v1alpha1" => &[FLUNDERS, FISCHERS],
        "v1beta1" => &[FLUNDERS],
        _ => &[],
    }
}

/// A refusal, in the generic registry's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// HTTP status.
    pub code: u16,
    /// Status reason.
    pub reason: &'static str,
    /// Status message.
    pub message: String,
}

impl Refusal {
    fn new(code: u16, reason: &'static str, message: String) -> Self {
        Refusal { code, reason, message }
    }
}

/// One change, for watchers.
#[derive(Debug, Clone)]
pub struct Event {
    /// The resource.
    pub plural: &'static str,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: &'static str,
    /// The object after the change (before it, for a deletion).
    pub object: Value,
}

/// The objects, by (plural, namespace, name).
#[derive(Debug)]
pub struct Objects {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Event>,
}

#[derive(Debug, Default)]
struct Inner {
    rv: u64,
    objects: BTreeMap<(&'static str, String, String), Value>,
}

impl Default for Objects {
    fn default() -> Self {
        Objects {
            inner: Mutex::default(),
            events: broadcast::channel(256).0,
        }
    }
}

fn qualified(k: Kind) -> String {
    format!("{}.{GROUP}", k.plural)
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn rv_text(obj: &Value) -> &str {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

impl Objects {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("sample-apiserver store lock")
    }

    /// A receiver of every later change.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    fn publish(&self, plural: &'static str, kind: &'static str, object: &Value) {
        // No watcher is not an error.
        let _ = self.events.send(Event {
            plural,
            kind,
            object: object.clone(),
        });
    }

    /// The objects of `k` in `ns` (every namespace with `None`) and the current resourceVersion.
    pub fn list(&self, k: Kind, ns: Option<&str>) -> (Vec<Value>, u64) {
        let g = self.lock();
        let items = g
            .objects
            .iter()
            .filter(|((p, n, _), _)| *p == k.plural && ns.is_none_or(|want| n == want))
            .map(|(_, v)| v.clone())
            .collect();
        (items, g.rv)
    }

    /// One object.
    pub fn get(&self, k: Kind, ns: &str, name: &str) -> Result<Value, Refusal> {
        self.lock()
            .objects
            .get(&(k.plural, ns.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| Refusal::new(404, "NotFound", format!("{} {name:?} not found", qualified(k))))
    }

    /// Stores a new object (name or generateName given) in `ns`.
    pub fn create(&self, k: Kind, ns: &str, mut obj: Value) -> Result<Value, Refusal> {
        let mut g = self.lock();
        let mut name = name_of(&obj).to_string();
        if name.is_empty() {
            let prefix = obj
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if prefix.is_empty() {
                return Err(Refusal::new(
                    422,
                    "Invalid",
                    format!(
                        "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                        k.kind
                    ),
                ));
            }
            name = format!("{prefix}{}", &uuid::Uuid::new_v4().simple().to_string()[..5]);
        }
        let key = (k.plural, ns.to_string(), name.clone());
        if g.objects.contains_key(&key) {
            return Err(Refusal::new(
                409,
                "AlreadyExists",
                format!("{} {name:?} already exists", qualified(k)),
            ));
        }
        g.rv += 1;
        let meta = obj
            .as_object_mut()
            .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
            .ok_or_else(|| Refusal::new(400, "BadRequest", "the body is not an object".into()))?;
        meta["name"] = json!(name);
        if k.namespaced {
            meta["namespace"] = json!(ns);
        }
        meta["uid"] = json!(uuid::Uuid::new_v4().to_string());
        meta["resourceVersion"] = json!(g.rv.to_string());
        meta["creationTimestamp"] = json!(crate::api::meta::now());
        strip_type(&mut obj);
        g.objects.insert(key, obj.clone());
        drop(g);
        self.publish(k.plural, "ADDED", &obj);
        Ok(obj)
    }

    /// Replaces an object; a resourceVersion in the body must be the stored one.
    pub fn update(&self, k: Kind, ns: &str, name: &str, mut obj: Value) -> Result<Value, Refusal> {
        let mut g = self.lock();
        let key = (k.plural, ns.to_string(), name.to_string());
        let Some(old) = g.objects.get(&key).cloned() else {
            return Err(Refusal::new(
                404,
                "NotFound",
                format!("{} {name:?} not found", qualified(k)),
            ));
        };
        let sent = rv_text(&obj);
        if !sent.is_empty() && sent != rv_text(&old) {
            return Err(Refusal::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
                    qualified(k)
                ),
            ));
        }
        g.rv += 1;
        let sent_meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
        strip_type(&mut obj);
        // Identity, timestamps and the uid are the server's; labels and annotations the caller's.
        let mut meta = old["metadata"].clone();
        for field in ["labels", "annotations"] {
            match sent_meta.get(field).filter(|v| !v.is_null()) {
                Some(v) => meta[field] = v.clone(),
                None => {
                    if let Some(m) = meta.as_object_mut() {
                        m.remove(field);
                    }
                }
            }
        }
        meta["resourceVersion"] = json!(g.rv.to_string());
        obj["metadata"] = meta;
        g.objects.insert(key, obj.clone());
        drop(g);
        self.publish(k.plural, "MODIFIED", &obj);
        Ok(obj)
    }

    /// Removes an object and returns it.
    pub fn delete(&self, k: Kind, ns: &str, name: &str) -> Result<Value, Refusal> {
        let mut g = self.lock();
        let Some(mut obj) = g.objects.remove(&(k.plural, ns.to_string(), name.to_string())) else {
            return Err(Refusal::new(
                404,
                "NotFound",
                format!("{} {name:?} not found", qualified(k)),
            ));
        };
        g.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(g.rv.to_string());
        drop(g);
        self.publish(k.plural, "DELETED", &obj);
        Ok(obj)
    }
}

/// Type information is not stored: it is written on the way out, for the version asked.
fn strip_type(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        o.remove("apiVersion");
        o.remove("kind");
    }
}
