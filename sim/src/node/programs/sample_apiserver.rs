//! `/kube-sample-apiserver` of the e2e `sample-apiserver` image (k8s.io/sample-apiserver):
//! the aggregated API server of upstream's Aggregator conformance case, serving group
//! `wardle.example.com` (`v1alpha1`: flunders, fischers; `v1beta1`: flunders) over HTTPS on
//! `--secure-port` (443) with the mounted `--tls-cert-file`/`--tls-private-key-file`.
//!
//! Like the real one it needs its etcd (`--etcd-servers`): it does not listen until a GET
//! of the first server's `/health` answers, and `/readyz` fails while etcd does not answer.
//! Authentication is the front proxy's: the user is the `X-Remote-User` header (groups in
//! `X-Remote-Group`); a request without it is `system:anonymous` and refused (403), as the
//! real server's delegated authorizer refuses an anonymous caller. Health paths are open.
//! Objects live in [`super::sample_apiserver_store`]; lists honour `labelSelector`, and
//! `watch=true` streams events.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use super::sample_apiserver_store::{self as store, GROUP, Kind, Objects, Refusal};
use super::servers::{listen, serve_tls, tls_from_pem};
use super::{Ctx, until_stopped};
use crate::api::selector::LabelSelector;

/// How often the etcd connection is retried while it does not answer.
const ETCD_RETRY: Duration = Duration::from_secs(1);

/// The served versions, preferred first.
const VERSIONS: [&str; 2] = ["v1beta1", "v1alpha1"];

/// What every request shares.
struct Server {
    ctx: Ctx,
    etcd: SocketAddr,
    objects: Objects,
}

/// Runs `kube-sample-apiserver ARGS`.
pub async fn run(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, _) = super::agnhost::flags(&args);
    let etcd_url = f
        .get("etcd-servers")
        .and_then(|s| s.split(',').next().map(String::from))
        .unwrap_or_default();
    if etcd_url.is_empty() {
        ctx.out.err_line("Error: --etcd-servers must be specified");
        return 1;
    }
    let etcd = match super::etcd::client_port(&etcd_url) {
        Ok(p) => SocketAddr::from(([127, 0, 0, 1], p)),
        Err(e) => {
            ctx.out.err_line(&format!("Error: {e}"));
            return 1;
        }
    };
    let port = match f.get("secure-port").map(|p| p.parse::<u16>()) {
        None => 443,
        Some(Ok(p)) => p,
        Some(Err(_)) => {
            ctx.out.err_line("Error: invalid argument for \"--secure-port\" flag");
            return 1;
        }
    };
    let read = |flag: &str| {
        let path = f.get(flag).cloned().unwrap_or_default();
        ctx.fs.read(&path).map_err(|e| format!("open {path}: {e}"))
    };
    let config = match (read("tls-cert-file"), read("tls-private-key-file")) {
        (Ok(c), Ok(k)) => tls_from_pem(&c, &k),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    let config = match config {
        Ok(c) => c,
        Err(e) => {
            ctx.out
                .err_line(&format!("Error: failed to load serving certificate: {e}"));
            return 1;
        }
    };
    let server = Arc::new(Server {
        ctx: ctx.clone(),
        etcd,
        objects: Objects::default(),
    });
    // The storage backend must answer before anything is served.
    let mut retry = tokio::time::interval(ETCD_RETRY);
    loop {
        tokio::select! {
            () = ctx.cancel.cancelled() => return super::terminated_code(ctx.pod.os),
            _ = retry.tick() => {}
        }
        match server.etcd_health().await {
            Ok(()) => break,
            Err(e) => ctx.out.err_line(&format!(
                "W0000 logging.go:59] [core] [Channel #1 SubChannel #2] grpc: addrConn.createTransport failed to connect to {{Addr: \"{etcd}\"}}. Err: connection error: desc = \"transport: Error while dialing: {e}\""
            )),
        }
    }
    let listener = match listen(ctx.pod.ip, port) {
        Ok(l) => l,
        Err(e) => {
            ctx.out.err_line(&format!(
                "Error: failed to create listener: listen tcp 0.0.0.0:{port}: bind: {e}"
            ));
            return 1;
        }
    };
    let app = Router::new().fallback(handle).with_state(server);
    serve_tls(listener, app, config, ctx.cancel.clone());
    ctx.out
        .line(&format!("I0000 secure_serving.go:213] Serving securely on [::]:{port}"));
    until_stopped(&ctx).await
}

