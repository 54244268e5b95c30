//! Server building blocks for emulated programs (an HTTP server and a UDP server bound to the
//! pod's own address) and the simple server images: pause, nginx and httpd.

use std::net::{Ipv4Addr, SocketAddr};

use axum::Router;
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
