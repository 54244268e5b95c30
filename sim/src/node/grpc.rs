//! The gRPC health-checking protocol (`grpc.health.v1.Health/Check`) over plaintext HTTP/2,
//! both sides: the server agnhost `grpc-health-checking` runs, and the client the kubelet's
//! gRPC prober uses (upstream `pkg/probe/grpc`).
//!
//! Real gRPC on the wire: HTTP/2 with prior knowledge (no TLS, no upgrade), `POST
//! /grpc.health.v1.Health/Check`, `content-type: application/grpc`, each message a 5-byte
//! length prefix plus protobuf, and the status in the `grpc-status`/`grpc-message` trailers. The
//! two protobuf messages are tiny (`HealthCheckRequest{string service = 1}`,
//! `HealthCheckResponse{ServingStatus status = 1}`), so they are encoded by hand.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// The method path of the health check.
pub const CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// `HealthCheckResponse.ServingStatus` SERVING.
pub const SERVING: u64 = 1;
/// `HealthCheckResponse.ServingStatus` NOT_SERVING.
pub const NOT_SERVING: u64 = 2;

/// gRPC status codes used here (google.golang.org/grpc/codes).
pub mod code {
    /// OK.
    pub const OK: u32 = 0;
    /// NotFound.
    pub const NOT_FOUND: u32 = 5;
    /// Unimplemented.
    pub const UNIMPLEMENTED: u32 = 12;
    /// Internal.
    pub const INTERNAL: u32 = 13;
}

/// The name protobuf's text form gives a serving status (`HealthCheckResponse_ServingStatus`).
pub fn status_name(s: u64) -> String {
    match s {
        0 => "UNKNOWN".into(),
        SERVING => "SERVING".into(),
        NOT_SERVING => "NOT_SERVING".into(),
        3 => "SERVICE_UNKNOWN".into(),
        n => n.to_string(),
    }
}

fn put_varint(b: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

fn get_varint(b: &mut &[u8]) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        if !b.has_remaining() {
            return Err("truncated varint".into());
        }
        let byte = b.get_u8();
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint overflow".into())
}

/// One length-prefixed gRPC message around `msg` (uncompressed).
fn frame(msg: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + msg.len());
    b.put_u8(0);
    b.put_u32(msg.len() as u32);
    b.put_slice(msg);
    b.freeze()
}

