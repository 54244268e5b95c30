//! Calling one webhook: the AdmissionReview v1 request, the HTTPS POST (to a Service's ready
//! endpoint in the simulated network, or to a `url` on 127.0.0.0/8, never anywhere else), the
//! server certificate checked against `caBundle` and the name upstream checks
//! (`NAME.NAMESPACE.svc`, or the URL's host), the `timeoutSeconds` deadline, and upstream's
//! `VerifyAdmissionResponse` checks on the answer.
//!
//! Every failure is a [`CallError`] whose text follows Go's: `Post "URL": REASON`, so
//! `failed calling webhook "NAME": failed to call webhook: Post ...` reads as upstream's.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;

use super::Attributes;
use crate::api::auth::UserInfo;
use crate::api::registry::ResourceDef;
use crate::api::state::AppState;

/// Why a webhook could not be called or its answer not used (upstream's `ErrCallingWebhook`
/// reasons). The text is what follows `failed calling webhook "NAME": `.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Dialling, TLS, the HTTP exchange or the deadline failed.
    #[error("failed to call webhook: Post {url:?}: {reason}")]
    Post {
        /// The URL as Go prints it, with `?timeout=Ns`.
        url: String,
        /// What went wrong, in Go's words where the simulator can match them.
        reason: String,
    },
    /// The webhook answered with an HTTP error status (client-go's generic server response
    /// error, which carries no URL).
    #[error("failed to call webhook: {0}")]
    Status(String),
    /// The answer was not a usable AdmissionReview.
    #[error("received invalid webhook response: {0}")]
    Invalid(String),
    /// The webhook sent a patch of a type other than `JSONPatch`.
    #[error("unsupported patch type {0:?}")]
    UnsupportedPatch(String),
    /// The webhook accepts no AdmissionReview version the server sends.
    #[error("could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)")]
    NoVersion,
}

/// The AdmissionReview version a webhook is sent: the first of its `admissionReviewVersions`
/// the server knows, as upstream's `CreateAdmissionObjects` picks it.
pub fn review_version(hook: &Value) -> Result<&'static str, CallError> {
    hook.get("admissionReviewVersions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find_map(|v| match v.as_str() {
            Some("v1") => Some("admission.k8s.io/v1"),
            Some("v1beta1") => Some("admission.k8s.io/v1beta1"),
            _ => None,
        })
        .ok_or(CallError::NoVersion)
}

/// Where and how to reach a webhook.
struct Target {
    /// The URL shown in errors, with the timeout query.
    url: String,
    /// The address dialled.
    addr: SocketAddr,
    /// The name the certificate must be valid for.
    server_name: ServerName<'static>,
    /// Path and query sent.
    path_and_query: String,
    /// The `Host` header.
    host: String,
}

/// The `userInfo` of a review: empty fields left out, as Go's `omitempty` does.
pub fn user_info(u: &UserInfo) -> Value {
    let mut v = json!({"username": u.name});
    if !u.uid.is_empty() {
        v["uid"] = json!(u.uid);
    }
    if !u.groups.is_empty() {
        v["groups"] = json!(u.groups);
    }
    if !u.extra.is_empty() {
        v["extra"] = json!(u.extra);
    }
    v
}

/// The AdmissionReview (`api_version`, v1 or v1beta1, which share their shape) sent for
/// `attrs`, the webhook having matched `def` (which differs from the request's resource under
/// `matchPolicy: Equivalent`).
pub fn review(attrs: &Attributes, def: &ResourceDef, api_version: &str, uid: &str, obj: Option<&Value>) -> Value {
    // Subresource bodies of another kind (Eviction, exec options) are sent as they came.
    let present = |o: &Value| {
        if attrs.sub_kind.is_some() {
            o.clone()
        } else {
            crate::api::convert::from_storage(def, o.clone())
        }
    };
    let (kind, request_kind) = attrs.kinds(def);
    let mut req = json!({
        "uid": uid,
        "kind": kind,
        "resource": {"group": def.group, "version": def.version, "resource": def.plural},
        "requestKind": request_kind,
        "requestResource": {"group": attrs.def.group, "version": attrs.def.version, "resource": attrs.def.plural},
        "operation": attrs.op.as_str(),
        "userInfo": user_info(&attrs.user),
        "object": obj.map(present).unwrap_or(Value::Null),
        "oldObject": attrs.old.as_ref().map(present).unwrap_or(Value::Null),
        "dryRun": attrs.dry_run,
        "options": attrs.options,
    });
    let m = req.as_object_mut().expect("built as an object");
    if !attrs.sub.is_empty() {
        m.insert("subResource".into(), json!(attrs.sub));
        m.insert("requestSubResource".into(), json!(attrs.sub));
    }
    if !attrs.name.is_empty() {
        m.insert("name".into(), json!(attrs.name));
    }
    if !attrs.namespace.is_empty() {
        m.insert("namespace".into(), json!(attrs.namespace));
    }
    json!({"kind": "AdmissionReview", "apiVersion": api_version, "request": req})
}

