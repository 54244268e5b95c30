//! Forwarding to what the node side serves: pod logs and exec through the kubelet, and the
//! pod, service and node proxies.
//!
//! The kubelet is dialled at `<node InternalIP>:<status.daemonEndpoints.kubeletEndpoint.Port>`
//! over TLS without verifying its self-signed certificate, as an apiserver without
//! `--kubelet-certificate-authority` does. Only loopback addresses are ever dialled. Exec
//! negotiates the websocket subprotocol with the kubelet first (the client's offer, e.g.
//! `v5.channel.k8s.io` then `v4.channel.k8s.io`) and accepts the client with the kubelet's
//! choice, then copies frames both ways.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::extract::Request;
use axum::extract::ws::{self, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite;

use crate::addr;

use super::error::{ApiError, ApiResult};
use super::objects::Query;
use super::route::Target;
use super::state::AppState;
use super::tls;

/// Where a forwarded request goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Upstream {
    pub(crate) addr: SocketAddr,
    https: bool,
}

/// Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus our credentials.
const HOP: &[&str] = &[
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

pub(super) fn pod(st: &AppState, ns: &str, name: &str) -> ApiResult<Value> {
    st.store
        .get("/pods", ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))
}

/// The kubelet endpoint of a node.
pub(super) fn kubelet(st: &AppState, node: &str) -> ApiResult<Upstream> {
    let n = st
        .store
        .get("/nodes", "", node)
        .ok_or_else(|| ApiError::not_found("", "nodes", node))?;
    let ip = n
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|x| x["type"] == "InternalIP"))
        .and_then(|x| x["address"].as_str())
        .and_then(|s| s.parse::<IpAddr>().ok())
        .ok_or_else(|| {
            ApiError::unavailable(
                503,
                format!("no preferred addresses found; known addresses: [] for node {node:?}"),
            )
        })?;
    let port = n
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .unwrap_or(addr::KUBELET_PORT);
    Ok(Upstream {
        addr: SocketAddr::new(ip, port),
        https: true,
    })
}

/// Picks the container a log/exec request means, as upstream does.
fn container(p: &Value, requested: Option<&str>) -> ApiResult<String> {
    let name = p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let names = |key: &str| -> Vec<String> {
        p.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(String::from))
            .collect()
    };
    let (main, init, eph) = (
        names("containers"),
        names("initContainers"),
        names("ephemeralContainers"),
    );
    match requested.filter(|c| !c.is_empty()) {
        Some(c) if main.iter().chain(&init).chain(&eph).any(|x| x == c) => Ok(c.to_string()),
        Some(c) => {
            let mut msg = format!("container {c} is not valid for pod {name}");
            if !main.is_empty() {
                msg = format!("container {c} is not valid for pod {name}");
            }
            Err(ApiError::bad_request(msg))
        }
        None if main.len() == 1 => Ok(main[0].clone()),
        None => {
            let mut msg = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                main.join(" ")
            );
            if !init.is_empty() {
                msg.push_str(&format!(" or one of the init containers: [{}]", init.join(" ")));
            }
            Err(ApiError::bad_request(msg))
        }
    }
}

pub(super) fn node_of(p: &Value) -> ApiResult<String> {
    p.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(String::from)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "pod {} does not have a host assigned",
                p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
            ))
        })
}