/// The message inside one length-prefixed gRPC frame.
fn unframe(body: &[u8]) -> Result<&[u8], String> {
    if body.len() < 5 {
        return Err(format!(
            "grpc: message frame of {} bytes is shorter than its prefix",
            body.len()
        ));
    }
    if body[0] != 0 {
        return Err("grpc: compressed messages are not supported".into());
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    body.get(5..5 + len)
        .ok_or_else(|| format!("grpc: message frame announces {len} bytes, carries {}", body.len() - 5))
}

/// Walks the fields of a protobuf message; `on` sees (field number, varint value or bytes).
fn fields(mut msg: &[u8], mut on: impl FnMut(u64, Result<u64, &[u8]>)) -> Result<(), String> {
    while msg.has_remaining() {
        let key = get_varint(&mut msg)?;
        let (num, wire) = (key >> 3, key & 7);
        match wire {
            0 => on(num, Ok(get_varint(&mut msg)?)),
            2 => {
                let len = get_varint(&mut msg)? as usize;
                let v = msg.get(..len).ok_or("truncated length-delimited field")?;
                on(num, Err(v));
                msg.advance(len);
            }
            1 => msg.advance(8.min(msg.len())),
            5 => msg.advance(4.min(msg.len())),
            w => return Err(format!("unsupported protobuf wire type {w}")),
        }
    }
    Ok(())
}

/// A framed `HealthCheckRequest{service}`.
pub fn encode_request(service: &str) -> Bytes {
    let mut m = BytesMut::new();
    if !service.is_empty() {
        m.put_u8(0x0a);
        put_varint(&mut m, service.len() as u64);
        m.put_slice(service.as_bytes());
    }
    frame(&m)
}

/// The `service` of a framed `HealthCheckRequest`.
pub fn decode_request(body: &[u8]) -> Result<String, String> {
    let mut service = String::new();
    fields(unframe(body)?, |n, v| {
        if let (1, Err(b)) = (n, v) {
            service = String::from_utf8_lossy(b).into_owned();
        }
    })?;
    Ok(service)
}

/// A framed `HealthCheckResponse{status}`.
pub fn encode_response(status: u64) -> Bytes {
    let mut m = BytesMut::new();
    if status != 0 {
        m.put_u8(0x08);
        put_varint(&mut m, status);
    }
    frame(&m)
}

/// The `status` of a framed `HealthCheckResponse`.
pub fn decode_response(body: &[u8]) -> Result<u64, String> {
    let mut status = 0;
    fields(unframe(body)?, |n, v| {
        if let (1, Ok(s)) = (n, v) {
            status = s;
        }
    })?;
    Ok(status)
}

/// What a health server answers for one requested service: a serving status, or a gRPC error
/// (code, message).
pub type Answer = Result<u64, (u32, String)>;

type RespBody = StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

fn grpc_response(frames: Vec<Frame<Bytes>>, headers: &[(&'static str, String)]) -> Response<RespBody> {
    let mut r = Response::new(StreamBody::new(futures::stream::iter(
        frames.into_iter().map(Ok).collect::<Vec<_>>(),
    )));
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/grpc"));
    for (k, v) in headers {
        if let Ok(v) = HeaderValue::from_str(v) {
            r.headers_mut().insert(*k, v);
        }
    }
    r
}

fn status_trailers(code: u32, msg: &str) -> HeaderMap {
    let mut t = HeaderMap::new();
    t.insert("grpc-status", HeaderValue::from(code));
    if !msg.is_empty() {
        // grpc-message is percent-encoded; the messages here are plain ASCII.
        if let Ok(v) = HeaderValue::from_str(&msg.replace('%', "%25")) {
            t.insert("grpc-message", v);
        }
    }
    t
}

async fn handle(req: Request<Incoming>, check: Arc<dyn Fn(&str) -> Answer + Send + Sync>) -> Response<RespBody> {
    if req.uri().path() != CHECK_PATH {
        // A trailers-only response, as grpc-go sends for an unknown method.
        let msg = format!("unknown method {}", req.uri().path());
        return grpc_response(
            vec![],
            &[("grpc-status", code::UNIMPLEMENTED.to_string()), ("grpc-message", msg)],
        );
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return grpc_response(
                vec![],
                &[
                    ("grpc-status", code::INTERNAL.to_string()),
                    ("grpc-message", e.to_string()),
                ],
            );
        }
    };
    let answer = decode_request(&body)
        .map_err(|e| (code::INTERNAL, e))
        .and_then(|s| check(&s));
    match answer {
        Ok(status) => grpc_response(
            vec![
                Frame::data(encode_response(status)),
                Frame::trailers(status_trailers(code::OK, "")),
            ],
            &[],
        ),
        Err((c, msg)) => grpc_response(vec![], &[("grpc-status", c.to_string()), ("grpc-message", msg)]),
    }
}

/// Serves the health service on `listener` (plaintext HTTP/2, as `grpc.NewServer()` without
/// credentials) until `cancel`; `check` answers each request's service name.
pub fn serve(listener: TcpListener, check: Arc<dyn Fn(&str) -> Answer + Send + Sync>, cancel: CancellationToken) {
    tokio::spawn(async move {
        loop {
            let (tcp, peer): (TcpStream, SocketAddr) = tokio::select! {
                () = cancel.cancelled() => return,
                r = listener.accept() => match r { Ok(x) => x, Err(_) => continue },
            };
            let (check, cancel) = (check.clone(), cancel.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let check = check.clone();
                    async move { Ok::<_, Infallible>(handle(req, check).await) }
                });
                let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), svc);
                tokio::select! {
                    r = conn => if let Err(e) = r { debug!(%peer, error = %e, "grpc connection ended") },
                    () = cancel.cancelled() => {}
                }
            });
        }
    });
}

/// Why a health check did not get a status back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// The HTTP/2 connection could not be set up (the peer is not a gRPC server).
    Connect(String),
    /// The call ended with a non-OK gRPC status.
    Status(u32, String),
    /// The exchange broke (reset stream, malformed answer).
    Transport(String),
}

