//! `agnhost webhook`: the admission webhook server of upstream's e2e webhook cases
//! (`test/images/agnhost/webhook`), serving HTTPS with the certificate and key files the pod
//! mounts (`--tls-cert-file`, `--tls-private-key-file`, `--port`, default 443) at the paths
//! the cases register, with upstream's denial messages and JSONPatches.
//!
//! AdmissionReview `v1` and `v1beta1` are both answered in the version asked. A request whose
//! Content-Type is not `application/json` gets an empty answer, as upstream writes nothing; a
//! review for another resource than a handler expects makes upstream's handler return no
//! response and its server drop the connection, answered here with an empty 500.

use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use serde_json::{Value, json};

use super::servers::{listen, serve_tls, tls_from_pem};
use super::{Ctx, until_stopped};

/// What an admit function decides: `None` is upstream returning no response at all.
type Verdict = Option<Value>;

/// `toV1AdmissionResponse(err)`: refused with the error as the message.
fn error_response(msg: &str) -> Value {
    json!({"allowed": false, "status": {"metadata": {}, "message": msg}})
}

fn allowed() -> Value {
    json!({"allowed": true})
}

fn denied_reason(reason: &str) -> Value {
    json!({"allowed": false, "status": {"metadata": {}, "reason": reason}})
}

fn denied_message(message: &str) -> Value {
    json!({"allowed": false, "status": {"metadata": {}, "message": message}})
}

/// An allowed answer carrying a JSONPatch (base64 as Go marshals `[]byte`).
fn patched(patch: &str) -> Value {
    use base64::Engine;
    json!({"allowed": true, "patchType": "JSONPatch",
        "patch": base64::engine::general_purpose::STANDARD.encode(patch)})
}

fn request(ar: &Value) -> &Value {
    ar.get("request").unwrap_or(&Value::Null)
}

fn operation(ar: &Value) -> &str {
    request(ar).get("operation").and_then(Value::as_str).unwrap_or_default()
}

fn is_resource(ar: &Value, group: &str, version: &str, resource: &str) -> bool {
    request(ar).get("resource") == Some(&json!({"group": group, "version": version, "resource": resource}))
}

/// The object a validating handler reads: `oldObject` for deletes, else `object`.
fn subject(ar: &Value) -> &Value {
    let key = if operation(ar) == "DELETE" {
        "oldObject"
    } else {
        "object"
    };
    request(ar).get(key).unwrap_or(&Value::Null)
}

fn map_of<'a>(v: &'a Value, ptr: &str) -> Vec<(&'a str, &'a str)> {
    v.pointer(ptr)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

const CONFIGMAP_PATCH_1: &str = r#"[
         { "op": "add", "path": "/data/mutation-stage-1", "value": "yes" }
     ]"#;
const CONFIGMAP_PATCH_2: &str = r#"[
         { "op": "add", "path": "/data/mutation-stage-2", "value": "yes" }
     ]"#;
const ADD_FIRST_LABEL_PATCH: &str = r#"[
         { "op": "add", "path": "/metadata/labels", "value": {"added-label": "yes"}}
     ]"#;
const ADD_ADDITIONAL_LABEL_PATCH: &str = r#"[
         { "op": "add", "path": "/metadata/labels/added-label", "value": "yes" }
     ]"#;
const UPDATE_LABEL_PATCH: &str = r#"[
         { "op": "replace", "path": "/metadata/labels/added-label", "value": "yes" }
     ]"#;
const PODS_INIT_CONTAINER_PATCH: &str = r#"[
		 {"op":"add","path":"/spec/initContainers","value":[{"image":"webhook-added-image","name":"webhook-added-init-container","resources":{}}]}
	]"#;

fn always_deny(_: &Value) -> Verdict {
    Some(denied_message("this webhook denies all requests"))
}

fn add_label(ar: &Value) -> Verdict {
    let labels = map_of(request(ar).get("object").unwrap_or(&Value::Null), "/metadata/labels");
    let value = labels.iter().find(|(k, _)| *k == "added-label").map(|(_, v)| *v);
    Some(match value {
        _ if labels.is_empty() => patched(ADD_FIRST_LABEL_PATCH),
        None => patched(ADD_ADDITIONAL_LABEL_PATCH),
        Some(v) if v != "yes" => patched(UPDATE_LABEL_PATCH),
        Some(_) => allowed(),
    })
}

fn admit_pods(ar: &Value) -> Verdict {
    if !is_resource(ar, "", "v1", "pods") {
        return Some(error_response("expect resource to be { v1 pods}"));
    }
    let pod = request(ar).get("object").unwrap_or(&Value::Null);
    let mut msg = String::new();
    if let Some((_, v)) = map_of(pod, "/metadata/labels")
        .into_iter()
        .find(|(k, _)| *k == "webhook-e2e-test")
    {
        if v == "webhook-disallow" {
            msg.push_str("the pod contains unwanted label; ");
        }
        if v == "wait-forever" {
            // Upstream blocks this handler forever; the caller's timeout ends the call.
            return None;
        }
    }
    for c in pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if c.get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .contains("webhook-disallow")
        {
            msg.push_str("the pod contains unwanted container name; ");
        }
    }
    Some(if msg.is_empty() {
        allowed()
    } else {
        denied_message(msg.trim())
    })
}

