//! `/usr/local/bin/etcd` of the `etcd` image, as far as a client of its HTTP gateway sees it:
//! a listener on `--listen-client-urls` (default `http://localhost:2379`) answering `/health`
//! and `/version`. The sample-apiserver of the Aggregator case only needs it to answer; it
//! keeps its objects itself (see [`super::sample_apiserver`]).

use axum::Router;
use axum::routing::get;
use serde_json::json;

use super::servers::serve_http;
use super::{Ctx, until_stopped};

/// The server version the gateway reports (the image is `etcd:3.5.21-0`).
const VERSION: &str = "3.5.21";

/// The port of a client URL (`http://127.0.0.1:2379`), if it is one etcd can listen on
/// here: plain HTTP on loopback or any address, which in a pod is the pod's own address.
pub fn client_port(url: &str) -> Result<u16, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("unsupported URL scheme in {url:?} (the simulator serves http only)"))?;
    let host_port = rest.split('/').next().unwrap_or(rest);
    let (host, port) = host_port
        .rsplit_once(':')
        .ok_or_else(|| format!("URL address does not have the form \"host:port\": {url}"))?;
    let host = host.trim_matches(['[', ']']);
    if !matches!(host, "127.0.0.1" | "localhost" | "::1" | "0.0.0.0" | "") {
        return Err(format!("listen tcp {host_port}: bind: cannot assign requested address"));
    }
    port.parse().map_err(|_| format!("invalid port in {url:?}"))
}

/// Runs `etcd ARGS`.
pub async fn run(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, _) = super::agnhost::flags(&args);
    let url = f
        .get("listen-client-urls")
        .cloned()
        .unwrap_or_else(|| "http://localhost:2379".into());
    // The first URL of a comma-separated list is the one a client is given.
    let first = url.split(',').next().unwrap_or_default().to_string();
    let port = match client_port(&first) {
        Ok(p) => p,
        Err(e) => {
            ctx.out.err_line(&format!(
                "{{\"level\":\"fatal\",\"msg\":\"discovery failed\",\"error\":{}}}",
                json!(e)
            ));
            return 1;
        }
    };
    let app = Router::new()
        .route(
            "/health",
            get(|| async { axum::Json(json!({"health": "true", "reason": ""})) }),
        )
        .route(
            "/version",
            get(|| async { axum::Json(json!({"etcdserver": VERSION, "etcdcluster": "3.5.0"})) }),
        );
    if let Err(e) = serve_http(ctx.pod.ip, port, app, ctx.cancel.clone()).await {
        ctx.out.err_line(&format!(
            "{{\"level\":\"fatal\",\"msg\":\"listen tcp :{port}: bind: {e}\"}}"
        ));
        return 1;
    }
    ctx.out.line(&format!(
        "{{\"level\":\"info\",\"msg\":\"serving client traffic insecurely; this is strongly discouraged!\",\"address\":\"{}:{port}\"}}",
        ctx.pod.ip
    ));
    until_stopped(&ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_urls_are_loopback_http() {
        assert_eq!(client_port("http://127.0.0.1:2379"), Ok(2379));
        assert_eq!(client_port("http://[::1]:2379"), Ok(2379));
        assert!(client_port("https://127.0.0.1:2379").is_err());
        assert!(client_port("http://10.0.0.1:2379").is_err());
    }
}
