//! `/admission-webhook/admission-webhook` of the windows-gmsa admission webhook image
//! (kubernetes-sigs/windows-gmsa `admission-webhook`, `sigwindowstools/k8s-gmsa-webhook`):
//! serves HTTPS on `HTTPS_PORT` (443) with the certificate and key named by `TLS_CRT` and
//! `TLS_KEY`, talking to the API server with the pod's in-cluster credentials.
//!
//! - `/mutate` inlines, for each `windowsOptions` (pod, containers, init containers) that
//!   names a `gmsaCredentialSpecName` without contents, the `credspec` of that
//!   GMSACredentialSpec as `gmsaCredentialSpec` (a JSONPatch `add`).
//! - `/validate` refuses a pod whose service account may not `use` a named credential spec (a
//!   LocalSubjectAccessReview as that account), whose inlined contents differ from the named
//!   resource's, or that has contents without a name; on update, any change of either.
//! - `/health` answers 204, `/info` the version.
//!
//! Messages and HTTP codes in the responses are the webhook's own (webhook.go,
//! kube_client.go).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

use super::servers::{listen, serve_tls, tls_from_pem};
use super::{Ctx, until_stopped};

/// The CRD's coordinates (kube_client.go).
const CRD_GROUP: &str = "windows.k8s.io";
const CRD_VERSION: &str = "v1";
const CRD_RESOURCE: &str = "gmsacredentialspecs";
/// What the image reports on `/info`.
const VERSION: &str = "0.12.1";

const SA_TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
const SA_CA_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

/// The webhook's client for the API server: client-go's in-cluster configuration.
#[derive(Clone)]
struct Api {
    ctx: Ctx,
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
}

impl Api {
    /// `rest.InClusterConfig()`.
    fn in_cluster(ctx: &Ctx) -> Result<Api, String> {
        let get = |k: &str| ctx.env.get(k).filter(|v| !v.is_empty()).cloned();
        let (Some(host), Some(port)) = (get("KUBERNETES_SERVICE_HOST"), get("KUBERNETES_SERVICE_PORT")) else {
            return Err("unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined".into());
        };
        let addr = match (host.parse::<IpAddr>(), port.parse::<u16>()) {
            (Ok(ip), Ok(p)) => SocketAddr::new(ip, p),
            _ => return Err(format!("parse \"https://{host}:{port}\": invalid host or port")),
        };
        ctx.fs
            .read(SA_TOKEN_FILE)
            .map_err(|e| format!("open {SA_TOKEN_FILE}: {e}"))?;
        let mut roots = rustls::RootCertStore::empty();
        let pem = ctx.fs.read(SA_CA_FILE).map_err(|e| format!("open {SA_CA_FILE}: {e}"))?;
        for der in CertificateDer::pem_slice_iter(&pem).flatten() {
            roots
                .add(der)
                .map_err(|e| format!("unable to load root certificates: {e}"))?;
        }
        let tls = Arc::new(
            rustls::ClientConfig::builder()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        );
        Ok(Api {
            ctx: ctx.clone(),
            addr,
            tls,
        })
    }

