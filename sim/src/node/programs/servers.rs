//! Server building blocks for emulated programs (an HTTP server and a UDP server bound to the
//! pod's own address) and the simple server images: pause, nginx and httpd.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::ConnectInfo;
use axum::{Extension, Router};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, UdpSocket};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::Ctx;

/// nginx's default page (the e2e nginx image serves it on port 80).
pub const NGINX_PAGE: &str = "<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n</head>\n<body>\n<h1>Welcome to nginx!</h1>\n</body>\n</html>\n";
/// Apache httpd's default page.
pub const HTTPD_PAGE: &str = "<html><body><h1>It works!</h1></body></html>\n";

/// Binds a TCP listener on `ip:port` as Go's `net.Listen` does on Linux: with `SO_REUSEADDR`,
/// so a restarted container (or a new pod on a reused address) can listen again while the old
/// one's connections sit in TIME_WAIT.
pub fn listen(ip: Ipv4Addr, port: u16) -> std::io::Result<TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::from((ip, port)))?;
    socket.listen(1024)
}

/// Binds `port` on the pod IP and serves `router` until `cancel`.
///
/// The error is the bind error, printed by the caller as Go programs print it.
pub async fn serve_http(ip: Ipv4Addr, port: u16, router: Router, cancel: CancellationToken) -> std::io::Result<()> {
    let listener = listen(ip, port)?;
    tokio::spawn(async move {
        let svc = router.into_make_service_with_connect_info::<SocketAddr>();
        let r = axum::serve(listener, svc)
            .with_graceful_shutdown(async move { cancel.cancelled().await })
            .await;
        if let Err(e) = r {
            debug!(error = %e, "http server ended");
        }
    });
    Ok(())
}

/// The serving configuration from PEM files (the certificate file may carry the chain), as
/// Go's `tls.LoadX509KeyPair` reads them; the error is worded as Go's.
pub fn tls_from_pem(cert: &[u8], key: &[u8]) -> Result<Arc<rustls::ServerConfig>, String> {
    crate::install_crypto_provider();
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("tls: failed to find any PEM data in certificate input: {e}"))?;
    if chain.is_empty() {
        return Err("tls: failed to find any PEM data in certificate input".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| format!("tls: failed to find any PEM data in key input: {e}"))?;
    let provider = rustls::crypto::ring::default_provider();
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("tls: {e}"))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Serves `router` over TLS on `listener` until `cancel`, as Go's `ListenAndServeTLS`: a
/// client that fails the handshake (one speaking plain HTTP) is dropped and never reaches a
/// handler. Each request carries the peer as [`ConnectInfo`].
pub fn serve_tls(listener: TcpListener, router: Router, config: Arc<rustls::ServerConfig>, cancel: CancellationToken) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let (tcp, peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
                () = cancel.cancelled() => return,
                r = listener.accept() => match r { Ok(x) => x, Err(_) => continue },
            };
            let (acceptor, app, cancel) = (acceptor.clone(), router.clone(), cancel.clone());
            tokio::spawn(async move {
                let serve = async {
                    let tls = match acceptor.accept(tcp).await {
                        Ok(t) => t,
                        Err(e) => {
                            // Go's server logs "http: TLS handshake error from PEER: ..."
                            debug!(%peer, error = %e, "tls handshake failed");
                            return;
                        }
                    };
                    let app = app.layer(Extension(ConnectInfo(peer)));
                    let service = TowerToHyperService::new(app);
                    let builder = auto::Builder::new(TokioExecutor::new());
                    if let Err(e) = builder.serve_connection(TokioIo::new(tls), service).await {
                        debug!(%peer, error = %e, "tls connection ended with an error");
                    }
                };
                tokio::select! {
                    () = serve => {}
                    () = cancel.cancelled() => {}
                }
            });
        }
    });
}

/// Binds a UDP socket on the pod IP and answers each datagram with `answer(text, peer)` until
/// `cancel`; `None` sends nothing back.
pub async fn serve_udp<F>(ip: Ipv4Addr, port: u16, cancel: CancellationToken, answer: F) -> std::io::Result<()>
where
    F: Fn(&str, SocketAddr) -> Option<String> + Send + Sync + 'static,
{
    let sock = UdpSocket::bind((ip, port)).await?;
    tokio::spawn(async move {
        let mut buf = vec![0u8; 2048];
        loop {
            let (n, peer) = tokio::select! {
                _ = cancel.cancelled() => return,
                r = sock.recv_from(&mut buf) => match r { Ok(x) => x, Err(_) => continue },
            };
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            if let Some(reply) = answer(&text, peer) {
                let _ = sock.send_to(reply.as_bytes(), peer).await;
            }
        }
    });
    Ok(())
}

