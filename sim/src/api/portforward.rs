//! `pods/{name}/portforward`, routed as a 1.33 kube-apiserver routes it to the kubelet's
//! `portForward/{ns}/{pod}`:
//!
//! - a websocket offering `SPDY/3.1+portforward.k8s.io` (kubectl's default since 1.31, the
//!   `PortForwardWebsockets` feature): the API server upgrades to the kubelet with SPDY/3.1
//!   (a POST with `Upgrade: SPDY/3.1`, `X-Stream-Protocol-Version: portforward.k8s.io`), then
//!   accepts the websocket with the tunnelling protocol and carries the SPDY bytes inside binary
//!   messages (upstream's `streamtunnel.go`);
//! - any other websocket (`v4.channel.k8s.io`, `?ports=`): bridged to the kubelet's websocket;
//! - a plain `Upgrade: SPDY/3.1` request: proxied, then the upgraded bytes copied both ways.

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::extract::Request;
use axum::extract::ws::{self, WebSocketUpgrade};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::error::{ApiError, ApiResult};
use super::proxy::{self, Upstream};
use super::route::Target;
use super::state::AppState;

/// The websocket subprotocol prefix that says "SPDY inside websocket messages".
const TUNNEL_PREFIX: &str = "SPDY/3.1+";
/// The stream protocol kubectl asks for.
const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";

fn websocket_protocols(req: &Request) -> Vec<String> {
    req.headers()
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty())
        .collect()
}

fn header_is(req: &Request, name: &str, want: &str) -> bool {
    req.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim().eq_ignore_ascii_case(want))
}

/// Serves `pods/{name}/portforward`.
pub async fn serve(st: &AppState, t: &Target, raw_query: Option<&str>, req: Request) -> ApiResult<Response> {
    let ns = t.namespace.clone().unwrap_or_default();
    let name = t.name.clone().unwrap_or_default();
    let p = proxy::pod(st, &ns, &name)?;
    let node = proxy::node_of(&p)?;
    let up = proxy::kubelet(st, &node)?;
    let path = format!("portForward/{ns}/{name}");
    if header_is(&req, "upgrade", "websocket") {
        let protocols = websocket_protocols(&req);
        let spdy: Vec<String> = protocols
            .iter()
            .filter_map(|p| p.strip_prefix(TUNNEL_PREFIX))
            .filter(|p| p.ends_with(".k8s.io"))
            .map(String::from)
            .collect();
        if !spdy.is_empty() {
            return tunnel(st, up, &path, &spdy, req).await;
        }
        let query = raw_query.map(|q| format!("?{q}")).unwrap_or_default();
        return proxy::websocket_to_kubelet(st, up, &format!("{path}{query}"), req).await;
    }
    if header_is(&req, "upgrade", "SPDY/3.1") {
        let offered: Vec<String> = req
            .headers()
            .get_all("x-stream-protocol-version")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(String::from)
            .collect();
        return spdy_upgrade(up, &path, &offered, req).await;
    }
    Err(ApiError::bad_request("Upgrade request required"))
}

/// Upgrades a connection to the kubelet with SPDY/3.1; the kubelet's answer, and on 101 the
/// upgraded connection.
async fn kubelet_spdy(
    up: Upstream,
    path: &str,
    protocols: &[String],
) -> ApiResult<(http::response::Parts, Option<hyper::upgrade::Upgraded>, bytes::Bytes)> {
    let io = proxy::connect(up).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| ApiError::unavailable(502, format!("error dialing backend: {e}")))?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "kubelet port-forward connection ended with an error");
        }
    });
    let mut b = http::Request::builder()
        .method(Method::POST)
        .uri(format!("/{path}"))
        .header("host", up.addr.to_string())
        .header("connection", "Upgrade")
        .header("upgrade", "SPDY/3.1");
    for p in protocols {
        b = b.header("x-stream-protocol-version", p.as_str());
    }
    let req = b
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(|e| ApiError::internal(format!("invalid kubelet request: {e}")))?;
    let mut resp = sender
        .send_request(req)
        .await
        .map_err(|e| ApiError::unavailable(502, format!("error dialing backend: {e}")))?;
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        let upgraded = hyper::upgrade::on(&mut resp)
            .await
            .map_err(|e| ApiError::unavailable(502, format!("error upgrading the kubelet connection: {e}")))?;
        let (parts, _) = resp.into_parts();
        return Ok((parts, Some(upgraded), bytes::Bytes::new()));
    }
    let (parts, body) = resp.into_parts();
    let body = http_body_util::BodyExt::collect(body)
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    Ok((parts, None, body))
}

