//! The subresource POSTs that act on a pod or service account rather than write the target:
//! binding a pod to a node, evicting a pod, and TokenRequests.

use axum::response::Response;
use serde_json::{Value, json};

use super::delete::{DeleteOptions, delete_one};
use super::{Query, json_response};
use crate::api::error::{ApiError, ApiResult, Cause};
use crate::api::meta;
use crate::api::registry;
use crate::api::state::AppState;
use crate::api::store::ModifyError;

/// POST of a Binding: assigns a pod to a node, once.
pub fn bind(st: &AppState, ns: &str, pod: &str, body: &[u8]) -> ApiResult<Response> {
    let b: Value = serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let node = b
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if node.is_empty() {
        return Err(ApiError::invalid(
            "",
            "Binding",
            pod,
            vec![Cause::required("target.name")],
        ));
    }
    let def = registry::find("", "v1", "pods").expect("pods");
    let res = st.store.modify("/pods", ns, pod, |old| {
        if meta::is_deleting(old) {
            return Err(ApiError::conflict(
                "",
                "pods",
                pod,
                "pod is being deleted, cannot be assigned to a host",
            ));
        }
        if let Some(n) = old
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            return Err(ApiError::conflict(
                "",
                "pods/binding",
                pod,
                &format!("pod {pod} is already assigned to node {n:?}"),
            ));
        }
        let mut new = old.clone();
        new["spec"]["nodeName"] = json!(node);
        let conds = new["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let mut conds: Vec<Value> = conds.into_iter().filter(|c| c["type"] != "PodScheduled").collect();
        conds.push(
            json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": meta::now()}),
        );
        new["status"]["conditions"] = json!(conds);
        Ok(Some(new))
    });
    match res {
        Ok(_) => Ok(json_response(
            201,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            &[],
        )),
        Err(ModifyError::NotFound) => Err(ApiError::not_found(def.group, def.plural, pod)),
        Err(ModifyError::Rejected(e)) => Err(e),
    }
}

/// POST of an Eviction: a pod delete with the eviction's DeleteOptions (no disruption budgets
/// are modelled, so it is always allowed).
pub fn evict(st: &AppState, ns: &str, pod: &str, q: &Query, body: &[u8]) -> ApiResult<Response> {
    let def = registry::find("", "v1", "pods").expect("pods");
    let opts = DeleteOptions::parse(q, body)?;
    delete_one(st, def, ns, pod, &opts)?;
    Ok(json_response(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        &[],
    ))
}

/// POST serviceaccounts/{name}/token: a TokenRequest answered with a bound ServiceAccount
/// token (JWT-shaped) that authenticates as the ServiceAccount until it expires or the
/// ServiceAccount (or the pod in `spec.boundObjectRef`) is deleted.
pub fn token_request(st: &AppState, ns: &str, sa: &str, body: &[u8]) -> ApiResult<Response> {
    let Some(account) = st.store.get("/serviceaccounts", ns, sa) else {
        return Err(ApiError::not_found("", "serviceaccounts", sa));
    };
    let sa_uid = meta::uid(&account).to_string();
    let mut req: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?
    };
    let secs = req
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    let audiences: Vec<String> = req
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default();
    let pod = match req.pointer("/spec/boundObjectRef") {
        Some(r) if r.get("kind").and_then(Value::as_str) == Some("Pod") => {
            let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
            let Some(p) = st.store.get("/pods", ns, name) else {
                return Err(ApiError::not_found("", "pods", name));
            };
            Some((name.to_string(), meta::uid(&p).to_string()))
        }
        _ => None,
    };
    let issued = st.tokens.issue_service_account(ns, sa, &sa_uid, secs, &audiences, pod);
    req["apiVersion"] = json!("authentication.k8s.io/v1");
    req["kind"] = json!("TokenRequest");
    req["metadata"] = json!({"name": sa, "namespace": ns, "creationTimestamp": null});
    req["spec"]["expirationSeconds"] = json!(secs);
    if audiences.is_empty() {
        req["spec"]["audiences"] = json!([crate::api::auth::tokens::ISSUER]);
    }
    req["status"] = json!({"token": issued.token, "expirationTimestamp": meta::now_plus(secs)});
    Ok(json_response(201, &req, &[]))
}
