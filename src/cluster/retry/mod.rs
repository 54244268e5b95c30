//! Retrying API access: a layer around kube's client that rides out what a transient fault broke.
//!
//! kube's built-in policy retries 429, 503 and 504 a few times. A nightly Windows run meets more
//! than that: an API server restarting refuses connections for tens of seconds, a load balancer
//! cuts a response half-way, etcd times out a write that was stored anyway. One such blip must
//! not fail a 4-hour job, and one that does must say so. The layer:
//! - retries what [`policy`] allows, with exponential backoff (or the server's `Retry-After`),
//!   for up to [`policy::RETRY_BUDGET`] after the first attempt;
//! - reads non-streaming answers whole before handing them on, so a connection lost mid-answer
//!   is a retryable failure here rather than a body error in the caller;
//! - reads back ambiguous writes (a create answered 409 or 403 on replay, a delete answered
//!   404);
//! - sends a streaming or upgrading request again only when its connection was refused;
//!   otherwise the watcher and its backoff resume watches, and exec reruns a broken stream;
//! - writes what it met into the [`journal`], which failure messages quote.

mod journal;
pub mod policy;

use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;

pub use journal::{Journal, SLOW, Trouble, journal};
pub use policy::backoff;
use policy::{Failure, Kind};

/// Whether a request streams (watch, followed log) or upgrades (exec, attach, port-forward).
fn streaming<B>(req: &Request<B>) -> bool {
    if req.headers().contains_key(http::header::UPGRADE) {
        return true;
    }
    let query = req.uri().query().unwrap_or("");
    query.split('&').any(|kv| {
        matches!(
            kv,
            "watch=true" | "watch=1" | "follow=true" | "follow=1" | "watch" | "follow"
        )
    })
}

/// Whether the error chain says the connection was refused (nothing was sent).
fn refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Transport failures: the request may not have reached the server or its answer was lost.
fn transport_failure(e: &kube::Error) -> Option<Failure> {
    match e {
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            Some(if refused(e) { Failure::Clean } else { Failure::Ambiguous })
        }
        _ => None,
    }
}

/// A request's parts, kept to build each attempt afresh.
#[derive(Clone)]
struct Replay {
    parts: http::request::Parts,
    body: Bytes,
}

impl Replay {
    fn request(&self) -> Request<Body> {
        let mut req = Request::from_parts(self.parts.clone(), Body::from(self.body.clone()));
        *req.extensions_mut() = self.parts.extensions.clone();
        req
    }

    fn get(&self, path: &str) -> Request<Body> {
        let mut req = Request::get(path)
            .body(Body::from(Bytes::new()))
            .expect("a path is a valid uri");
        *req.headers_mut() = self.parts.headers.clone();
        req.headers_mut().remove(http::header::CONTENT_TYPE);
        req
    }
}

/// One attempt's outcome, its body read whole.
enum Outcome {
    Answer(Response<Body>, Bytes),
    Lost(kube::Error),
}

/// A tower service that sends through an inner kube client and retries as the module says.
#[derive(Clone)]
pub struct Retrying {
    inner: Client,
    journal: &'static Journal,
}

impl Retrying {
    /// Wraps `inner` (built with kube's own retry switched off), journalling into the process's
    /// [`journal`].
    pub fn new(inner: Client) -> Retrying {
        Retrying {
            inner,
            journal: journal(),
        }
    }

    async fn attempt(&self, req: Request<Body>) -> Outcome {
        match self.inner.send(req).await {
            Err(e) => Outcome::Lost(e),
            Ok(resp) => {
                let (parts, body) = resp.into_parts();
                match body.collect_bytes().await {
                    Ok(bytes) => Outcome::Answer(Response::from_parts(parts, Body::from(bytes.clone())), bytes),
                    Err(e) => Outcome::Lost(e),
                }
            }
        }
    }

