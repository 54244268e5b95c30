//! agnhost `nettest`: the HTTP state server of upstream `test/images/agnhost/nettest` on
//! `--port` (8080). `POST /write` with `{"Source": NAME}` counts one message received from NAME,
//! `GET /read` returns the state (`Hostname`, `Sent`, `Received`, `Errors`, `Log`,
//! `StillContactingPeers`), `GET /status` says whether peer contact finished. Peer contact itself
//! (listing the `--service` endpoints through the API and writing to each peer) is not emulated:
//! the state reports it still running, as upstream does until every peer answered.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use serde::{Deserialize, Serialize};

use super::agnhost::{flags, port_flag};
use super::servers::serve_http;
use super::{Ctx, until_stopped};

/// Upstream `State` (field names as its JSON).
#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
struct State {
    hostname: String,
    sent: BTreeMap<String, i64>,
    received: BTreeMap<String, i64>,
    errors: Vec<String>,
    log: Vec<String>,
    still_contacting_peers: bool,
}

/// Upstream `WritePost`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct WritePost {
    #[serde(default)]
    source: String,
}

/// `/write`: a POST counts a message from its source; any method answers `{"Hostname": ...}`.
fn write(state: &Mutex<State>, method: &Method, uri: &str, body: &[u8]) -> axum::response::Response {
    let mut s = state.lock().expect("nettest state");
    if method == Method::POST {
        match serde_json::from_slice::<WritePost>(body) {
            Err(e) => {
                s.errors.push(format!("{uri}: Got http error: {e}"));
                return StatusCode::BAD_REQUEST.into_response();
            }
            Ok(wp) if wp.source.is_empty() => {
                s.errors.push(format!("{uri}: Got request with empty source"));
                return StatusCode::BAD_REQUEST.into_response();
            }
            Ok(wp) => *s.received.entry(wp.source).or_default() += 1,
        }
    }
    let body = serde_json::json!({ "Hostname": s.hostname }).to_string() + "\n";
    body.into_response()
}

/// Runs the subcommand.
pub(super) async fn run(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, _) = flags(&args);
    let Ok(Ok(port)) = port_flag(&f, "port", 8080).map(u16::try_from) else {
        ctx.out.err_line("invalid --port");
        return 1;
    };
    let state = Arc::new(Mutex::new(State {
        hostname: ctx.pod.hostname.clone(),
        still_contacting_peers: true,
        ..State::default()
    }));
    let (w, r) = (state.clone(), state.clone());
    let router = Router::new()
        .route(
            "/write",
            any(move |method: Method, uri: axum::http::Uri, body: Bytes| {
                let w = w.clone();
                async move { write(&w, &method, &uri.to_string(), &body) }
            }),
        )
        .route(
            "/read",
            get(move || {
                let r = r.clone();
                async move {
                    let s = r.lock().expect("nettest state").clone();
                    serde_json::to_string(&s).unwrap_or_default() + "\n"
                }
            }),
        )
        .route(
            "/status",
            get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "still contacting peers\n") }),
        );
    if let Err(e) = serve_http(ctx.pod.ip, port, router, ctx.cancel.clone()).await {
        ctx.out.err_line(&format!("listen tcp :{port}: bind: {e}"));
        return 1;
    }
    until_stopped(&ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_counts_by_source_and_get_only_reads() {
        let s = Mutex::new(State {
            hostname: "server".into(),
            ..State::default()
        });
        let ok = write(&s, &Method::POST, "/write", br#"{"Source": "prestop"}"#);
        assert_eq!(ok.status(), StatusCode::OK);
        write(&s, &Method::GET, "/write", b"");
        assert_eq!(s.lock().unwrap().received.get("prestop"), Some(&1));
        let bad = write(&s, &Method::POST, "/write", b"not json");
        assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
        assert_eq!(s.lock().unwrap().errors.len(), 1);
        let json = serde_json::to_value(&*s.lock().unwrap()).unwrap();
        assert_eq!(json["Received"]["prestop"], 1);
        assert_eq!(json["Hostname"], "server");
    }
}
