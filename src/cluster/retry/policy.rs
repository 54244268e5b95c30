//! What may be retried, and when: the request's kind decides what a failure may have done.
//!
//! A failure is either *clean* (the server did not act: 429, 503 and a refused connection) or
//! *ambiguous* (500, 502, 504 or a connection lost after the request went out: the change may
//! have been stored; kube-apiserver's "etcdserver: request timed out" often is). Clean failures
//! are retried for every method. Ambiguous ones only when a replay cannot do harm or its
//! outcome can be read back:
//! - reads (GET, HEAD, OPTIONS) and replaces (PUT) replay as they are; a replace whose replay
//!   meets 409 Conflict was stored by the first attempt if the object read back holds every
//!   field the replace sent (see [`holds`]), and that object is returned;
//! - merge, strategic-merge and apply patches set fields to values, so a replay is a no-op;
//!   JSON patches (`add`/`remove` operations) are not, and are never replayed;
//! - a DELETE whose replay answers 404 Not Found was done by the first attempt;
//! - a create with a name (`metadata.name`, not `generateName`) whose replay is refused (409
//!   AlreadyExists, or 403 from a quota the first attempt's object now fills) was stored by the
//!   first attempt if the object can be read back, and that object is returned;
//! - anything else (subresource POSTs such as evictions, creates with `generateName`) is not
//!   replayed after an ambiguous failure.

use std::time::Duration;

use http::{Method, StatusCode, header};

/// How long a request keeps being retried after its first attempt: long enough to ride out an
/// API server restart (kubeadm's static pod restarts in 20–40 s), short enough that a server
/// that stays down fails the case that needed it.
pub const RETRY_BUDGET: Duration = Duration::from_secs(60);

/// The delay before retry number `n` (1-based): 200 ms doubling, capped at 5 s.
pub fn backoff(n: u32) -> Duration {
    let ms = 200u64.saturating_mul(1u64 << n.saturating_sub(1).min(10));
    Duration::from_millis(ms.min(5_000))
}

/// The server's `Retry-After` in seconds, capped at 10 s (client-go honours it the same way).
pub fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let secs: u64 = headers.get(header::RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs.min(10)))
}

/// What a request does, as far as replaying it is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// GET, HEAD, OPTIONS, and merge/strategic/apply patches: replays are harmless.
    Replayable,
    /// PUT: harmless too, but a replace carrying the `resourceVersion` it read answers 409
    /// Conflict on replay when the first attempt was stored (its version is gone).
    Replace,
    /// DELETE: a replay may answer 404 because the first attempt deleted it.
    Delete,
    /// POST to a collection of an object with a fixed name: a replay may answer 409.
    Create {
        /// The object's URL (the collection's path plus the name).
        object_path: String,
    },
    /// Everything else (JSON patches, subresource POSTs, generateName creates).
    Once,
}

/// Classifies a request from its method, path, content type and (for a POST) body.
pub fn classify(method: &Method, path: &str, content_type: Option<&str>, body: &[u8]) -> Kind {
    match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => Kind::Replayable,
        Method::PUT => Kind::Replace,
        Method::DELETE => Kind::Delete,
        Method::PATCH => {
            let ct = content_type.unwrap_or("");
            if ct.starts_with("application/merge-patch+json")
                || ct.starts_with("application/strategic-merge-patch+json")
                || ct.starts_with("application/apply-patch")
                || (ct.starts_with("application/json-patch+json") && json_patch_sets_values(body))
            {
                Kind::Replayable
            } else {
                Kind::Once
            }
        }
        // Reviews (SubjectAccessReview, TokenReview, SelfSubjectReview ...) are answered and
        // never stored: asking again is a read.
        Method::POST if is_collection(path) && path.ends_with("reviews") => Kind::Replayable,
        Method::POST if is_collection(path) => match created_name(body) {
            Some(name) => Kind::Create {
                object_path: format!("{}/{name}", path.trim_end_matches('/')),
            },
            None => Kind::Once,
        },
        _ => Kind::Once,
    }
}

/// Whether `path` names a resource collection (`/api/v1/namespaces`,
/// `/api/v1/namespaces/NS/pods`, `/apis/G/V/RESOURCE`), not an object or a subresource.
fn is_collection(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return false,
    };
    matches!(rest, [_] | ["namespaces", _, _])
}

/// Whether a JSON patch only sets values, so that applying it twice equals applying it once:
/// `replace` and `test` operations, and `add` to an object member (which sets it); not `add`
/// into an array (an index or `-` inserts), `remove`, `move` or `copy`.
fn json_patch_sets_values(body: &[u8]) -> bool {
    let Ok(serde_json::Value::Array(ops)) = serde_json::from_slice::<serde_json::Value>(body) else {
        return false;
    };
    !ops.is_empty()
        && ops.iter().all(|op| {
            let last = op["path"].as_str().and_then(|p| p.rsplit('/').next()).unwrap_or("-");
            match op["op"].as_str() {
                Some("replace" | "test") => true,
                Some("add") => last != "-" && last.parse::<usize>().is_err(),
                _ => false,
            }
        })
}

