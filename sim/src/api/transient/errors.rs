//! `api-errors=[CODE:]PERCENT`: the error answers a nightly job meets from a real API server now
//! and then, given before the request is processed.
//!
//! Each code is answered the way kube-apiserver 1.33 answers it, so clients see what they would
//! see from a real cluster:
//! - **429**: API Priority and Fairness (or max-in-flight) rejecting a request: `Retry-After: 1`
//!   and Go's `http.Error` plain-text body `Too many requests, please try again later.`
//!   (upstream `apiserver/pkg/server/filters` `tooManyRequests`). Upstream exempts
//!   `system:masters`; the simulator throttles every user, so an admin kubeconfig still meets it.
//! - **500**: a storage error surfaced as `NewInternalError`: a Status with reason
//!   `InternalError`, message `Internal error occurred: etcdserver: request timed out` and the
//!   cause in `details.causes`.
//! - **503**: an API server draining during a rolling restart (`WithWaitGroup`): `Retry-After: 1`
//!   and a Status with reason `ServiceUnavailable`, message `apiserver is shutting down`.
//! - **504**: the non-long-running request timeout (`WithTimeoutForNonLongRunningRequests`): a
//!   Status with reason `Timeout`, message `Timeout: request did not complete within requested
//!   timeout - context deadline exceeded`.
//!
//! Long-running requests (watches, exec, attach, port-forward, followed logs) are left alone:
//! upstream's max-in-flight and timeout filters exempt them, and cut watches are their own
//! switch. Each request draws once against each configured code, in the order given.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use rand::Rng;
use serde_json::json;

use crate::api::error::ApiError;
use crate::faults::Faults;
use crate::faults::values::parse_api_errors;

/// The fault switch's name.
pub const SWITCH: &str = "api-errors";

/// The codes the switch can answer with.
pub const CODES: [u16; 4] = [429, 500, 503, 504];

/// One code and share of the switch (see [`crate::faults::values::parse_api_errors`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// The HTTP code answered.
    pub code: u16,
    /// The share of requests answered with it, from 0 to 1.
    pub share: f64,
}

/// The response for `code`, as upstream writes it.
pub fn response(code: u16) -> Response {
    let retry_after = |mut r: Response| {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        r
    };
    match code {
        429 => {
            let mut r = (
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "Too many requests, please try again later.\n",
            )
                .into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            r.headers_mut()
                .insert("x-content-type-options", HeaderValue::from_static("nosniff"));
            retry_after(r)
        }
        500 => {
            let cause = "etcdserver: request timed out";
            let mut e = ApiError::internal(format!("Internal error occurred: {cause}"));
            e.details = Some(json!({ "causes": [{ "message": cause }] }));
            e.into_response()
        }
        503 => retry_after(ApiError::unavailable(503, "apiserver is shutting down").into_response()),
        _ => {
            let mut e = ApiError::internal(
                "Timeout: request did not complete within requested timeout - context deadline exceeded",
            );
            e.code = 504;
            e.reason = "Timeout".into();
            e.details = Some(json!({}));
            e.into_response()
        }
    }
}

/// The response for this request, when a configured code's draw picks it.
pub(super) fn draw(faults: &Faults, path: &str) -> Option<Response> {
    let values = faults.values(SWITCH);
    if values.is_empty() {
        return None;
    }
    let mut rng = rand::rng();
    let rate = values
        .iter()
        .filter_map(|v| parse_api_errors(v))
        .flatten()
        .find(|rate| rng.random::<f64>() < rate.share)?;
    tracing::debug!(code = rate.code, %path, "transient API error injected");
    Some(response(rate.code))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::handler::router;
    use crate::api::state::{AppState, StateConfig};
    use axum::body::{Body, to_bytes};
    use axum::extract::Request;
    use tower::ServiceExt;

    async fn call(faults: &str, uri: &str) -> (u16, Option<String>, String) {
        let st = AppState::new(StateConfig::new(AddressBlock(202)));
        for v in faults.split(',').filter(|v| !v.is_empty()) {
            st.cfg.faults.set(SWITCH, v, true);
        }
        let token = st.cfg.admin_token.clone();
        let req = Request::get(uri)
            .header("authorization", format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let resp = router(st).oneshot(req).await.unwrap();
        let code = resp.status().as_u16();
        let retry = resp
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_string());
        let body = to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        (code, retry, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn each_code_is_answered_as_upstream_answers_it() {
        let (code, retry, body) = call("429:100%", "/api/v1/namespaces/default/pods").await;
        assert_eq!((code, retry.as_deref()), (429, Some("1")));
        assert_eq!(body, "Too many requests, please try again later.\n");

        let (code, retry, body) = call("503:100%", "/api/v1/pods").await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!((code, retry.as_deref()), (503, Some("1")));
        assert_eq!(
            (v["kind"].as_str(), v["reason"].as_str()),
            (Some("Status"), Some("ServiceUnavailable"))
        );

        let (code, _, body) = call("500:100%", "/api/v1/pods").await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (code, v["reason"].as_str(), v["code"].as_u64()),
            (500, Some("InternalError"), Some(500))
        );
        assert_eq!(v["details"]["causes"][0]["message"], "etcdserver: request timed out");

        let (code, retry, body) = call("504:100%", "/api/v1/pods").await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!((code, retry, v["reason"].as_str()), (504, None, Some("Timeout")));
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .starts_with("Timeout: request did not complete")
        );
    }

    #[tokio::test]
    async fn watches_pass_and_a_zero_rate_never_fires() {
        let (code, _, _) = call("429:100%", "/api/v1/pods?watch=true&timeoutSeconds=1").await;
        assert_eq!(code, 200);
        let (code, _, _) = call("429:0%", "/api/v1/pods").await;
        assert_eq!(code, 200);
        let (code, _, _) = call("", "/api/v1/pods").await;
        assert_eq!(code, 200);
    }
}
