//! GET requests through the API server's pod, service and node proxies.
//!
//! Going through the API server (rather than dialling pod IPs from the runner) is what upstream
//! does, and it works from a prow pod that has no route to the pod network.

use std::time::Duration;

use super::{CaseError, Framework};

/// The path of a proxy request, percent-encoding nothing: callers pass a path and query that
/// are already URL-safe (the helpers below build them).
fn proxy_path(kind: &str, ns: Option<&str>, name: &str, port: Option<u16>, rest: &str) -> String {
    let target = match port {
        Some(p) => format!("{name}:{p}"),
        None => name.to_string(),
    };
    let rest = rest.trim_start_matches('/');
    match ns {
        Some(ns) => format!("/api/v1/namespaces/{ns}/{kind}/{target}/proxy/{rest}"),
        None => format!("/api/v1/{kind}/{target}/proxy/{rest}"),
    }
}

/// What a proxied GET answered: the target's status and body, whatever the status.
#[derive(Debug, Clone)]
pub struct ProxyAnswer {
    /// The HTTP status (the target's, or the API server's own when it could not reach it).
    pub status: u16,
    /// The body as text.
    pub body: String,
}

impl ProxyAnswer {
    /// The message of the API server's `Status` body, or the body itself: what a failure
    /// message should quote.
    pub fn message(&self) -> String {
        serde_json::from_str::<serde_json::Value>(&self.body)
            .ok()
            .filter(|v| v.get("kind").and_then(|k| k.as_str()) == Some("Status"))
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_string))
            .unwrap_or_else(|| self.body.trim().to_string())
    }
}

impl Framework {
    /// A proxied GET that keeps the status and body of every answer. kube's `request_text`
    /// turns a non-2xx answer into an error and parses its body as a `Status`; a proxied
    /// target's own JSON (netexec `/dial` answers 417 with `{"errors":[...]}`) then becomes an
    /// empty "(0 )" error. Upstream reads such bodies with curl from inside a pod, whatever
    /// the status, so we keep them.
    async fn proxy_answer(&self, path: String, timeout: Duration) -> Result<ProxyAnswer, CaseError> {
        self.proxy_request(http::Method::GET, &path, timeout).await
    }

    /// A request of any method to an absolute API path (a proxy path, `?query` included), the
    /// status and body of any answer kept; a redirect is returned, not followed (upstream's
    /// proxy cases use a client with `http.ErrUseLastResponse`).
    ///
    /// # Errors
    /// When the request cannot be made or times out.
    pub async fn proxy_request(
        &self,
        method: http::Method,
        path: &str,
        timeout: Duration,
    ) -> Result<ProxyAnswer, CaseError> {
        let request = http::Request::builder()
            .method(method.clone())
            .uri(path)
            .body(kube::client::Body::empty())
            .map_err(|e| CaseError::failed(format!("building request {method} {path}: {e}")))?;
        let exchange = async {
            let response = self.client().send(request).await?;
            let status = response.status().as_u16();
            let bytes = response.into_body().collect_bytes().await?;
            Ok::<_, kube::Error>(ProxyAnswer {
                status,
                body: String::from_utf8_lossy(&bytes).into_owned(),
            })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(CaseError::from(e).context(format!("{method} {path}"))),
            Err(_) => Err(CaseError::failed(format!(
                "{method} {path} timed out after {timeout:?}"
            ))),
        }
    }

    /// A proxied GET of `kind` (`pods`, `services`) `name:port` in the case namespace, whose
    /// body counts only with a 2xx status, given up after `timeout`: for cases that repeat their
    /// requests themselves, so one stuck behind the client's retries of a 503 (a Service whose
    /// endpoints are briefly not ready answers "no endpoints available") does not use up their
    /// window.
    ///
    /// # Errors
    /// When the request fails, answers outside 2xx or times out.
    pub async fn proxy_get_within(
        &self,
        kind: &str,
        name: &str,
        port: u16,
        path: &str,
        timeout: Duration,
    ) -> Result<String, CaseError> {
        self.proxy_get(proxy_path(kind, Some(self.ns()), name, Some(port), path), timeout)
            .await
    }

    /// A proxied GET whose body counts only with a 2xx status.
    async fn proxy_get(&self, path: String, timeout: Duration) -> Result<String, CaseError> {
        let answer = self.proxy_answer(path.clone(), timeout).await?;
        if (200..300).contains(&answer.status) {
            Ok(answer.body)
        } else {
            Err(CaseError::failed(format!(
                "GET {path}: HTTP {}: {}",
                answer.status,
                answer.message()
            )))
        }
    }

    /// `GET /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/<path>` in the case namespace,
    /// keeping the status and body of any answer (see [`ProxyAnswer`]).
    ///
    /// # Errors
    /// When the request cannot be made or times out (30 s).
    pub async fn pod_proxy_answer(&self, pod: &str, port: u16, path: &str) -> Result<ProxyAnswer, CaseError> {
        self.proxy_answer(
            proxy_path("pods", Some(self.ns()), pod, Some(port), path),
            Duration::from_secs(30),
        )
        .await
    }

    /// `GET /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/<path>` in the case namespace.
    ///
    /// # Errors
    /// When the request fails or times out (30 s).
    pub async fn pod_proxy_get(&self, pod: &str, port: u16, path: &str) -> Result<String, CaseError> {
        self.proxy_get(
            proxy_path("pods", Some(self.ns()), pod, Some(port), path),
            Duration::from_secs(30),
        )
        .await
    }

    /// `GET /api/v1/namespaces/<ns>/services/<svc>:<port>/proxy/<path>` in the case namespace.
    ///
    /// # Errors
    /// When the request fails or times out (30 s).
    pub async fn service_proxy_get(&self, service: &str, port: u16, path: &str) -> Result<String, CaseError> {
        self.proxy_get(
            proxy_path("services", Some(self.ns()), service, Some(port), path),
            Duration::from_secs(30),
        )
        .await
    }

    /// `GET /api/v1/nodes/<node>/proxy/<path>` (the kubelet: `stats/summary`, `configz`…).
    ///
    /// # Errors
    /// When the request fails or times out (60 s).
    pub async fn node_proxy_get(&self, node: &str, path: &str) -> Result<String, CaseError> {
        self.proxy_get(proxy_path("nodes", None, node, None, path), Duration::from_secs(60))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_proxy_paths() {
        assert_eq!(
            proxy_path("pods", Some("ns"), "p", Some(8080), "/dial?x=1"),
            "/api/v1/namespaces/ns/pods/p:8080/proxy/dial?x=1"
        );
        assert_eq!(
            proxy_path("nodes", None, "win-1", None, "stats/summary"),
            "/api/v1/nodes/win-1/proxy/stats/summary"
        );
    }
}
