//! The kubelet's HTTPS API on `nodeIP:10250` (self-signed certificate): `/healthz`, `/configz`,
//! `/stats/summary`, `/metrics/resource`, `/pods`, `/containerLogs/{ns}/{pod}/{container}` and
//! `/exec/{ns}/{pod}/{container}` as a websocket speaking the Kubernetes channel protocol
//! (`v5.channel.k8s.io`, `v4.channel.k8s.io`): stream 1 stdout, 2 stderr, 3 a Status JSON with
//! the exit code, as the real kubelet answers. The API server proxies `pods/log`, `pods/exec`
//! and `nodes/{n}/proxy/...` here.
//!
//! [`router`] builds the app so tests can call it without a socket.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use bytes::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rcgen::{CertificateParams, DnType, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio::net::TcpListener;
use tracing::{debug, info};

use crate::addr::KUBELET_PORT;
use crate::node::kubelet::{Kubelet, log_text};
use crate::node::portforward;
use crate::node::remotecommand::{self, Outcome};
use crate::node::stats;

/// Errors starting the kubelet server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The node address could not be bound.
    #[error("bind kubelet server on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The self-signed certificate could not be made.
    #[error("generate kubelet serving certificate")]
    Certificate(#[source] rcgen::Error),
    /// The TLS configuration was rejected.
    #[error("configure kubelet tls")]
    Tls(#[source] rustls::Error),
}

fn tls_config(ip: std::net::Ipv4Addr, node: &str) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    crate::install_crypto_provider();
    let key = KeyPair::generate().map_err(ServerError::Certificate)?;
    let mut params = CertificateParams::new(vec![node.to_string()]).map_err(ServerError::Certificate)?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{node}@kubelet"));
    params.subject_alt_names.push(SanType::IpAddress(ip.into()));
    let cert = params.self_signed(&key).map_err(ServerError::Certificate)?;
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut cfg = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(ServerError::Tls)?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Binds `nodeIP:10250` and serves [`router`] over TLS until the kubelet stops.
pub(crate) async fn start(kl: Arc<Kubelet>) -> Result<SocketAddr, ServerError> {
    let ip = kl.node_ip();
    let addr = SocketAddr::from((ip, KUBELET_PORT));
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_config(ip, &kl.cfg.name)?);
    let app = router(kl.clone());
    let cancel = kl.cancel.clone();
    let node = kl.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = tokio::select! {
                _ = cancel.cancelled() => return,
                r = listener.accept() => match r { Ok(x) => x, Err(e) => { debug!(error = %e, "kubelet accept failed"); continue; } },
            };
            // A lost node (`node-lost`) answers nobody: packets to a dead host go unanswered,
            // so the API server's logs, exec and proxy requests hang until its own timeouts
            // (the kubelet client's 10 s TLS handshake timeout) rather than failing at once.
            if node.health.is_lost() {
                let cancel = cancel.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        () = cancel.cancelled() => {}
                        () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
                    }
                    drop(tcp);
                });
                continue;
            }
            let (acceptor, app, cancel) = (acceptor.clone(), app.clone(), cancel.clone());
            tokio::spawn(async move {
                let tls = match acceptor.accept(tcp).await {
                    Ok(t) => t,
                    Err(e) => {
                        debug!(%peer, error = %e, "kubelet tls handshake failed");
                        return;
                    }
                };
                let builder = auto::Builder::new(TokioExecutor::new());
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(app));
                tokio::select! {
                    r = conn => if let Err(e) = r { debug!(%peer, error = %e, "kubelet connection ended"); },
                    _ = cancel.cancelled() => {}
                }
            });
        }
    });
    info!(%addr, node = %kl.cfg.name, "kubelet server listening");
    Ok(addr)
}

/// The kubelet HTTP app.
pub(crate) fn router(kl: Arc<Kubelet>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/configz", get(configz))
        .route(
            "/metrics",
            get(|State(kl): State<Arc<Kubelet>>| async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    kl.metrics.render(kl.cfg.os == crossconf_model::os::Os::Windows),
                )
            }),
        )
        .route(
            "/metrics/resource",
            get(|State(kl): State<Arc<Kubelet>>| async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    super::resource_metrics::render(&stats::summary(&kl)),
                )
            }),
        )
        .route(
            "/stats/summary",
            get(|State(kl): State<Arc<Kubelet>>| async move { axum::Json(stats::summary(&kl)) }),
        )
        .route("/pods", get(pods))
        .route("/containerLogs/{ns}/{pod}/{container}", get(container_logs))
        .route("/exec/{ns}/{pod}/{container}", any(exec))
        .route("/attach/{ns}/{pod}/{container}", any(attach))
        .route("/portForward/{ns}/{pod}", any(port_forward))
        .with_state(kl)
}

