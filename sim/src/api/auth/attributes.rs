//! What a request asks to do, derived from its method, path and query the way upstream's
//! `RequestInfoFactory` (k8s.io/apiserver endpoints/request) does; the authorizer judges these.
//!
//! The main structure is [`Attributes`], built by [`Attributes::from_request`].

use std::collections::HashMap;

use axum::http::Method;

/// Upstream's authorizer attributes for one request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `proxy`, `impersonate`, or the lower-cased method for non-resource requests.
    pub verb: String,
    /// Whether the path names an API resource (`/api/v1/...`, `/apis/g/v/...`).
    pub resource_request: bool,
    /// The API group.
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource (`log`, `status`, ...).
    pub subresource: String,
    /// The namespace, empty when cluster-scoped.
    pub namespace: String,
    /// The object name, empty for collections.
    pub name: String,
    /// The request path (used for non-resource requests).
    pub path: String,
}

/// Subresources of a namespace object rather than resources in the namespace.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

impl Attributes {
    /// The attributes of a request; `query` is the decoded query string.
    pub fn from_request(method: &Method, path: &str, query: &HashMap<String, String>) -> Self {
        let mut a = Attributes {
            path: path.to_string(),
            verb: method.as_str().to_ascii_lowercase(),
            ..Attributes::default()
        };
        let trimmed = path.trim_matches('/');
        let mut parts: Vec<&str> = if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed.split('/').collect()
        };
        if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
            return a;
        }
        let grouped = parts[0] == "apis";
        parts.remove(0);
        if grouped {
            if parts.len() < 3 {
                return a;
            }
            a.group = parts.remove(0).to_string();
        }
        a.resource_request = true;
        a.version = parts.remove(0).to_string();
        if matches!(parts[0], "proxy" | "watch") {
            if parts.len() < 2 {
                // Upstream answers an error here; with nothing to authorise the request is
                // judged as a non-resource one on its path.
                a.resource_request = false;
                return a;
            }
            a.verb = parts.remove(0).to_string();
        } else {
            a.verb = match *method {
                Method::POST => "create",
                Method::GET | Method::HEAD => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            }
            .to_string();
        }
        if parts.first() == Some(&"namespaces") && parts.len() > 1 {
            a.namespace = decode(parts[1]);
            if parts.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&parts[2]) {
                parts.drain(..2);
            }
        }
        if parts.len() >= 3 && a.verb != "proxy" {
            a.subresource = parts[2].to_string();
        }
        if parts.len() >= 2 {
            a.name = decode(parts[1]);
        }
        if let Some(r) = parts.first() {
            a.resource = r.to_string();
        }
        if a.name.is_empty() && a.verb == "get" {
            let watch = query
                .get("watch")
                .is_some_and(|v| matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"));
            a.verb = if watch { "watch" } else { "list" }.into();
            if let Some(name) = query.get("fieldSelector").and_then(|s| exact_name(s)) {
                a.name = name;
            }
        }
        if a.name.is_empty() && a.verb == "delete" {
            a.verb = "deletecollection".into();
        }
        a
    }

    /// `pods` or `pods/log`.
    pub fn resource_and_sub(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// The name a field selector pins with `metadata.name=X` (or `==`), as upstream's
/// `RequiresExactMatch`; only when it is the selector's sole term.
fn exact_name(selector: &str) -> Option<String> {
    let terms: Vec<&str> = selector.split(',').filter(|t| !t.trim().is_empty()).collect();
    if terms.len() != 1 {
        return None;
    }
    let t = terms[0].trim();
    let v = t
        .strip_prefix("metadata.name==")
        .or_else(|| t.strip_prefix("metadata.name="))?;
    (!v.is_empty() && !v.contains('/') && v != "." && v != "..").then(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(m: Method, path: &str, q: &[(&str, &str)]) -> Attributes {
        let q = q.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Attributes::from_request(&m, path, &q)
    }

    #[test]
    fn derives_verbs_like_upstream() {
        let a = attrs(Method::GET, "/api/v1/namespaces/ns/pods", &[]);
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str(), a.namespace.as_str()),
            ("list", "pods", "ns")
        );
        let a = attrs(Method::GET, "/api/v1/namespaces/ns/pods", &[("watch", "true")]);
        assert_eq!(a.verb, "watch");
        let a = attrs(Method::GET, "/api/v1/watch/namespaces/ns/pods/p", &[]);
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "p"));
        let a = attrs(Method::DELETE, "/apis/apps/v1/namespaces/ns/deployments", &[]);
        assert_eq!((a.verb.as_str(), a.group.as_str()), ("deletecollection", "apps"));
        let a = attrs(Method::GET, "/api/v1/namespaces/ns/pods/p/log", &[]);
        assert_eq!(a.resource_and_sub(), "pods/log");
        let a = attrs(Method::GET, "/api/v1/namespaces/ns", &[]);
        assert_eq!(
            (a.resource.as_str(), a.name.as_str(), a.namespace.as_str()),
            ("namespaces", "ns", "ns")
        );
        let a = attrs(Method::PUT, "/api/v1/namespaces/ns/finalize", &[]);
        assert_eq!(
            (a.resource.as_str(), a.subresource.as_str()),
            ("namespaces", "finalize")
        );
        let a = attrs(Method::GET, "/api/v1/nodes", &[("fieldSelector", "metadata.name=n1")]);
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("list", "n1"));
        let a = attrs(Method::GET, "/version", &[]);
        assert!(!a.resource_request);
        assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", "/version"));
        let a = attrs(Method::GET, "/apis/apps", &[]);
        assert!(!a.resource_request);
        let a = attrs(Method::GET, "/api/v1", &[]);
        assert!(!a.resource_request, "/api/v1 is discovery, a non-resource path");
    }
}