/// Resolves the webhook's `clientConfig` to an address to dial and a name to verify.
fn target(st: &AppState, cc: &Value, timeout: Duration) -> Result<Target, CallError> {
    let query = format!("?timeout={}s", timeout.as_secs());
    if let Some(svc) = cc.get("service").filter(|s| s.is_object()) {
        let name = svc.get("name").and_then(Value::as_str).unwrap_or_default();
        let ns = svc.get("namespace").and_then(Value::as_str).unwrap_or_default();
        let port = svc.get("port").and_then(Value::as_u64).unwrap_or(443);
        let path = svc.get("path").and_then(Value::as_str).unwrap_or_default();
        let host = format!("{name}.{ns}.svc");
        let url = format!("https://{host}:{port}{path}{query}");
        let up = crate::api::proxy::service_endpoint(st, ns, name, Some(&port.to_string()), true).map_err(|e| {
            CallError::Post {
                url: url.clone(),
                reason: e.message.clone(),
            }
        })?;
        let server_name = ServerName::try_from(host.clone()).map_err(|e| CallError::Post {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        return Ok(Target {
            url,
            addr: up.addr,
            server_name,
            path_and_query: format!("{}{query}", if path.is_empty() { "/" } else { path }),
            host: format!("{host}:{port}"),
        });
    }
    let raw = cc.get("url").and_then(Value::as_str).unwrap_or_default();
    let url = format!("{raw}{query}");
    let fail = |reason: String| CallError::Post {
        url: url.clone(),
        reason,
    };
    let uri: http::Uri = raw.parse().map_err(|e: http::uri::InvalidUri| fail(e.to_string()))?;
    let host = uri.host().unwrap_or_default().trim_matches(['[', ']']).to_string();
    let port = uri.port_u16().unwrap_or(443);
    // Only loopback is ever dialled: a URL elsewhere fails like an unreachable network.
    let ip = match host.as_str() {
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        h => h
            .parse::<IpAddr>()
            .map_err(|_| fail(format!("dial tcp: lookup {h}: no such host in the simulated network")))?,
    };
    if !crate::addr::dialable(ip) {
        return Err(fail(format!(
            "dial tcp {}: connect: network is unreachable (the simulator dials 127.0.0.0/8 only)",
            SocketAddr::new(ip, port)
        )));
    }
    let server_name = ServerName::try_from(host.clone()).map_err(|e| fail(e.to_string()))?;
    let path = uri.path();
    Ok(Target {
        addr: SocketAddr::new(ip, port),
        server_name,
        path_and_query: format!("{}{query}", if path.is_empty() { "/" } else { path }),
        host: uri.authority().map(|a| a.to_string()).unwrap_or(host),
        url,
    })
}

/// A TLS client trusting exactly the certificates of `caBundle` (base64 PEM, as the API
/// carries it). With none, nothing is trusted: the simulator has no system roots to fall back
/// on, so such a webhook fails verification, which is what an e2e webhook signed by its own
/// CA would do against system roots too.
pub(crate) fn tls_config(cc: &Value) -> Result<Arc<rustls::ClientConfig>, String> {
    use base64::Engine;
    crate::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    let bundle = cc.get("caBundle").and_then(Value::as_str).unwrap_or_default();
    if !bundle.is_empty() {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(bundle)
            .map_err(|e| format!("invalid caBundle: {e}"))?;
        for c in CertificateDer::pem_slice_iter(&pem) {
            let c = c.map_err(|e| format!("invalid caBundle: {e}"))?;
            roots.add(c).map_err(|e| format!("invalid caBundle: {e}"))?;
        }
    }
    let provider = rustls::crypto::ring::default_provider();
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Go's words for a failed TLS handshake (its `x509` verification errors).
fn tls_reason(e: &std::io::Error) -> String {
    use rustls::CertificateError as C;
    let cert = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(|r| match r {
            rustls::Error::InvalidCertificate(c) => Some(c),
            _ => None,
        });
    let why = match cert {
        // An issuer that is not in caBundle, or one of the same name that did not sign it.
        Some(C::UnknownIssuer | C::BadSignature) => "x509: certificate signed by unknown authority".to_string(),
        Some(C::NotValidForName | C::NotValidForNameContext { .. }) => {
            "x509: certificate is not valid for the requested name".to_string()
        }
        Some(C::Expired | C::ExpiredContext { .. }) => "x509: certificate has expired or is not yet valid".to_string(),
        _ => return format!("tls: {e}"),
    };
    format!("tls: failed to verify certificate: {why}")
}

/// POSTs `body` and returns the status code and body of the answer.
async fn post(t: &Target, cc: &Value, body: Vec<u8>) -> Result<(u16, bytes::Bytes), String> {
    let tcp = TcpStream::connect(t.addr).await.map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
            _ => e.to_string(),
        };
        format!("dial tcp {}: connect: {why}", t.addr)
    })?;
    let connector = tokio_rustls::TlsConnector::from(tls_config(cc)?);
    let tls = connector
        .connect(t.server_name.clone(), tcp)
        .await
        .map_err(|e| tls_reason(&e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "webhook connection ended with an error");
        }
    });
    let req = http::Request::post(&t.path_and_query)
        .header(http::header::HOST, &t.host)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .body(Full::new(bytes::Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((code, bytes))
}

/// What a webhook answered, once checked.
#[derive(Debug)]
pub struct Answer {
    /// `response.allowed`.
    pub allowed: bool,
    /// `response.status`, when the webhook gave one.
    pub status: Option<Value>,
    /// The JSONPatch, decoded (mutating webhooks only).
    pub patch: Option<Value>,
    /// `response.patchType` (JSONPatch for a v1beta1 answer with a patch).
    pub patch_type: Option<String>,
    /// `response.warnings`.
    pub warnings: Vec<String>,
}

/// kube-apiserver's `--request-timeout` default, the longest a call can run when the
/// `webhook-timeout-ignored` fault drops the webhook's own deadline.
const REQUEST_LIMIT: Duration = Duration::from_secs(60);

/// Calls the webhook `hook` with `review` and checks the answer (`mutating` allows a patch).
pub async fn call(st: &AppState, hook: &Value, review: &Value, mutating: bool) -> Result<Answer, CallError> {
    let secs = hook.get("timeoutSeconds").and_then(Value::as_u64).unwrap_or(10);
    let timeout = Duration::from_secs(secs);
    let cc = hook.get("clientConfig").cloned().unwrap_or(Value::Null);
    let t = target(st, &cc, timeout)?;
    let body = serde_json::to_vec(review).map_err(|e| CallError::Invalid(e.to_string()))?;
    let post_err = |reason: String| CallError::Post {
        url: t.url.clone(),
        reason,
    };
    // `webhook-timeout-ignored`: a server that lets the call run to the request's own limit.
    let waited = if st.cfg.faults.is_on("webhook-timeout-ignored") {
        REQUEST_LIMIT
    } else {
        timeout
    };
    let (code, bytes) = match tokio::time::timeout(waited, post(&t, &cc, body)).await {
        Err(_) => return Err(post_err("context deadline exceeded".into())),
        Ok(Err(reason)) => return Err(post_err(reason)),
        Ok(Ok(r)) => r,
    };
    if !(200..300).contains(&code) {
        // A Status body is decoded as the error it describes, as client-go does.
        let status = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .filter(|v| v.get("kind").and_then(Value::as_str) == Some("Status"))
            .and_then(|v| v.get("message").and_then(Value::as_str).map(String::from));
        return Err(CallError::Status(
            status.unwrap_or_else(|| status_error_text(code, &bytes)),
        ));
    }
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| CallError::Invalid(format!("couldn't decode the webhook's answer: {e}")))?;
    let uid = review
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let sent = review.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let answer = verify(&v, sent, uid, mutating).map_err(CallError::Invalid)?;
    match &answer.patch_type {
        Some(t) if answer.allowed && answer.patch.is_some() && t != "JSONPatch" => {
            Err(CallError::UnsupportedPatch(t.clone()))
        }
        _ => Ok(answer),
    }
}