/// net/http's TLSHandshakeTimeout, which kube-apiserver's kubelet client keeps.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) async fn connect(up: Upstream) -> ApiResult<Box<dyn Io>> {
    if !addr::dialable(up.addr.ip()) {
        return Err(ApiError::unavailable(
            503,
            format!(
                "error trying to reach service: address {} is outside the simulator",
                up.addr
            ),
        ));
    }
    let tcp = TcpStream::connect(up.addr).await.map_err(|e| {
        ApiError::unavailable(
            503,
            format!("error trying to reach service: dial tcp {}: connect: {e}", up.addr),
        )
    })?;
    if !up.https {
        return Ok(Box::new(tcp));
    }
    let connector = tokio_rustls::TlsConnector::from(tls::insecure_client_config());
    let server_name = rustls::pki_types::ServerName::IpAddress(up.addr.ip().into());
    // kube-apiserver's kubelet client gives a TLS handshake 10 s (net/http's
    // TLSHandshakeTimeout): a kubelet that accepts and then says nothing (a dead host) ends there.
    let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, connector.connect(server_name, tcp)).await {
        Err(_) => {
            return Err(ApiError::unavailable(
                503,
                "error trying to reach service: net/http: TLS handshake timeout".to_string(),
            ));
        }
        Ok(r) => r.map_err(|e| {
            ApiError::unavailable(
                503,
                format!("error trying to reach service: tls handshake with {}: {e}", up.addr),
            )
        })?,
    };
    Ok(Box::new(tls))
}

/// A byte stream to an upstream (plain TCP or TLS).
pub(super) trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Io for T {}

/// Sends one HTTP/1.1 request upstream and streams the answer back.
async fn forward(
    up: Upstream,
    method: Method,
    path_and_query: &str,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let io = connect(up).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
        .await
        .map_err(|e| ApiError::unavailable(502, format!("error trying to reach service: {e}")))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "upstream connection ended with an error");
        }
    });
    let mut req = http::Request::builder().method(method).uri(path_and_query);
    for (k, v) in headers {
        if !HOP.contains(&k.as_str()) {
            req = req.header(k, v);
        }
    }
    req = req.header("host", up.addr.to_string());
    let req = req
        .body(body)
        .map_err(|e| ApiError::bad_request(format!("invalid proxied request: {e}")))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| ApiError::unavailable(502, format!("error trying to reach service: {e}")))?;
    let (parts, incoming) = resp.into_parts();
    let mut out = Response::builder().status(parts.status);
    for (k, v) in &parts.headers {
        if !HOP.contains(&k.as_str()) {
            out = out.header(k, v);
        }
    }
    out.body(Body::new(incoming))
        .map_err(|e| ApiError::internal(format!("invalid proxied response: {e}")))
}

/// `GET pods/{name}/log`: the kubelet's `containerLogs`, streamed.
pub async fn log(st: &AppState, t: &Target, q: &Query) -> ApiResult<Response> {
    let ns = t.namespace.clone().unwrap_or_default();
    let name = t.name.clone().unwrap_or_default();
    let p = pod(st, &ns, &name)?;
    let c = container(&p, q.get("container").map(String::as_str))?;
    let node = node_of(&p)?;
    let up = kubelet(st, &node)?;
    let query = {
        let mut params = form_urlencoded::Serializer::new(String::new());
        for key in [
            "follow",
            "tailLines",
            "previous",
            "timestamps",
            "sinceSeconds",
            "sinceTime",
            "limitBytes",
        ] {
            if let Some(v) = q.get(key) {
                params.append_pair(key, v);
            }
        }
        params.finish()
    };
    let path = format!(
        "/containerLogs/{ns}/{name}/{c}{}{query}",
        if query.is_empty() { "" } else { "?" }
    );
    let mut resp = forward(up, Method::GET, &path, &HeaderMap::new(), Body::empty()).await?;
    // Upstream's log REST streams with `Content-Type: text/plain` whatever the kubelet says;
    // clients decide how to read the body by it (the Python client refuses octet-stream).
    if resp.status().is_success() {
        resp.headers_mut()
            .insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    }
    Ok(resp)
}