async fn configz(State(kl): State<Arc<Kubelet>>) -> axum::Json<serde_json::Value> {
    let r = &kl.cfg.reserved;
    axum::Json(json!({
        "kubeletconfig": {
            "kind": "KubeletConfiguration",
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "port": KUBELET_PORT,
            "maxPods": kl.cfg.capacity.pods,
            "kubeReserved": {"cpu": format!("{}m", r.kube_cpu_millis), "memory": format!("{}Mi", r.kube_memory_bytes >> 20)},
            "systemReserved": {"cpu": format!("{}m", r.system_cpu_millis), "memory": format!("{}Mi", r.system_memory_bytes >> 20)},
            "evictionHard": {"memory.available": format!("{}Mi", r.eviction_memory_bytes >> 20), "nodefs.available": "10%"},
            "evictionPressureTransitionPeriod": go_secs(kl.cfg.profile.pressure_transition()),
            "enforceNodeAllocatable": ["pods"],
            "clusterDNS": [kl.cfg.block.dns_service().to_string()],
            "clusterDomain": crate::node::dns::CLUSTER_DOMAIN,
            "shutdownGracePeriod": go_secs(kl.cfg.shutdown.grace),
            "shutdownGracePeriodCriticalPods": go_secs(kl.cfg.shutdown.critical),
            "featureGates": feature_gates(&kl),
            "containerRuntimeEndpoint": if kl.cfg.os == crossconf_model::os::Os::Windows { "npipe:////./pipe/containerd-containerd" } else { "unix:///run/containerd/containerd.sock" },
        }
    }))
}

/// A duration as the kubelet's configz prints a `metav1.Duration` ("10s", "0s").
fn go_secs(d: std::time::Duration) -> String {
    format!("{}s", d.as_secs())
}

/// The kubelet's `featureGates` as configured: the gates set on this node's kubelet.
fn feature_gates(kl: &Kubelet) -> serde_json::Value {
    let mut gates = serde_json::Map::new();
    if kl.cfg.shutdown.gate {
        gates.insert(crate::gates::WINDOWS_GRACEFUL_NODE_SHUTDOWN.into(), true.into());
    }
    gates.into()
}

