//! The typed-value operations server-side apply is built from, as structured-merge-diff's
//! `typed` package defines them: the field set of an applied configuration
//! ([`to_field_set`]), the comparison of two objects ([`compare`]), the merge of a configuration
//! into the live object ([`merge`]) and the removal of a set's items ([`remove_items`]).
//!
//! Every function walks the JSON with the node types of [`schema`](super::schema): objects are
//! structs or maps, lists are atomic, sets or keyed by their map keys. List items are named by
//! their keys (`k:{"name":"c"}`), set items by value (`v:"x"`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, Path, PathElement, path_string};
use super::schema::{NodeType, node_type};

/// Where a walk is: the field path and the field names used to look up node types.
#[derive(Clone, Default)]
struct At<'a> {
    kind: &'a str,
    path: Path,
    names: Vec<String>,
}

impl<'a> At<'a> {
    fn root(kind: &'a str) -> Self {
        At {
            kind,
            ..Default::default()
        }
    }

    fn field(&self, name: &str) -> Self {
        let mut next = self.clone();
        next.path.push(PathElement::Field(name.to_string()));
        next.names.push(name.to_string());
        next
    }

    fn item(&self, pe: PathElement) -> Self {
        let mut next = self.clone();
        next.path.push(pe);
        next
    }

    fn ty(&self, v: &Value) -> NodeType {
        if self.path.is_empty() {
            return NodeType::Struct;
        }
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        match v {
            Value::Array(_) => node_type(self.kind, &names, true),
            Value::Object(_) => node_type(self.kind, &names, false),
            _ => NodeType::Atomic,
        }
    }
}

/// The path element naming a list item, or why the item cannot be named.
fn item_element(at: &At<'_>, ty: &NodeType, item: &Value) -> Result<PathElement, String> {
    match ty {
        NodeType::MapList(keys) => {
            let obj = item
                .as_object()
                .ok_or_else(|| format!("{}: expected map, got {item}", path_string(&at.path)))?;
            let mut kv = Vec::with_capacity(keys.len());
            for (k, default) in keys {
                match obj.get(k).or(default.as_ref()) {
                    Some(v) => kv.push((k.clone(), v.clone())),
                    None => {
                        return Err(format!(
                            "{}: associative list with keys has an element that omits key field {k:?} (and doesn't have default value)",
                            path_string(&at.path)
                        ));
                    }
                }
            }
            kv.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(kv))
        }
        _ => Ok(PathElement::Value(item.clone())),
    }
}

/// The items of a keyed list or set by element, in order, refusing duplicates as upstream does.
fn index_items<'v>(at: &At<'_>, ty: &NodeType, list: &'v [Value]) -> Result<Vec<(PathElement, &'v Value)>, String> {
    let mut out: Vec<(PathElement, &Value)> = Vec::with_capacity(list.len());
    for item in list {
        let pe = item_element(at, ty, item)?;
        if out.iter().any(|(p, _)| *p == pe) {
            return Err(format!("{}: duplicate entries for key {pe}", path_string(&at.path)));
        }
        out.push((pe, item));
    }
    Ok(out)
}

fn granular_list(ty: &NodeType) -> bool {
    matches!(ty, NodeType::MapList(_) | NodeType::Set)
}

/// The set of fields a configuration sets: leaves, list items, map entries and empty or null
/// values; a struct field holding a non-empty object is not itself a member.
pub fn to_field_set(kind: &str, v: &Value) -> Result<FieldSet, String> {
    let mut set = FieldSet::default();
    fields_of(&At::root(kind), v, &mut set)?;
    Ok(set)
}

fn fields_of(at: &At<'_>, v: &Value, set: &mut FieldSet) -> Result<(), String> {
    let ty = at.ty(v);
    match v {
        Value::Object(m) if ty != NodeType::Atomic => {
            for (k, val) in m {
                let child = at.field(k);
                fields_of(&child, val, set)?;
                let empty = val.is_null() || val.as_object().is_some_and(Map::is_empty);
                if empty || ty == NodeType::Map {
                    set.insert(&child.path);
                }
            }
        }
        Value::Array(list) if granular_list(&ty) => {
            for (pe, item) in index_items(at, &ty, list)? {
                let child = at.item(pe);
                if matches!(ty, NodeType::MapList(_)) {
                    fields_of(&child, item, set)?;
                }
                set.insert(&child.path);
            }
        }
        _ => {
            if !at.path.is_empty() {
                set.insert(&at.path);
            }
        }
    }
    Ok(())
}

/// What changed from one object to another, path by path.
#[derive(Debug, Default)]
pub struct Comparison {
    /// Paths present only in the new object.
    pub added: FieldSet,
    /// Leaves whose value changed.
    pub modified: FieldSet,
    /// Paths present only in the old object.
    pub removed: FieldSet,
}

