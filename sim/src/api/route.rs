//! Parsing request paths into what they address.
//!
//! The main structure is [`Route`]. Resource paths follow upstream's layout:
//! `/api/v1[/watch][/namespaces/{ns}]/{plural}[/{name}[/{subresource}[/{rest}]]]` and the same
//! under `/apis/{group}/{version}`.

use std::collections::HashMap;

use super::registry::{self, ResourceDef};

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/readyz`, `/livez` (and their sub-checks).
    Health,
    /// `/api`.
    Api,
    /// `/apis`.
    Apis,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`.
    GroupVersion(String, String),
    /// `/openapi/v3`.
    OpenApiRoot,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
    OpenApiDoc(String, String),
    /// `/.well-known/openid-configuration` or `/openid/v1/jwks`: the ServiceAccount issuer's
    /// OIDC discovery documents.
    OpenId(super::openid::Document),
    /// A resource path.
    Resource(Target),
    /// Nothing is served there.
    NotFound,
}

/// A resource path's parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The resource.
    pub def: &'static ResourceDef,
    /// The namespace segment, when present.
    pub namespace: Option<String>,
    /// The object name, when present.
    pub name: Option<String>,
    /// The subresource, when present.
    pub sub: Option<String>,
    /// What follows the subresource (for proxy), with its leading slash, or empty.
    pub rest: String,
    /// Whether the legacy `/watch/` prefix was used.
    pub legacy_watch: bool,
}

/// Parses a path against the built-in resources only.
pub fn parse(path: &str) -> Route {
    parse_with(path, &registry::builtin())
}

/// Parses a path against `defs`: the built-in resources and a server's custom ones.
pub fn parse_with(path: &str, defs: &[&'static ResourceDef]) -> Route {
    let serves = |g: &str, v: &str| defs.iter().any(|d| d.group == g && d.version == v);
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let trailing_empty = path.len() > 1 && path.ends_with('/');
    let segs: Vec<&str> = if trailing_empty {
        segs[..segs.len() - 1].to_vec()
    } else {
        segs
    };
    match segs.as_slice() {
        ["version"] => Route::Version,
        [h, ..] if matches!(*h, "healthz" | "readyz" | "livez") => Route::Health,
        ["api"] => Route::Api,
        ["apis"] => Route::Apis,
        ["api", "v1"] => Route::GroupVersion(String::new(), "v1".into()),
        ["apis", g] if defs.iter().any(|d| d.group == *g) => Route::Group(g.to_string()),
        ["apis", g, v] if serves(g, v) => Route::GroupVersion(g.to_string(), v.to_string()),
        [".well-known", "openid-configuration"] => Route::OpenId(super::openid::Document::Configuration),
        ["openid", "v1", "jwks"] => Route::OpenId(super::openid::Document::Keys),
        ["openapi", "v3"] => Route::OpenApiRoot,
        ["openapi", "v3", "api", "v1"] => Route::OpenApiDoc(String::new(), "v1".into()),
        ["openapi", "v3", "apis", g, v] if serves(g, v) => Route::OpenApiDoc(g.to_string(), v.to_string()),
        ["api", "v1", rest @ ..] => resource(defs, "", "v1", rest),
        ["apis", g, v, rest @ ..] if serves(g, v) => resource(defs, g, v, rest),
        _ => Route::NotFound,
    }
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

fn resource(defs: &[&'static ResourceDef], group: &str, version: &str, rest: &[&str]) -> Route {
    let find = |plural: &str| {
        defs.iter()
            .copied()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
    };
    let (legacy_watch, rest) = match rest {
        ["watch", more @ ..] => (true, more),
        other => (false, other),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, more @ ..] if find(plural).is_some_and(|d| d.namespaced) => (
            Some(decode(ns)),
            std::iter::once(*plural).chain(more.iter().copied()).collect::<Vec<_>>(),
        ),
        other => (None, other.to_vec()),
    };
    let Some((plural, after)) = rest.split_first() else {
        return Route::NotFound;
    };
    let Some(def) = find(plural) else {
        return Route::NotFound;
    };
    let name = after.first().map(|s| decode(s));
    let sub = after.get(1).map(|s| s.to_string());
    let rest = if after.len() > 2 {
        format!("/{}", after[2..].join("/"))
    } else {
        String::new()
    };
    if name.as_deref() == Some("") {
        return Route::NotFound;
    }
    Route::Resource(Target {
        def,
        namespace,
        name,
        sub,
        rest,
        legacy_watch,
    })
}

/// The query string as a map (last value wins, as with Go's `Get`).
pub fn query_map(q: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(q.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// Every value of one query key (`command` repeats for exec).
pub fn query_all(q: Option<&str>, key: &str) -> Vec<String> {
    form_urlencoded::parse(q.unwrap_or_default().as_bytes())
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
        .collect()
}

/// Whether a boolean query parameter is set the way Go's `strconv.ParseBool` reads true.
pub fn flag(q: &HashMap<String, String>, key: &str) -> bool {
    q.get(key)
        .is_some_and(|v| matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(path: &str) -> Target {
        match parse(path) {
            Route::Resource(t) => t,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn parses_resource_paths() {
        let t = target("/api/v1/namespaces/default/pods/web/log");
        assert_eq!(
            (
                t.def.plural,
                t.namespace.as_deref(),
                t.name.as_deref(),
                t.sub.as_deref()
            ),
            ("pods", Some("default"), Some("web"), Some("log"))
        );
        let t = target("/api/v1/namespaces/default");
        assert_eq!(
            (t.def.plural, t.namespace, t.name.as_deref()),
            ("namespaces", None, Some("default"))
        );
        let t = target("/api/v1/namespaces/x/finalize");
        assert_eq!(
            (t.def.plural, t.name.as_deref(), t.sub.as_deref()),
            ("namespaces", Some("x"), Some("finalize"))
        );
        let t = target("/apis/apps/v1/deployments");
        assert_eq!((t.def.kind, t.namespace), ("Deployment", None));
        let t = target("/api/v1/watch/namespaces/a/pods/b");
        assert!(t.legacy_watch);
        assert_eq!(t.name.as_deref(), Some("b"));
        let t = target("/api/v1/namespaces/a/services/s:80/proxy/x/y");
        assert_eq!(
            (t.name.as_deref(), t.sub.as_deref(), t.rest.as_str()),
            (Some("s:80"), Some("proxy"), "/x/y")
        );
        assert_eq!(parse("/apis/apps/v9/deployments"), Route::NotFound);
        assert_eq!(parse("/api/v1/widgets"), Route::NotFound);
        assert_eq!(parse("/apis/apps/v1"), Route::GroupVersion("apps".into(), "v1".into()));
        assert_eq!(
            parse("/openapi/v3/apis/batch/v1"),
            Route::OpenApiDoc("batch".into(), "v1".into())
        );
    }
}