    /// Sends a streaming or upgrading request (a watch, a followed log, exec, attach,
    /// port-forward). Its answer is never replayed, but a refused connection sent nothing, so
    /// the request is sent again, within the budget: an exec started while the API server
    /// restarts waits for it instead of failing the case.
    async fn once(&self, req: Request<Body>) -> Result<Response<Body>, kube::Error> {
        let started = tokio::time::Instant::now();
        let mut req = req;
        let mut attempt = 0u32;
        loop {
            let copy = req.body().try_clone().map(|body| {
                let mut r = Request::new(body);
                *r.method_mut() = req.method().clone();
                *r.uri_mut() = req.uri().clone();
                *r.version_mut() = req.version();
                *r.headers_mut() = req.headers().clone();
                *r.extensions_mut() = req.extensions().clone();
                r
            });
            let result = self.inner.send(req).await;
            match &result {
                Ok(_) => {
                    self.journal.answered();
                    return result;
                }
                Err(e) if refused(e) => self.journal.record(Trouble::Refused),
                Err(_) => return result,
            }
            attempt += 1;
            let delay = backoff(attempt);
            match copy {
                Some(next) if started.elapsed() + delay <= policy::RETRY_BUDGET => {
                    tokio::time::sleep(delay).await;
                    req = next;
                }
                _ => return result,
            }
        }
    }

    async fn send(&self, req: Request<Body>) -> Result<Response<Body>, kube::Error> {
        if streaming(&req) {
            return self.once(req).await;
        }
        let (parts, body) = req.into_parts();
        let body = body.collect_bytes().await?;
        let replay = Replay { parts, body };
        let content_type = replay
            .parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let kind = policy::classify(
            &replay.parts.method,
            replay.parts.uri.path(),
            content_type,
            &replay.body,
        );
        // Tokio's clock, so tests with paused time see the budget run out.
        let started = tokio::time::Instant::now();
        let mut ambiguous = false;
        let mut attempt = 0u32;
        let mut last_answer = None;
        loop {
            let t0 = Instant::now();
            let outcome = self.attempt(replay.request()).await;
            let took = t0.elapsed();
            if took >= SLOW {
                self.journal.record(Trouble::Slow(took));
            }
            let (failure, wait_hint) = match &outcome {
                Outcome::Answer(resp, bytes) => {
                    self.journal.answered();
                    match policy::status_failure(resp.status(), bytes) {
                        Some(f) if !policy::is_final_refusal(&kind, resp.status(), resp.headers()) => {
                            self.journal.record(Trouble::Status(resp.status().as_u16()));
                            (f, policy::retry_after(resp.headers()))
                        }
                        _ => return self.settle(&replay, &kind, ambiguous, outcome).await,
                    }
                }
                Outcome::Lost(e) => match transport_failure(e) {
                    Some(f) => {
                        self.journal.record(if f == Failure::Clean {
                            Trouble::Refused
                        } else {
                            Trouble::Reset
                        });
                        (f, None)
                    }
                    None => return Err(lost(outcome)),
                },
            };
            attempt += 1;
            let delay = wait_hint.unwrap_or_else(|| backoff(attempt)).max(backoff(1));
            if !policy::may_replay(&kind, failure) || started.elapsed() + delay > policy::RETRY_BUDGET {
                return match (outcome, last_answer) {
                    (Outcome::Answer(resp, _), _) => Ok(resp),
                    // The server's own last word says more than a connection lost after it
                    // (a 500 whose replays met an API server restarting).
                    (Outcome::Lost(_), Some(resp)) if policy::may_replay(&kind, failure) => Ok(resp),
                    (Outcome::Lost(e), _) => Err(e),
                };
            }
            ambiguous |= failure == Failure::Ambiguous;
            if let Outcome::Answer(resp, _) = outcome {
                last_answer = Some(resp);
            }
            tracing::debug!(method = %replay.parts.method, path = replay.parts.uri.path(), attempt, ?delay, ?failure,
                "retrying API request after a transient failure");
            tokio::time::sleep(delay).await;
        }
    }