impl Server {
    /// GET `/health` of etcd over the pod's network.
    async fn etcd_health(&self) -> Result<(), String> {
        let tcp = self
            .ctx
            .net
            .dialer()
            .tcp(&self.ctx.source(), self.etcd)
            .await
            .map_err(|e| format!("dial tcp {}: {e}", self.etcd))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let req = http::Request::get("/health")
            .header(http::header::HOST, self.etcd.to_string())
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let ok = resp.status().is_success();
        let body = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        let healthy = serde_json::from_slice::<Value>(&body).is_ok_and(|v| v["health"] == "true");
        if ok && healthy {
            Ok(())
        } else {
            Err("etcd is unhealthy".into())
        }
    }
}

fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Response {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    if let Some(d) = details {
        s["details"] = d;
    }
    json_out(
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &s,
    )
}

fn json_out(code: StatusCode, v: &Value) -> Response {
    (code, [(http::header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

fn refused(k: Kind, name: &str, r: &Refusal) -> Response {
    status(
        r.code,
        r.reason,
        &r.message,
        Some(json!({"name": name, "group": GROUP, "kind": k.plural})),
    )
}

fn not_found() -> Response {
    status(
        404,
        "NotFound",
        "the server could not find the requested resource",
        Some(json!({})),
    )
}

/// The object as the client sees it: with the type of the version it asked for.
fn typed(mut obj: Value, k: Kind, version: &str) -> Value {
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), json!(format!("{GROUP}/{version}")));
        o.insert("kind".into(), json!(k.kind));
    }
    obj
}

fn group_doc() -> Value {
    let versions: Vec<Value> = VERSIONS
        .iter()
        .map(|v| json!({"groupVersion": format!("{GROUP}/{v}"), "version": v}))
        .collect();
    json!({"name": GROUP, "versions": versions, "preferredVersion": versions[0]})
}

fn resource_list(version: &str) -> Value {
    let resources: Vec<Value> = store::kinds(version)
        .iter()
        .map(|k| {
            json!({"name": k.plural, "singularName": k.singular, "namespaced": k.namespaced, "kind": k.kind,
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]})
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/{version}"), "resources": resources})
}

/// The request's user from the front-proxy headers, `system:anonymous` without them.
fn user(headers: &HeaderMap) -> Option<String> {
    headers
        .get("x-remote-user")
        .and_then(|v| v.to_str().ok())
        .filter(|u| !u.is_empty())
        .map(String::from)
}

async fn handle(State(srv): State<Arc<Server>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().trim_end_matches('/').to_string();
    match path.as_str() {
        "/healthz" | "/livez" => return (StatusCode::OK, "ok").into_response(),
        "/readyz" => {
            return match srv.etcd_health().await {
                Ok(()) => (StatusCode::OK, "ok").into_response(),
                Err(e) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("[-]etcd failed: {e}\nreadyz check failed\n"),
                )
                    .into_response(),
            };
        }
        _ => {}
    }
    let segs: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let q: std::collections::HashMap<String, String> =
        form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let Some(who) = user(&headers) else {
        let verb = verb_of(&method, &segs, &q);
        return forbidden_anonymous(&segs, &path, &verb);
    };
    tracing::debug!(user = %who, %method, %path, "sample-apiserver request");
    match segs.as_slice() {
        ["apis"] => json_out(
            StatusCode::OK,
            &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group_doc()]}),
        ),
        ["apis", g] if *g == GROUP => {
            let mut d = group_doc();
            d["kind"] = json!("APIGroup");
            d["apiVersion"] = json!("v1");
            json_out(StatusCode::OK, &d)
        }
        ["apis", g, v] if *g == GROUP && VERSIONS.contains(v) => json_out(StatusCode::OK, &resource_list(v)),
        ["apis", g, v, rest @ ..] if *g == GROUP && VERSIONS.contains(v) => {
            let (ns, rest): (Option<&str>, &[&str]) = match rest {
                ["namespaces", ns, more @ ..] if !more.is_empty() => (Some(ns), more),
                other => (None, other),
            };
            let Some((plural, after)) = rest.split_first() else {
                return not_found();
            };
            let Some(k) = store::kinds(v).iter().copied().find(|k| k.plural == *plural) else {
                return not_found();
            };
            if ns.is_some() && !k.namespaced {
                return not_found();
            }
            match after {
                [] => collection(&srv, k, v, ns, &method, &q, &body).await,
                [name] => object(&srv, k, v, ns.unwrap_or_default(), name, &method, &headers, &body),
                _ => not_found(),
            }
        }
        _ => not_found(),
    }
}