    /// One request; `(status, body)`. The token file is read per request, as client-go's
    /// file-backed token source reloads it.
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<(u16, Value), String> {
        let url = format!("https://{}{path}", self.addr);
        let fail = |e: String| format!("{method} {url:?}: {e}");
        let token = self
            .ctx
            .fs
            .read(SA_TOKEN_FILE)
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
            .map_err(|e| fail(format!("open {SA_TOKEN_FILE}: {e}")))?;
        let exchange = async {
            let tcp = self
                .ctx
                .net
                .dialer()
                .tcp(&self.ctx.source(), self.addr)
                .await
                .map_err(|e| fail(format!("dial tcp {}: {e}", self.addr)))?;
            let stream = tokio_rustls::TlsConnector::from(self.tls.clone())
                .connect(ServerName::IpAddress(self.addr.ip().into()), tcp)
                .await
                .map_err(|e| fail(format!("tls: {e}")))?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| fail(e.to_string()))?;
            tokio::spawn(async move {
                // The connection ends with the response; an error reached the request.
                let _ = conn.await;
            });
            let payload = body.map(|b| b.to_string()).unwrap_or_default();
            let req = http::Request::builder()
                .method(method)
                .uri(path)
                .header("Host", self.addr.to_string())
                .header("Accept", "application/json")
                .header("Content-Type", "application/json")
                .header(
                    "User-Agent",
                    "admission-webhook/v0.0.0 (linux/amd64) kubernetes/$Format",
                )
                .header("Authorization", format!("Bearer {token}"))
                .body(Full::new(Bytes::from(payload)))
                .map_err(|e| fail(e.to_string()))?;
            let resp = sender.send_request(req).await.map_err(|e| fail(e.to_string()))?;
            let status = resp.status().as_u16();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| fail(e.to_string()))?
                .to_bytes();
            Ok((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
        };
        tokio::time::timeout(Duration::from_secs(30), exchange)
            .await
            .map_err(|_| fail("context deadline exceeded".into()))?
    }

    /// `retrieveCredSpecContents`: the resource's `credspec` as JSON, or the error and the
    /// HTTP code the webhook answers with.
    async fn cred_spec_contents(&self, name: &str) -> Result<String, (String, u16)> {
        let path = format!("/apis/{CRD_GROUP}/{CRD_VERSION}/{CRD_RESOURCE}/{name}");
        let (status, body) = self
            .call("GET", &path, None)
            .await
            .map_err(|e| (format!("unable to retrieve the contents of cred spec {name}: {e}"), 500))?;
        if status == 404 {
            return Err((format!("cred spec {name} does not exist"), 404));
        }
        if !(200..300).contains(&status) {
            let msg = body
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            return Err((
                format!("unable to retrieve the contents of cred spec {name}: {msg}"),
                500,
            ));
        }
        match body.get("credspec") {
            None | Some(Value::Null) => Err((format!("cred spec {name} does not have a credspec key"), 417)),
            Some(Value::String(s)) if s.is_empty() => {
                Err((format!("cred spec {name} does not have a credspec key"), 417))
            }
            // Go marshals map keys sorted, as serde_json's default map does.
            Some(v) => Ok(v.to_string()),
        }
    }

    /// `isAuthorizedToUseCredSpec`: a LocalSubjectAccessReview of `use` on the credential
    /// spec as the service account; `(allowed, reason)`.
    async fn may_use(&self, sa: &str, ns: &str, name: &str) -> (bool, String) {
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "LocalSubjectAccessReview",
            "metadata": {"namespace": ns},
            "spec": {
                "resourceAttributes": {
                    "namespace": ns, "verb": "use", "group": CRD_GROUP, "version": CRD_VERSION,
                    "resource": CRD_RESOURCE, "name": name,
                },
                "user": format!("system:serviceaccount:{ns}:{sa}"),
                "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}")],
            }
        });
        let path = format!("/apis/authorization.k8s.io/v1/namespaces/{ns}/localsubjectaccessreviews");
        match self.call("POST", &path, Some(review)).await {
            Ok((status, body)) if (200..300).contains(&status) => {
                let st = &body["status"];
                let allowed = st["allowed"].as_bool().unwrap_or(false) && !st["denied"].as_bool().unwrap_or(false);
                (allowed, st["reason"].as_str().unwrap_or_default().to_string())
            }
            Ok((_, body)) => (
                false,
                format!(
                    "error when checking authz access: {}",
                    body.get("message").and_then(Value::as_str).unwrap_or_default()
                ),
            ),
            Err(e) => (false, format!("error when checking authz access: {e}")),
        }
    }
}

/// A refusal: message and HTTP code (`podAdmissionError`).
type Refusal = (String, u16);

