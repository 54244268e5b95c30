//! Sets of field paths, as structured-merge-diff's `fieldpath.Set` holds them, and their wire
//! form `FieldsV1`.
//!
//! The main structure is [`FieldSet`]: a tree whose nodes are path elements (`f:name`,
//! `k:{"name":"x"}`, `v:"a"`, `i:0`) and whose `member` flag says the path itself is in the set
//! (the `.` of FieldsV1). The set operations are upstream's: [`FieldSet::difference`] is not
//! recursive (removing `.spec` does not remove `.spec.replicas`), which is why `f:metadata`
//! survives the stripping of `metadata` with its children intact.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathElement {
    /// A struct field or map key (`f:name`).
    Field(String),
    /// An associative list item, by its key fields sorted by name (`k:{"name":"x"}`).
    Key(Vec<(String, Value)>),
    /// A set item (`v:"x"`).
    Value(Value),
    /// An atomic list's item by position (`i:0`); only seen in decoded sets.
    Index(usize),
}

impl PathElement {
    fn rank(&self) -> u8 {
        match self {
            Self::Field(_) => 0,
            Self::Key(_) => 1,
            Self::Value(_) => 2,
            Self::Index(_) => 3,
        }
    }

    /// The FieldsV1 key of this element.
    pub fn encode(&self) -> String {
        match self {
            Self::Field(f) => format!("f:{f}"),
            Self::Key(kv) => {
                let m: Map<String, Value> = kv.iter().cloned().collect();
                format!("k:{}", Value::Object(m))
            }
            Self::Value(v) => format!("v:{v}"),
            Self::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a FieldsV1 key (not `.`).
    pub fn decode(s: &str) -> Result<Self, String> {
        let (prefix, rest) = s.split_once(':').ok_or_else(|| format!("invalid path element {s:?}"))?;
        match prefix {
            "f" => Ok(Self::Field(rest.to_string())),
            "k" => match serde_json::from_str::<Value>(rest) {
                Ok(Value::Object(m)) => {
                    let mut kv: Vec<(String, Value)> = m.into_iter().collect();
                    kv.sort_by(|a, b| a.0.cmp(&b.0));
                    Ok(Self::Key(kv))
                }
                _ => Err(format!("invalid key path element {s:?}")),
            },
            "v" => serde_json::from_str(rest)
                .map(Self::Value)
                .map_err(|e| format!("invalid value path element {s:?}: {e}")),
            "i" => rest
                .parse()
                .map(Self::Index)
                .map_err(|_| format!("invalid index path element {s:?}")),
            _ => Err(format!("unknown path element prefix in {s:?}")),
        }
    }
}

/// Upstream's `value.ToString`: strings quoted, everything else as JSON.
fn value_string(v: &Value) -> String {
    v.to_string()
}

impl fmt::Display for PathElement {
    /// The form conflict messages use: `.name`, `[name="x"]`, `[="x"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Field(n) => write!(f, ".{n}"),
            Self::Key(kv) => {
                let parts: Vec<String> = kv.iter().map(|(k, v)| format!("{k}={}", value_string(v))).collect();
                write!(f, "[{}]", parts.join(","))
            }
            Self::Value(v) => write!(f, "[={}]", value_string(v)),
            Self::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// Orders JSON scalars the way the sorted FieldsV1 output needs: by type, then by value.
fn cmp_value(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Number(_) => 2,
            Value::String(_) => 3,
            Value::Array(_) => 4,
            Value::Object(_) => 5,
        }
    }
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Number(x), Value::Number(y)) => x
            .as_f64()
            .unwrap_or_default()
            .partial_cmp(&y.as_f64().unwrap_or_default())
            .unwrap_or(Ordering::Equal),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)).then_with(|| a.to_string().cmp(&b.to_string())),
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Field(a), Self::Field(b)) => a.cmp(b),
            (Self::Key(a), Self::Key(b)) => {
                for ((ka, va), (kb, vb)) in a.iter().zip(b) {
                    let c = ka.cmp(kb).then_with(|| cmp_value(va, vb));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (Self::Value(a), Self::Value(b)) => cmp_value(a, b),
            (Self::Index(a), Self::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A path from the object's root.
pub type Path = Vec<PathElement>;

/// The display form of a path (`.spec.containers[name="c"].image`).
pub fn path_string(p: &[PathElement]) -> String {
    p.iter().map(ToString::to_string).collect()
}

/// A set of paths as a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// Whether the path that leads to this node is itself in the set.
    pub member: bool,
    /// The paths that continue below this node.
    pub children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// Whether no path is in the set.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// The node at `path`, created when absent.
    pub fn node_mut(&mut self, path: &[PathElement]) -> &mut FieldSet {
        let mut node = self;
        for pe in path {
            node = node.children.entry(pe.clone()).or_default();
        }
        node
    }

    /// The node at `path`, if any path continues there.
    pub fn node(&self, path: &[PathElement]) -> Option<&FieldSet> {
        let mut node = self;
        for pe in path {
            node = node.children.get(pe)?;
        }
        Some(node)
    }

    /// Adds `path` to the set.
    pub fn insert(&mut self, path: &[PathElement]) {
        self.node_mut(path).member = true;
    }

    /// Whether `path` itself is in the set.
    pub fn has(&self, path: &[PathElement]) -> bool {
        self.node(path).is_some_and(|n| n.member)
    }

    fn prune(mut self) -> Self {
        self.children.retain(|_, c| !c.is_empty());
        self
    }

    /// Every path in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_in(other);
        out
    }

    /// Adds every path of `other`.
    pub fn union_in(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (pe, c) in &other.children {
            self.children.entry(pe.clone()).or_default().union_in(c);
        }
    }

    /// The paths of `self` that are not in `other` (each path on its own: a parent in
    /// `other` does not remove its children).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let children = self
            .children
            .iter()
            .map(|(pe, c)| {
                let d = match other.children.get(pe) {
                    Some(o) => c.difference(o),
                    None => c.clone(),
                };
                (pe.clone(), d)
            })
            .collect();
        FieldSet {
            member: self.member && !other.member,
            children,
        }
        .prune()
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let children = self
            .children
            .iter()
            .filter_map(|(pe, c)| other.children.get(pe).map(|o| (pe.clone(), c.intersection(o))))
            .collect();
        FieldSet {
            member: self.member && other.member,
            children,
        }
        .prune()
    }

    /// The paths of `self` that are neither in `other` nor below a path of `other`.
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let children = self
            .children
            .iter()
            .filter_map(|(pe, c)| match other.children.get(pe) {
                Some(o) if o.member => None,
                Some(o) => Some((pe.clone(), c.recursive_difference(o))),
                None => Some((pe.clone(), c.clone())),
            })
            .collect();
        FieldSet {
            member: self.member && !other.member,
            children,
        }
        .prune()
    }

    /// Every path in the set, in upstream's iteration order: a node's own members (sorted)
    /// before the paths below its children.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for (pe, c) in &self.children {
            if c.member {
                let mut p = prefix.clone();
                p.push(pe.clone());
                out.push(p);
            }
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The FieldsV1 JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.children_json())
    }

    fn children_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        for (pe, c) in &self.children {
            if c.is_empty() {
                continue;
            }
            let mut inner = c.children_json();
            if c.member && !inner.is_empty() {
                inner.insert(".".into(), Value::Object(Map::new()));
            }
            m.insert(pe.encode(), Value::Object(inner));
        }
        m
    }

    /// Parses FieldsV1 JSON.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, String> {
        let m = v.as_object().ok_or("FieldsV1 must be a JSON object")?;
        let mut out = FieldSet::default();
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let pe = PathElement::decode(k)?;
            let mut node = FieldSet::from_fields_v1(child)?;
            let cm = child.as_object().ok_or("FieldsV1 must be a JSON object")?;
            // A leaf (`{}`) or a node marked `.` is a member itself.
            node.member = cm.is_empty() || cm.contains_key(".");
            out.children.insert(pe, node);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(n: &str) -> PathElement {
        PathElement::Field(n.into())
    }

    #[test]
    fn fields_v1_round_trips_in_upstream_form() {
        let v = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:ports": {
                "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}},
            "f:finalizers": {"v:\"x\"": {}}});
        let s = FieldSet::from_fields_v1(&v).unwrap();
        assert_eq!(s.to_fields_v1(), v);
        assert!(s.has(&[f("metadata"), f("labels")]));
        assert!(!s.has(&[f("metadata")]));
        let k = PathElement::Key(vec![("name".into(), json!("c"))]);
        assert_eq!(
            path_string(&[f("spec"), f("containers"), k, f("image")]),
            ".spec.containers[name=\"c\"].image"
        );
        assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_err());
    }

    #[test]
    fn difference_is_per_path_and_recursive_difference_is_by_prefix() {
        let mut a = FieldSet::default();
        a.insert(&[f("spec")]);
        a.insert(&[f("spec"), f("replicas")]);
        a.insert(&[f("data"), f("x")]);
        let mut b = FieldSet::default();
        b.insert(&[f("spec")]);
        let d = a.difference(&b);
        assert!(!d.has(&[f("spec")]) && d.has(&[f("spec"), f("replicas")]));
        let r = a.recursive_difference(&b);
        assert_eq!(r.paths(), vec![vec![f("data"), f("x")]]);
        assert!(a.intersection(&b).has(&[f("spec")]));
        assert_eq!(a.union(&b), a);
        assert_eq!(
            a.paths(),
            vec![vec![f("spec")], vec![f("data"), f("x")], vec![f("spec"), f("replicas")]]
        );
    }
}