fn verb_of(method: &Method, segs: &[&str], q: &std::collections::HashMap<String, String>) -> String {
    // `/apis/G/V/namespaces/NS/PLURAL/NAME` or `/apis/G/V/PLURAL/NAME`.
    let named = segs.len() == if segs.get(3) == Some(&"namespaces") { 7 } else { 5 };
    match *method {
        Method::GET if q.get("watch").is_some_and(|w| w == "true" || w == "1") => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "get",
    }
    .to_string()
}

/// The delegated authorizer's refusal of the anonymous user.
fn forbidden_anonymous(segs: &[&str], path: &str, verb: &str) -> Response {
    let resource = match segs {
        ["apis", _, _, "namespaces", ns, plural, ..] => Some((*plural, format!(" in the namespace {ns:?}"))),
        ["apis", _, _, plural, ..] => Some((*plural, String::new())),
        _ => None,
    };
    let message = match resource {
        Some((plural, scope)) => format!(
            "{plural}.{GROUP} is forbidden: User \"system:anonymous\" cannot {verb} resource {plural:?} in API group {GROUP:?}{scope}"
        ),
        None => format!("forbidden: User \"system:anonymous\" cannot get path {path:?}"),
    };
    status(403, "Forbidden", &message, Some(json!({})))
}

async fn collection(
    srv: &Arc<Server>,
    k: Kind,
    version: &str,
    ns: Option<&str>,
    method: &Method,
    q: &std::collections::HashMap<String, String>,
    body: &Bytes,
) -> Response {
    let selector = match LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or_default()) {
        Ok(s) => s,
        Err(e) => return status(400, "BadRequest", &e.message, None),
    };
    match *method {
        Method::GET if q.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            watch(srv, k, version, ns, selector, q)
        }
        Method::GET => {
            let (items, rv) = srv.objects.list(k, ns);
            let items: Vec<Value> = items.into_iter().filter(|o| selector.matches(o)).collect();
            json_out(
                StatusCode::OK,
                &json!({"kind": format!("{}List", k.kind), "apiVersion": format!("{GROUP}/{version}"),
                    "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
            )
        }
        Method::POST => {
            let Ok(obj) = serde_json::from_slice::<Value>(body) else {
                return status(
                    400,
                    "BadRequest",
                    "the body of the request was in an unknown format",
                    None,
                );
            };
            if let Some(bad) = wrong_type(&obj, k, version) {
                return status(400, "BadRequest", &bad, None);
            }
            let sent_ns = obj
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if k.namespaced && !sent_ns.is_empty() && Some(sent_ns) != ns {
                return status(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                    None,
                );
            }
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            match srv.objects.create(k, ns.unwrap_or_default(), obj) {
                Ok(o) => json_out(StatusCode::CREATED, &typed(o, k, version)),
                Err(r) => refused(k, &name, &r),
            }
        }
        Method::DELETE => {
            let (items, rv) = srv.objects.list(k, ns);
            let mut gone = Vec::new();
            for o in items.into_iter().filter(|o| selector.matches(o)) {
                let n = o
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let space = o
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if let Ok(d) = srv.objects.delete(k, &space, &n) {
                    gone.push(d);
                }
            }
            json_out(
                StatusCode::OK,
                &json!({"kind": format!("{}List", k.kind), "apiVersion": format!("{GROUP}/{version}"),
                    "metadata": {"resourceVersion": rv.to_string()}, "items": gone}),
            )
        }
        _ => status(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            None,
        ),
    }
}