fn has_container(pod: &Value, list: &str, name: &str) -> bool {
    pod.pointer(list)
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c.get("name").and_then(Value::as_str) == Some(name)))
}

fn mutate_pods(ar: &Value) -> Verdict {
    if !is_resource(ar, "", "v1", "pods") {
        return None;
    }
    let pod = request(ar).get("object").unwrap_or(&Value::Null);
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(
        if name == "webhook-to-be-mutated"
            && !has_container(pod, "/spec/initContainers", "webhook-added-init-container")
        {
            patched(PODS_INIT_CONTAINER_PATCH)
        } else {
            allowed()
        },
    )
}

fn mutate_pods_sidecar(ar: &Value, sidecar: &str) -> Verdict {
    if sidecar.is_empty() {
        return Some(json!({"allowed": false, "status": {"metadata": {}, "status": "Failure",
            "message": "No image specified by the sidecar-image parameter", "code": 500}}));
    }
    if !is_resource(ar, "", "v1", "pods") {
        return None;
    }
    let pod = request(ar).get("object").unwrap_or(&Value::Null);
    if has_container(pod, "/spec/containers", "webhook-added-sidecar") {
        return Some(allowed());
    }
    let patch = format!(
        r#"[
		{{"op":"add", "path":"/spec/containers/-","value":{{"image":"{sidecar}","name":"webhook-added-sidecar","resources":{{}}}}}}
	]"#
    );
    Some(patched(&patch))
}

fn deny_attach(ar: &Value) -> Verdict {
    let req = request(ar);
    if req.get("name").and_then(Value::as_str) != Some("to-be-attached-pod") {
        return Some(allowed());
    }
    if !is_resource(ar, "", "v1", "pods") {
        return Some(error_response("expect resource to be { v1 pods}"));
    }
    let sub = req.get("subResource").and_then(Value::as_str).unwrap_or_default();
    if sub != "attach" {
        return Some(error_response(&format!("expect subresource to be attach, got {sub}")));
    }
    let o = req.get("object").unwrap_or(&Value::Null);
    let stdin = o.get("stdin").and_then(Value::as_bool).unwrap_or(false);
    if !stdin || o.get("container").and_then(Value::as_str) != Some("container1") {
        return Some(allowed());
    }
    Some(denied_message("attaching to pod 'to-be-attached-pod' is not allowed"))
}

/// The validating handlers of ConfigMaps and custom objects: a `webhook-e2e-test` data entry
/// refuses creates/updates (`webhook-disallow`) or deletes (`webhook-nondeletable`).
fn admit_data(ar: &Value, create_reason: &str, delete_reason: &str) -> Value {
    let op = operation(ar);
    let mut out = allowed();
    for (k, v) in map_of(subject(ar), "/data") {
        if k == "webhook-e2e-test" && v == "webhook-disallow" && matches!(op, "CREATE" | "UPDATE") {
            out = denied_reason(create_reason);
        }
        if k == "webhook-e2e-test" && v == "webhook-nondeletable" && op == "DELETE" {
            out = denied_reason(delete_reason);
        }
    }
    out
}

fn admit_configmaps(ar: &Value) -> Verdict {
    if !is_resource(ar, "", "v1", "configmaps") {
        return None;
    }
    Some(admit_data(
        ar,
        "the configmap contains unwanted key and value",
        "the configmap cannot be deleted because it contains unwanted key and value",
    ))
}

/// The two-stage data patches of ConfigMaps and custom objects.
fn staged_patch(obj: &Value) -> Value {
    let data = map_of(obj, "/data");
    let has = |k: &str| data.iter().any(|(dk, dv)| *dk == k && *dv == "yes");
    let mut patch = None;
    if has("mutation-start") {
        patch = Some(CONFIGMAP_PATCH_1);
    }
    if has("mutation-stage-1") {
        patch = Some(CONFIGMAP_PATCH_2);
    }
    patch.map_or_else(allowed, patched)
}

fn mutate_configmaps(ar: &Value) -> Verdict {
    if !is_resource(ar, "", "v1", "configmaps") {
        return None;
    }
    Some(staged_patch(request(ar).get("object").unwrap_or(&Value::Null)))
}

fn admit_custom_resource(ar: &Value) -> Verdict {
    Some(admit_data(
        ar,
        "the custom resource contains unwanted data",
        "the custom resource cannot be deleted because it contains unwanted key and value",
    ))
}

fn mutate_custom_resource(ar: &Value) -> Verdict {
    Some(staged_patch(request(ar).get("object").unwrap_or(&Value::Null)))
}

