//! The ServiceAccount issuer's OIDC discovery endpoints (upstream pkg/routes/openidmetadata.go):
//! `GET /.well-known/openid-configuration` (the provider metadata: issuer, `jwks_uri`, the
//! signing algorithms) and `GET /openid/v1/jwks` (the public keys, `application/jwk-set+json`).
//! Both are non-resource URLs the authorization filter has already judged: the bootstrap
//! ClusterRole `system:service-account-issuer-discovery`, bound to every ServiceAccount,
//! grants them. Like upstream's, the `jwks_uri` is the API server's own address
//! (`https://<advertise address>:<secure port>/openid/v1/jwks`).

use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::auth::signing::{self, SigningKey};
use super::auth::tokens::ISSUER;
use super::error::{ApiError, ApiResult};
use super::state::AppState;

/// Upstream's path of the discovery document.
pub const CONFIG_PATH: &str = "/.well-known/openid-configuration";
/// Upstream's path of the key set.
pub const JWKS_PATH: &str = "/openid/v1/jwks";
/// Upstream's `Cache-Control` (the static key getter's one hour), which overrides the
/// server-wide `no-cache`.
const CACHE_CONTROL: &str = "public, max-age=3600";

/// Which document a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Document {
    /// The discovery document.
    Configuration,
    /// The key set.
    Keys,
}

/// The keys the endpoints publish: the signing key, or under `oidc-jwks-stale` the key from
/// before the last rotation (a key set that was never updated).
fn published(st: &AppState) -> &SigningKey {
    if st.cfg.faults.is_on("oidc-jwks-stale") {
        st.tokens.previous_key()
    } else {
        st.tokens.key()
    }
}

/// `https://<api server address>:<port>/openid/v1/jwks`.
pub fn jwks_uri(st: &AppState) -> String {
    format!("https://{}:{}{JWKS_PATH}", st.cfg.block.api_server(), st.cfg.api_port)
}

/// Serves `doc` (GET only: go-restful routes nothing else there).
///
/// # Errors
/// 405 for another method.
pub fn serve(st: &AppState, doc: Document, method: &Method, path: &str) -> ApiResult<Response> {
    if *method != Method::GET {
        return Err(ApiError::method_not_allowed(format!(
            "{method} is not supported on {path}"
        )));
    }
    let key = published(st);
    let (body, content_type) = match doc {
        Document::Configuration => (
            signing::openid_configuration_json(ISSUER, &jwks_uri(st), &[key]),
            "application/json",
        ),
        Document::Keys => (signing::jwks_json(&[key]), "application/jwk-set+json"),
    };
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL));
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::handler::router;
    use crate::api::state::StateConfig;
    use axum::body::{Body, to_bytes};
    use axum::extract::Request;
    use serde_json::{Value, json};
    use tower::ServiceExt;

    /// State with ServiceAccount `ns/sa` and a token for it; `faults` turned on.
    fn state(faults: &[&str]) -> (AppState, String) {
        let mut cfg = StateConfig::new(AddressBlock(202));
        cfg.faults = std::sync::Arc::new(crate::faults::Faults::parse(&faults.join(",")).unwrap());
        let st = AppState::new(cfg);
        st.store
            .create(
                "/serviceaccounts",
                "ns",
                "sa",
                json!({"metadata": {"name": "sa", "namespace": "ns", "uid": "u1"}}),
            )
            .unwrap();
        let token = st
            .tokens
            .issue_service_account("ns", "sa", "u1", 600, &[], None)
            .unwrap()
            .token;
        (st, token)
    }

    async fn get(st: &AppState, path: &str, token: Option<&str>) -> (u16, String, String) {
        let mut req = Request::get(path);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let resp = router(st.clone())
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let code = resp.status().as_u16();
        let ct = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        (code, ct, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn service_accounts_discover_the_issuer_and_its_signing_key() {
        let (st, token) = state(&[]);
        let (code, ct, body) = get(&st, CONFIG_PATH, Some(&token)).await;
        assert_eq!((code, ct.as_str()), (200, "application/json"), "{body}");
        let doc: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(doc["issuer"], ISSUER);
        assert_eq!(
            doc["jwks_uri"],
            format!("https://127.202.0.1:{}/openid/v1/jwks", st.cfg.api_port)
        );
        assert_eq!(doc["id_token_signing_alg_values_supported"], json!(["ES256"]));
        let (code, ct, body) = get(&st, "/openid/v1/jwks/", Some(&token)).await;
        assert_eq!((code, ct.as_str()), (200, "application/jwk-set+json"), "{body}");
        let jwks: Value = serde_json::from_str(&body).unwrap();
        let header = token.split('.').next().unwrap();
        let header: Value = serde_json::from_slice(
            &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, header).unwrap(),
        )
        .unwrap();
        assert_eq!(jwks["keys"][0]["kid"], header["kid"]);
    }

    #[tokio::test]
    async fn anonymous_callers_are_forbidden_and_bad_tokens_unauthorized() {
        let (st, _) = state(&[]);
        let (code, _, body) = get(&st, JWKS_PATH, None).await;
        assert_eq!(code, 403);
        assert!(
            body.contains(r#"User \"system:anonymous\" cannot get path \"/openid/v1/jwks\""#),
            "{body}"
        );
        assert_eq!(get(&st, CONFIG_PATH, Some("nope")).await.0, 401);
    }

    #[tokio::test]
    async fn a_stale_key_set_publishes_another_key() {
        let (st, token) = state(&["oidc-jwks-stale"]);
        let (code, _, body) = get(&st, JWKS_PATH, Some(&token)).await;
        assert_eq!(code, 200);
        let jwks: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(jwks["keys"].as_array().map(Vec::len), Some(1));
        assert_ne!(jwks["keys"][0]["kid"].as_str(), Some(st.tokens.key().kid()));
    }
}
