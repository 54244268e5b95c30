//! The `AvailableConditionController` of kube-aggregator (`apiserver/apiservice_controller`
//! `status/remote/remote_available_controller.go`): for every APIService backed by a Service
//! it sets the `Available` condition from the Service, its EndpointSlices and a discovery GET
//! the aggregated server must answer, with upstream's reasons and messages.
//!
//! Upstream reacts to APIService, Service and EndpointSlice events and resyncs; here one pass
//! runs every [`PERIOD`], which gives the same answers within a second. A pass that finds the
//! discovery document also caches it for `/apis` aggregated discovery
//! ([`super::aggregated_items`]), which upstream's discovery aggregation controller fetches
//! separately from the same URL.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::proxy::{self, ProxyError};
use crate::api::auth::UserInfo;
use crate::api::meta;
use crate::api::state::AppState;

/// How often every remote APIService is checked.
pub const PERIOD: Duration = Duration::from_secs(1);

/// Upstream's per-attempt deadline for the discovery GET ("insurance" against slow dials).
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(6);

/// The storage key of APIServices.
const KEY: &str = "apiregistration.k8s.io/apiservices";

/// The `Available` condition one check arrived at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// Upstream's reason.
    pub reason: &'static str,
    /// Upstream's message.
    pub message: String,
}

impl Verdict {
    fn no(reason: &'static str, message: String) -> Self {
        Verdict {
            status: "False",
            reason,
            message,
        }
    }
}

/// Runs the controller until `cancel`.
pub async fn run(st: AppState, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        sync_all(&st).await;
    }
}

/// One pass over every remote APIService.
pub async fn sync_all(st: &AppState) {
    let services = super::remote_services(st);
    for svc in &services {
        let name = svc
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (verdict, discovery) = check(st, svc).await;
        st.aggregated.set(name, discovery);
        record(st, name, &verdict);
    }
    st.aggregated
        .retain(|n| services.iter().any(|s| s.pointer("/metadata/name") == Some(&json!(n))));
}

/// Upstream's checks, in its order; the discovery document when the last one passed.
pub async fn check(st: &AppState, svc: &Value) -> (Verdict, Option<Value>) {
    let r = svc.pointer("/spec/service").cloned().unwrap_or(Value::Null);
    let ns = r["namespace"].as_str().unwrap_or_default();
    let name = r["name"].as_str().unwrap_or_default();
    let port = r["port"].as_i64().unwrap_or(443);
    let Some(service) = st.store.get("/services", ns, name) else {
        return (
            Verdict::no("ServiceNotFound", format!("service/{name} in {ns:?} is not present")),
            None,
        );
    };
    let kind = service
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if kind == "ClusterIP" {
        let Some(sp) = service
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p["port"].as_i64() == Some(port))
        else {
            return (
                Verdict::no(
                    "ServicePortError",
                    format!("service/{name} in {ns:?} is not listening on port {port}"),
                ),
                None,
            );
        };
        let port_name = sp["name"].as_str().unwrap_or_default();
        let (slices, _) = st.store.list("discovery.k8s.io/endpointslices", Some(ns));
        let slices: Vec<&Value> = slices
            .iter()
            .filter(|s| {
                s.pointer("/metadata/labels/kubernetes.io~1service-name")
                    .and_then(Value::as_str)
                    == Some(name)
            })
            .collect();
        if slices.is_empty() {
            return (
                Verdict::no(
                    "EndpointsNotFound",
                    format!("cannot find endpointslices for service/{name} in {ns:?}"),
                ),
                None,
            );
        }
        if !slices.iter().any(|s| has_available_endpoint(s, port_name)) {
            return (
                Verdict::no(
                    "MissingEndpoints",
                    format!(
                        "endpointslices for service/{name} in {ns:?} have no addresses with port name {port_name:?}"
                    ),
                ),
                None,
            );
        }
    }
    match discover(st, svc).await {
        Ok(doc) => (
            Verdict {
                status: "True",
                reason: "Passed",
                message: "all checks passed".into(),
            },
            Some(doc),
        ),
        Err(message) => (Verdict::no("FailedDiscoveryCheck", message), None),
    }
}

/// Upstream's `hasAvailableEndpoint`: a ready (or readiness-unknown) endpoint and a port of
/// the Service port's name.
fn has_available_endpoint(slice: &Value, port_name: &str) -> bool {
    let ready = slice["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e.pointer("/conditions/ready").and_then(Value::as_bool).unwrap_or(true));
    ready
        && slice["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"].as_str().unwrap_or_default() == port_name && p["port"].is_number())
}

/// The discovery GET (`/apis/<group>/<version>`) as `system:kube-aggregator` in
/// `system:masters`; the error text is upstream's.
async fn discover(st: &AppState, svc: &Value) -> Result<Value, String> {
    let group = svc.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default();
    let version = svc.pointer("/spec/version").and_then(Value::as_str).unwrap_or_default();
    let path = format!("/apis/{group}/{version}");
    let clusterip = {
        let r = svc.pointer("/spec/service").cloned().unwrap_or(Value::Null);
        let ns = r["namespace"].as_str().unwrap_or_default();
        let name = r["name"].as_str().unwrap_or_default();
        let ip = st
            .store
            .get("/services", ns, name)
            .and_then(|s| s.pointer("/spec/clusterIP").and_then(Value::as_str).map(String::from))
            .unwrap_or_default();
        format!("{ip}:{}", r["port"].as_u64().unwrap_or(443))
    };
    let url = format!("https://{clusterip}{path}");
    let user = UserInfo {
        name: "system:kube-aggregator".into(),
        groups: vec!["system:masters".into()],
        ..Default::default()
    };
    let mut headers = HeaderMap::new();
    headers.insert(http::header::ACCEPT, http::HeaderValue::from_static("application/json"));
    let call = proxy::send(st, svc, Method::GET, &path, &headers, Body::empty(), &user);
    let resp = match tokio::time::timeout(DISCOVERY_TIMEOUT, call).await {
        Err(_) => return Err(format!("timed out waiting for {url}")),
        Ok(Err(ProxyError::Resolve(e) | ProxyError::Transport(e))) => {
            return Err(format!("failing or missing response from {url}: Get {url:?}: {e}"));
        }
        Ok(Ok(r)) => r,
    };
    let code = resp.status().as_u16();
    if !(200..300).contains(&code) {
        return Err(format!(
            "failing or missing response from {url}: bad status from {url}: {code}"
        ));
    }
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("failing or missing response from {url}: {e}"))?
        .to_bytes();
    serde_json::from_slice(&bytes).map_err(|e| format!("failing or missing response from {url}: {e}"))
}