/// POSTs a JSON `body` to the webhook at `cc` (a `clientConfig`) within `timeout` and
/// decodes the 2xx answer: the HTTPS plumbing of admission calls, shared with CRD conversion
/// webhooks (`crd::conversion`), which check the answer themselves.
///
/// # Errors
/// [`CallError::Post`] for dialling, TLS and the deadline, [`CallError::Status`] for a non-2xx
/// answer, [`CallError::Invalid`] for a body that is not JSON.
pub async fn post_json(st: &AppState, cc: &Value, timeout: Duration, body: &Value) -> Result<Value, CallError> {
    let t = target(st, cc, timeout)?;
    let bytes = serde_json::to_vec(body).map_err(|e| CallError::Invalid(e.to_string()))?;
    let (code, answer) = match tokio::time::timeout(timeout, post(&t, cc, bytes)).await {
        Err(_) => {
            return Err(CallError::Post {
                url: t.url.clone(),
                reason: "context deadline exceeded".into(),
            });
        }
        Ok(Err(reason)) => {
            return Err(CallError::Post {
                url: t.url.clone(),
                reason,
            });
        }
        Ok(Ok(r)) => r,
    };
    if !(200..300).contains(&code) {
        let status = serde_json::from_slice::<Value>(&answer)
            .ok()
            .filter(|v| v.get("kind").and_then(Value::as_str) == Some("Status"))
            .and_then(|v| v.get("message").and_then(Value::as_str).map(String::from));
        return Err(CallError::Status(
            status.unwrap_or_else(|| status_error_text(code, &answer)),
        ));
    }
    serde_json::from_slice(&answer)
        .map_err(|e| CallError::Invalid(format!("couldn't decode the webhook's answer: {e}")))
}