/// A body of another group, version or kind than the URL's.
fn wrong_type(obj: &Value, k: Kind, version: &str) -> Option<String> {
    let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let want = format!("{GROUP}/{version}");
    ((!av.is_empty() && av != want) || (!kind.is_empty() && kind != k.kind))
        .then(|| format!("the API version in the data ({av}) does not match the expected API version ({want})"))
}

#[expect(clippy::too_many_arguments, reason = "one request's parts, read once")]
fn object(
    srv: &Arc<Server>,
    k: Kind,
    version: &str,
    ns: &str,
    name: &str,
    method: &Method,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let result = match *method {
        Method::GET => srv.objects.get(k, ns, name).map(|o| (StatusCode::OK, o)),
        Method::PUT => match serde_json::from_slice::<Value>(body) {
            Ok(obj) => {
                if let Some(bad) = wrong_type(&obj, k, version) {
                    return status(400, "BadRequest", &bad, None);
                }
                srv.objects.update(k, ns, name, obj).map(|o| (StatusCode::OK, o))
            }
            Err(_) => {
                return status(
                    400,
                    "BadRequest",
                    "the body of the request was in an unknown format",
                    None,
                );
            }
        },
        Method::PATCH => match patched(srv, k, version, ns, name, headers, body) {
            Ok(obj) => srv.objects.update(k, ns, name, obj).map(|o| (StatusCode::OK, o)),
            Err(resp) => return *resp,
        },
        Method::DELETE => {
            return match srv.objects.delete(k, ns, name) {
                Ok(o) => json_out(
                    StatusCode::OK,
                    &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                        "details": {"name": name, "group": GROUP, "kind": k.plural, "uid": o.pointer("/metadata/uid")}}),
                ),
                Err(r) => refused(k, name, &r),
            };
        }
        _ => {
            return status(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                None,
            );
        }
    };
    match result {
        Ok((code, o)) => json_out(code, &typed(o, k, version)),
        Err(r) => refused(k, name, &r),
    }
}