/// `pods/{name}/exec` (and attach): a websocket bridged to the kubelet's.
pub async fn exec(st: &AppState, t: &Target, raw_query: Option<&str>, req: Request) -> ApiResult<Response> {
    let ns = t.namespace.clone().unwrap_or_default();
    let name = t.name.clone().unwrap_or_default();
    let sub = t.sub.clone().unwrap_or_else(|| "exec".into());
    let p = pod(st, &ns, &name)?;
    let q = super::route::query_map(raw_query);
    let c = container(&p, q.get("container").map(String::as_str))?;
    if sub == "exec" && super::route::query_all(raw_query, "command").is_empty() {
        return Err(ApiError::bad_request("you must specify at least 1 command"));
    }
    let node = node_of(&p)?;
    let up = kubelet(st, &node)?;
    // Everything but `container` passes through (command repeats, stdin/stdout/stderr/tty).
    let passthrough: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(
            form_urlencoded::parse(raw_query.unwrap_or_default().as_bytes()).filter(|(k, _)| k != "container"),
        )
        .finish();
    websocket_to_kubelet(st, up, &format!("{sub}/{ns}/{name}/{c}?{passthrough}"), req).await
}

/// Bridges a client's websocket to the kubelet's at `path` (no leading slash), negotiating the
/// subprotocol with the kubelet first (the client's offer, e.g. `v5.channel.k8s.io` then
/// `v4.channel.k8s.io`) and accepting the client with the kubelet's choice.
pub(super) async fn websocket_to_kubelet(st: &AppState, up: Upstream, path: &str, req: Request) -> ApiResult<Response> {
    // Subscribed now, so an API server going down (`api-down`, shutdown) ends the stream too.
    let drops = st.connection_drops();
    let (mut parts, _body) = req.into_parts();
    let offered: Vec<String> = parts
        .headers
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty())
        .collect();
    let upgrade = WebSocketUpgrade::from_request_parts(&mut parts, st)
        .await
        .map_err(|_| ApiError::bad_request("Upgrade request required"))?;
    let url = format!("wss://{}/{path}", up.addr);
    let io = connect(up).await?;
    let mut wsreq = tungstenite::client::IntoClientRequest::into_client_request(url.as_str())
        .map_err(|e| ApiError::internal(format!("invalid kubelet url: {e}")))?;
    if !offered.is_empty() {
        let v = HeaderValue::from_str(&offered.join(", "))
            .map_err(|_| ApiError::bad_request("invalid Sec-WebSocket-Protocol"))?;
        wsreq.headers_mut().insert("sec-websocket-protocol", v);
    }
    let (kubelet_ws, resp) = tokio_tungstenite::client_async(wsreq, io).await.map_err(|e| match e {
        tungstenite::Error::Http(r) => ApiError::unavailable(
            502,
            format!(
                "the kubelet refused the stream: {} {}",
                r.status(),
                r.body()
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default()
            ),
        ),
        other => ApiError::unavailable(502, format!("error dialing backend: {other}")),
    })?;
    let chosen = resp
        .headers()
        .get("sec-websocket-protocol")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let upgrade = match chosen {
        Some(p) => upgrade.protocols([p]),
        None => upgrade,
    };
    Ok(upgrade
        .on_upgrade(move |client| bridge(client, kubelet_ws, drops))
        .into_response())
}

fn to_kubelet(m: ws::Message) -> tungstenite::Message {
    match m {
        ws::Message::Text(t) => tungstenite::Message::Text(t.as_str().into()),
        ws::Message::Binary(b) => tungstenite::Message::Binary(b),
        ws::Message::Ping(b) => tungstenite::Message::Ping(b),
        ws::Message::Pong(b) => tungstenite::Message::Pong(b),
        ws::Message::Close(c) => tungstenite::Message::Close(c.map(|c| tungstenite::protocol::CloseFrame {
            code: c.code.into(),
            reason: c.reason.as_str().into(),
        })),
    }
}

