//! The subresource POSTs that act on a pod or service account rather than write the target:
//! binding a pod to a node and TokenRequests (evictions are in `eviction`).

use axum::response::Response;
use serde_json::{Value, json};

use super::json_response;
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

/// The audience a kind cluster's API server puts in tokens by default (`--api-audiences`
/// defaults to the service account issuer, `https://kubernetes.default.svc.cluster.local`).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// `ValidateTokenRequest`: at least ten minutes, at most 2^32 seconds.
fn token_request_causes(secs: i64) -> Vec<Cause> {
    let why = if secs < 600 {
        "may not specify a duration less than 10 minutes"
    } else if secs > 1 << 32 {
        "may not specify a duration larger than 2^32 seconds"
    } else {
        return Vec::new();
    };
    vec![Cause::invalid("spec.expirationSeconds", &json!(secs), why)]
}

/// POST serviceaccounts/{name}/token, as upstream's `TokenREST.Create`: the body's name and
/// namespace must match the URL, audiences default to the server's, the expiration to an
/// hour, and a pod the token is bound to must run as this service account. The token is
/// JWT-shaped and authenticates as the ServiceAccount until it expires or the ServiceAccount
/// (or the bound pod) is deleted.
pub fn token_request(st: &AppState, ns: &str, sa: &str, body: &[u8]) -> ApiResult<Response> {
    let mut req: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?
    };
    const GROUP: &str = "authentication.k8s.io";
    for (field, url, what) in [("name", sa, "name"), ("namespace", ns, "namespace")] {
        let given = req
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !given.is_empty() && given != url {
            return Err(ApiError::invalid(
                GROUP,
                "TokenRequest",
                sa,
                vec![Cause::invalid(
                    format!("metadata.{field}"),
                    &json!(given),
                    &format!("must match the service account {what} if specified"),
                )],
            ));
        }
    }
    let Some(account) = st.store.get("/serviceaccounts", ns, sa) else {
        return Err(ApiError::not_found("", "serviceaccounts", sa));
    };
    let sa_uid = meta::uid(&account).to_string();
    if !req.get("spec").is_some_and(Value::is_object) {
        req["spec"] = json!({});
    }
    if req
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        req["spec"]["audiences"] = json!([API_AUDIENCE]);
    }
    let secs = req
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    req["spec"]["expirationSeconds"] = json!(secs);
    let causes = token_request_causes(secs);
    if !causes.is_empty() {
        return Err(ApiError::invalid(GROUP, "TokenRequest", "", causes));
    }
    let mut bound_pod = None;
    if let Some(r) = req.pointer("/spec/boundObjectRef").filter(|r| r.is_object()) {
        let kind = r.get("kind").and_then(Value::as_str).unwrap_or_default();
        let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
        let api_version = r.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let (key, plural) = match (api_version, kind) {
            ("v1", "Pod") => ("/pods", "pods"),
            ("v1", "Secret") => ("/secrets", "secrets"),
            ("v1", "Node") => ("/nodes", "nodes"),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token to object of type {api_version}, Kind={kind}"
                )));
            }
        };
        let obj_ns = if kind == "Node" { "" } else { ns };
        let obj = st
            .store
            .get(key, obj_ns, name)
            .ok_or_else(|| ApiError::not_found("", plural, name))?;
        if kind == "Pod" && obj.pointer("/spec/serviceAccountName").and_then(Value::as_str) != Some(sa) {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount {sa:?} to pod running with different serviceaccount name."
            )));
        }
        let uid = r.get("uid").and_then(Value::as_str).unwrap_or_default();
        if !uid.is_empty() && obj.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid) {
            return Err(ApiError::conflict(
                "",
                kind,
                name,
                &format!(
                    "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
            ));
        }
        if kind == "Pod" {
            bound_pod = Some((name.to_string(), meta::uid(&obj).to_string()));
        }
    }
    let audiences: Vec<String> = req
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default();
    let token = st
        .tokens
        .issue_service_account(ns, sa, &sa_uid, secs, &audiences, bound_pod)
        .map_err(|e| ApiError::internal(e.to_string()))?
        .token;
    req["apiVersion"] = json!("authentication.k8s.io/v1");
    req["kind"] = json!("TokenRequest");
    let m = meta::meta_mut(&mut req);
    m.insert("name".into(), json!(sa));
    m.insert("namespace".into(), json!(ns));
    m.insert("creationTimestamp".into(), json!(meta::now()));
    req["status"] = json!({"token": token, "expirationTimestamp": meta::now_plus(secs)});
    Ok(json_response(201, &req, &[]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_durations_are_bounded_like_upstream() {
        assert!(token_request_causes(3600).is_empty());
        assert_eq!(
            token_request_causes(60)[0].line(),
            "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
        );
        assert!(token_request_causes((1 << 32) + 1)[0].message.contains("2^32"));
    }
}
