//! Errors of the API server: [`Error`] for starting it, [`ApiError`] for what a request gets back.
//!
//! [`ApiError`] renders as a `meta/v1` `Status` object, the shape every Kubernetes client parses
//! (kube-rs turns it into `kube::Error::Api`, kubectl prints its message).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Why the API server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The block's API address is taken: the caller tries the next block.
    #[error("api server address {addr} is already in use")]
    AddressInUse {
        /// The address that was taken.
        addr: std::net::SocketAddr,
    },
    /// Binding failed for another reason (no such loopback address, permissions).
    #[error("failed to bind the api server to {addr}")]
    Bind {
        /// The address that could not be bound.
        addr: std::net::SocketAddr,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// Generating the CA or the serving certificate failed.
    #[error("failed to generate the api server certificates")]
    Certificate(#[source] rcgen::Error),
    /// The rustls server configuration was refused.
    #[error("failed to build the api server tls configuration")]
    Tls(#[source] rustls::Error),
    /// The kube client configuration could not be built.
    #[error("failed to build the kube client configuration")]
    KubeConfig(#[source] serde_json::Error),
}

/// One cause of an `Invalid` error, as `Status.details.causes[]` carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// Upstream `CauseType`, e.g. `FieldValueRequired`, `FieldValueInvalid`, `FieldValueForbidden`.
    pub reason: String,
    /// Human message, e.g. `Required value`.
    pub message: String,
    /// The JSON path of the field, e.g. `spec.containers[0].image`.
    pub field: String,
}

impl Cause {
    /// A `FieldValueRequired` cause.
    pub fn required(field: impl Into<String>) -> Self {
        Self {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: field.into(),
        }
    }

    /// A `FieldValueInvalid` cause; `value` is rendered like upstream (`Invalid value: "x": why`).
    pub fn invalid(field: impl Into<String>, value: &Value, why: &str) -> Self {
        let shown = match value {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        Self {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {shown}: {why}"),
            field: field.into(),
        }
    }

    /// A `FieldValueForbidden` cause (`Forbidden: why`).
    pub fn forbidden(field: impl Into<String>, why: &str) -> Self {
        Self {
            reason: "FieldValueForbidden".into(),
            message: format!("Forbidden: {why}"),
            field: field.into(),
        }
    }

    /// A `FieldValueNotSupported` cause listing the supported values.
    pub fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Self {
        let list = supported
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        Self {
            reason: "FieldValueNotSupported".into(),
            message: format!("Unsupported value: {value}: supported values: {list}"),
            field: field.into(),
        }
    }

    /// A `FieldValueDuplicate` cause.
    pub fn duplicate(field: impl Into<String>, value: &Value) -> Self {
        Self {
            reason: "FieldValueDuplicate".into(),
            message: format!("Duplicate value: {value}"),
            field: field.into(),
        }
    }

    /// The upstream one-line form: `field: message`.
    pub fn line(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// A failed request, rendered as a `Status` object with the matching HTTP code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code, also `Status.code`.
    pub code: u16,
    /// `Status.reason` (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`...); owned when it
    /// comes from elsewhere (an admission webhook's own Status).
    pub reason: std::borrow::Cow<'static, str>,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, when the error concerns one object.
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: std::borrow::Cow::Borrowed(reason),
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut d = json!({ "name": name, "kind": kind });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        self.details = Some(d);
        self
    }

    /// 404: `pods "x" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} {name:?} not found", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// 409 AlreadyExists: `pods "x" already exists`.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} {name:?} already exists", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// 409 Conflict on a stale resourceVersion, with upstream's wording.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {name:?}: {why}",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, name)
    }

    /// 422 Invalid with causes: `Pod "x" is invalid: [a: b, c: d]`, `Deployment.apps "x" is
    /// invalid: ...` for a kind of a named group.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let lines: Vec<String> = causes.iter().map(Cause::line).collect();
        let summary = if lines.len() == 1 {
            lines[0].clone()
        } else {
            format!("[{}]", lines.join(", "))
        };
        // `NewInvalid` names the kind as `GroupKind.String()`: `Deployment.apps`, core `Pod`.
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{qualified_kind} {name:?} is invalid: {summary}"),
        )
        .with_details(group, kind, name);
        if let Some(d) = e.details.as_mut() {
            d["causes"] = Value::Array(
                causes
                    .iter()
                    .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
                    .collect(),
            );
        }
        e
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// The same error with `details` naming the object (`name`, `group`, `kind` as upstream
    /// orders them, empty ones left out).
    #[must_use]
    pub fn with_group_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut d = serde_json::Map::new();
        for (k, v) in [("name", name), ("group", group), ("kind", kind)] {
            if !v.is_empty() {
                d.insert(k.into(), json!(v));
            }
        }
        self.details = Some(Value::Object(d));
        self
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 410 Expired: a resourceVersion or continue token older than the history kept.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 502/503 ServiceUnavailable: a forwarding target did not answer.
    pub fn unavailable(code: u16, message: impl Into<String>) -> Self {
        Self::new(code, "ServiceUnavailable", message)
    }

    /// 404 for paths that name no resource (upstream answers these with a plain NotFound).
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // StatusReasonUnknown is "", which Go's omitempty leaves out.
            if let Some(m) = v.as_object_mut() {
                m.remove("reason");
            }
        }
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }

    /// A failure that is not an API status: upstream's `ErrorToAPIStatus` answers it as 500
    /// with no reason (StatusReasonUnknown) and the error's text.
    pub fn unknown(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }
}