/// Calls `Health/Check` for `service` over `stream` (already connected to `addr`), with the
/// kubelet prober's `user-agent`.
pub async fn check(stream: TcpStream, addr: SocketAddr, service: &str, user_agent: &str) -> Result<u64, CheckError> {
    let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
        .await
        .map_err(|e| CheckError::Connect(e.to_string()))?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = Request::post(format!("http://{addr}{CHECK_PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("user-agent", user_agent)
        .body(Full::new(encode_request(service)))
        .map_err(|e| CheckError::Transport(e.to_string()))?;
    let result = async {
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| CheckError::Connect(e.to_string()))?;
        if resp.status() != StatusCode::OK {
            return Err(CheckError::Transport(format!(
                "unexpected HTTP status code received from server: {}",
                resp.status().as_u16()
            )));
        }
        let head = resp.headers().clone();
        let collected = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| CheckError::Transport(e.to_string()))?;
        let trailers = collected.trailers().cloned().unwrap_or_default();
        let body = collected.to_bytes();
        let get = |k: &str| {
            trailers
                .get(k)
                .or_else(|| head.get(k))
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let code: u32 = get("grpc-status")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| CheckError::Transport("server closed the stream without sending trailers".into()))?;
        if code != code::OK {
            return Err(CheckError::Status(
                code,
                get("grpc-message").unwrap_or_default().replace("%25", "%"),
            ));
        }
        decode_response(&body).map_err(CheckError::Transport)
    }
    .await;
    driver.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Dials `addr` directly (tests only; the kubelet dials through the simulated network).
    async fn check_addr(addr: SocketAddr, service: &str, timeout: Duration) -> Result<u64, CheckError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| CheckError::Connect("i/o timeout".into()))?
            .map_err(|e| CheckError::Connect(e.to_string()))?;
        tokio::time::timeout(timeout, check(stream, addr, service, "grpc-test"))
            .await
            .map_err(|_| CheckError::Transport("deadline exceeded".into()))?
    }

    #[test]
    fn request_round_trips_with_and_without_service() {
        assert_eq!(decode_request(&encode_request("")).unwrap(), "");
        assert_eq!(decode_request(&encode_request("liveness")).unwrap(), "liveness");
        // An empty service is an empty message: the 5-byte prefix alone.
        assert_eq!(encode_request("").as_ref(), &[0, 0, 0, 0, 0]);
    }

    #[test]
    fn response_round_trips() {
        assert_eq!(decode_response(&encode_response(SERVING)).unwrap(), SERVING);
        assert_eq!(decode_response(&encode_response(NOT_SERVING)).unwrap(), NOT_SERVING);
        assert_eq!(decode_response(&encode_response(0)).unwrap(), 0);
        assert_eq!(encode_response(SERVING).as_ref(), &[0, 0, 0, 0, 2, 0x08, 0x01]);
    }

    #[test]
    fn truncated_frames_are_errors() {
        assert!(decode_request(&[0, 0, 0]).is_err());
        assert!(decode_request(&[0, 0, 0, 0, 9, 0x0a]).is_err());
        assert!(decode_response(&[1, 0, 0, 0, 0]).is_err());
    }

    async fn server(check: Arc<dyn Fn(&str) -> Answer + Send + Sync>) -> (SocketAddr, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cancel = CancellationToken::new();
        serve(listener, check, cancel.clone());
        (addr, cancel)
    }

    #[tokio::test]
    async fn check_over_http2_gets_the_status_or_the_grpc_error() {
        let (addr, cancel) = server(Arc::new(|s: &str| match s {
            "" => Ok(SERVING),
            "down" => Ok(NOT_SERVING),
            _ => Err((code::NOT_FOUND, "unknown service".into())),
        }))
        .await;
        let t = Duration::from_secs(5);
        assert_eq!(check_addr(addr, "", t).await, Ok(SERVING));
        assert_eq!(check_addr(addr, "down", t).await, Ok(NOT_SERVING));
        assert_eq!(
            check_addr(addr, "other", t).await,
            Err(CheckError::Status(code::NOT_FOUND, "unknown service".into()))
        );
        cancel.cancel();
    }

    #[tokio::test]
    async fn a_plain_http1_server_is_not_a_grpc_server() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            if let Ok((mut s, _)) = listener.accept().await {
                let _ = s
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
                    .await;
            }
        });
        assert!(check_addr(addr, "", Duration::from_secs(5)).await.is_err());
    }
}
