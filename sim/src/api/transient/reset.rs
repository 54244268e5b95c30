//! `conn-reset=PERCENT`: that share of the requests that are not long-running is processed (it
//! takes effect: a create creates, a delete deletes), then its response is cut mid-body.
//!
//! What it models: a load balancer or an apiserver dying mid-write. The client gets the status
//! line and headers (with the full `Content-Length`), about half of the body, then the
//! connection breaks, and it cannot tell whether its request took effect, which is the case
//! that makes retried creates meet `AlreadyExists` and retried deletes `NotFound`:
//! - over HTTP/1.1 (kube-rs, Python) the connection is closed short of its `Content-Length`:
//!   `unexpected EOF`, hyper's `IncompleteMessage`, urllib3's `IncompleteRead`/`ProtocolError`;
//! - over HTTP/2 (kubectl, client-go) the stream is reset (`RST_STREAM` `INTERNAL_ERROR`), which
//!   client-go reports as "stream error when reading response body, may be caused by closed
//!   connection"; the connection's other streams (watches) live on, as only that request broke.
//!
//! Both come from hyper: a response body that yields an error makes it abort the connection
//! (HTTP/1.1) or reset the stream (HTTP/2) instead of ending the message cleanly.

use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use rand::Rng;

use crate::faults::Faults;
use crate::faults::values::parse_percent;

/// The fault switch's name.
pub const SWITCH: &str = "conn-reset";

/// How long the cut response's first half is left to reach the client before the cut, so the
/// client really has the head and part of the body (a cut before the head would look like a
/// refused request instead).
const FLUSH_PAUSE: Duration = Duration::from_millis(20);

/// The error the cut body yields (hyper logs it as the reason the connection ended).
#[derive(Debug, thiserror::Error)]
pub enum ResetError {
    /// The `conn-reset` fault cut the response.
    #[error("response cut mid-body by the conn-reset fault")]
    Injected,
}

/// Whether this request's response is cut: one draw per configured share.
pub(super) fn draw(faults: &Faults, path: &str) -> bool {
    let values = faults.values(SWITCH);
    if values.is_empty() {
        return false;
    }
    let mut rng = rand::rng();
    let hit = values
        .iter()
        .filter_map(|v| parse_percent(v))
        .any(|share| rng.random::<f64>() < share);
    if hit {
        tracing::debug!(%path, "connection reset injected: the response will be cut mid-body");
    }
    hit
}

/// `response` with its head intact, announcing its full length, and a body that stops after the
/// first half and fails.
pub(super) async fn cut(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let full = match to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        // The handler's own body failed: the connection breaks anyway.
        Err(e) => return Response::from_parts(parts, Body::from_stream(futures::stream::iter([Err::<Bytes, _>(e)]))),
    };
    parts.headers.remove(header::TRANSFER_ENCODING);
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(full.len()));
    Response::from_parts(parts, Body::from_stream(half_then_fail(full)))
}