/// `pods` or `deployments.apps`, the way upstream names a resource in messages.
fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (
            code,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            status_text(&self.status()),
        )
            .into_response();
        // upstream's response writer turns `details.retryAfterSeconds` into a Retry-After header.
        if let Some(secs) = self
            .details
            .as_ref()
            .and_then(|d| d.get("retryAfterSeconds"))
            .and_then(Value::as_i64)
            .filter(|s| *s > 0)
        {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(secs));
        }
        resp
    }
}

/// Key order of a `meta/v1` `Status`, as Go marshals the struct's fields.
const STATUS_KEYS: &[&str] = &[
    "kind",
    "apiVersion",
    "metadata",
    "status",
    "message",
    "reason",
    "details",
    "code",
];
/// Key order of `StatusDetails`.
const DETAILS_KEYS: &[&str] = &["name", "group", "kind", "uid", "causes", "retryAfterSeconds"];
/// Key order of `StatusCause`.
const CAUSE_KEYS: &[&str] = &["reason", "message", "field"];

/// Writes `m`'s entries in `order` first, then any others in map order; `inner` renders the
/// value of each key.
fn ordered(m: &serde_json::Map<String, Value>, order: &[&str], inner: &dyn Fn(&str, &Value) -> String) -> String {
    let known = order.iter().filter_map(|k| m.get(*k).map(|v| (*k, v)));
    let rest = m
        .iter()
        .filter(|(k, _)| !order.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v));
    let parts: Vec<String> = known
        .chain(rest)
        .map(|(k, v)| format!("{}:{}", Value::from(k), inner(k, v)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// A `Status` object serialised with upstream's key order (`kind`, `apiVersion`, `metadata`,
/// `status`, `message`, `reason`, `details`, `code`), nested details and causes included.
///
/// serde_json sorts object keys, but some clients and conformance checks compare raw Status
/// bodies with the real server's, which Go writes in struct field order.
pub fn status_text(v: &Value) -> String {
    let Some(m) = v.as_object() else {
        return v.to_string();
    };
    ordered(m, STATUS_KEYS, &|k, v| match (k, v) {
        ("details", Value::Object(d)) => ordered(d, DETAILS_KEYS, &|k, v| match (k, v) {
            ("causes", Value::Array(causes)) => {
                let items: Vec<String> = causes
                    .iter()
                    .map(|c| match c {
                        Value::Object(c) => ordered(c, CAUSE_KEYS, &|_, v| v.to_string()),
                        other => other.to_string(),
                    })
                    .collect();
                format!("[{}]", items.join(","))
            }
            _ => v.to_string(),
        }),
        _ => v.to_string(),
    })
}

/// Result of a request handler.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_status_has_causes_like_upstream() {
        let e = ApiError::invalid("", "Pod", "p", vec![Cause::required("spec.containers[0].image")]);
        let s = e.status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["reason"], "Invalid");
        assert_eq!(
            s["message"],
            "Pod \"p\" is invalid: spec.containers[0].image: Required value"
        );
        assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueRequired");
        assert_eq!(s["details"]["kind"], "Pod");
    }

    #[test]
    fn status_text_keeps_upstream_key_order() {
        let e = ApiError::invalid("apps", "Deployment", "d", vec![Cause::required("spec.selector")]);
        let text = status_text(&e.status());
        let at = |k: &str| {
            text.find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k} in {text}"))
        };
        let top = [
            "kind",
            "apiVersion",
            "metadata",
            "status",
            "message",
            "reason",
            "details",
            "code",
        ];
        assert!(top.windows(2).all(|w| at(w[0]) < at(w[1])), "{text}");
        assert!(text.contains(r#""details":{"name":"d","group":"apps","kind":"Deployment","causes":[{"reason":"FieldValueRequired","message":"Required value","field":"spec.selector"}]}"#), "{text}");
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, e.status());
    }

    #[test]
    fn not_found_names_group_qualified_resource() {
        let e = ApiError::not_found("apps", "deployments", "web");
        assert_eq!(e.message, "deployments.apps \"web\" not found");
        assert_eq!(e.status()["details"]["group"], "apps");
    }
}