/// client-go's words for a non-2xx answer that is not a Status (`NewGenericServerResponse`).
fn status_error_text(code: u16, body: &[u8]) -> String {
    match code {
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 => "the server does not allow access to the requested resource".into(),
        404 => "the server could not find the requested resource".into(),
        405 => "the server does not allow this method on the requested resource".into(),
        409 => "the server reported a conflict".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        429 => "the server has received too many requests and has asked us to try again later".into(),
        503 => "the server is currently unable to handle the request".into(),
        504 => {
            "the server was unable to return a response in the time allotted, but may still be processing the request"
                .into()
        }
        c if c >= 500 => {
            let text = String::from_utf8_lossy(body).trim().to_string();
            let text = if text.is_empty() { "unknown".to_string() } else { text };
            format!("an error on the server ({text:?}) has prevented the request from succeeding")
        }
        c => format!("the server responded with the status code {c} but did not return more information"),
    }
}

/// Upstream's `VerifyAdmissionResponse` for the answer to a review of version `sent`: v1
/// answers must echo the uid, be v1 AdmissionReviews and carry a patch type beside a patch;
/// v1beta1 answers were never checked, and their patch is taken as a JSONPatch.
fn verify(v: &Value, sent: &str, uid: &str, mutating: bool) -> Result<Answer, String> {
    let Some(resp) = v.get("response").filter(|r| r.is_object()) else {
        return Err("webhook response was absent".into());
    };
    let v1 = sent == "admission.k8s.io/v1";
    let patch_b64 = resp.get("patch").and_then(Value::as_str).unwrap_or_default();
    let mut patch_type = resp.get("patchType").and_then(Value::as_str).map(String::from);
    if v1 {
        let got_uid = resp.get("uid").and_then(Value::as_str).unwrap_or_default();
        if got_uid != uid {
            return Err(format!("expected response.uid={uid:?}, got {got_uid:?}"));
        }
        let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
        if (api_version, kind) != ("admission.k8s.io/v1", "AdmissionReview") {
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {api_version}, Kind={kind}"
            ));
        }
    }
    let mut patch = None;
    if mutating {
        if v1 {
            if !patch_b64.is_empty() && patch_type.is_none() {
                return Err("webhook returned response.patch but not response.patchType".into());
            }
            if patch_b64.is_empty() && patch_type.is_some() {
                return Err("webhook returned response.patchType but not response.patch".into());
            }
            if patch_type.as_deref() == Some("") {
                return Err("webhook returned invalid response.patchType of \"\"".into());
            }
        } else if !patch_b64.is_empty() {
            patch_type = Some("JSONPatch".into());
        }
        if !patch_b64.is_empty() {
            use base64::Engine;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(patch_b64)
                .map_err(|e| format!("received undecodable patch in webhook response: {e}"))?;
            patch = Some(
                serde_json::from_slice::<Value>(&raw)
                    .map_err(|e| format!("received undecodable patch in webhook response: {e}"))?,
            );
        }
    } else if v1 {
        if !patch_b64.is_empty() {
            return Err("validating webhook may not return response.patch".into());
        }
        if patch_type.is_some() {
            return Err("validating webhook may not return response.patchType".into());
        }
    } else {
        patch_type = None;
    }
    Ok(Answer {
        allowed: resp.get("allowed").and_then(Value::as_bool).unwrap_or(false),
        status: resp.get("status").filter(|s| s.is_object()).cloned(),
        patch,
        patch_type,
        warnings: resp
            .get("warnings")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "admission.k8s.io/v1";

    #[test]
    fn answers_are_checked_as_upstream_checks_them() {
        let ok = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u", "allowed": true, "warnings": ["w"]}});
        let a = verify(&ok, V1, "u", false).unwrap();
        assert!(a.allowed);
        assert_eq!(a.warnings, vec!["w".to_string()]);
        assert_eq!(
            verify(&ok, V1, "other", false).unwrap_err(),
            "expected response.uid=\"other\", got \"u\""
        );
        let patched = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u", "allowed": true, "patch": "W10="}});
        assert_eq!(
            verify(&patched, V1, "u", true).unwrap_err(),
            "webhook returned response.patch but not response.patchType"
        );
        assert_eq!(
            verify(&patched, V1, "u", false).unwrap_err(),
            "validating webhook may not return response.patch"
        );
        assert_eq!(
            verify(&json!({"apiVersion": V1, "kind": "AdmissionReview"}), V1, "u", false).unwrap_err(),
            "webhook response was absent"
        );
    }

    #[test]
    fn v1beta1_answers_are_taken_unchecked_with_a_jsonpatch() {
        let a = verify(
            &json!({"response": {"allowed": true, "patch": "W10="}}),
            "admission.k8s.io/v1beta1",
            "u",
            true,
        )
        .unwrap();
        assert_eq!(a.patch_type.as_deref(), Some("JSONPatch"));
        assert_eq!(a.patch, Some(json!([])));
        let hook = json!({"admissionReviewVersions": ["v2", "v1beta1", "v1"]});
        assert_eq!(review_version(&hook).unwrap(), "admission.k8s.io/v1beta1");
        assert!(review_version(&json!({"admissionReviewVersions": ["v2"]})).is_err());
    }

    #[test]
    fn urls_off_loopback_are_never_dialled() {
        let st = crate::api::admission::testutil::state();
        let cc = json!({"url": "https://10.1.2.3:8443/x"});
        let err = target(&st, &cc, Duration::from_secs(3)).err().unwrap().to_string();
        assert!(
            err.starts_with(
                "failed to call webhook: Post \"https://10.1.2.3:8443/x?timeout=3s\": dial tcp 10.1.2.3:8443"
            ),
            "{err}"
        );
        let cc = json!({"url": "https://example.com/x"});
        assert!(target(&st, &cc, Duration::from_secs(3)).is_err());
        let cc = json!({"url": "https://127.0.0.1:9443/hook"});
        let t = target(&st, &cc, Duration::from_secs(3)).ok().unwrap();
        assert_eq!(t.path_and_query, "/hook?timeout=3s");
    }
}