/// One `windowsOptions` of a pod: kind (`pod`, `container`, `initContainer`), owner name,
/// container index, and the options.
struct Options<'a> {
    kind: &'static str,
    name: String,
    index: usize,
    opts: &'a Value,
}

/// `iterateOverWindowsSecurityOptions`: the pod's, then each container's and init
/// container's non-null `windowsOptions`.
fn windows_options(pod: &Value) -> Vec<Options<'_>> {
    let mut out = Vec::new();
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(o) = pod
        .pointer("/spec/securityContext/windowsOptions")
        .filter(|v| v.is_object())
    {
        out.push(Options {
            kind: "pod",
            name: pod_name.to_string(),
            index: 0,
            opts: o,
        });
    }
    for (list, kind) in [("containers", "container"), ("initContainers", "initContainer")] {
        for (i, c) in pod["spec"][list].as_array().into_iter().flatten().enumerate() {
            if let Some(o) = c.pointer("/securityContext/windowsOptions").filter(|v| v.is_object()) {
                out.push(Options {
                    kind,
                    name: c["name"].as_str().unwrap_or_default().to_string(),
                    index: i,
                    opts: o,
                });
            }
        }
    }
    out
}

fn field<'a>(o: &'a Value, k: &str) -> Option<&'a str> {
    o.get(k).and_then(Value::as_str)
}

/// `mutateCreateRequest`: the JSONPatch inlining every named credential spec without
/// contents.
async fn mutate(api: &Api, pod: &Value) -> Result<Vec<Value>, Refusal> {
    let mut patches = Vec::new();
    for o in windows_options(pod) {
        let Some(name) = field(o.opts, "gmsaCredentialSpecName") else {
            continue;
        };
        if o.opts.get("gmsaCredentialSpec").is_some_and(|v| !v.is_null()) {
            continue;
        }
        let contents = api.cred_spec_contents(name).await?;
        let partial = match o.kind {
            "container" => format!("/containers/{}", o.index),
            "initContainer" => format!("/initContainers/{}", o.index),
            _ => String::new(),
        };
        patches.push(json!({
            "op": "add",
            "path": format!("/spec{partial}/securityContext/windowsOptions/gmsaCredentialSpec"),
            "value": contents,
        }));
    }
    Ok(patches)
}

/// `compareCredSpecContents`: equal text, or equal JSON objects.
fn same_contents(from_pod: &str, from_crd: &str) -> Result<bool, String> {
    if from_pod == from_crd {
        return Ok(true);
    }
    let a: serde_json::Map<String, Value> =
        serde_json::from_str(from_pod).map_err(|e| format!("unable to parse {from_pod:?} as a JSON object: {e}"))?;
    let b: serde_json::Map<String, Value> = serde_json::from_str(from_crd)
        .map_err(|e| format!("unable to parse CRD {from_crd:?} as a JSON object: {e}"))?;
    Ok(a == b)
}

/// `validateCreateRequest`.
async fn validate_create(api: &Api, pod: &Value, ns: &str) -> Result<(), Refusal> {
    let sa = pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    for o in windows_options(pod) {
        let contents = field(o.opts, "gmsaCredentialSpec");
        match field(o.opts, "gmsaCredentialSpecName") {
            Some(name) => {
                let (allowed, reason) = api.may_use(sa, ns, name).await;
                if !allowed {
                    let mut msg = format!("service account {sa:?} is not authorized to `use` GMSA cred spec {name:?}");
                    if !reason.is_empty() {
                        msg.push_str(&format!(", reason: {reason:?}"));
                    }
                    return Err((msg, 403));
                }
                if let Some(contents) = contents {
                    let expected = api.cred_spec_contents(name).await?;
                    let same = same_contents(contents, &expected);
                    if !matches!(same, Ok(true)) {
                        let mut msg = format!(
                            "the GMSA cred spec contents for {} {:?} does not match the contents of GMSA resource {name:?}",
                            o.kind, o.name
                        );
                        if let Err(e) = same {
                            msg.push_str(&format!(": {e}"));
                        }
                        return Err((msg, 422));
                    }
                }
            }
            None if contents.is_some() => {
                return Err((
                    format!(
                        "{} {:?} has a GMSA cred spec set, but does not define the name of the corresponding resource",
                        o.kind, o.name
                    ),
                    422,
                ));
            }
            None => {}
        }
    }
    Ok(())
}

