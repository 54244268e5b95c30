//! `metadata.managedFields`: decoding, encoding and the bookkeeping of an update, as
//! kube-apiserver's field manager chain does it (`staging/src/k8s.io/apimachinery/pkg/util/
//! managedfields/internal`).
//!
//! The main structure is [`Managed`], one [`Entry`] per manager identity. An identity is the
//! manager, operation and subresource, plus the apiVersion for `Update` entries (upstream's
//! `BuildManagerIdentifier`), so an applier keeps one entry across versions.

use serde_json::{Map, Value, json};

use super::fieldset::FieldSet;
use super::walk::{self, Comparison};

/// Upstream's `DefaultMaxUpdateManagers`.
pub const MAX_UPDATE_MANAGERS: usize = 10;
/// The bucket the oldest update entries are merged into past the cap.
const ANCIENT: &str = "ancient-changes";

/// A field manager operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// A server-side apply.
    Apply,
    /// Any other write (create, update, patch).
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Apply => "Apply",
            Self::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The manager's name.
    pub manager: String,
    /// How it wrote.
    pub operation: Operation,
    /// The group/version its fields are expressed in.
    pub api_version: String,
    /// When it last changed something (`None` when the client sent none).
    pub time: Option<String>,
    /// The subresource written through (`status`, `scale`), empty for the object itself.
    pub subresource: String,
    /// The fields it owns.
    pub set: FieldSet,
}

impl Entry {
    /// Whether `self` is the entry of this identity.
    pub fn is(&self, manager: &str, op: Operation, subresource: &str, api_version: &str) -> bool {
        self.manager == manager
            && self.operation == op
            && self.subresource == subresource
            && (op == Operation::Apply || self.api_version == api_version)
    }

    /// Upstream's `printManager`, used in conflict messages.
    pub fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s = format!("{s} with subresource {:?}", self.subresource);
        }
        // The identity printed never carries the time (BuildManagerIdentifier drops it), so
        // upstream's "at <time>" branch is not reached from a conflict.
        if self.operation == Operation::Update {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }
}

/// Who makes a write and when: the identity an `Update` entry is recorded under.
#[derive(Debug, Clone, Copy)]
pub struct Writer<'a> {
    /// The field manager.
    pub manager: &'a str,
    /// `status`, `scale`, or empty.
    pub subresource: &'a str,
    /// The group/version of the request.
    pub api_version: &'a str,
    /// The time to stamp, RFC 3339.
    pub now: &'a str,
}

/// The managed fields of one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Managed {
    /// The entries, in no particular order until [`Managed::encode`] sorts them.
    pub entries: Vec<Entry>,
}

/// The paths the field manager never tracks (upstream's `stripMetaManager`).
fn strip_set() -> FieldSet {
    let mut s = FieldSet::default();
    let f = |n: &str| super::fieldset::PathElement::Field(n.to_string());
    s.insert(&[f("apiVersion")]);
    s.insert(&[f("kind")]);
    s.insert(&[f("metadata")]);
    for m in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[f("metadata"), f(m)]);
    }
    s
}

/// Whether the client asked to reset managedFields: an empty list, or one empty entry.
pub fn is_reset(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Array(a)) => a.is_empty() || (a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty)),
        _ => false,
    }
}

impl Managed {
    /// Decodes `metadata.managedFields` as upstream's `DecodeManagedFields` does.
    pub fn decode(v: Option<&Value>) -> Result<Managed, String> {
        let Some(v) = v else {
            return Ok(Managed::default());
        };
        let list = v.as_array().ok_or("managedFields must be a list")?;
        let mut entries: Vec<Entry> = Vec::with_capacity(list.len());
        for (i, e) in list.iter().enumerate() {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let operation = match s("operation").as_str() {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return Err("operation must be `Apply` or `Update`".into()),
            };
            let api_version = s("apiVersion");
            if api_version.is_empty() {
                return Err("apiVersion must not be empty".into());
            }
            match s("fieldsType").as_str() {
                "FieldsV1" => {}
                "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
                other => return Err(format!("invalid fieldsType {other:?} in managed fields entry {i}")),
            }
            let set = match e.get("fieldsV1") {
                Some(f) => FieldSet::from_fields_v1(f).map_err(|err| format!("error decoding set: {err}"))?,
                None => FieldSet::default(),
            };
            let entry = Entry {
                manager: s("manager"),
                operation,
                api_version,
                time: e.get("time").and_then(Value::as_str).map(String::from),
                subresource: s("subresource"),
                set,
            };
            // Upstream keys entries by identity, so a later duplicate replaces an earlier one.
            entries.retain(|x| !x.is(&entry.manager, entry.operation, &entry.subresource, &entry.api_version));
            entries.push(entry);
        }
        Ok(Managed { entries })
    }