fn admit_crd(ar: &Value) -> Verdict {
    let resource = request(ar).get("resource").cloned().unwrap_or(Value::Null);
    let group = resource.get("group").and_then(Value::as_str).unwrap_or_default();
    let version = resource.get("version").and_then(Value::as_str).unwrap_or_default();
    let plural = resource.get("resource").and_then(Value::as_str).unwrap_or_default();
    if group != "apiextensions.k8s.io" || !matches!(version, "v1" | "v1beta1") || plural != "customresourcedefinitions"
    {
        return Some(error_response(&format!(
            "expect resource to be one of [{{apiextensions.k8s.io v1beta1 customresourcedefinitions}}, {{apiextensions.k8s.io v1 customresourcedefinitions}}] but got {{{group} {version} {plural}}}"
        )));
    }
    let labels = map_of(request(ar).get("object").unwrap_or(&Value::Null), "/metadata/labels");
    Some(
        if labels
            .iter()
            .any(|(k, v)| *k == "webhook-e2e-test" && *v == "webhook-disallow")
        {
            denied_message("the crd contains unwanted label")
        } else {
            allowed()
        },
    )
}

/// Upstream's `serve`: checks the content type, decodes the review, answers in its version
/// with the request's uid.
fn serve(headers: &HeaderMap, body: &[u8], admit: impl FnOnce(&Value) -> Verdict) -> Response {
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if ct != "application/json" {
        return StatusCode::OK.into_response();
    }
    let ar: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("Request could not be decoded: {e}\n")).into_response();
        }
    };
    let api_version = ar.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = ar.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind != "AdmissionReview" || !matches!(api_version, "admission.k8s.io/v1" | "admission.k8s.io/v1beta1") {
        return (
            StatusCode::BAD_REQUEST,
            format!("Unsupported group version kind: {api_version}, Kind={kind}\n"),
        )
            .into_response();
    }
    let Some(mut response) = admit(&ar) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let uid = request(&ar).get("uid").cloned().unwrap_or(json!(""));
    let mut ordered = serde_json::Map::new();
    ordered.insert("uid".into(), uid);
    if let Some(m) = response.as_object_mut() {
        ordered.append(m);
    }
    let out = json!({"kind": "AdmissionReview", "apiVersion": api_version, "response": ordered});
    ([("Content-Type", "application/json")], out.to_string()).into_response()
}

/// The routes upstream's `main` registers.
fn router(sidecar: String) -> Router {
    fn route(f: fn(&Value) -> Verdict) -> axum::routing::MethodRouter {
        any(move |headers: HeaderMap, body: Bytes| async move { serve(&headers, &body, f) })
    }
    Router::new()
        .route(
            "/always-allow-delay-5s",
            any(|headers: HeaderMap, body: Bytes| async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                serve(&headers, &body, |_| {
                    Some(json!({"allowed": true, "status": {"metadata": {}, "message": "this webhook allows all requests"}}))
                })
            }),
        )
        .route("/always-deny", route(always_deny))
        .route("/add-label", route(add_label))
        .route(
            "/pods",
            any(|headers: HeaderMap, body: Bytes| async move {
                let ar: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let forever = map_of(request(&ar).get("object").unwrap_or(&Value::Null), "/metadata/labels")
                    .iter()
                    .any(|(k, v)| *k == "webhook-e2e-test" && *v == "wait-forever");
                if forever {
                    std::future::pending::<()>().await;
                }
                serve(&headers, &body, admit_pods)
            }),
        )
        .route("/pods/attach", route(deny_attach))
        .route("/mutating-pods", route(mutate_pods))
        .route(
            "/mutating-pods-sidecar",
            post(move |headers: HeaderMap, body: Bytes| async move {
                serve(&headers, &body, |ar| mutate_pods_sidecar(ar, &sidecar))
            }),
        )
        .route("/configmaps", route(admit_configmaps))
        .route("/mutating-configmaps", route(mutate_configmaps))
        .route("/custom-resource", route(admit_custom_resource))
        .route("/mutating-custom-resource", route(mutate_custom_resource))
        .route("/crd", route(admit_crd))
        .route("/readyz", any(|| async { "ok" }))
}

/// Runs `agnhost webhook ARGS`.
pub async fn run(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, _) = super::agnhost::flags(&args);
    let port = match f.get("port").map(|p| p.parse::<u16>()) {
        None => 443,
        Some(Ok(p)) => p,
        Some(Err(_)) => {
            ctx.out.err_line("Error: invalid argument for \"--port\" flag");
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
            // Upstream's configTLS calls klog.Fatal on a bad key pair.
            ctx.out.err_line(&format!("F0000 config.go:37] {e}"));
            return 255;
        }
    };
    let listener = match listen(ctx.pod.ip, port) {
        Ok(l) => l,
        Err(e) => {
            ctx.out.err_line(&format!("panic: listen tcp :{port}: bind: {e}"));
            return 2;
        }
    };
    let app = router(f.get("sidecar-image").cloned().unwrap_or_default());
    serve_tls(listener, app, config, ctx.cancel.clone());
    until_stopped(&ctx).await
}