/// `validateUpdateRequest`: neither the name nor the contents may change.
fn validate_update(pod: &Value, old: &Value) -> Result<(), Refusal> {
    let old_opts = windows_options(old);
    for o in windows_options(pod) {
        let before = old_opts
            .iter()
            .find(|p| (p.kind == "pod") == (o.kind == "pod") && (o.kind == "pod" || p.name == o.name))
            .map(|p| p.opts);
        let get = |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_str).map(str::to_string);
        let mut changed = Vec::new();
        if get(Some(o.opts), "gmsaCredentialSpecName") != get(before, "gmsaCredentialSpecName") {
            changed.push("name");
        }
        if get(Some(o.opts), "gmsaCredentialSpec") != get(before, "gmsaCredentialSpec") {
            changed.push("contents");
        }
        if !changed.is_empty() {
            return Err((
                format!(
                    "cannot update an existing pod's GMSA settings (GMSA {} modified on {} {:?})",
                    changed.join(" and "),
                    o.kind,
                    o.name
                ),
                403,
            ));
        }
    }
    Ok(())
}

/// `deniedAdmissionResponse`.
fn denied((message, code): Refusal) -> Value {
    json!({"allowed": false, "status": {"metadata": {}, "message": message, "code": code}})
}

/// `validateOrMutate` for one review.
async fn review(api: &Api, ar: &Value, validating: bool) -> Value {
    let req = &ar["request"];
    if req.pointer("/kind/kind").and_then(Value::as_str) != Some("Pod") {
        let kind = req.pointer("/kind/kind").and_then(Value::as_str).unwrap_or_default();
        return denied((format!("expected a Pod object, got a {kind}"), 400));
    }
    let pod = &req["object"];
    let ns = req["namespace"].as_str().unwrap_or_default();
    match (req["operation"].as_str().unwrap_or_default(), validating) {
        ("CREATE", true) => match validate_create(api, pod, ns).await {
            Ok(()) => json!({"allowed": true}),
            Err(r) => denied(r),
        },
        ("CREATE", false) => match mutate(api, pod).await {
            Ok(p) if p.is_empty() => json!({"allowed": true}),
            Ok(p) => json!({
                "allowed": true,
                "patch": base64::engine::general_purpose::STANDARD.encode(Value::Array(p).to_string()),
                "patchType": "JSONPatch",
            }),
            Err(r) => denied(r),
        },
        ("UPDATE", true) => match validate_update(pod, &req["oldObject"]) {
            Ok(()) => json!({"allowed": true}),
            Err(r) => denied(r),
        },
        ("UPDATE", false) => json!({"allowed": true}),
        (op, _) => denied((format!("unpexpected operation {op}"), 400)),
    }
}

/// `ServeHTTP`: routing, method and content type, then the review.
async fn serve(api: Api, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let validating = match uri.path() {
        "/validate" => true,
        "/mutate" => false,
        "/info" => {
            return (
                [("Content-Type", "application/json")],
                json!({"version": VERSION}).to_string(),
            )
                .into_response();
        }
        "/health" => return StatusCode::NO_CONTENT.into_response(),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    if method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    if headers.get("Content-Type").and_then(|v| v.to_str().ok()) != Some("application/json") {
        return StatusCode::UNSUPPORTED_MEDIA_TYPE.into_response();
    }
    let response = match serde_json::from_slice::<Value>(&body) {
        Err(e) => denied((
            format!("unable to unmarshall JSON body as an admission review: {e}"),
            400,
        )),
        Ok(ar) if ar.get("request").is_none_or(Value::is_null) => {
            denied(("no 'Request' field in JSON body".into(), 400))
        }
        Ok(ar) => {
            let mut r = review(&api, &ar, validating).await;
            r["uid"] = ar["request"]["uid"].clone();
            r
        }
    };
    let out = json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "response": response});
    ([("Content-Type", "application/json")], out.to_string()).into_response()
}

