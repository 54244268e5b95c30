//! `agnhost crd-conversion-webhook`: the CRD conversion webhook of upstream's e2e conversion
//! cases (`test/images/agnhost/crd-conversion-webhook`), serving HTTPS with the mounted
//! certificate and key (`--tls-cert-file`, `--tls-private-key-file`, `--port`, default 443)
//! at `/crdconvert` (and `/readyz`).
//!
//! Its converter (`convertExampleCRD`) knows `stable.example.com` v1 `hostPort: "H:P"` and v2
//! `host: H`, `port: P`; any other pair of versions, a conversion to the object's own version
//! or a `hostPort` without exactly one colon is a `Failure` result with upstream's message.
//! ConversionReview `v1` and `v1beta1` are answered in the version asked; a body that is not
//! `application/json` gets upstream's 415-style refusal text with status 400.

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Map, Value, json};

use super::servers::{listen, serve_tls, tls_from_pem};
use super::{Ctx, until_stopped};

const V1: &str = "stable.example.com/v1";
const V2: &str = "stable.example.com/v2";

fn failure(message: String) -> Value {
    json!({"metadata": {}, "status": "Failure", "message": message})
}

/// Upstream's `convertExampleCRD`: the object at `to`, or the failed status.
fn convert(obj: &Value, to: &str) -> Result<Value, Value> {
    let from = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    if from == to {
        return Err(failure(format!(
            "conversion from a version to itself should not call the webhook: {to}"
        )));
    }
    let mut out: Map<String, Value> = obj.as_object().cloned().unwrap_or_default();
    match (from, to) {
        (V1, V2) => {
            if let Some(hp) = out.remove("hostPort") {
                let text = hp.as_str().unwrap_or_default();
                let parts: Vec<&str> = text.split(':').collect();
                if parts.len() != 2 {
                    return Err(failure(format!("invalid hostPort value `{text}`")));
                }
                out.insert("host".into(), json!(parts[0]));
                out.insert("port".into(), json!(parts[1]));
            }
        }
        (V2, V1) => {
            let host = out.remove("host");
            let port = out.remove("port");
            if host.is_some() || port.is_some() {
                let s = |v: Option<Value>| v.and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
                out.insert("hostPort".into(), json!(format!("{}:{}", s(host), s(port))));
            }
        }
        (V1 | V2, _) => return Err(failure(format!("unexpected conversion version {to:?}"))),
        _ => return Err(failure(format!("unexpected conversion version {from:?}"))),
    }
    out.insert("apiVersion".into(), json!(to));
    Ok(Value::Object(out))
}

/// Upstream's `doConversion`: every object converted, or the first failure.
fn review(request: &Value) -> Value {
    let to = request
        .get("desiredAPIVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut converted = Vec::new();
    for obj in request.get("objects").and_then(Value::as_array).into_iter().flatten() {
        match convert(obj, to) {
            Ok(o) => converted.push(o),
            Err(status) => return json!({"uid": request.get("uid"), "result": status}),
        }
    }
    json!({"uid": request.get("uid"), "convertedObjects": converted,
        "result": {"metadata": {}, "status": "Success"}})
}

fn serve(headers: &HeaderMap, body: &Bytes) -> Response {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type != "application/json" {
        return (
            StatusCode::BAD_REQUEST,
            format!("contentType={content_type}, expect application/json"),
        )
            .into_response();
    }
    let Ok(cr) = serde_json::from_slice::<Value>(body) else {
        return (StatusCode::BAD_REQUEST, "failed to deserialize body").into_response();
    };
    let api_version = cr.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    if !matches!(api_version, "apiextensions.k8s.io/v1" | "apiextensions.k8s.io/v1beta1") {
        return (
            StatusCode::BAD_REQUEST,
            format!("unsupported group version kind: {api_version}, Kind=ConversionReview"),
        )
            .into_response();
    }
    let response = review(cr.get("request").unwrap_or(&Value::Null));
    let out = json!({"kind": "ConversionReview", "apiVersion": api_version, "response": response});
    ([("Content-Type", "application/json")], out.to_string()).into_response()
}

/// Runs `agnhost crd-conversion-webhook ARGS`.
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
    let app = Router::new()
        .route(
            "/crdconvert",
            any(|headers: HeaderMap, body: Bytes| async move { serve(&headers, &body) }),
        )
        .route("/readyz", any(|| async { "ok" }));
    serve_tls(listener, app, config, ctx.cancel.clone());
    until_stopped(&ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_host_port_both_ways_as_upstream() {
        let v1 = json!({"apiVersion": V1, "kind": "K", "metadata": {"name": "a"}, "hostPort": "localhost:8080"});
        let v2 = convert(&v1, V2).unwrap();
        assert_eq!(v2["host"], "localhost");
        assert_eq!(v2["port"], "8080");
        assert!(v2.get("hostPort").is_none());
        assert_eq!(convert(&v2, V1).unwrap(), v1);
        let bad = json!({"apiVersion": V1, "hostPort": "a:b:c"});
        assert_eq!(
            convert(&bad, V2).unwrap_err()["message"],
            "invalid hostPort value `a:b:c`"
        );
        assert!(convert(&v1, V1).is_err());
        let r = review(&json!({"uid": "u", "desiredAPIVersion": V2, "objects": [v1]}));
        assert_eq!(r["result"]["status"], "Success");
        assert_eq!(r["convertedObjects"][0]["host"], "localhost");
    }
}