fn created_name(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

/// Whether `stored` holds everything `sent` set: objects field by field (so server defaults
/// and added metadata do not count), other values equal. The metadata the server moves on every
/// write it applies (`resourceVersion`, `generation` on a spec change, the `managedFields`
/// entry's time and field set) is skipped: the sent copy holds the values read before the write.
/// So is `status` unless `status_written` (a replace of the object itself does not write its
/// status, one of `/status` does).
pub fn holds(sent: &serde_json::Value, stored: &serde_json::Value, status_written: bool) -> bool {
    let within = |sent, stored| within(sent, stored, &[], status_written);
    within(sent, stored)
}

fn within(sent: &serde_json::Value, stored: &serde_json::Value, path: &[&str], status_written: bool) -> bool {
    {
        match (sent, stored) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => a.iter().all(|(k, v)| {
                let here: Vec<&str> = path.iter().copied().chain([k.as_str()]).collect();
                matches!(
                    here.as_slice(),
                    ["metadata", "resourceVersion" | "generation" | "managedFields"]
                ) || (here == ["status"] && !status_written)
                    || b.get(k).is_some_and(|w| within(v, w, &here, status_written))
                    || v.is_null() && b.get(k).is_none()
            }),
            _ => sent == stored,
        }
    }
}

/// Whether a failure with this answer is clean (not acted on), ambiguous, or final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The server did not act on the request.
    Clean,
    /// The server may have acted on it.
    Ambiguous,
}

/// How an answer counts: `None` is a final answer (success or a real error).
///
/// A 500 from admission is final: kube-apiserver answers a webhook it could not call under
/// `failurePolicy: Fail` with `NewInternalError` ("failed calling webhook ..."), before any
/// storage, so nothing was stored and a replay would only meet the same webhook again (and
/// keep a case that expects that refusal waiting out the whole budget). So is server-side
/// apply's refusal of a patch its schema cannot type ("failed to create typed patch object
/// ... field not declared in schema"), which it answers 500 before storing anything.
pub fn status_failure(status: StatusCode, body: &[u8]) -> Option<Failure> {
    match status {
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => Some(Failure::Clean),
        StatusCode::INTERNAL_SERVER_ERROR if admission_refusal(body) || untyped_apply(body) => None,
        StatusCode::INTERNAL_SERVER_ERROR | StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT => {
            Some(Failure::Ambiguous)
        }
        _ => None,
    }
}

/// Whether a Status body is kube-apiserver's answer for a webhook call that failed.
fn admission_refusal(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(|m| m.contains("failed calling webhook")))
        .unwrap_or(false)
}

/// Whether a Status body is server-side apply's refusal of a patch it cannot type.
fn untyped_apply(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v["message"]
                .as_str()
                .map(|m| m.starts_with("failed to create typed patch object"))
        })
        .unwrap_or(false)
}

/// Whether a 429 is a refusal to keep rather than throttling to wait out: one without
/// `Retry-After` to a request that is not replayed (an eviction a PodDisruptionBudget blocks,
/// which kube-apiserver answers 429 with the `DisruptionBudget` cause and no retry hint).
/// client-go's `checkWait` sends again only when `Retry-After` is there.
pub fn is_final_refusal(kind: &Kind, status: StatusCode, headers: &http::HeaderMap) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS && matches!(kind, Kind::Once) && retry_after(headers).is_none()
}