/// Runs the webhook (`main.go`): a missing `TLS_CRT`/`TLS_KEY` or in-cluster configuration
/// panics, as the Go program does.
pub async fn run(ctx: Ctx, _args: Vec<String>) -> i32 {
    let panic = |msg: &str| {
        ctx.out.err_line(&format!("panic: {msg}"));
        2
    };
    let api = match Api::in_cluster(&ctx) {
        Ok(a) => a,
        Err(e) => return panic(&e),
    };
    let env = |k: &str| ctx.env.get(k).cloned().ok_or_else(|| format!("{k} env var not found"));
    let (crt, key) = match (env("TLS_CRT"), env("TLS_KEY")) {
        (Ok(c), Ok(k)) => (c, k),
        (Err(e), _) | (_, Err(e)) => return panic(&e),
    };
    let port = ctx
        .env
        .get("HTTPS_PORT")
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(443);
    let config = match (ctx.fs.read(&crt), ctx.fs.read(&key)) {
        (Ok(c), Ok(k)) => tls_from_pem(&c, &k),
        (Err(e), _) => Err(format!("open {crt}: {e}")),
        (_, Err(e)) => Err(format!("open {key}: {e}")),
    };
    let config = match config {
        Ok(c) => c,
        Err(e) => return panic(&e),
    };
    ctx.out.line(&format!(
        "time=\"{}\" level=info msg=\"starting webhook server at port {port}\"",
        jiff::Timestamp::now()
    ));
    let listener = match listen(ctx.pod.ip, port) {
        Ok(l) => l,
        Err(e) => return panic(&format!("listen tcp :{port}: bind: {e}")),
    };
    let app = Router::new().fallback(any(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let api = api.clone();
        async move { serve(api, method, uri, headers, body).await }
    }));
    serve_tls(listener, app, config, ctx.cancel.clone());
    until_stopped(&ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({
            "metadata": {"name": "p"},
            "spec": {
                "serviceAccountName": "sa",
                "securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "gmsa-e2e"}},
                "containers": [
                    {"name": "c0"},
                    {"name": "c1", "securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "other"}}},
                ],
                "initContainers": [
                    {"name": "i0", "securityContext": {"windowsOptions": {"gmsaCredentialSpec": "{}"}}},
                ],
            }
        })
    }

    #[test]
    fn every_windows_options_is_visited_with_its_owner() {
        let p = pod();
        let seen: Vec<(&str, String, usize)> = windows_options(&p)
            .into_iter()
            .map(|o| (o.kind, o.name, o.index))
            .collect();
        assert_eq!(
            seen,
            vec![
                ("pod", "p".to_string(), 0),
                ("container", "c1".to_string(), 1),
                ("initContainer", "i0".to_string(), 0)
            ]
        );
    }

    #[test]
    fn contents_compare_as_json_objects() {
        assert_eq!(same_contents(r#"{"a":1,"b":2}"#, r#"{"b":2,"a":1}"#), Ok(true));
        assert_eq!(same_contents(r#"{"a":1}"#, r#"{"a":2}"#), Ok(false));
        assert!(same_contents("x", "{}").unwrap_err().contains("as a JSON object"));
    }

    #[test]
    fn updates_may_not_change_the_gmsa_settings() {
        let old = pod();
        let mut new = pod();
        new["spec"]["containers"][1]["securityContext"]["windowsOptions"]["gmsaCredentialSpecName"] = json!("x");
        assert_eq!(validate_update(&old, &old), Ok(()));
        assert_eq!(
            validate_update(&new, &old).unwrap_err().0,
            "cannot update an existing pod's GMSA settings (GMSA name modified on container \"c1\")"
        );
    }
}
