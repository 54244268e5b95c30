//! The emulated outside world: one host on `addr.outside()` that stands for everything beyond
//! the cluster (egress cases, `MODELLED_EXTERNAL_IPS`, [`crate::addr::EXTERNAL_NAME`]).
//!
//! It serves HTTP on [`HTTP_PORTS`] (`/hostname` and `/` answer [`HOSTNAME`], `/echo?msg=`,
//! `/clientip`), a TCP echo and a UDP echo on [`ECHO_PORT`], and a netexec-style UDP server
//! (`hostname`, `echo <msg>`, `clientip`) on [`UDP_PORT`] and on every HTTP port: the
//! `--external-endpoint HOST:PORT` the simulator hands the egress cases is one endpoint for
//! both protocols, as the TCP and UDP egress cases expect.

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::Router;
use axum::extract::{ConnectInfo, Query};
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::addr::AddressBlock;
use crate::node::programs::servers::{serve_http, serve_udp};

/// What the outside host calls itself.
pub const HOSTNAME: &str = "outside";
/// HTTP ports of the outside host.
pub const HTTP_PORTS: [u16; 2] = [80, 8080];
/// TCP and UDP echo port (RFC 862).
pub const ECHO_PORT: u16 = 7;
/// netexec-style UDP port.
pub const UDP_PORT: u16 = 8081;

/// Errors starting the outside host.
#[derive(Debug, thiserror::Error)]
#[error("bind outside host port {port}")]
pub struct OutsideError {
    /// The port.
    pub port: u16,
    /// The OS error.
    #[source]
    pub source: std::io::Error,
}

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { HOSTNAME }))
        .route("/hostname", get(|| async { HOSTNAME }))
        .route(
            "/clientip",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
        )
        .route(
            "/echo",
            get(|Query(q): Query<HashMap<String, String>>| async move { q.get("msg").cloned().unwrap_or_default() }),
        )
}

/// Starts the outside host of `block` until `cancel`.
pub async fn start(block: AddressBlock, cancel: CancellationToken) -> Result<(), OutsideError> {
    let ip = block.outside();
    for port in HTTP_PORTS {
        serve_http(ip, port, app(), cancel.clone())
            .await
            .map_err(|source| OutsideError { port, source })?;
    }
    serve_udp(ip, ECHO_PORT, cancel.clone(), |t, _| Some(t.to_string()))
        .await
        .map_err(|source| OutsideError {
            port: ECHO_PORT,
            source,
        })?;
    for port in std::iter::once(UDP_PORT).chain(HTTP_PORTS) {
        serve_udp(ip, port, cancel.clone(), |t, peer| {
            let t = t.trim();
            match t.to_ascii_lowercase().as_str() {
                "hostname" => Some(HOSTNAME.to_string()),
                "clientip" => Some(peer.to_string()),
                _ => t
                    .get(..5)
                    .filter(|p| p.eq_ignore_ascii_case("echo "))
                    .map(|_| t[5..].to_string()),
            }
        })
        .await
        .map_err(|source| OutsideError { port, source })?;
    }
    let echo = TcpListener::bind((ip, ECHO_PORT))
        .await
        .map_err(|source| OutsideError {
            port: ECHO_PORT,
            source,
        })?;
    tokio::spawn(async move {
        loop {
            let (mut c, _) = tokio::select! {
                _ = cancel.cancelled() => return,
                r = echo.accept() => match r { Ok(x) => x, Err(_) => continue },
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while let Ok(n) = c.read(&mut buf).await {
                    if n == 0 || c.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok(())
}
