//! Upstream `[sig-network] Proxy version v1` conformance cases "A set of valid responses are
//! returned for both pod and service Proxy / ProxyWithPath" (test/e2e/network/proxy.go): every
//! HTTP method goes through the API server's pod and service proxies to an
//! `agnhost porter --json-response` pod of the target OS, which answers
//! `{"Method": <the method it received>, "Body": "foo"}`.
//!
//! `Proxy` requests the bare proxy path (`.../proxy?method=VERB`): DELETE, OPTIONS, PATCH, POST
//! and PUT are forwarded, while GET and HEAD are answered `301 Moved Permanently` by the API
//! server itself (it redirects a proxy request with an empty path to the path with a trailing
//! slash; upstream asserts the 301). `ProxyWithPath` requests `.../proxy/some/path/with/VERB`
//! for all seven methods (HEAD checked by its 200 status only, as upstream).

use std::time::Duration;

use http::Method;

use super::proxy::{VERBS_PROXY, VERBS_PROXY_WITH_PATH};
use crate::catalog::{Case, Kind};
use crate::framework::services::ServiceBuilder;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, pod_node};

/// The cases of this file.
pub(super) fn cases() -> Vec<Case> {
    vec![
        crate::case!(VERBS_PROXY, Kind::Adapted, verbs_proxy),
        crate::case!(VERBS_PROXY_WITH_PATH, Kind::Adapted, verbs_proxy_with_path),
    ]
}

/// What the porter serves on port 80 (upstream's `msg`).
const MSG: &str = "foo";
/// The pod's name (upstream's).
const POD: &str = "agnhost";
/// How long each method may keep failing before the case fails (upstream
/// `requestRetryTimeout`, one minute, polled every `requestRetryPeriod`).
const REQUEST_RETRY: Duration = Duration::from_secs(60);
/// How long one request may take.
const ATTEMPT: Duration = Duration::from_secs(10);

/// Creates the porter pod labelled `key=value` (Running) and a Service `svc` selecting it,
/// port 80 → 80; returns the pod's node for failure messages.
async fn porter_and_service(f: &Framework, key: &str, value: &str, svc: &str) -> Result<String, CaseError> {
    f.require_nodes(f.target_os(), 1).await?;
    let porter = ContainerBuilder::new("agnhost", "agnhost")
        .args(["porter", "--json-response"])
        .env("SERVE_PORT_80", MSG);
    let pod = f
        .create_pod_ready(&f.pod(POD).label(key, value).restart_policy("Never").container(porter))
        .await?;
    f.create_service(
        &ServiceBuilder::cluster_ip(svc)
            .selector(key, value)
            .port("", 80, 80, "TCP"),
    )
    .await?;
    Ok(pod_node(&pod))
}

/// Whether one answer is what upstream's `validateProxyVerbRequest` accepts: 200, and for every
/// method but HEAD a JSON body `{"Method": method, "Body": "foo"}`. `Err` says what was seen.
fn check_verb_answer(method: &Method, status: u16, body: &str) -> Result<(), String> {
    if status != 200 {
        return Err(format!("HTTP {status}: {}", body.trim()));
    }
    if *method == Method::HEAD {
        return Ok(());
    }
    let json: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("body {:?} is not JSON: {e}", body.trim()))?;
    let seen_method = json.get("Method").and_then(|m| m.as_str());
    let seen_body = json.get("Body").and_then(|b| b.as_str());
    if seen_method != Some(method.as_str()) || seen_body != Some(MSG) {
        return Err(format!(
            "expected {{\"Method\":{:?},\"Body\":{MSG:?}}}, got {}",
            method.as_str(),
            body.trim()
        ));
    }
    Ok(())
}