    /// The wire form, sorted as upstream sorts it (operation, time, manager, apiVersion,
    /// subresource); `None` when no manager owns anything.
    pub fn encode(&self) -> Option<Value> {
        if self.entries.is_empty() {
            return None;
        }
        let mut sorted: Vec<&Entry> = self.entries.iter().collect();
        sorted.sort_by(|p, q| {
            p.operation
                .cmp(&q.operation)
                .then_with(|| seconds(p.time.as_deref()).cmp(&seconds(q.time.as_deref())))
                .then_with(|| p.manager.cmp(&q.manager))
                .then_with(|| p.api_version.cmp(&q.api_version))
                .then_with(|| p.subresource.cmp(&q.subresource))
        });
        let list = sorted
            .into_iter()
            .map(|e| {
                let mut m = Map::new();
                // Go's `omitempty`: a request with neither fieldManager nor user agent leaves
                // the manager out.
                if !e.manager.is_empty() {
                    m.insert("manager".into(), json!(e.manager));
                }
                m.insert("operation".into(), json!(e.operation.as_str()));
                m.insert("apiVersion".into(), json!(e.api_version));
                if let Some(t) = &e.time {
                    m.insert("time".into(), json!(t));
                }
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.set.to_fields_v1());
                if !e.subresource.is_empty() {
                    m.insert("subresource".into(), json!(e.subresource));
                }
                Value::Object(m)
            })
            .collect();
        Some(Value::Array(list))
    }

    /// Takes the changed and removed paths from every manager but `except` (structured-merge-
    /// diff's `update` with force), dropping managers left with nothing. Returns the conflicts:
    /// per manager, the paths it owns that `cmp` changes.
    pub fn take_changed(&mut self, cmp: &Comparison, except: Option<usize>) -> Vec<(usize, FieldSet)> {
        let changed = cmp.modified.union(&cmp.added);
        let mut conflicts = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            if Some(i) == except {
                continue;
            }
            let c = e.set.intersection(&changed);
            if !c.is_empty() {
                conflicts.push((i, c));
            }
        }
        conflicts
    }

    /// Removes the conflicting and removed paths from the other managers and drops empty
    /// entries; `keep` is the index of the entry exempt from both.
    pub fn give_up(&mut self, cmp: &Comparison, conflicts: &[(usize, FieldSet)], keep: Option<usize>) {
        for (i, c) in conflicts {
            self.entries[*i].set = self.entries[*i].set.difference(c);
        }
        for (i, e) in self.entries.iter_mut().enumerate() {
            if Some(i) != keep && !cmp.removed.is_empty() {
                e.set = e.set.difference(&cmp.removed);
            }
        }
    }

    fn drop_empty(&mut self) {
        self.entries.retain(|e| !e.set.is_empty());
    }

    /// Records an `Update` by `who` that turned `old` into `new` (both without
    /// managedFields): managers lose what changed or went away, and the writer gains what it
    /// changed or added, stamped with its time. `ignored` paths (reset fields of the endpoint)
    /// are not attributed.
    pub fn record_update(
        &mut self,
        kind: &str,
        old: &Value,
        new: &Value,
        who: &Writer<'_>,
        ignored: &FieldSet,
    ) -> Result<(), String> {
        let Writer {
            manager,
            subresource,
            api_version,
            now,
        } = *who;
        let mut cmp = walk::compare(kind, old, new)?;
        cmp.filter(ignored);
        if cmp.is_same() {
            return Ok(());
        }
        let conflicts = self.take_changed(&cmp, None);
        self.give_up(&cmp, &conflicts, None);
        self.drop_empty();
        let ours = cmp.modified.union(&cmp.added).difference(&strip_set());
        if !ours.is_empty() {
            match self
                .entries
                .iter_mut()
                .find(|e| e.is(manager, Operation::Update, subresource, api_version))
            {
                Some(e) => {
                    e.set.union_in(&ours);
                    e.time = Some(now.to_string());
                }
                None => self.entries.push(Entry {
                    manager: manager.to_string(),
                    operation: Operation::Update,
                    api_version: api_version.to_string(),
                    time: Some(now.to_string()),
                    subresource: subresource.to_string(),
                    set: ours,
                }),
            }
        }
        self.cap_updates();
        Ok(())
    }

    /// Merges the oldest `Update` entries into per-version `ancient-changes` buckets until at
    /// most [`MAX_UPDATE_MANAGERS`] remain (upstream's `capManagersManager`).
    pub fn cap_updates(&mut self) {
        let mut updaters: Vec<usize> = (0..self.entries.len())
            .filter(|&i| self.entries[i].operation == Operation::Update)
            .collect();
        if updaters.len() <= MAX_UPDATE_MANAGERS {
            return;
        }
        let key = |e: &Entry| {
            (
                seconds(e.time.as_deref()),
                identity(e.manager.as_str(), e.subresource.as_str(), e.api_version.as_str()),
            )
        };
        updaters.sort_by(|&a, &b| key(&self.entries[a]).cmp(&key(&self.entries[b])));
        let mut first_of_version: Vec<(String, usize)> = Vec::new();
        let mut gone: Vec<usize> = Vec::new();
        let mut length = updaters.len();
        for &i in &updaters {
            if length <= MAX_UPDATE_MANAGERS {
                break;
            }
            let version = self.entries[i].api_version.clone();
            let Some(&(_, first)) = first_of_version.iter().find(|(v, _)| *v == version) else {
                first_of_version.push((version, i));
                continue;
            };
            let bucket = match self
                .entries
                .iter()
                .position(|e| e.is(ANCIENT, Operation::Update, "", &version))
            {
                Some(b) => b,
                None => {
                    // The first entry of this version becomes the bucket.
                    let e = &mut self.entries[first];
                    e.manager = ANCIENT.to_string();
                    e.subresource.clear();
                    first
                }
            };
            let set = self.entries[i].set.clone();
            let time = self.entries[i].time.clone();
            self.entries[bucket].set.union_in(&set);
            self.entries[bucket].time = time;
            gone.push(i);
            length -= 1;
        }
        let mut idx = 0;
        self.entries.retain(|_| {
            let keep = !gone.contains(&idx);
            idx += 1;
            keep
        });
    }
}