/// Stores `v` as the APIService's `Available` condition when it changed (upstream's
/// `updateAPIServiceStatus` issues no no-op writes); the transition time moves only when the
/// status does, and every other condition stays where it is.
fn record(st: &AppState, name: &str, v: &Verdict) {
    let result = st.store.modify::<std::convert::Infallible>(KEY, "", name, |old| {
        let mut obj = old.clone();
        let conds = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let pos = conds.iter().position(|c| c["type"] == "Available");
        let prev = pos.map(|i| conds[i].clone());
        if let Some(p) = &prev
            && p["status"] == v.status
            && p["reason"] == v.reason
            && p["message"] == json!(v.message)
        {
            return Ok(None);
        }
        let since = match &prev {
            Some(p) if p["status"] == v.status => p["lastTransitionTime"].clone(),
            _ => json!(meta::now()),
        };
        let cond = json!({"type": "Available", "status": v.status, "lastTransitionTime": since,
            "reason": v.reason, "message": v.message});
        let mut conds = conds;
        match pos {
            Some(i) => conds[i] = cond,
            None => conds.push(cond),
        }
        if !obj.get("status").is_some_and(Value::is_object) {
            obj["status"] = json!({});
        }
        obj["status"]["conditions"] = json!(conds);
        tracing::debug!(apiservice = %name, status = v.status, reason = v.reason, message = %v.message, "APIService availability");
        Ok(Some(obj))
    });
    if let Err(crate::api::store::ModifyError::NotFound) = result {
        tracing::debug!(apiservice = %name, "APIService went away before its status was written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::state::StateConfig;

    fn apiservice(st: &AppState) -> Value {
        let svc = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1alpha1.wardle.example.com"},
            "spec": {"group": "wardle.example.com", "version": "v1alpha1", "groupPriorityMinimum": 2000,
                "versionPriority": 200, "service": {"namespace": "ns", "name": "sample-api", "port": 7443}}});
        st.store
            .create(KEY, "", "v1alpha1.wardle.example.com", svc.clone())
            .unwrap();
        svc
    }

    #[tokio::test]
    async fn reasons_follow_the_service_and_its_endpoints() {
        let st = AppState::new(StateConfig::new(AddressBlock(201)));
        let svc = apiservice(&st);
        let (v, _) = check(&st, &svc).await;
        assert_eq!(
            (v.reason, v.message.as_str()),
            ("ServiceNotFound", "service/sample-api in \"ns\" is not present")
        );
        st.store
            .create(
                "/services",
                "ns",
                "sample-api",
                json!({"metadata": {"name": "sample-api", "namespace": "ns"},
                "spec": {"clusterIP": "127.201.240.9", "ports": [{"port": 443}]}}),
            )
            .unwrap();
        let (v, _) = check(&st, &svc).await;
        assert_eq!(v.reason, "ServicePortError");
        assert_eq!(v.message, "service/sample-api in \"ns\" is not listening on port 7443");
        st.store
            .update(
                "/services",
                "ns",
                "sample-api",
                json!({"metadata": {"name": "sample-api", "namespace": "ns"},
                "spec": {"clusterIP": "127.201.240.9", "ports": [{"port": 7443, "targetPort": 443}]}}),
                None,
            )
            .unwrap();
        assert_eq!(check(&st, &svc).await.0.reason, "EndpointsNotFound");
        st.store
            .create("discovery.k8s.io/endpointslices", "ns", "sample-api-x", json!({
                "metadata": {"name": "sample-api-x", "namespace": "ns", "labels": {"kubernetes.io/service-name": "sample-api"}},
                "endpoints": [{"addresses": ["127.201.8.8"], "conditions": {"ready": false}}],
                "ports": [{"name": "", "port": 443}]}))
            .unwrap();
        let (v, _) = check(&st, &svc).await;
        assert_eq!(v.reason, "MissingEndpoints");
        assert_eq!(
            v.message,
            "endpointslices for service/sample-api in \"ns\" have no addresses with port name \"\""
        );
        record(&st, "v1alpha1.wardle.example.com", &v);
        let stored = st.store.get(KEY, "", "v1alpha1.wardle.example.com").unwrap();
        assert_eq!(stored["status"]["conditions"][0]["reason"], "MissingEndpoints");
        assert_eq!(stored["status"]["conditions"][0]["status"], "False");
        let rv = crate::api::store::rv_of(&stored);
        record(&st, "v1alpha1.wardle.example.com", &v);
        let again = st.store.get(KEY, "", "v1alpha1.wardle.example.com").unwrap();
        assert_eq!(crate::api::store::rv_of(&again), rv, "no write when nothing changed");
    }
}
