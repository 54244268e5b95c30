//! A minimal HTTP/1.1 client (HTTPS too) over the loopback-only [`Dialer`], used by emulated
//! programs (`curl`, `wget`, netexec `/dial`, `Invoke-WebRequest`), probes and lifecycle hooks.

use std::net::SocketAddr;
use std::time::Duration;

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Empty, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;

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
    /// The TLS handshake failed (an unverifiable certificate, most often).
    #[error("Get \"{url}\": tls: handshake failed")]
    Tls {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: std::io::Error,
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
    let req = Request {
        method: "GET",
        host,
        path,
        headers,
        body: None,
        tls: None,
    };
    request(dialer, src, addr, &req, timeout).await
}

/// One request's parts beyond the address.
#[derive(Debug)]
pub struct Request<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// The Host header.
    pub host: &'a str,
    /// The path with query.
    pub path: &'a str,
    /// Extra headers.
    pub headers: &'a [(String, String)],
    /// The body, if any.
    pub body: Option<Bytes>,
    /// For HTTPS: the client configuration and the name the certificate must carry.
    pub tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
}

/// Sends `req` to `addr` (over TLS when `req.tls` is set).
pub async fn request(
    dialer: &Dialer,
    src: &Source,
    addr: SocketAddr,
    req: &Request<'_>,
    timeout: Duration,
) -> Result<Response, HttpError> {
    let path = if req.path.starts_with('/') {
        req.path.to_string()
    } else {
        format!("/{}", req.path)
    };
    let scheme = if req.tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}{path}", req.host);
    let fut = async {
        let stream = dialer.tcp(src, addr).await.map_err(|source| HttpError::Dial {
            url: url.clone(),
            addr,
            source,
        })?;
        match &req.tls {
            None => exchange(stream, req, &path, &url).await,
            Some((cfg, name)) => {
                let tls = tokio_rustls::TlsConnector::from(cfg.clone())
                    .connect(name.clone(), stream)
                    .await
                    .map_err(|source| HttpError::Tls {
                        url: url.clone(),
                        source,
                    })?;
                exchange(tls, req, &path, &url).await
            }
        }
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(HttpError::Timeout { url }),
    }
}

/// The HTTP/1.1 exchange over an open connection.
async fn exchange<S>(stream: S, req: &Request<'_>, path: &str, url: &str) -> Result<Response, HttpError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|source| HttpError::Exchange {
            url: url.to_string(),
            source,
        })?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut builder = http::Request::builder()
        .method(req.method)
        .uri(path)
        .header("Host", req.host)
        .header("User-Agent", "crossconf-sim");
    for (k, v) in req.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    let body = match &req.body {
        Some(b) => Either::Right(Full::new(b.clone())),
        None => Either::Left(Empty::<Bytes>::new()),
    };
    let request = builder.body(body).map_err(|source| HttpError::Build {
        url: url.to_string(),
        source,
    })?;
    let resp = sender
        .send_request(request)
        .await
        .map_err(|source| HttpError::Exchange {
            url: url.to_string(),
            source,
        })?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|source| HttpError::Exchange {
            url: url.to_string(),
            source,
        })?
        .to_bytes();
    Ok(Response { status, body })
}