/// The object after a JSON, merge or strategic-merge patch (the wardle types have no patch
/// strategies, so a strategic merge patch merges as a JSON merge patch does).
fn patched(
    srv: &Arc<Server>,
    k: Kind,
    version: &str,
    ns: &str,
    name: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Value, Box<Response>> {
    let current = srv
        .objects
        .get(k, ns, name)
        .map_err(|r| Box::new(refused(k, name, &r)))?;
    let mut doc = typed(current, k, version);
    let ct = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let bad = |e: String| Box::new(status(400, "BadRequest", &e, None));
    let p: Value = serde_json::from_slice(body).map_err(|e| bad(format!("error decoding patch: {e}")))?;
    if ct.starts_with("application/json-patch+json") {
        let ops: json_patch::Patch = serde_json::from_value(p).map_err(|e| bad(e.to_string()))?;
        json_patch::patch(&mut doc, &ops).map_err(|e| Box::new(status(422, "Invalid", &e.to_string(), None)))?;
    } else if ct.starts_with("application/merge-patch+json") || ct.starts_with("application/strategic-merge-patch+json")
    {
        json_patch::merge(&mut doc, &p);
    } else {
        return Err(Box::new(status(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json",
            None,
        )));
    }
    // The patch applies to what is stored now, whatever version it was read at.
    if let Some(m) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    Ok(doc)
}

/// A watch: the current objects as ADDED, then every change, until `timeoutSeconds` or the
/// container stops.
fn watch(
    srv: &Arc<Server>,
    k: Kind,
    version: &str,
    ns: Option<&str>,
    selector: LabelSelector,
    q: &std::collections::HashMap<String, String>,
) -> Response {
    let rx = srv.objects.subscribe();
    let (items, _) = srv.objects.list(k, ns);
    let version = version.to_string();
    let ns = ns.map(String::from);
    let frame = {
        let version = version.clone();
        move |kind: &str, o: Value| Bytes::from(format!("{}\n", json!({"type": kind, "object": typed(o, k, &version)})))
    };
    let initial: Vec<Result<Bytes, std::io::Error>> = items
        .into_iter()
        .filter(|o| selector.matches(o))
        .map(|o| Ok(frame("ADDED", o)))
        .collect();
    let secs = q
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(1800);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let cancel = srv.ctx.cancel.clone();
    let later = futures::stream::unfold((rx, selector), move |(mut rx, selector)| {
        let (cancel, ns, frame) = (cancel.clone(), ns.clone(), frame.clone());
        async move {
            loop {
                let ev = tokio::select! {
                    () = cancel.cancelled() => return None,
                    () = tokio::time::sleep_until(deadline) => return None,
                    ev = rx.recv() => ev,
                };
                match ev {
                    Ok(e) => {
                        let in_ns = ns
                            .as_deref()
                            .is_none_or(|n| e.object.pointer("/metadata/namespace").and_then(Value::as_str) == Some(n));
                        if e.plural == k.plural && in_ns && selector.matches(&e.object) {
                            let bytes = frame(e.kind, e.object);
                            return Some((Ok::<_, std::io::Error>(bytes), (rx, selector)));
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return None,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    });
    let stream = futures::stream::iter(initial).chain(later);
    (
        StatusCode::OK,
        [(http::header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_callers_are_refused_with_the_authorizer_message() {
        let segs = ["apis", GROUP, "v1alpha1", "namespaces", "default", "flunders"];
        let r = forbidden_anonymous(&segs, "/apis/x", "list");
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert_eq!(verb_of(&Method::GET, &segs, &Default::default()), "list");
        let named = ["apis", GROUP, "v1alpha1", "namespaces", "default", "flunders", "f"];
        assert_eq!(verb_of(&Method::DELETE, &named, &Default::default()), "delete");
        assert_eq!(
            verb_of(
                &Method::GET,
                &["apis", GROUP, "v1alpha1", "fischers", "x"],
                &Default::default()
            ),
            "get"
        );
    }

    #[test]
    fn discovery_lists_flunders_in_both_versions_and_fischers_in_v1alpha1() {
        let l = resource_list("v1alpha1");
        assert_eq!(l["resources"].as_array().unwrap().len(), 2);
        assert_eq!(l["resources"][0]["name"], "flunders");
        assert_eq!(resource_list("v1beta1")["resources"].as_array().unwrap().len(), 1);
        assert_eq!(group_doc()["preferredVersion"]["version"], "v1beta1");
    }

    #[test]
    fn store_keeps_objects_with_versions() {
        let o = Objects::default();
        let f = o
            .create(
                store::FLUNDERS,
                "default",
                json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
                "metadata": {"name": "a", "labels": {"sample-label": "true"}}}),
            )
            .unwrap();
        assert_eq!(f["metadata"]["namespace"], "default");
        assert!(f.get("kind").is_none());
        let e = o
            .create(store::FLUNDERS, "default", json!({"metadata": {"name": "a"}}))
            .unwrap_err();
        assert_eq!((e.code, e.reason), (409, "AlreadyExists"));
        let stale = json!({"metadata": {"name": "a", "resourceVersion": "0"}});
        assert_eq!(o.update(store::FLUNDERS, "default", "a", stale).unwrap_err().code, 409);
        let sel = LabelSelector::parse("sample-label=true").unwrap();
        let (items, _) = o.list(store::FLUNDERS, Some("default"));
        assert_eq!(items.iter().filter(|i| sel.matches(i)).count(), 1);
        o.delete(store::FLUNDERS, "default", "a").unwrap();
        assert_eq!(o.get(store::FLUNDERS, "default", "a").unwrap_err().code, 404);
    }
}