/// Whether a request of `kind` may be replayed after `failure`.
pub fn may_replay(kind: &Kind, failure: Failure) -> bool {
    failure == Failure::Clean || !matches!(kind, Kind::Once)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reviews_are_reads() {
        for path in [
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            "/apis/authorization.k8s.io/v1/namespaces/a/localsubjectaccessreviews",
            "/apis/authentication.k8s.io/v1/tokenreviews",
        ] {
            assert_eq!(classify(&Method::POST, path, None, b"{}"), Kind::Replayable, "{path}");
        }
        assert_eq!(
            classify(&Method::POST, "/api/v1/namespaces/a/pods", None, b"{}"),
            Kind::Once
        );
    }

    #[test]
    fn a_stored_replace_holds_what_was_sent() {
        let sent = serde_json::json!({"metadata": {"name": "e", "resourceVersion": "5", "labels": {"a": "b"}},
            "note": "updated", "series": null, "status": {"x": 1}});
        let stored = serde_json::json!({"metadata": {"name": "e", "resourceVersion": "6", "labels": {"a": "b"},
            "uid": "u"}, "note": "updated", "type": "Normal"});
        assert!(holds(&sent, &stored, false));
        assert!(!holds(&sent, &stored, true));
        let other = serde_json::json!({"metadata": {"name": "e", "resourceVersion": "6", "labels": {"a": "c"}},
            "note": "updated"});
        assert!(!holds(&sent, &other, false));
        let read = serde_json::json!({"metadata": {"name": "w", "resourceVersion": "5", "generation": 1,
            "managedFields": [{"manager": "crossconf", "time": "2026-11-26T10:00:00Z"}]}, "webhooks": [{"name": "b"}]});
        let written = serde_json::json!({"metadata": {"name": "w", "resourceVersion": "7", "generation": 2,
            "managedFields": [{"manager": "crossconf", "time": "2026-11-26T10:00:04Z"}]}, "webhooks": [{"name": "b"}]});
        assert!(holds(&read, &written, false), "server-moved metadata must not count");
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(1), Duration::from_millis(200));
        assert_eq!(backoff(2), Duration::from_millis(400));
        assert_eq!(backoff(10), Duration::from_secs(5));
    }

    #[test]
    fn creates_with_a_name_are_recognised() {
        let named = br#"{"metadata":{"name":"web"}}"#;
        let generated = br#"{"metadata":{"generateName":"web-"}}"#;
        assert_eq!(
            classify(&Method::POST, "/api/v1/namespaces/ns1/pods", None, named),
            Kind::Create {
                object_path: "/api/v1/namespaces/ns1/pods/web".into()
            }
        );
        assert_eq!(
            classify(
                &Method::POST,
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                None,
                named
            ),
            Kind::Create {
                object_path: "/apis/rbac.authorization.k8s.io/v1/clusterroles/web".into()
            }
        );
        assert_eq!(
            classify(&Method::POST, "/api/v1/namespaces/ns1/pods", None, generated),
            Kind::Once
        );
        assert_eq!(
            classify(&Method::POST, "/api/v1/namespaces/ns1/pods/web/eviction", None, named),
            Kind::Once
        );
    }

    #[test]
    fn a_budget_refusal_without_retry_after_is_final() {
        let mut headers = http::HeaderMap::new();
        let once = Kind::Once;
        assert!(is_final_refusal(&once, StatusCode::TOO_MANY_REQUESTS, &headers));
        assert!(!is_final_refusal(&once, StatusCode::SERVICE_UNAVAILABLE, &headers));
        assert!(!is_final_refusal(
            &Kind::Replayable,
            StatusCode::TOO_MANY_REQUESTS,
            &headers
        ));
        headers.insert(header::RETRY_AFTER, http::HeaderValue::from_static("1"));
        assert!(!is_final_refusal(&once, StatusCode::TOO_MANY_REQUESTS, &headers));
    }

    #[test]
    fn patches_replay_unless_json_patch() {
        for (ct, kind) in [
            ("application/merge-patch+json", Kind::Replayable),
            ("application/strategic-merge-patch+json", Kind::Replayable),
            ("application/apply-patch+yaml", Kind::Replayable),
            ("application/json-patch+json", Kind::Once),
        ] {
            assert_eq!(
                classify(&Method::PATCH, "/api/v1/namespaces/a/pods/b", Some(ct), b""),
                kind
            );
        }
        let json = |body: &str| {
            classify(
                &Method::PATCH,
                "/apis/g/v1/xs/a/status",
                Some("application/json-patch+json"),
                body.as_bytes(),
            )
        };
        assert_eq!(
            json(r#"[{"op":"add","path":"/status/conditions","value":[]}]"#),
            Kind::Replayable
        );
        assert_eq!(
            json(r#"[{"op":"test","path":"/a","value":1},{"op":"replace","path":"/a","value":2}]"#),
            Kind::Replayable
        );
        assert_eq!(
            json(r#"[{"op":"add","path":"/status/conditions/-","value":{}}]"#),
            Kind::Once
        );
        assert_eq!(json(r#"[{"op":"add","path":"/spec/list/0","value":1}]"#), Kind::Once);
        assert_eq!(json(r#"[{"op":"remove","path":"/metadata/labels/a"}]"#), Kind::Once);
    }

    #[test]
    fn ambiguous_failures_are_replayed_only_when_safe() {
        let once = Kind::Once;
        assert!(may_replay(&once, Failure::Clean));
        assert!(!may_replay(&once, Failure::Ambiguous));
        assert!(may_replay(&Kind::Delete, Failure::Ambiguous));
        assert_eq!(status_failure(StatusCode::CONFLICT, b""), None);
        assert_eq!(
            status_failure(StatusCode::GATEWAY_TIMEOUT, b""),
            Some(Failure::Ambiguous)
        );
        let storage =
            br#"{"kind":"Status","message":"Internal error occurred: etcdserver: request timed out","code":500}"#;
        assert_eq!(
            status_failure(StatusCode::INTERNAL_SERVER_ERROR, storage),
            Some(Failure::Ambiguous)
        );
        let webhook = br#"{"kind":"Status","message":"Internal error occurred: failed calling webhook \"a.k8s.io\": context deadline exceeded","code":500}"#;
        assert_eq!(status_failure(StatusCode::INTERNAL_SERVER_ERROR, webhook), None);
        let untyped = br#"{"kind":"Status","message":"failed to create typed patch object (/x; g/v1, Kind=K): .foo: field not declared in schema","code":500}"#;
        assert_eq!(status_failure(StatusCode::INTERNAL_SERVER_ERROR, untyped), None);
    }
}