impl Comparison {
    /// Drops the paths at or below `ignored` (structured-merge-diff's `FilterFields`): an
    /// endpoint's reset fields neither conflict nor change hands.
    pub fn filter(&mut self, ignored: &FieldSet) {
        if ignored.is_empty() {
            return;
        }
        self.added = self.added.recursive_difference(ignored);
        self.modified = self.modified.recursive_difference(ignored);
        self.removed = self.removed.recursive_difference(ignored);
    }

    /// Whether nothing changed.
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// Compares `old` to `new`.
pub fn compare(kind: &str, old: &Value, new: &Value) -> Result<Comparison, String> {
    let mut c = Comparison::default();
    compare_at(&At::root(kind), Some(old), Some(new), &mut c)?;
    Ok(c)
}

fn compare_at(at: &At<'_>, old: Option<&Value>, new: Option<&Value>, c: &mut Comparison) -> Result<(), String> {
    let sample = new.or(old).unwrap_or(&Value::Null);
    let ty = at.ty(sample);
    let leaf = |c: &mut Comparison| {
        match (old, new) {
            (None, Some(_)) => c.added.insert(&at.path),
            (Some(_), None) => c.removed.insert(&at.path),
            (Some(a), Some(b)) if a != b => c.modified.insert(&at.path),
            _ => {}
        };
    };
    let same_shape = |pred: fn(&Value) -> bool| old.is_none_or(pred) && new.is_none_or(pred);
    match sample {
        Value::Object(_) if ty != NodeType::Atomic && same_shape(Value::is_object) => {
            let empty = Map::new();
            let o = old.and_then(Value::as_object).unwrap_or(&empty);
            let n = new.and_then(Value::as_object).unwrap_or(&empty);
            for (k, nv) in n {
                let child = at.field(k);
                compare_at(&child, o.get(k), Some(nv), c)?;
                if !o.contains_key(k) {
                    c.added.insert(&child.path);
                }
            }
            for (k, ov) in o {
                if !n.contains_key(k) {
                    let child = at.field(k);
                    compare_at(&child, Some(ov), None, c)?;
                    c.removed.insert(&child.path);
                }
            }
        }
        Value::Array(_) if granular_list(&ty) && same_shape(Value::is_array) => {
            let o = index_items(at, &ty, old.and_then(Value::as_array).map_or(&[], Vec::as_slice))?;
            let n = index_items(at, &ty, new.and_then(Value::as_array).map_or(&[], Vec::as_slice))?;
            let old_by: BTreeMap<&PathElement, &Value> = o.iter().map(|(p, v)| (p, *v)).collect();
            let new_by: BTreeMap<&PathElement, &Value> = n.iter().map(|(p, v)| (p, *v)).collect();
            for (pe, nv) in &n {
                let child = at.item(pe.clone());
                match old_by.get(pe) {
                    Some(ov) => compare_at(&child, Some(ov), Some(nv), c)?,
                    None => {
                        compare_at(&child, None, Some(nv), c)?;
                        c.added.insert(&child.path);
                    }
                }
            }
            for (pe, ov) in &o {
                if !new_by.contains_key(pe) {
                    let child = at.item(pe.clone());
                    compare_at(&child, Some(ov), None, c)?;
                    c.removed.insert(&child.path);
                }
            }
        }
        _ => leaf(c),
    }
    Ok(())
}

/// Merges an applied configuration into the live object: the configuration's values win,
/// objects merge key by key, keyed lists and sets item by item (in the configuration's order,
/// with live-only items kept where they were), anything atomic is replaced.
pub fn merge(kind: &str, live: &Value, config: &Value) -> Result<Value, String> {
    merge_at(&At::root(kind), Some(live), config)
}

fn merge_at(at: &At<'_>, live: Option<&Value>, config: &Value) -> Result<Value, String> {
    let ty = at.ty(config);
    match (live, config) {
        (Some(Value::Object(l)), Value::Object(c)) if ty != NodeType::Atomic => {
            let mut out = l.clone();
            for (k, cv) in c {
                let merged = merge_at(&at.field(k), l.get(k), cv)?;
                out.insert(k.clone(), merged);
            }
            Ok(Value::Object(out))
        }
        (Some(Value::Array(l)), Value::Array(c)) if granular_list(&ty) => {
            let lhs = index_items(at, &ty, l)?;
            let rhs = index_items(at, &ty, c)?;
            merge_items(at, &ty, &lhs, &rhs).map(Value::Array)
        }
        (None, Value::Object(_) | Value::Array(_)) => {
            // Validate keys of new lists even when nothing merges with them.
            if granular_list(&ty)
                && let Value::Array(c) = config
            {
                index_items(at, &ty, c)?;
            }
            Ok(config.clone())
        }
        _ => Ok(config.clone()),
    }
}

/// structured-merge-diff's list merge: walks both lists at once, taking shared items in the
/// configuration's order and keeping live-only items in place relative to them.
fn merge_items(
    at: &At<'_>,
    ty: &NodeType,
    lhs: &[(PathElement, &Value)],
    rhs: &[(PathElement, &Value)],
) -> Result<Vec<Value>, String> {
    let in_lhs = |pe: &PathElement| lhs.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
    let in_rhs = |pe: &PathElement| rhs.iter().any(|(p, _)| p == pe);
    let mut shared = rhs.iter().map(|(p, _)| p).filter(|p| in_lhs(p).is_some());
    let mut next_shared = shared.next();
    let mut merged_rhs: Vec<&PathElement> = Vec::new();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let merge_item = |pe: &PathElement, l: Option<&Value>, r: &Value| -> Result<Value, String> {
        if matches!(ty, NodeType::MapList(_)) {
            merge_at(&at.item(pe.clone()), l, r)
        } else {
            Ok(r.clone())
        }
    };
    let (mut li, mut ri) = (0, 0);
    while li < lhs.len() || ri < rhs.len() {
        if li < lhs.len() && ri < rhs.len() {
            let pe = &lhs[li].0;
            if *pe == rhs[ri].0 {
                merged_rhs.push(pe);
                out.push(merge_item(pe, Some(lhs[li].1), rhs[ri].1)?);
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if in_rhs(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs.len() {
            let pe = &lhs[li].0;
            if !in_rhs(pe) {
                out.push(lhs[li].1.clone());
                li += 1;
                continue;
            } else if merged_rhs.contains(&pe) {
                li += 1;
                continue;
            }
        }
        if ri < rhs.len() {
            let pe = &rhs[ri].0;
            merged_rhs.push(pe);
            out.push(merge_item(pe, in_lhs(pe), rhs[ri].1)?);
            ri += 1;
            if next_shared.is_some_and(|n| n == pe) {
                next_shared = shared.next();
            }
        }
    }
    Ok(out)
}

/// Removes from `v` the map entries and list items whose paths are members of `set`. As
/// upstream, an object or list that would be left empty keeps its entries (its parent's path
/// is what removes it).
pub fn remove_items(kind: &str, v: &Value, set: &FieldSet) -> Value {
    remove_at(&At::root(kind), v, set)
}

fn remove_at(at: &At<'_>, v: &Value, set: &FieldSet) -> Value {
    let ty = at.ty(v);
    match v {
        Value::Object(m) if ty != NodeType::Atomic && !m.is_empty() => {
            let mut out = Map::new();
            for (k, val) in m {
                let pe = PathElement::Field(k.clone());
                match set.children.get(&pe) {
                    Some(s) if s.member => {}
                    Some(s) => {
                        out.insert(k.clone(), remove_at(&at.field(k), val, s));
                    }
                    None => {
                        out.insert(k.clone(), val.clone());
                    }
                }
            }
            if out.is_empty() { v.clone() } else { Value::Object(out) }
        }
        Value::Array(list) if granular_list(&ty) && !list.is_empty() => {
            let mut out = Vec::with_capacity(list.len());
            for item in list {
                let Ok(pe) = item_element(at, &ty, item) else {
                    out.push(item.clone());
                    continue;
                };
                match set.children.get(&pe) {
                    Some(s) if s.member => {}
                    Some(s) => out.push(remove_at(&at.item(pe), item, s)),
                    None => out.push(item.clone()),
                }
            }
            if out.is_empty() { v.clone() } else { Value::Array(out) }
        }
        _ => v.clone(),
    }
}

/// structured-merge-diff's `EnsureNamedFieldsAreMembers`: every struct field the set reaches
/// becomes a member itself, so pruning can remove a whole struct a configuration stopped
/// sending.
pub fn ensure_named_fields(kind: &str, set: &FieldSet) -> FieldSet {
    let mut out = set.clone();
    ensure_at(kind, &mut Vec::new(), &mut out, true);
    out
}

fn ensure_at(kind: &str, names: &mut Vec<String>, node: &mut FieldSet, is_struct: bool) {
    for (pe, child) in &mut node.children {
        match pe {
            PathElement::Field(name) => {
                if is_struct {
                    child.member = true;
                }
                names.push(name.clone());
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let child_struct = node_type(kind, &refs, false) == NodeType::Struct;
                ensure_at(kind, names, child, child_struct);
                names.pop();
            }
            // List items are objects (structs) when keyed; set items have no children.
            _ => ensure_at(kind, names, child, true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy(image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "1"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "c", "image": image, "ports": [{"containerPort": 80}]}]}}}})
    }