    /// GETs `path` with the request's credentials, retrying transient failures within the
    /// budget; `None` when no answer came.
    async fn read_back(&self, replay: &Replay, path: &str) -> Option<(Response<Body>, Bytes)> {
        let started = tokio::time::Instant::now();
        let mut attempt = 0u32;
        loop {
            let outcome = self.attempt(replay.get(path)).await;
            let retry = match &outcome {
                Outcome::Answer(resp, bytes) => policy::status_failure(resp.status(), bytes).is_some(),
                Outcome::Lost(e) => transport_failure(e).is_some(),
            };
            if !retry {
                return match outcome {
                    Outcome::Answer(resp, bytes) => Some((resp, bytes)),
                    Outcome::Lost(_) => None,
                };
            }
            attempt += 1;
            let delay = backoff(attempt);
            if started.elapsed() + delay > policy::RETRY_BUDGET {
                return None;
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// A final answer: after an ambiguous failure, a create answered 409 or a delete answered
    /// 404 is read as the first attempt having done the work.
    async fn settle(
        &self,
        replay: &Replay,
        kind: &Kind,
        ambiguous: bool,
        outcome: Outcome,
    ) -> Result<Response<Body>, kube::Error> {
        let Outcome::Answer(resp, _) = outcome else {
            return Err(lost(outcome));
        };
        if !ambiguous {
            return Ok(resp);
        }
        match (kind, resp.status()) {
            // 409 AlreadyExists, or an admission refusal the first attempt's object caused
            // (a quota it now fills): read the object back.
            (Kind::Create { object_path }, status) if status.is_client_error() => {
                // Read the object back (a read, retried as any read); kube's create accepts any
                // 2xx with the object.
                let Some((got, bytes)) = self.read_back(replay, object_path).await else {
                    return Ok(resp);
                };
                if got.status() != StatusCode::OK {
                    return Ok(resp);
                }
                self.journal.record(Trouble::Recovered);
                tracing::debug!(object_path, "create found done on replay after an ambiguous failure");
                let (mut parts, _) = got.into_parts();
                parts.status = StatusCode::CREATED;
                Ok(Response::from_parts(parts, Body::from(bytes)))
            }
            // 409 Conflict on a replayed replace: stored by the first attempt if the object
            // now holds what was sent.
            (Kind::Replace, StatusCode::CONFLICT) => {
                let Ok(sent) = serde_json::from_slice::<serde_json::Value>(&replay.body) else {
                    return Ok(resp);
                };
                let Some((got, bytes)) = self.read_back(replay, replay.parts.uri.path()).await else {
                    return Ok(resp);
                };
                let stored = serde_json::from_slice::<serde_json::Value>(&bytes).unwrap_or_default();
                if got.status() != StatusCode::OK
                    || !policy::holds(&sent, &stored, replay.parts.uri.path().ends_with("/status"))
                {
                    return Ok(resp);
                }
                self.journal.record(Trouble::Recovered);
                tracing::debug!(
                    path = replay.parts.uri.path(),
                    "replace found done on replay after an ambiguous failure"
                );
                Ok(got)
            }
            (Kind::Delete, StatusCode::NOT_FOUND) => {
                self.journal.record(Trouble::Recovered);
                let status = serde_json::json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {}, "code": 200,
                });
                let (mut parts, _) = resp.into_parts();
                parts.status = StatusCode::OK;
                parts.headers.remove(http::header::CONTENT_LENGTH);
                Ok(Response::from_parts(parts, Body::from(status.to_string().into_bytes())))
            }
            _ => Ok(resp),
        }
    }
}

fn lost(outcome: Outcome) -> kube::Error {
    match outcome {
        Outcome::Lost(e) => e,
        Outcome::Answer(..) => unreachable!("only called on a lost attempt"),
    }
}

impl tower::Service<Request<Body>> for Retrying {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.send(req).await })
    }
}