fn to_client(m: tungstenite::Message) -> Option<ws::Message> {
    Some(match m {
        tungstenite::Message::Text(t) => ws::Message::Text(t.as_str().into()),
        tungstenite::Message::Binary(b) => ws::Message::Binary(b),
        tungstenite::Message::Ping(b) => ws::Message::Ping(b),
        tungstenite::Message::Pong(b) => ws::Message::Pong(b),
        tungstenite::Message::Close(c) => ws::Message::Close(Some(match c {
            Some(c) => ws::CloseFrame {
                code: c.code.into(),
                reason: c.reason.as_str().into(),
            },
            None => ws::CloseFrame {
                code: ws::close_code::NORMAL,
                reason: "".into(),
            },
        })),
        tungstenite::Message::Frame(_) => return None,
    })
}

/// How long a closing stream waits for the peer's close frame.
pub(crate) const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// Ends when either side closes, or when the API server drops its connections (`drops`).
async fn bridge<S>(
    client: ws::WebSocket,
    kubelet: tokio_tungstenite::WebSocketStream<S>,
    mut drops: tokio::sync::watch::Receiver<u64>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut c_tx, mut c_rx) = client.split();
    let (mut k_tx, mut k_rx) = kubelet.split();
    let up = async {
        let mut kubelet_open = true;
        while let Some(Ok(m)) = c_rx.next().await {
            let close = matches!(m, ws::Message::Close(_));
            // A failed send means the kubelet is closing (the process ended while the client
            // still wrote, e.g. its close-stdin signal): keep reading the client so its last
            // frames are consumed rather than left unread on a socket we close.
            if kubelet_open && k_tx.send(to_kubelet(m)).await.is_err() {
                kubelet_open = false;
            }
            if close {
                break;
            }
        }
    };
    let down = async {
        while let Some(Ok(m)) = k_rx.next().await {
            if matches!(m, tungstenite::Message::Close(_)) {
                break;
            }
            if let Some(m) = to_client(m)
                && c_tx.send(m).await.is_err()
            {
                break;
            }
        }
        // The kubelet ended the stream: end the client's too, with a normal-closure status
        // (client-go treats a close without a status, 1005, as a broken stream).
        let _ = c_tx
            .send(ws::Message::Close(Some(ws::CloseFrame {
                code: ws::close_code::NORMAL,
                reason: "".into(),
            })))
            .await;
    };
    tokio::pin!(up, down);
    tokio::select! {
        _ = &mut up => tracing::debug!("exec stream: the client ended it"),
        _ = &mut down => {
            // A lingering close: wait (briefly) for the client's answering close frame. Dropping
            // a socket with the client's last frames unread makes the kernel reset it, and a
            // reset discards output the client had not read yet.
            let lingered = tokio::time::timeout(LINGER, &mut up).await;
            tracing::debug!(client_closed = lingered.is_ok(), "exec stream: the kubelet ended it");
        }
        _ = drops.changed() => tracing::debug!("exec stream dropped with the API server's connections"),
    }
}

/// Splits `[scheme:]name[:port]` as upstream's proxy paths write it.
fn split_name(s: &str) -> (Option<&str>, &str, Option<&str>) {
    let parts: Vec<&str> = s.split(':').collect();
    match parts.as_slice() {
        [n] => (None, n, None),
        [scheme, n, port] => (Some(*scheme), n, Some(*port).filter(|p| !p.is_empty())),
        [n, port] => (None, n, Some(*port).filter(|p| !p.is_empty())),
        _ => (None, s, None),
    }
}