    #[test]
    fn field_set_of_a_configuration_is_upstreams() {
        let s = to_field_set("Deployment", &deploy("i")).unwrap();
        assert_eq!(
            s.to_fields_v1(),
            json!({"f:apiVersion": {}, "f:kind": {},
                "f:metadata": {"f:name": {}, "f:labels": {"f:a": {}}},
                "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"c\"}": {".": {}, "f:name": {}, "f:image": {}, "f:ports": {
                        "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}}}}})
        );
        let dup = json!({"spec": {"containers": [{"name": "c"}, {"name": "c"}]}});
        assert!(to_field_set("Pod", &dup).unwrap_err().contains("duplicate entries"));
        // A container's name defaults to "" in the OpenAPI, so a nameless one is keyed by "";
        // an ObjectReference's name has no default, so a keyless service account secret is
        // refused.
        let keyless = json!({"spec": {"containers": [{"image": "c"}]}});
        let s = to_field_set("Pod", &keyless).unwrap();
        assert_eq!(
            s.to_fields_v1(),
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"\"}": {".": {}, "f:image": {}}}}})
        );
        let keyless = json!({"secrets": [{"namespace": "n"}]});
        assert!(
            to_field_set("ServiceAccount", &keyless)
                .unwrap_err()
                .contains("omits key field \"name\"")
        );
        // Owner references are atomic items: owned whole, no field of theirs listed.
        let owned = json!({"metadata": {"ownerReferences": [{"uid": "u", "kind": "ReplicaSet", "name": "r"}]}});
        assert_eq!(
            to_field_set("Pod", &owned).unwrap().to_fields_v1(),
            json!({"f:metadata": {"f:ownerReferences": {"k:{\"uid\":\"u\"}": {}}}})
        );
    }