/// The first half of `full`, a pause for it to be flushed, then [`ResetError::Injected`].
fn half_then_fail(full: Bytes) -> impl futures::Stream<Item = Result<Bytes, ResetError>> + Send {
    let half = full.slice(..full.len() / 2);
    futures::stream::iter([Ok(half)]).chain(futures::stream::once(async {
        tokio::time::sleep(FLUSH_PAUSE).await;
        Err(ResetError::Injected)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::handler::router;
    use crate::api::state::{AppState, StateConfig};
    use axum::extract::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_cut_response_keeps_its_head_and_half_its_body_then_fails() {
        let st = AppState::new(StateConfig::new(AddressBlock(202)));
        st.cfg.faults.set(SWITCH, "100%", true);
        let token = st.cfg.admin_token.clone();
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cut"}});
        let req = Request::post("/api/v1/namespaces/default/configmaps")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(Body::from(cm.to_string()))
            .unwrap();
        let resp = router(st.clone()).oneshot(req).await.unwrap();
        assert_eq!(resp.status(), 201);
        let length: usize = resp.headers()[header::CONTENT_LENGTH]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let mut body = resp.into_body();
        let mut got = 0;
        let err = loop {
            match body.frame().await {
                Some(Ok(f)) => got += f.into_data().map_or(0, |d| d.len()),
                Some(Err(e)) => break e,
                None => panic!("the body ended cleanly after {got} of {length} bytes"),
            }
        };
        assert_eq!(got, length / 2);
        assert!(err.to_string().contains("conn-reset"), "{err}");
        // The request took effect.
        assert!(st.store.get("/configmaps", "default", "cut").is_some());
    }

    #[tokio::test]
    async fn watches_and_a_zero_rate_are_never_cut() {
        let st = AppState::new(StateConfig::new(AddressBlock(202)));
        st.cfg.faults.set(SWITCH, "100%", true);
        let token = st.cfg.admin_token.clone();
        let req = Request::get("/api/v1/configmaps?watch=true&timeoutSeconds=1")
            .header("authorization", format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let resp = router(st.clone()).oneshot(req).await.unwrap();
        assert!(resp.into_body().collect().await.is_ok());
        st.cfg.faults.set(SWITCH, "100%", false);
        st.cfg.faults.set(SWITCH, "0%", true);
        let req = Request::get("/api/v1/configmaps")
            .header("authorization", format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let resp = router(st).oneshot(req).await.unwrap();
        assert!(resp.into_body().collect().await.is_ok());
    }

    /// What a real connection sees, from a real server: over HTTP/1.1 the head with the full
    /// Content-Length, fewer body bytes, then the connection closes; over HTTP/2 the stream is
    /// reset with INTERNAL_ERROR and the connection serves the next request.
    #[tokio::test]
    async fn a_real_connection_is_cut_mid_body() {
        use crate::api::server::{ApiConfig, ApiServer};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        crate::install_crypto_provider();
        let faults = std::sync::Arc::new(crate::faults::Faults::parse("conn-reset=100%").unwrap());
        let srv = ApiServer::start(ApiConfig::new(AddressBlock(214)).port(0).faults(faults))
            .await
            .unwrap();
        let tls = |alpn: &[u8]| {
            let mut cfg = (*crate::api::tls::insecure_client_config()).clone();
            cfg.alpn_protocols = vec![alpn.to_vec()];
            tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg))
        };
        let name = rustls::pki_types::ServerName::IpAddress(srv.addr().ip().into());
        let path = "/api/v1/namespaces/kube-system/configmaps";

        let tcp = tokio::net::TcpStream::connect(srv.addr()).await.unwrap();
        let mut h1 = tls(b"http/1.1").connect(name.clone(), tcp).await.unwrap();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
            srv.addr(),
            srv.admin_token()
        );
        h1.write_all(req.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        // The close comes without TLS close_notify, which rustls reports as an error.
        let _ = tokio::time::timeout(Duration::from_secs(5), h1.read_to_end(&mut got))
            .await
            .expect("the connection is closed");
        let text = String::from_utf8_lossy(&got);
        let (head, body) = text.split_once("\r\n\r\n").expect("a whole head");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(str::to_string)
            })
            .expect("a Content-Length")
            .parse()
            .unwrap();
        assert!(
            !body.is_empty() && body.len() < length,
            "{} of {length} bytes",
            body.len()
        );

        let tcp = tokio::net::TcpStream::connect(srv.addr()).await.unwrap();
        let h2 = tls(b"h2").connect(name, tcp).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(h2),
        )
        .await
        .unwrap();
        tokio::spawn(conn);
        for _ in 0..2 {
            let req = http::Request::get(format!("https://{}{path}", srv.addr()))
                .header("authorization", format!("Bearer {}", srv.admin_token()))
                .body(http_body_util::Empty::<Bytes>::new())
                .unwrap();
            let resp = sender.send_request(req).await.expect("the head arrives");
            assert_eq!(resp.status(), 200);
            let err = resp.into_body().collect().await.expect_err("the stream is reset");
            let shown = format!("{err:?}");
            assert!(shown.contains("Reset") && shown.contains("INTERNAL_ERROR"), "{shown}");
        }
        srv.shutdown().await;
    }
}
