//! Forwarding to an aggregated API server (kube-aggregator `handler_proxy.go`).
//!
//! The Service is resolved to its ClusterIP and the APIService's port (kube-apiserver's
//! default `ClusterIPServiceResolver`; kube-proxy forwards to a ready endpoint). The TLS
//! server name is `<service>.<namespace>.svc`, verified against `spec.caBundle` unless
//! `insecureSkipTLSVerify`. The caller's credentials never leave: `Authorization` and the
//! `Impersonate-*` headers are dropped, and the authenticated user travels in the
//! front-proxy headers the aggregated server trusts (`transport.SetAuthProxyHeaders`).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::Value;
use tokio::net::TcpStream;

use crate::api::auth::UserInfo;
use crate::api::state::AppState;

/// Headers that describe one hop or carry the caller's credentials (never forwarded).
const DROPPED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "authorization",
    "content-length",
];

/// Why a request could not reach the aggregated server.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The Service is gone or has no ClusterIP (upstream's resolver error).
    #[error("{0}")]
    Resolve(String),
    /// Dialling, TLS or the HTTP exchange failed.
    #[error("{0}")]
    Transport(String),
}

/// Where the APIService `svc` is reached: `ClusterIP:port` and the TLS name.
fn resolve(st: &AppState, svc: &Value) -> Result<(SocketAddr, String), ProxyError> {
    let r = svc.pointer("/spec/service").cloned().unwrap_or(Value::Null);
    let ns = r["namespace"].as_str().unwrap_or_default();
    let name = r["name"].as_str().unwrap_or_default();
    let port = r["port"].as_u64().and_then(|p| u16::try_from(p).ok()).unwrap_or(443);
    let service = st
        .store
        .get("/services", ns, name)
        .ok_or_else(|| ProxyError::Resolve(format!("service \"{name}\" not found")))?;
    let ip = service
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<IpAddr>().ok())
        .ok_or_else(|| ProxyError::Resolve(format!("service {ns}/{name} has no cluster IP")))?;
    if !crate::addr::dialable(ip) {
        return Err(ProxyError::Resolve(format!("cluster IP {ip} is outside the simulator")));
    }
    Ok((SocketAddr::new(ip, port), format!("{name}.{ns}.svc")))
}

/// The TLS client for `svc`: its `caBundle` trusted (nothing else), or no verification with
/// `insecureSkipTLSVerify`.
fn tls(svc: &Value) -> Result<Arc<rustls::ClientConfig>, ProxyError> {
    let spec = svc.get("spec").cloned().unwrap_or(Value::Null);
    if spec["insecureSkipTLSVerify"].as_bool() == Some(true) {
        return Ok(crate::api::tls::insecure_client_config());
    }
    crate::api::webhook::call::tls_config(&spec).map_err(ProxyError::Transport)
}

/// What Go's `url.PathEscape` leaves alone: letters, digits and `-._~` (upstream escapes
/// extra keys so any key fits a header name).
const PATH_ESCAPE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Sets the front-proxy identity headers for `user` (client-go `SetAuthProxyHeaders`).
fn identity(headers: &mut HeaderMap, user: &UserInfo) {
    let mut put = |k: String, v: &str| {
        if let (Ok(k), Ok(v)) = (axum::http::HeaderName::try_from(k), HeaderValue::from_str(v)) {
            headers.append(k, v);
        }
    };
    put("X-Remote-User".into(), &user.name);
    for g in &user.groups {
        put("X-Remote-Group".into(), g);
    }
    for (k, vs) in &user.extra {
        let key: String = percent_encoding::utf8_percent_encode(k, PATH_ESCAPE).to_string();
        for v in vs {
            put(format!("X-Remote-Extra-{key}"), v);
        }
    }
}

/// Sends one request for `user` to the server behind APIService `svc` and returns its
/// answer, body streamed.
///
/// # Errors
/// [`ProxyError`] when the Service cannot be resolved or the exchange fails.
pub async fn send(
    st: &AppState,
    svc: &Value,
    method: Method,
    path_and_query: &str,
    incoming: &HeaderMap,
    body: Body,
    user: &UserInfo,
) -> Result<Response, ProxyError> {
    let (addr, host) = resolve(st, svc)?;
    let config = tls(svc)?;
    let server_name = ServerName::try_from(host.clone()).map_err(|e| ProxyError::Transport(e.to_string()))?;
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| ProxyError::Transport(format!("dial tcp {addr}: connect: {e}")))?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(server_name, tcp)
        .await
        .map_err(|e| ProxyError::Transport(format!("tls: {e}")))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| ProxyError::Transport(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "aggregated server connection ended with an error");
        }
    });
    let mut headers = HeaderMap::new();
    for (k, v) in incoming {
        let n = k.as_str();
        if !DROPPED.contains(&n) && !n.starts_with("impersonate-") && !n.starts_with("x-remote-") {
            headers.append(k.clone(), v.clone());
        }
    }
    if !st.cfg.faults.is_on(super::FRONT_PROXY_OFF) {
        identity(&mut headers, user);
    }
    let mut req = http::Request::builder()
        .method(method)
        .uri(path_and_query)
        .header(http::header::HOST, format!("{host}:{}", addr.port()));
    for (k, v) in &headers {
        req = req.header(k, v);
    }
    let req = req.body(body).map_err(|e| ProxyError::Transport(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| ProxyError::Transport(e.to_string()))?;
    let (parts, incoming) = resp.into_parts();
    let mut out = Response::builder().status(parts.status);
    for (k, v) in &parts.headers {
        if !DROPPED.contains(&k.as_str()) {
            out = out.header(k, v);
        }
    }
    out.body(Body::new(incoming))
        .map_err(|e| ProxyError::Transport(e.to_string()))
}

/// What a client gets from `proxyError`: Go's `http.Error`, plain text and a newline.
pub fn plain_error(code: StatusCode, text: &str) -> Response {
    (
        code,
        [
            (http::header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        format!("{text}\n"),
    )
        .into_response()
}

/// Serves a request under `/apis/<group>/<version>` that APIService `svc` owns: 503
/// `service unavailable` while it is not Available, else the aggregated server's answer.
pub async fn serve(st: &AppState, svc: &Value, req: axum::extract::Request) -> Response {
    if !super::is_available(svc) {
        return plain_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
    }
    let Some(user) = crate::api::auth::user::current() else {
        return plain_error(StatusCode::INTERNAL_SERVER_ERROR, "missing user");
    };
    let path_and_query = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let (parts, body) = req.into_parts();
    match send(st, svc, parts.method, &path_and_query, &parts.headers, body, &user).await {
        Ok(r) => r,
        Err(ProxyError::Resolve(e)) => {
            tracing::warn!(error = %e, "error resolving the aggregated API server");
            plain_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable")
        }
        // The upgrade-aware proxy's responder writes transport failures as 503 with Go's text.
        Err(ProxyError::Transport(e)) => plain_error(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("error trying to reach service: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_travels_in_front_proxy_headers() {
        let mut h = HeaderMap::new();
        let user = UserInfo {
            name: "alice".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: [("scopes.example/x".to_string(), vec!["a".to_string()])].into(),
            ..Default::default()
        };
        identity(&mut h, &user);
        assert_eq!(h.get("x-remote-user").unwrap(), "alice");
        let groups: Vec<_> = h.get_all("x-remote-group").iter().collect();
        assert_eq!(groups.len(), 2);
        assert_eq!(h.get("x-remote-extra-scopes.example%2Fx").unwrap(), "a");
    }
}