/// A client that retries transient failures; `config` is used with kube's own retry off.
///
/// # Errors
/// When the inner client cannot be built from `config`.
pub fn retrying_client(mut config: kube::Config) -> Result<Client, kube::Error> {
    config.default_retry = false;
    let namespace = config.default_namespace.clone();
    let inner = Client::try_from(config)?;
    Ok(Client::new(Retrying::new(inner), namespace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    /// A client whose server answers `statuses` in turn (then 200), counting calls.
    fn scripted(statuses: Vec<u16>) -> (Client, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let svc = tower::service_fn(move |_req: Request<Body>| {
            let n = c.fetch_add(1, Ordering::SeqCst) as usize;
            let code = statuses.get(n).copied().unwrap_or(200);
            async move {
                Ok::<_, std::convert::Infallible>(
                    Response::builder()
                        .status(code)
                        .body(Body::from(
                            br#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#.to_vec(),
                        ))
                        .unwrap(),
                )
            }
        });
        let inner = Client::new(svc, "default");
        (Client::new(Retrying::new(inner), "default"), calls)
    }

    fn get() -> Request<Vec<u8>> {
        Request::get("/version").body(Vec::new()).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn get_is_retried_on_500_and_502() {
        let (client, calls) = scripted(vec![500, 502]);
        client.request_text(get()).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn post_is_not_retried_on_500_but_is_on_503() {
        let (client, calls) = scripted(vec![500]);
        let post = Request::post("/api/v1/namespaces").body(b"{}".to_vec()).unwrap();
        assert!(client.request_text(post).await.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let (client, calls) = scripted(vec![503]);
        let post = Request::post("/api/v1/namespaces").body(b"{}".to_vec()).unwrap();
        client.request_text(post).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_when_the_budget_is_spent() {
        let (client, calls) = scripted(vec![503; 100]);
        let t0 = tokio::time::Instant::now();
        assert!(client.request_text(get()).await.is_err());
        let n = calls.load(Ordering::SeqCst);
        assert!((10..=20).contains(&n), "{n} attempts");
        assert!(t0.elapsed() <= policy::RETRY_BUDGET, "{:?}", t0.elapsed());
        assert!(
            t0.elapsed() >= policy::RETRY_BUDGET - Duration::from_secs(5),
            "{:?}",
            t0.elapsed()
        );
    }

    /// A server that answers each request with the next of `answers` (status, body), then 200.
    fn answering(answers: Vec<(u16, &'static str)>) -> (Client, Arc<std::sync::Mutex<Vec<String>>>) {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        let svc = tower::service_fn(move |req: Request<Body>| {
            let mut seen = s.lock().unwrap();
            seen.push(format!("{} {}", req.method(), req.uri().path()));
            let (code, body) = answers.get(seen.len() - 1).copied().unwrap_or((200, "{}"));
            async move {
                Ok::<_, std::convert::Infallible>(
                    Response::builder()
                        .status(code)
                        .body(Body::from(body.as_bytes().to_vec()))
                        .unwrap(),
                )
            }
        });
        (Client::new(Retrying::new(Client::new(svc, "default")), "default"), seen)
    }

    const CONFLICT: &str =
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"AlreadyExists","code":409}"#;
    const NOT_FOUND: &str = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#;

    #[tokio::test(start_paused = true)]
    async fn a_create_stored_despite_a_500_is_read_back() {
        let obj = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"a"}}"#;
        let (client, seen) = answering(vec![(500, "{}"), (409, CONFLICT), (200, obj)]);
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "a");
        let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_str(obj).unwrap();
        let got = api.create(&Default::default(), &cm).await.unwrap();
        assert_eq!(got.metadata.name.as_deref(), Some("cm"));
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "POST /api/v1/namespaces/a/configmaps",
                "POST /api/v1/namespaces/a/configmaps",
                "GET /api/v1/namespaces/a/configmaps/cm"
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_plain_conflict_stays_a_conflict() {
        let obj = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"a"}}"#;
        let (client, seen) = answering(vec![(409, CONFLICT)]);
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "a");
        let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_str(obj).unwrap();
        assert!(matches!(api.create(&Default::default(), &cm).await, Err(kube::Error::Api(s)) if s.code == 409));
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_delete_done_despite_a_504_succeeds() {
        let (client, _) = answering(vec![(504, "{}"), (404, NOT_FOUND)]);
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client.clone(), "a");
        assert!(api.delete("cm", &Default::default()).await.is_ok());
        let (client, _) = answering(vec![(404, NOT_FOUND)]);
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "a");
        assert!(matches!(api.delete("cm", &Default::default()).await, Err(kube::Error::Api(s)) if s.code == 404));
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_cut_mid_body_is_retried() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let svc = tower::service_fn(move |_req: Request<Body>| {
            let n = c.fetch_add(1, Ordering::SeqCst);
            async move {
                let chunks: Vec<Result<hyper::body::Frame<Bytes>, std::io::Error>> = if n == 0 {
                    vec![
                        Ok(hyper::body::Frame::data(Bytes::from_static(b"{\"kind\":"))),
                        Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset")),
                    ]
                } else {
                    vec![Ok(hyper::body::Frame::data(Bytes::from_static(
                        br#"{"major":"1","minor":"33"}"#,
                    )))]
                };
                let body = http_body_util::StreamBody::new(futures::stream::iter(chunks));
                Ok::<_, std::convert::Infallible>(Response::builder().status(200).body(body).unwrap())
            }
        });
        let client = Client::new(Retrying::new(Client::new(svc, "default")), "default");
        let text = client.request_text(get()).await.unwrap();
        assert!(text.contains("33"), "{text}");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    /// A server whose attempt `n` (0-based) ends as `answer(n)` says: a response with that
    /// status and body, or (None) a connection reset before any answer.
    fn counting(answer: fn(u32) -> Option<(u16, &'static str)>) -> (Client, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let svc = tower::service_fn(move |_req: Request<Body>| {
            let n = c.fetch_add(1, Ordering::SeqCst);
            async move {
                match answer(n) {
                    None => Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "connection reset",
                    )),
                    Some((code, body)) => Ok(Response::builder()
                        .status(code)
                        .body(Body::from(body.as_bytes().to_vec()))
                        .unwrap()),
                }
            }
        });
        (
            Client::new(Retrying::new(Client::new(svc, "default")), "default"),
            calls,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_connections_are_retried_for_gets() {
        let (client, calls) = counting(|n| (n > 0).then_some((200, "{}")));
        client.request_text(get()).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    const WEBHOOK_500: &str = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Internal error occurred: failed calling webhook \"deny.k8s.io\": context deadline exceeded","reason":"InternalError","code":500}"#;

    #[tokio::test(start_paused = true)]
    async fn a_webhook_refusal_is_not_replayed() {
        let obj = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"a"}}"#;
        let (client, seen) = answering(vec![(500, WEBHOOK_500)]);
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "a");
        let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_str(obj).unwrap();
        let err = api.create(&Default::default(), &cm).await.unwrap_err();
        assert!(
            matches!(&err, kube::Error::Api(s) if s.message.contains("failed calling webhook")),
            "{err}"
        );
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_answer_beats_a_connection_lost_after_it() {
        let (client, calls) = counting(|n| {
            (n == 0).then_some((
                500,
                r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Internal error occurred: etcdserver: request timed out","reason":"InternalError","code":500}"#,
            ))
        });
        let err = client.request_text(get()).await.unwrap_err();
        assert!(matches!(&err, kube::Error::Api(s) if s.code == 500), "{err}");
        assert!(calls.load(Ordering::SeqCst) > 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_replace_stored_despite_a_504_is_read_back() {
        let sent = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"a","resourceVersion":"5"},"data":{"k":"v2"}}"#;
        let stored = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"a","resourceVersion":"6"},"data":{"k":"v2"}}"#;
        let older = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"a","resourceVersion":"6"},"data":{"k":"other"}}"#;
        let conflict = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409}"#;
        let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_str(sent).unwrap();
        let (client, seen) = answering(vec![(504, "{}"), (409, conflict), (200, stored)]);
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "a");
        let got = api.replace("cm", &Default::default(), &cm).await.unwrap();
        assert_eq!(got.metadata.resource_version.as_deref(), Some("6"));
        assert_eq!(seen.lock().unwrap().len(), 3);
        // Someone else's write in between: the conflict stands.
        let (client, _) = answering(vec![(504, "{}"), (409, conflict), (200, older)]);
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "a");
        assert!(matches!(api.replace("cm", &Default::default(), &cm).await, Err(kube::Error::Api(s)) if s.code == 409));
    }
}