/// Repeats `method path` until the answer passes [`check_verb_answer`] or [`REQUEST_RETRY`]
/// has passed; the failure names the last answer.
async fn expect_verb(f: &Framework, method: Method, path: &str, node: &str) -> CaseResult {
    f.step(format!("{method} {path}"));
    let until = tokio::time::Instant::now() + REQUEST_RETRY;
    let mut pace = tokio::time::interval(Duration::from_millis(500));
    loop {
        pace.tick().await;
        let seen = match f.proxy_request(method.clone(), path, ATTEMPT).await {
            Ok(answer) => check_verb_answer(&method, answer.status, &answer.body),
            Err(e) => Err(e.to_string()),
        };
        match seen {
            Ok(()) => return Ok(()),
            Err(why) if tokio::time::Instant::now() >= until => {
                return Err(CaseError::failed(format!(
                    "{method} {path} (pod {POD} on node {node}): expected 200 with the porter's answer \
                     within {REQUEST_RETRY:?}; last seen: {why}"
                )));
            }
            Err(_) => {}
        }
    }
}

/// Upstream's `validateRedirectRequest`: one request, answered 301.
async fn expect_redirect(f: &Framework, method: Method, path: &str) -> CaseResult {
    f.step(format!("{method} {path}, expecting 301"));
    let answer = f.proxy_request(method.clone(), path, ATTEMPT).await?;
    crate::ensure!(
        answer.status == 301,
        "{method} {path}: expected the API server's 301 Moved Permanently (a proxy request with an \
         empty path), got HTTP {}: {}",
        answer.status,
        answer.message()
    );
    Ok(())
}

/// Upstream proxy.go "A set of valid responses are returned for both pod and service Proxy".
async fn verbs_proxy(f: &Framework) -> CaseResult {
    let svc = "e2e-proxy-test-service";
    let node = porter_and_service(f, "e2e-test", "proxy-endpoints", svc).await?;
    let ns = f.ns();
    let pod_path = format!("/api/v1/namespaces/{ns}/pods/{POD}/proxy");
    let svc_path = format!("/api/v1/namespaces/{ns}/services/{svc}/proxy");
    let verbs = [
        Method::DELETE,
        Method::OPTIONS,
        Method::PATCH,
        Method::POST,
        Method::PUT,
    ];
    for base in [&pod_path, &svc_path] {
        for method in &verbs {
            expect_verb(f, method.clone(), &format!("{base}?method={method}"), &node).await?;
        }
    }
    for method in [Method::GET, Method::HEAD] {
        expect_redirect(f, method.clone(), &format!("{pod_path}?method={method}")).await?;
        expect_redirect(f, method.clone(), &format!("{svc_path}?method={method}")).await?;
    }
    Ok(())
}

/// Upstream proxy.go "A set of valid responses are returned for both pod and service
/// ProxyWithPath".
async fn verbs_proxy_with_path(f: &Framework) -> CaseResult {
    let svc = "test-service";
    let node = porter_and_service(f, "test", "response", svc).await?;
    let ns = f.ns();
    let verbs = [
        Method::DELETE,
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::PATCH,
        Method::POST,
        Method::PUT,
    ];
    for base in [
        format!("/api/v1/namespaces/{ns}/pods/{POD}/proxy"),
        format!("/api/v1/namespaces/{ns}/services/{svc}/proxy"),
    ] {
        for method in &verbs {
            expect_verb(f, method.clone(), &format!("{base}/some/path/with/{method}"), &node).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_porters_answer_for_the_method() {
        let ok = r#"{"Method":"PUT","Body":"foo"}"#;
        assert!(check_verb_answer(&Method::PUT, 200, ok).is_ok());
        assert!(
            check_verb_answer(&Method::POST, 200, ok)
                .unwrap_err()
                .contains("expected")
        );
        assert!(
            check_verb_answer(&Method::PUT, 503, ok)
                .unwrap_err()
                .contains("HTTP 503")
        );
        assert!(
            check_verb_answer(&Method::PUT, 200, "foo")
                .unwrap_err()
                .contains("not JSON")
        );
        assert!(check_verb_answer(&Method::HEAD, 200, "").is_ok());
        assert!(check_verb_answer(&Method::HEAD, 301, "").is_err());
    }
}
