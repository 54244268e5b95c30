//! Label and field selectors, parsed from the `labelSelector` / `fieldSelector` query parameters.
//!
//! The main structures are [`LabelSelector`] and [`FieldSelector`]. Syntax and the supported
//! field paths follow the real server: unsupported field paths are a 400, like upstream's
//! `field label not supported`.

use serde_json::Value;

use super::error::ApiError;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (`a=b,c!=d,e in (f,g),!h`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector(Vec<Req>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{rest}', expected: '(' in {whole:?}"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the query-parameter form.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in split_top(s) {
            let bad = || ApiError::bad_request(format!("unable to parse requirement: {term:?}"));
            if let Some(key) = term.strip_prefix('!') {
                reqs.push(Req::NotExists(key.trim().to_string()));
            } else if let Some((k, v)) = term.split_once("!=") {
                reqs.push(Req::Ne(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = term.split_once("==") {
                reqs.push(Req::Eq(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = term.split_once('=') {
                reqs.push(Req::Eq(k.trim().into(), v.trim().into()));
            } else if let Some((k, rest)) = term.split_once(" notin ") {
                reqs.push(Req::NotIn(k.trim().into(), parse_set(rest, &term)?));
            } else if let Some((k, rest)) = term.split_once(" in ") {
                reqs.push(Req::In(k.trim().into(), parse_set(rest, &term)?));
            } else if term.contains(' ') || term.contains('(') {
                return Err(bad());
            } else {
                reqs.push(Req::Exists(term.clone()));
            }
        }
        Ok(Self(reqs))
    }

    /// Builds a selector from a `metav1.LabelSelector` object (`matchLabels` + `matchExpressions`).
    pub fn from_object(sel: &Value) -> Self {
        let mut reqs = Vec::new();
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                reqs.push(Req::Eq(k.clone(), v.as_str().unwrap_or_default().to_string()));
            }
        }
        for e in sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = e.get("key").and_then(Value::as_str).unwrap_or_default().to_string();
            let vals: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
                .unwrap_or_default();
            match e.get("operator").and_then(Value::as_str) {
                Some("In") => reqs.push(Req::In(key, vals)),
                Some("NotIn") => reqs.push(Req::NotIn(key, vals)),
                Some("Exists") => reqs.push(Req::Exists(key)),
                Some("DoesNotExist") => reqs.push(Req::NotExists(key)),
                _ => {}
            }
        }
        Self(reqs)
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the labels of `obj` match.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::Ne(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector (`metadata.name=x,spec.nodeName!=`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// Field paths every resource supports.
const COMMON_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

/// Extra field paths by resource plural, as upstream registers them.
fn extra_fields(plural: &str) -> &'static [&'static str] {
    match plural {
        "pods" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "events" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
            "regarding.uid",
        ],
        "secrets" => &["type"],
        "nodes" => &["spec.unschedulable"],
        "namespaces" => &["status.phase"],
        "replicasets" | "replicationcontrollers" => &["status.replicas"],
        "jobs" => &["status.successful"],
        _ => &[],
    }
}

impl FieldSelector {
    /// Parses the query-parameter form, checking the fields against what `plural` supports.
    pub fn parse(s: &str, plural: &str, kind: &str, api_version: &str) -> Result<Self, ApiError> {
        let mut out = Vec::new();
        for term in split_top(s) {
            let (k, eq, v) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            let k = k.trim();
            if !COMMON_FIELDS.contains(&k) && !extra_fields(plural).contains(&k) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {k}"
                ))
                .with_message_prefix(&format!("Unable to find \"{api_version}, Kind={kind}\" that match label selector \"\", field selector \"{s}\": ")));
            }
            out.push((k.to_string(), eq, v.trim().to_string()));
        }
        Ok(Self(out))
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `obj` matches; absent fields compare as the empty string, as upstream.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let got = field_value(obj, path);
            (got == *want) == *eq
        })
    }
}

/// The string form of a selectable field.
fn field_value(obj: &Value, path: &str) -> String {
    if path == "source" {
        return obj
            .pointer("/source/component")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
    }
    let pointer = format!("/{}", path.replace('.', "/"));
    match obj.pointer(&pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

impl ApiError {
    fn with_message_prefix(mut self, prefix: &str) -> Self {
        self.message = format!("{prefix}{}", self.message);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"app": "web", "tier": "fe"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    }

    #[test]
    fn label_selector_operators() {
        let o = obj();
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("missing notin (x)", true),
            ("app=web,tier=be", false),
            ("", true),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&o), want, "{sel}");
        }
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn field_selector_paths() {
        let o = obj();
        let p = |s: &str| FieldSelector::parse(s, "pods", "Pod", "v1").unwrap().matches(&o);
        assert!(p("metadata.name=a"));
        assert!(p("spec.nodeName=n1,status.phase!=Pending"));
        assert!(!p("spec.nodeName="));
        let e = FieldSelector::parse("spec.foo=x", "pods", "Pod", "v1").unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("field label not supported: spec.foo"));
    }

    #[test]
    fn from_object_matches_expressions() {
        let s = LabelSelector::from_object(&json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe"]}]}));
        assert!(s.matches(&obj()));
    }
}