/// The pause program: blocks until stopped, then exits 0 (it handles SIGTERM).
pub async fn pause(ctx: Ctx) -> i32 {
    ctx.cancel.cancelled().await;
    0
}

/// nginx/httpd: serve a static page on port 80 of the pod IP.
pub async fn static_web(ctx: Ctx, page: &'static str) -> i32 {
    let router = Router::new().fallback(move || async move { axum::response::Html(page) });
    if let Err(e) = serve_http(ctx.pod.ip, 80, router, ctx.cancel.clone()).await {
        ctx.out.err_line(&format!("bind() to 0.0.0.0:80 failed ({e})"));
        return 1;
    }
    ctx.cancel.cancelled().await;
    0
}

/// The e2e resource-consumer: an HTTP server (`--port`, 8080) whose `/ConsumeCPU?millicores=N&durationSec=S`
/// and `/ConsumeMem?megabytes=N&durationSec=S` make the container use that much CPU or memory
/// for that long (the stats summary shows it, capped by the CPU limit), as upstream's does.
pub async fn resource_consumer(ctx: Ctx, args: Vec<String>) -> i32 {
    use axum::extract::{Query, State};
    use std::collections::HashMap;
    let port = args
        .iter()
        .find_map(|a| a.strip_prefix("--port=").or_else(|| a.strip_prefix("-port=")))
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(8080);
    fn num(q: &HashMap<String, String>, k: &str) -> Option<u64> {
        q.get(k).and_then(|v| v.parse::<u64>().ok())
    }
    let router = Router::new()
        .route(
            "/ConsumeCPU",
            axum::routing::any(
                |State(c): State<Ctx>, Query(q): Query<HashMap<String, String>>| async move {
                    let (Some(m), Some(d)) = (num(&q, "millicores"), num(&q, "durationSec")) else {
                        return (
                            axum::http::StatusCode::BAD_REQUEST,
                            "Incorrect parameters: millicores and durationSec are required\n".to_string(),
                        );
                    };
                    let guard = c.usage.busy(m);
                    let stop = c.cancel.clone();
                    tokio::spawn(async move {
                        tokio::select! {
                            _ = stop.cancelled() => {}
                            _ = tokio::time::sleep(std::time::Duration::from_secs(d)) => {}
                        }
                        drop(guard);
                    });
                    (
                        axum::http::StatusCode::OK,
                        format!("ConsumeCPU\n{m} millicores\n{d} durationSec\n"),
                    )
                },
            ),
        )
        .route(
            "/ConsumeMem",
            axum::routing::any(
                |State(c): State<Ctx>, Query(q): Query<HashMap<String, String>>| async move {
                    let (Some(mb), Some(d)) = (num(&q, "megabytes"), num(&q, "durationSec")) else {
                        return (
                            axum::http::StatusCode::BAD_REQUEST,
                            "Incorrect parameters: megabytes and durationSec are required\n".to_string(),
                        );
                    };
                    let bytes = mb << 20;
                    c.usage
                        .extra_memory_bytes
                        .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
                    let usage = c.usage.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(std::time::Duration::from_secs(d)).await;
                        usage
                            .extra_memory_bytes
                            .fetch_sub(bytes, std::sync::atomic::Ordering::Relaxed);
                    });
                    (
                        axum::http::StatusCode::OK,
                        format!("ConsumeMem\n{mb} megabytes\n{d} durationSec\n"),
                    )
                },
            ),
        )
        // Upstream resource-consumer's handleGetCurrentStatus writes exactly this (a warning line,
        // then the endpoint's name): clients probing the endpoint see what they would see for real.
        .route(
            "/GetCurrentStatus",
            axum::routing::get(|| async { "Warning: not implemented!\nGetCurrentStatus" }),
        )
        .with_state(ctx.clone());
    if let Err(e) = serve_http(ctx.pod.ip, port, router, ctx.cancel.clone()).await {
        ctx.out.err_line(&format!("listen tcp :{port}: bind: {e}"));
        return 1;
    }
    super::until_stopped(&ctx).await
}