/// The sort key upstream uses for an update manager identity (its JSON form starts with the
/// manager's name).
fn identity(manager: &str, subresource: &str, api_version: &str) -> String {
    format!("{manager}\u{0}{api_version}\u{0}{subresource}")
}

/// Seconds since the epoch of an RFC 3339 time, 0 when absent or unreadable (as upstream
/// treats a nil time).
fn seconds(t: Option<&str>) -> i64 {
    t.and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map_or(0, jiff::Timestamp::as_second)
}

/// Removes the paths the field manager never tracks from a set.
pub fn strip(set: &FieldSet) -> FieldSet {
    set.difference(&strip_set())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w<'a>(manager: &'a str, now: &'a str) -> Writer<'a> {
        Writer {
            manager,
            subresource: "",
            api_version: "v1",
            now,
        }
    }

    #[test]
    fn update_records_changes_and_takes_them_from_others() {
        let old = json!({"metadata": {"name": "a"}, "data": {"x": "1"}});
        let new = json!({"metadata": {"name": "a", "labels": {"l": "v"}}, "data": {"x": "2", "y": "3"}});
        let mut m = Managed::default();
        m.record_update(
            "ConfigMap",
            &json!({}),
            &old,
            &w("kubectl-create", "2026-01-01T00:00:00Z"),
            &FieldSet::default(),
        )
        .unwrap();
        assert_eq!(
            m.encode().unwrap(),
            json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:x": {}}}}])
        );
        m.record_update(
            "ConfigMap",
            &old,
            &new,
            &w("kubectl-edit", "2026-01-01T00:00:01Z"),
            &FieldSet::default(),
        )
        .unwrap();
        let enc = m.encode().unwrap();
        assert_eq!(enc[0]["fieldsV1"], json!({"f:data": {}}));
        assert_eq!(
            enc[1]["fieldsV1"],
            json!({"f:data": {"f:x": {}, "f:y": {}}, "f:metadata": {"f:labels": {".": {}, "f:l": {}}}})
        );
        assert_eq!(Managed::decode(Some(&enc)).unwrap(), m);
        assert!(Managed::decode(Some(&json!([{"operation": "Bad", "apiVersion": "v1"}]))).is_err());
        assert!(is_reset(Some(&json!([]))) && is_reset(Some(&json!([{}]))) && !is_reset(None));
    }

    #[test]
    fn update_managers_are_capped_into_ancient_changes() {
        let mut m = Managed::default();
        for i in 0..12 {
            let old = json!({"data": {}});
            let new = json!({"data": {format!("k{i}"): "v"}});
            let now = format!("2026-01-01T00:00:{i:02}Z");
            m.record_update(
                "ConfigMap",
                &old,
                &new,
                &w(&format!("m{i:02}"), &now),
                &FieldSet::default(),
            )
            .unwrap();
        }
        assert_eq!(m.entries.len(), MAX_UPDATE_MANAGERS);
        let ancient = m.entries.iter().find(|e| e.manager == ANCIENT).unwrap();
        assert_eq!(ancient.set.paths().len(), 3);
        assert_eq!(ancient.time.as_deref(), Some("2026-01-01T00:00:02Z"));
        assert!(
            !m.entries
                .iter()
                .any(|e| e.manager == "m00" || e.manager == "m01" || e.manager == "m02")
        );
    }
}