/// `pods|services|nodes/{name}[:port]/proxy/{path}`.
pub async fn proxy(st: &AppState, t: &Target, raw_query: Option<&str>, req: Request) -> ApiResult<Response> {
    let ns = t.namespace.clone().unwrap_or_default();
    let full = t.name.clone().unwrap_or_default();
    let (scheme, name, port) = split_name(&full);
    let https = scheme == Some("https");
    let up = match t.def.plural {
        "pods" => {
            let p = pod(st, &ns, name)?;
            let ip: Ipv4Addr = p
                .pointer("/status/podIP")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| ApiError::unavailable(503, format!("address not allowed: pod {name} has no IP")))?;
            let port = match port {
                Some(pn) => pn
                    .parse::<u16>()
                    .ok()
                    .or_else(|| named_container_port(&p, pn))
                    .ok_or_else(|| ApiError::bad_request(format!("invalid port {pn:?} for pod {name}")))?,
                // strategy.go ResourceLocation: no port names the first port a container
                // declares; with none, the URL has no port (80, or 443 for https).
                None => first_container_port(&p).unwrap_or(if https { 443 } else { 80 }),
            };
            Upstream {
                addr: SocketAddr::new(ip.into(), port),
                https,
            }
        }
        "services" => service_endpoint(st, &ns, name, port, https)?,
        "nodes" => {
            let mut up = kubelet(st, name)?;
            if let Some(p) = port.and_then(|p| p.parse::<u16>().ok()) {
                up.addr.set_port(p);
                up.https = https;
            }
            up
        }
        other => return Err(ApiError::no_route(&format!("{other}/{full}/proxy"))),
    };
    // upgradeaware.go: a GET or HEAD with an empty path is redirected to the path with a
    // trailing slash (the "hack for https://issue.k8s.io/4958"), query kept; other methods are
    // forwarded to `/`.
    if let Some(location) = empty_path_redirect(req.method(), req.uri().path(), &t.rest, raw_query) {
        return Response::builder()
            .status(StatusCode::MOVED_PERMANENTLY)
            .header(axum::http::header::LOCATION, location)
            .body(Body::empty())
            .map_err(|e| ApiError::internal(format!("building the redirect: {e}")));
    }
    let mut path = if t.rest.is_empty() {
        "/".to_string()
    } else {
        t.rest.clone()
    };
    if req.uri().path().ends_with('/') && !path.ends_with('/') {
        path.push('/');
    }
    if let Some(q) = raw_query.filter(|q| !q.is_empty()) {
        path = format!("{path}?{q}");
    }
    let (parts, body) = req.into_parts();
    let resp = forward(up, parts.method, &path, &parts.headers, body).await?;
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        return Err(ApiError::bad_request("upgrades through the proxy are not supported"));
    }
    Ok(resp)
}

/// Where upstream's proxy handler redirects a request: GET and HEAD of a proxy path with no
/// path after `/proxy` (not even `/`) go to the same path plus `/`.
fn empty_path_redirect(method: &Method, uri_path: &str, rest: &str, raw_query: Option<&str>) -> Option<String> {
    if !(*method == Method::GET || *method == Method::HEAD) || !rest.is_empty() || uri_path.ends_with('/') {
        return None;
    }
    let query = raw_query
        .filter(|q| !q.is_empty())
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    Some(format!("{uri_path}/{query}"))
}

/// The first `containerPort` of the first container that declares ports.
fn first_container_port(p: &Value) -> Option<u16> {
    p.pointer("/spec/containers")?
        .as_array()?
        .iter()
        .filter_map(|c| c["ports"].as_array())
        .find(|ports| !ports.is_empty())
        .and_then(|ports| ports[0]["containerPort"].as_u64())
        .and_then(|n| u16::try_from(n).ok())
}

fn named_container_port(p: &Value, name: &str) -> Option<u16> {
    p.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|c| c["ports"].as_array().cloned().unwrap_or_default())
        .find(|port| port["name"] == name)
        .and_then(|port| port["containerPort"].as_u64())
        .and_then(|n| u16::try_from(n).ok())
}