    #[test]
    fn compare_reports_added_modified_and_removed_paths() {
        let mut new = deploy("j");
        new["spec"]["template"]["spec"]["containers"][0]["ports"] = json!([{"containerPort": 81}]);
        new["metadata"]["labels"] = json!({"b": "2"});
        let c = compare("Deployment", &deploy("i"), &new).unwrap();
        let img = ".spec.template.spec.containers[name=\"c\"].image";
        let mod_paths: Vec<String> = c.modified.paths().iter().map(|p| path_string(p)).collect();
        assert_eq!(mod_paths, vec![img.to_string()]);
        assert!(c.added.has(&[
            PathElement::Field("metadata".into()),
            PathElement::Field("labels".into()),
            PathElement::Field("b".into())
        ]));
        assert!(
            c.removed
                .paths()
                .iter()
                .any(|p| path_string(p).ends_with("[containerPort=80,protocol=\"TCP\"]"))
        );
        assert!(compare("Deployment", &new, &new).unwrap().is_same());
    }

    #[test]
    fn merge_keys_lists_and_keeps_live_only_items_in_place() {
        let live = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}, {"name": "c", "image": "3"}],
            "tolerations": [{"key": "x"}]}, "metadata": {"finalizers": ["f1"]}});
        let config = json!({"spec": {"containers": [{"name": "c", "image": "9"}, {"name": "a", "args": ["x"]}],
            "tolerations": [{"key": "y"}]}, "metadata": {"finalizers": ["f2", "f1"]}});
        let m = merge("Pod", &live, &config).unwrap();
        let names: Vec<&str> = m["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["b", "c", "a"]);
        assert_eq!(m["spec"]["containers"][1]["image"], "9");
        assert_eq!(
            m["spec"]["containers"][2],
            json!({"name": "a", "image": "1", "args": ["x"]})
        );
        assert_eq!(m["spec"]["tolerations"], json!([{"key": "y"}]));
        assert_eq!(m["metadata"]["finalizers"], json!(["f2", "f1"]));
    }

    #[test]
    fn remove_items_and_named_fields() {
        let v = deploy("i");
        let mut set = FieldSet::default();
        set.insert(&[
            PathElement::Field("metadata".into()),
            PathElement::Field("labels".into()),
            PathElement::Field("a".into()),
        ]);
        set.insert(&[PathElement::Field("spec".into()), PathElement::Field("replicas".into())]);
        let r = remove_items("Deployment", &v, &set);
        assert!(r["spec"].get("replicas").is_none());
        // The only label stays: emptying a map is its parent's business.
        assert_eq!(r["metadata"]["labels"], json!({"a": "1"}));
        let e = ensure_named_fields("Deployment", &set);
        assert!(e.has(&[
            PathElement::Field("metadata".into()),
            PathElement::Field("labels".into())
        ]));
        assert!(e.has(&[PathElement::Field("spec".into())]));
        let labels_removed = remove_items("Deployment", &v, &e.difference(&FieldSet::default()));
        assert!(labels_removed.get("spec").is_none());
    }
}
