//! A minimal HTTP/1.1 client over the loopback-only [`Dialer`], used by emulated programs
//! (`curl`, `wget`, netexec `/dial`, `Invoke-WebRequest`), probes and lifecycle hooks.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

use crate::node::net::{Dialer, NetError, Source};

/// Errors of an HTTP request, worded like Go's net/http client errors.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The connection could not be opened.
    #[error("Get \"{url}\": dial tcp {addr}")]
    Dial {
        /// The URL.
        url: String,
        /// The address dialled.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: NetError,
    },
    /// The exchange failed after connecting.
    #[error("Get \"{url}\": request failed")]
    Exchange {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: hyper::Error,
    },
    /// The whole request took too long.
    #[error("Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)")]
    Timeout {
        /// The URL.
        url: String,
    },
    /// The request could not be built (bad path).
    #[error("Get \"{url}\": invalid request")]
    Build {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: http::Error,
    },
}

/// A response: status and body.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: Bytes,
}

/// GETs `path` (with query) from `addr`, sending `host` as the Host header.
pub async fn get(
    dialer: &Dialer,
    src: &Source,
    addr: SocketAddr,
    host: &str,
    path: &str,
    headers: &[(String, String)],
    timeout: Duration,
) -> Result<Response, HttpError> {
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let url = format!("http://{host}{path}");
    let fut = async {
        let stream = dialer.tcp(src, addr).await.map_err(|source| HttpError::Dial {
            url: url.clone(),
            addr,
            source,
        })?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|source| HttpError::Exchange {
                url: url.clone(),
                source,
            })?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = http::Request::builder()
            .method("GET")
            .uri(&path)
            .header("Host", host)
            .header("User-Agent", "crossconf-sim");
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req.body(Empty::<Bytes>::new()).map_err(|source| HttpError::Build {
            url: url.clone(),
            source,
        })?;
        let resp = sender.send_request(req).await.map_err(|source| HttpError::Exchange {
            url: url.clone(),
            source,
        })?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|source| HttpError::Exchange {
                url: url.clone(),
                source,
            })?
            .to_bytes();
        Ok(Response { status, body })
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(HttpError::Timeout { url }),
    }
}