/// A ready endpoint of a Service for the named (or only) port, from its EndpointSlices, else
/// its Endpoints object.
pub(crate) fn service_endpoint(
    st: &AppState,
    ns: &str,
    name: &str,
    port: Option<&str>,
    https: bool,
) -> ApiResult<Upstream> {
    let svc = st
        .store
        .get("/services", ns, name)
        .ok_or_else(|| ApiError::not_found("", "services", name))?;
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let sp = match port {
        Some(p) => ports
            .iter()
            .find(|x| x["name"] == p || x["port"].as_u64().map(|n| n.to_string()).as_deref() == Some(p)),
        None => ports.first(),
    }
    .cloned()
    .ok_or_else(|| ApiError::unavailable(503, format!("no endpoints available for service {name:?}")))?;
    let port_name = sp["name"].as_str().unwrap_or_default().to_string();
    let none = || ApiError::unavailable(503, format!("no endpoints available for service {name:?}"));
    let (slices, _) = st.store.list("discovery.k8s.io/endpointslices", Some(ns));
    for s in slices.iter().filter(|s| {
        s.pointer("/metadata/labels/kubernetes.io~1service-name")
            .and_then(Value::as_str)
            == Some(name)
    }) {
        let Some(pn) = s["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| p["port"].as_u64())
        else {
            continue;
        };
        for e in s["endpoints"].as_array().into_iter().flatten() {
            if e.pointer("/conditions/ready").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            if let Some(ip) = e["addresses"]
                .as_array()
                .and_then(|a| a.first())
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<IpAddr>().ok())
            {
                return Ok(Upstream {
                    addr: SocketAddr::new(ip, u16::try_from(pn).map_err(|_| none())?),
                    https,
                });
            }
        }
    }
    if let Some(ep) = st.store.get("/endpoints", ns, name) {
        for sub in ep["subsets"].as_array().into_iter().flatten() {
            let pn = sub["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
                .and_then(|p| p["port"].as_u64());
            let ip = sub["addresses"]
                .as_array()
                .and_then(|a| a.first())
                .and_then(|a| a["ip"].as_str())
                .and_then(|s| s.parse::<IpAddr>().ok());
            if let (Some(pn), Some(ip)) = (pn, ip) {
                return Ok(Upstream {
                    addr: SocketAddr::new(ip, u16::try_from(pn).map_err(|_| none())?),
                    https,
                });
            }
        }
    }
    Err(none())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redirects_get_and_head_of_an_empty_proxy_path() {
        let p = "/api/v1/namespaces/ns/pods/agnhost/proxy";
        assert_eq!(
            empty_path_redirect(&Method::GET, p, "", Some("method=GET")).as_deref(),
            Some("/api/v1/namespaces/ns/pods/agnhost/proxy/?method=GET")
        );
        assert_eq!(
            empty_path_redirect(&Method::HEAD, p, "", None).as_deref(),
            Some("/api/v1/namespaces/ns/pods/agnhost/proxy/")
        );
        assert_eq!(empty_path_redirect(&Method::POST, p, "", None), None);
        assert_eq!(empty_path_redirect(&Method::GET, &format!("{p}/"), "", None), None);
        assert_eq!(empty_path_redirect(&Method::GET, &format!("{p}/x"), "x", None), None);
    }

    #[test]
    fn container_choice_like_upstream() {
        let p = json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let e = container(&p, None).unwrap_err();
        assert_eq!(
            e.message,
            "a container name must be specified for pod web, choose one of: [a b]"
        );
        assert_eq!(container(&p, Some("b")).unwrap(), "b");
        assert_eq!(container(&p, Some("z")).unwrap_err().code, 400);
        let one = json!({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "only"}]}});
        assert_eq!(container(&one, None).unwrap(), "only");
    }

    #[test]
    fn a_pod_proxy_without_port_uses_the_first_declared_container_port() {
        let p = json!({"spec": {"containers": [{"name": "a"}, {"name": "b", "ports": [{"containerPort": 8080}, {"containerPort": 9090}]}]}});
        assert_eq!(first_container_port(&p), Some(8080));
        let none = json!({"spec": {"containers": [{"name": "a", "ports": []}]}});
        assert_eq!(first_container_port(&none), None);
    }

    #[test]
    fn proxy_names_split() {
        assert_eq!(split_name("web"), (None, "web", None));
        assert_eq!(split_name("web:8080"), (None, "web", Some("8080")));
        assert_eq!(split_name("https:web:443"), (Some("https"), "web", Some("443")));
    }
}
