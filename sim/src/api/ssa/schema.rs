//! What server-side apply knows of the built-in kinds' shape: which lists are associative (and
//! by which keys), which are sets, and which objects are maps rather than structs.
//!
//! The sim's OpenAPI documents are deliberately shallow (see `openapi.rs`), so this knowledge
//! lives apart, in `schema.txt`, extracted from upstream's published OpenAPI v3 markers with its
//! provenance noted there. Rules match a path suffix of field names, so one rule covers a
//! `PodSpec` in a Pod, a Deployment's template and a CronJob's job template alike. What no rule
//! names follows structured-merge-diff's defaults: a list is atomic, an object a struct.

use std::sync::OnceLock;

use serde_json::Value;

/// How one list or object node merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeType {
    /// A list merged by item keys (`x-kubernetes-list-type: map`), with each key's default.
    MapList(Vec<(String, Option<Value>)>),
    /// A list of scalars merged as a set.
    Set,
    /// Replaced as a whole (lists without a marker, `x-kubernetes-map-type: atomic`).
    Atomic,
    /// An object whose keys are entries, not named fields (`additionalProperties`).
    Map,
    /// An object of named fields (the default for objects).
    Struct,
}

struct Rule {
    kinds: Option<Vec<String>>,
    suffix: Vec<String>,
    ty: NodeType,
    /// The list's items are atomic (`x-kubernetes-map-type: atomic` on the item type, as on
    /// `OwnerReference`): an item is owned whole, never field by field.
    atomic_items: bool,
}

/// The marker a `map-list` line ends with when its items are atomic.
const ATOMIC_ITEMS: &str = "items=atomic";

/// A key default as the OpenAPI gives it: JSON when it parses (`0`, `""`), else a bare string
/// (`TCP`).
fn key_default(d: &str) -> Value {
    serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.to_string()))
}

fn parse_type(ty: &str, keys: &[&str]) -> Result<NodeType, String> {
    Ok(match ty {
        "map-list" => {
            if keys.is_empty() {
                return Err("map-list without keys".into());
            }
            NodeType::MapList(
                keys.iter()
                    .map(|k| match k.split_once('=') {
                        Some((n, d)) => (n.to_string(), Some(key_default(d))),
                        None => (k.to_string(), None),
                    })
                    .collect(),
            )
        }
        "set" => NodeType::Set,
        "atomic" => NodeType::Atomic,
        "map" => NodeType::Map,
        other => return Err(format!("unknown type {other:?}")),
    })
}

fn parse(text: &str) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        let [kinds, path, ty, keys @ ..] = cols.as_slice() else {
            return Err(format!("schema.txt line {}: too few columns", n + 1));
        };
        let (keys, atomic_items) = match keys.split_last() {
            Some((&ATOMIC_ITEMS, rest)) => (rest, true),
            _ => (keys, false),
        };
        let ty = parse_type(ty, keys).map_err(|e| format!("schema.txt line {}: {e}", n + 1))?;
        if atomic_items && !matches!(ty, NodeType::MapList(_)) {
            return Err(format!("schema.txt line {}: {ATOMIC_ITEMS} on a non-map-list", n + 1));
        }
        rules.push(Rule {
            kinds: (*kinds != "*").then(|| kinds.split(',').map(String::from).collect()),
            suffix: path.split('.').map(String::from).collect(),
            ty,
            atomic_items,
        });
    }
    Ok(rules)
}

fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| match parse(include_str!("schema.txt")) {
        Ok(r) => r,
        Err(e) => {
            // The file is compiled in and checked by a unit test; a bad line means no rules.
            tracing::error!(error = %e, "server-side apply schema table does not parse");
            Vec::new()
        }
    })
}

/// The type of the node at `path` (field names from the root) in an object of `kind`;
/// `is_list` picks the default when no rule names it. List items share their list's path, so
/// an object asked for at a keyed list's path is one of its items: a struct, or atomic when the
/// rule says its items are.
pub fn node_type(kind: &str, path: &[&str], is_list: bool) -> NodeType {
    let mut best: Option<&Rule> = None;
    for r in rules() {
        if r.suffix.len() > path.len() || best.is_some_and(|b| b.suffix.len() >= r.suffix.len()) {
            continue;
        }
        if r.kinds.as_ref().is_some_and(|ks| !ks.iter().any(|k| k == kind)) {
            continue;
        }
        let tail = &path[path.len() - r.suffix.len()..];
        if tail.iter().zip(&r.suffix).all(|(a, b)| *a == b) {
            best = Some(r);
        }
    }
    match best.map(|r| (&r.ty, r.atomic_items)) {
        Some((NodeType::Map | NodeType::Struct, _)) if is_list => NodeType::Atomic,
        Some((NodeType::MapList(_), true)) if !is_list => NodeType::Atomic,
        Some((NodeType::MapList(_) | NodeType::Set, _)) if !is_list => NodeType::Struct,
        Some((t, _)) => t.clone(),
        None if is_list => NodeType::Atomic,
        None => NodeType::Struct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_parses_and_rules_match_by_suffix() {
        assert!(parse(include_str!("schema.txt")).is_ok());
        let ports = node_type("Deployment", &["spec", "template", "spec", "containers", "ports"], true);
        assert_eq!(
            ports,
            NodeType::MapList(vec![
                ("containerPort".into(), Some(Value::from(0))),
                ("protocol".into(), Some(Value::String("TCP".into())))
            ])
        );
        assert_eq!(
            node_type("Service", &["spec", "ports"], true),
            NodeType::MapList(vec![
                ("port".into(), Some(Value::from(0))),
                ("protocol".into(), Some(Value::String("TCP".into())))
            ])
        );
        assert_eq!(
            node_type("Pod", &["spec", "containers"], true),
            NodeType::MapList(vec![("name".into(), Some(Value::String(String::new())))])
        );
        assert_eq!(node_type("Service", &["spec", "selector"], false), NodeType::Atomic);
        // LabelSelector is an atomic struct; PodSpec.nodeSelector an atomic map.
        assert_eq!(node_type("Deployment", &["spec", "selector"], false), NodeType::Atomic);
        assert_eq!(node_type("Pod", &["spec", "nodeSelector"], false), NodeType::Atomic);
        assert_eq!(node_type("Pod", &["spec", "affinity"], false), NodeType::Struct);
        assert_eq!(node_type("Pod", &["spec", "tolerations"], true), NodeType::Atomic);
        assert_eq!(node_type("ConfigMap", &["data"], false), NodeType::Map);
        assert_eq!(node_type("Pod", &["metadata", "finalizers"], true), NodeType::Set);
        assert!(parse("* a.b map-list\n").is_err());
        // A keyed list whose items are atomic: the list is keyed, an item (asked for as an
        // object at the list's path) is atomic.
        let refs = ["metadata", "ownerReferences"];
        assert_eq!(
            node_type("Pod", &refs, true),
            NodeType::MapList(vec![("uid".into(), Some(Value::String(String::new())))])
        );
        assert_eq!(node_type("Pod", &refs, false), NodeType::Atomic);
        assert_eq!(node_type("Pod", &["spec", "volumes"], false), NodeType::Struct);
        assert!(parse("* a.b set items=atomic\n").is_err());
        assert_eq!(key_default("TCP"), Value::String("TCP".into()));
        assert_eq!(key_default("\"\""), Value::String(String::new()));
    }
}