/// A kubelet refusal passed through as upstream's proxy passes a non-101 answer.
fn passthrough(parts: &http::response::Parts, body: bytes::Bytes) -> Response {
    let mut out = Response::builder().status(parts.status);
    if let Some(ct) = parts.headers.get("content-type") {
        out = out.header("content-type", ct);
    }
    out.body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// kubectl's default: SPDY tunnelled through websocket binary messages.
async fn tunnel(st: &AppState, up: Upstream, path: &str, spdy: &[String], req: Request) -> ApiResult<Response> {
    let drops = st.connection_drops();
    let (mut parts, _body) = req.into_parts();
    let upgrade = WebSocketUpgrade::from_request_parts(&mut parts, st)
        .await
        .map_err(|_| ApiError::bad_request("Upgrade request required"))?;
    let (resp, upgraded, body) = kubelet_spdy(up, path, spdy).await?;
    let Some(kubelet) = upgraded else {
        return Ok(passthrough(&resp, body));
    };
    let chosen = resp
        .headers
        .get("x-stream-protocol-version")
        .and_then(|v| v.to_str().ok())
        .map(|p| format!("{TUNNEL_PREFIX}{}", p.trim()));
    let upgrade = match chosen {
        Some(p) => upgrade.protocols([p]),
        None => upgrade,
    };
    Ok(upgrade
        .on_upgrade(move |socket| carry(socket, TokioIo::new(kubelet), drops))
        .into_response())
}

/// Copies SPDY bytes between websocket binary messages and the kubelet connection.
async fn carry(
    socket: ws::WebSocket,
    kubelet: TokioIo<hyper::upgrade::Upgraded>,
    mut drops: tokio::sync::watch::Receiver<u64>,
) {
    let (mut ws_tx, mut ws_rx) = socket.split();
    let (mut k_rd, mut k_wr) = tokio::io::split(kubelet);
    let up = async {
        while let Some(Ok(m)) = ws_rx.next().await {
            match m {
                ws::Message::Binary(b) if k_wr.write_all(&b).await.is_err() => break,
                ws::Message::Close(_) => break,
                _ => {}
            }
        }
        let _ = k_wr.shutdown().await;
    };
    let down = async {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match k_rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if ws_tx
                        .send(ws::Message::Binary(bytes::Bytes::copy_from_slice(&buf[..n])))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
        let _ = ws_tx
            .send(ws::Message::Close(Some(ws::CloseFrame {
                code: ws::close_code::NORMAL,
                reason: "".into(),
            })))
            .await;
    };
    tokio::pin!(up, down);
    tokio::select! {
        () = &mut up => {}
        () = &mut down => {
            let _ = tokio::time::timeout(proxy::LINGER, &mut up).await;
        }
        _ = drops.changed() => tracing::debug!("port-forward tunnel dropped with the API server's connections"),
    }
}

/// The SPDY fallback: the client's own upgrade, proxied.
async fn spdy_upgrade(up: Upstream, path: &str, offered: &[String], mut req: Request) -> ApiResult<Response> {
    let (resp, upgraded, body) = kubelet_spdy(up, path, offered).await?;
    let Some(kubelet) = upgraded else {
        return Ok(passthrough(&resp, body));
    };
    let on = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match on.await {
            Ok(client) => {
                let mut client = TokioIo::new(client);
                let mut kubelet = TokioIo::new(kubelet);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut kubelet).await;
            }
            Err(e) => tracing::debug!(error = %e, "client port-forward upgrade failed"),
        }
    });
    let mut out = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for (k, v) in &resp.headers {
        out = out.header(k, v);
    }
    if !resp.headers.contains_key("x-stream-protocol-version") {
        out = out.header(
            "x-stream-protocol-version",
            HeaderValue::from_static(PORT_FORWARD_PROTOCOL),
        );
    }
    out.body(Body::empty())
        .map_err(|e| ApiError::internal(format!("invalid upgrade response: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunnel_protocols_are_recognised() {
        let req = Request::builder()
            .header("upgrade", "websocket")
            .header(
                "sec-websocket-protocol",
                "SPDY/3.1+portforward.k8s.io, v4.channel.k8s.io",
            )
            .body(Body::empty())
            .unwrap();
        assert!(header_is(&req, "upgrade", "websocket"));
        let p = websocket_protocols(&req);
        assert_eq!(p, ["SPDY/3.1+portforward.k8s.io", "v4.channel.k8s.io"]);
        assert_eq!(
            p.iter()
                .filter_map(|p| p.strip_prefix(TUNNEL_PREFIX))
                .collect::<Vec<_>>(),
            [PORT_FORWARD_PROTOCOL]
        );
    }
}