async fn pods(State(kl): State<Arc<Kubelet>>) -> axum::Json<serde_json::Value> {
    axum::Json(json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": kl.pod_list()}))
}

fn query_pairs(q: &Option<String>) -> Vec<(String, String)> {
    form_urlencoded::parse(q.as_deref().unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn flag(pairs: &[(String, String)], k: &str) -> bool {
    pairs
        .iter()
        .any(|(key, v)| key == k && (v == "true" || v == "1" || v.is_empty()))
}

fn value<'a>(pairs: &'a [(String, String)], k: &str) -> Option<&'a str> {
    pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
}

async fn container_logs(
    State(kl): State<Arc<Kubelet>>,
    Path((ns, pod, container)): Path<(String, String, String)>,
    RawQuery(q): RawQuery,
) -> Response {
    let pairs = query_pairs(&q);
    let previous = flag(&pairs, "previous");
    let Some(log) = kl.logs(&ns, &pod, &container, previous) else {
        let msg = if previous {
            format!("previous terminated container \"{container}\" in pod \"{pod}\" not found")
        } else {
            format!("container \"{container}\" in pod \"{pod}\" is not available")
        };
        return (StatusCode::BAD_REQUEST, msg).into_response();
    };
    let timestamps = flag(&pairs, "timestamps");
    let follow = flag(&pairs, "follow");
    let tail = value(&pairs, "tailLines").and_then(|v| v.parse::<usize>().ok());
    let since = since_cutoff(&pairs, jiff::Timestamp::now());
    let limit = value(&pairs, "limitBytes").and_then(|v| v.parse::<usize>().ok());
    let mut lines = log.since(0);
    if let Some(t) = since {
        lines.retain(|l| l.ts >= t);
    }
    if let Some(n) = tail {
        let skip = lines.len().saturating_sub(n);
        lines.drain(..skip);
    }
    let mut first = log_text(&lines, timestamps);
    if let Some(l) = limit {
        first.truncate(l);
    }
    if !follow || log.is_closed() {
        return (StatusCode::OK, first).into_response();
    }
    let start = log.len();
    let rx = log.subscribe();
    let stream = futures::stream::unfold(
        (Some(first), start, rx, log),
        move |(first, idx, mut rx, log)| async move {
            if let Some(f) = first {
                return Some((Ok::<Bytes, std::io::Error>(Bytes::from(f)), (None, idx, rx, log)));
            }
            loop {
                let new = log.since(idx);
                if !new.is_empty() {
                    let n = idx + new.len();
                    return Some((Ok(Bytes::from(log_text(&new, timestamps))), (None, n, rx, log)));
                }
                if log.is_closed() {
                    return None;
                }
                match tokio::time::timeout(Duration::from_secs(1), rx.recv()).await {
                    Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => return None,
                    _ => continue,
                }
            }
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header("Content-Type", "text/plain")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The earliest log line wanted: `sinceSeconds` before `now`, or `sinceTime` (RFC 3339), as
/// the kubelet's `containerLogs` reads them.
fn since_cutoff(pairs: &[(String, String)], now: jiff::Timestamp) -> Option<jiff::Timestamp> {
    if let Some(s) = value(pairs, "sinceSeconds").and_then(|v| v.parse::<i64>().ok()) {
        return Some(now - jiff::SignedDuration::from_secs(s));
    }
    value(pairs, "sinceTime").and_then(|v| v.parse::<jiff::Timestamp>().ok())
}

/// The stream options of an exec or attach request.
fn streams(pairs: &[(String, String)]) -> remotecommand::Streams {
    remotecommand::Streams {
        stdin: flag(pairs, "stdin"),
        tty: flag(pairs, "tty"),
    }
}

async fn exec(
    State(kl): State<Arc<Kubelet>>,
    Path((ns, pod, container)): Path<(String, String, String)>,
    RawQuery(q): RawQuery,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let pairs = query_pairs(&q);
    let argv: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    let Ok(ws) = ws else {
        return (
            StatusCode::BAD_REQUEST,
            "exec needs a websocket upgrade (v5.channel.k8s.io or v4.channel.k8s.io); SPDY is not supported",
        )
            .into_response();
    };
    if argv.is_empty() {
        return (StatusCode::BAD_REQUEST, "you must specify at least 1 command").into_response();
    }
    let streams = streams(&pairs);
    let ws = ws.protocols(remotecommand::PROTOCOLS);
    let framing = remotecommand::Framing::of(ws.selected_protocol().and_then(|p| p.to_str().ok()));
    ws.on_upgrade(move |socket| async move {
        let (stdin_w, stdin) = remotecommand::exec_stdin(streams);
        let session = remotecommand::open(socket, framing, streams, stdin_w);
        let out = session.out.output(streams.tty);
        let t0 = std::time::Instant::now();
        debug!(%ns, %pod, %container, ?argv, "exec started");
        let outcome = match kl.exec(&ns, &pod, &container, argv.clone(), stdin, out).await {
            Ok(code) => Outcome::Exited(code),
            Err(e) => Outcome::Failed(e.to_string()),
        };
        debug!(%ns, %pod, ?argv, ?outcome, took = ?t0.elapsed(), "exec ended");
        session.finish(outcome, &argv).await;
    })
}

async fn attach(
    State(kl): State<Arc<Kubelet>>,
    Path((ns, pod, container)): Path<(String, String, String)>,
    RawQuery(q): RawQuery,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let pairs = query_pairs(&q);
    let Ok(ws) = ws else {
        return (
            StatusCode::BAD_REQUEST,
            "attach needs a websocket upgrade (v5.channel.k8s.io or v4.channel.k8s.io); SPDY is not supported",
        )
            .into_response();
    };
    let streams = streams(&pairs);
    let ws = ws.protocols(remotecommand::PROTOCOLS);
    let framing = remotecommand::Framing::of(ws.selected_protocol().and_then(|p| p.to_str().ok()));
    ws.on_upgrade(move |socket| attach_session(kl, socket, framing, streams, ns, pod, container))
}

/// Streams a running container's output from now on and feeds its stdin, until the container
/// ends or the client goes; with `stdinOnce` the client's end of input closes the container's.
async fn attach_session(
    kl: Arc<Kubelet>,
    socket: WebSocket,
    framing: remotecommand::Framing,
    streams: remotecommand::Streams,
    ns: String,
    pod: String,
    container: String,
) {
    let mut attached = match kl.attach(&ns, &pod, &container) {
        Ok(a) => a,
        Err(e) => {
            let session = remotecommand::open(socket, framing, streams, None);
            session.finish(Outcome::Failed(e.to_string()), &[]).await;
            return;
        }
    };
    // Only the session holds this handle: the container keeps its own, which `stdinOnce`
    // drops below, so the process reads end of file when the client closes its input.
    let stdin = attached.stdin.take().filter(|_| streams.stdin);
    let mut session = remotecommand::open(socket, framing, streams, stdin);
    let out = session.out.output(streams.tty && attached.tty);
    let logs = attached.logs;
    let mut notify = logs.subscribe();
    let mut idx = logs.len();
    let mut input_open = true;
    let mut gone = session.gone();
    loop {
        let new = logs.since(idx);
        idx += new.len();
        for l in &new {
            out.write(l.stream, &l.data);
        }
        if logs.is_closed() {
            break;
        }
        tokio::select! {
            r = notify.recv() => if let Err(tokio::sync::broadcast::error::RecvError::Closed) = r { break },
            r = &mut session.input_done, if input_open => {
                input_open = false;
                if streams.stdin && attached.stdin_once {
                    kl.close_stdin_once(&ns, &pod, &container);
                }
                if r.is_err() {
                    break;
                }
            }
            _ = gone.wait_for(|g| *g) => break,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    session.finish(Outcome::Done, &[]).await;
}

/// `portForward/{ns}/{pod}`: a websocket (`?ports=`), or a SPDY/3.1 upgrade negotiating
/// `portforward.k8s.io`.
async fn port_forward(
    State(kl): State<Arc<Kubelet>>,
    Path((ns, pod)): Path<(String, String)>,
    RawQuery(q): RawQuery,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
    mut req: axum::extract::Request,
) -> Response {
    let target = match kl.port_forward_target(&ns, &pod) {
        Ok(t) => t,
        Err(e) => return (StatusCode::NOT_FOUND, e.to_string()).into_response(),
    };
    if let Ok(ws) = ws {
        let pairs = query_pairs(&q);
        let values: Vec<String> = pairs
            .iter()
            .filter(|(k, _)| k == "ports")
            .map(|(_, v)| v.clone())
            .collect();
        let ports = match portforward::parse_ports(&values) {
            Ok(p) => p,
            Err(e) => return (StatusCode::BAD_REQUEST, e).into_response(),
        };
        let ws = ws.protocols(["v4.channel.k8s.io", "v4.base64.channel.k8s.io"]);
        let framing = remotecommand::Framing::of(ws.selected_protocol().and_then(|p| p.to_str().ok()));
        return ws.on_upgrade(move |socket| portforward::websocket(socket, framing, target, ports));
    }
    let headers = req.headers();
    let upgrade = headers.get("upgrade").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !upgrade.eq_ignore_ascii_case(SPDY_31) {
        return (StatusCode::BAD_REQUEST, "Upgrade request required").into_response();
    }
    let offered: Vec<String> = headers
        .get_all("x-stream-protocol-version")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_string()))
        .collect();
    if !offered.iter().any(|p| p == PORT_FORWARD_PROTOCOL) {
        return (
            StatusCode::FORBIDDEN,
            format!(
                "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server accepts [\"{PORT_FORWARD_PROTOCOL}\"]"
            ),
        )
            .into_response();
    }
    let on = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match on.await {
            Ok(up) => portforward::spdy(TokioIo::new(up), target).await,
            Err(e) => debug!(error = %e, "port-forward upgrade failed"),
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("Connection", "Upgrade")
        .header("Upgrade", SPDY_31)
        .header("X-Stream-Protocol-Version", PORT_FORWARD_PROTOCOL)
        .body(Body::empty())
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The SPDY upgrade token.
const SPDY_31: &str = "SPDY/3.1";
/// The port-forward stream protocol over SPDY.
const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_cutoffs() {
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let at = |q: &str| since_cutoff(&query_pairs(&Some(q.into())), now).map(|t| t.to_string());
        assert_eq!(at("sinceSeconds=60").as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(
            at("sinceTime=2025-12-31T23:59:30Z").as_deref(),
            Some("2025-12-31T23:59:30Z")
        );
        assert_eq!(at("follow=true"), None);
    }

    #[test]
    fn stream_flags() {
        let s = streams(&query_pairs(&Some("stdin=true&tty=1&stdout=true".into())));
        assert!(s.stdin && s.tty);
        let s = streams(&query_pairs(&Some("stdout=true".into())));
        assert!(!s.stdin && !s.tty);
    }
}
