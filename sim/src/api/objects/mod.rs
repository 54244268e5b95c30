//! The verbs on stored objects: get, list, create, update, patch, delete, deletecollection, and
//! the subresources that are object writes (status, scale, binding, finalize, eviction).
//!
//! Each handler takes the parsed [`Target`] and returns a response or an [`ApiError`] that
//! renders as a `Status`. Semantics follow the real server: system metadata is the server's,
//! a stale resourceVersion is a 409, writes that change nothing do not bump the
//! resourceVersion, and deletion honours finalizers and pod grace periods.
//!
//! Split by verb: `read` holds get and list (selectors, continue tokens), `create` the
//! POST of new objects, `apply` server-side apply patches, `update` PUT, PATCH and the shared [`commit`] of an update, `scale` the
//! scale subresource, `delete` DeleteOptions and the deletion rules, and `subresources` the
//! binding, eviction and token POSTs. This file keeps what every verb shares: the query map,
//! the JSON response, how a request names its object and how store errors become API errors.

use std::collections::HashMap;

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::convert;
use super::error::{ApiError, ApiResult};
use super::registry::ResourceDef;
use super::route::{Target, flag};
use super::state::AppState;
use super::store::StoreError;

mod apply;
mod create;
mod delete;
mod eviction;
mod read;
mod scale;
mod subresources;
mod update;

pub use apply::apply_patch;
pub use create::create;
pub use delete::{DeleteOptions, delete, delete_collection, delete_one};
pub use eviction::{VIOLATES_BUDGET, evict, set_disruption_allowed};
pub use read::{get, list, select, selectors};
pub use scale::{scale, selector_string};
pub use subresources::{bind, token_request};
pub use update::{commit, patch_object, update};

/// Query parameters as a map.
pub type Query = HashMap<String, String>;

/// A JSON response from an already serialised body (a list written item by item).
pub fn json_bytes_response(code: u16, body: Vec<u8>) -> Response {
    (
        axum::http::StatusCode::from_u16(code).unwrap_or(axum::http::StatusCode::OK),
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// A JSON response with warnings from field validation.
pub fn json_response(code: u16, v: &Value, warnings: &[String]) -> Response {
    // Status bodies (success ones too) keep upstream's key order; see `status_text`.
    let text = if v.get("kind").and_then(Value::as_str) == Some("Status") {
        super::error::status_text(v)
    } else {
        v.to_string()
    };
    let mut resp = (
        axum::http::StatusCode::from_u16(code).unwrap_or(axum::http::StatusCode::OK),
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response();
    for w in warnings {
        if let Ok(h) = axum::http::HeaderValue::from_str(&format!("299 - {w:?}")) {
            resp.headers_mut().append("Warning", h);
        }
    }
    resp
}

/// The object as served for `def`.
pub fn present(def: &ResourceDef, obj: Value) -> Value {
    convert::from_storage(def, obj)
}

/// Whether a write asked for `dryRun=All` is to be only validated and admitted, never stored
/// (upstream's `dryRun` handling in the generic registry). The `dry-run-ignored` fault switch
/// makes `def`'s writes ignore it: a server path that drops the option and persists the write.
fn is_dry_run(st: &AppState, def: &ResourceDef, q: &Query) -> bool {
    q.get("dryRun").is_some_and(|v| v == "All") && !st.cfg.faults.applies_to("dry-run-ignored", def.plural)
}

/// Why a write whose expected resourceVersion is no longer current fails (upstream's
/// `OptimisticLockErrorMsg`).
const STALE: &str = "the object has been modified; please apply your changes to the latest version and try again";

/// Whether `e` is the optimistic-lock conflict of a store write (as opposed to a failed
/// precondition the client asked for).
fn is_stale_write(e: &ApiError) -> bool {
    e.code == 409 && e.message.ends_with(STALE)
}

fn store_err(def: &ResourceDef, name: &str, e: StoreError) -> ApiError {
    match e {
        StoreError::Exists => ApiError::already_exists(def.group, def.plural, name),
        StoreError::NotFound => ApiError::not_found(def.group, def.plural, name),
        StoreError::Conflict => ApiError::conflict(def.group, def.plural, name, STALE),
    }
}

/// The namespace a request works in: the path's for namespaced resources, empty otherwise.
fn scope_ns(t: &Target) -> ApiResult<String> {
    if t.def.namespaced {
        t.namespace
            .clone()
            .ok_or_else(|| ApiError::bad_request("the namespace must be set for a namespaced resource"))
    } else {
        Ok(String::new())
    }
}

fn target_name(t: &Target) -> ApiResult<String> {
    t.name
        .clone()
        .ok_or_else(|| ApiError::method_not_allowed("a resource name is required"))
}

/// The stored object `ns/name` of `def`, or upstream's NotFound for it. Every verb on one
/// object (get, update, scale, patch, delete) starts by reading it this way; scale and patch
/// read it again on each conflict retry.
/// Whether the `writes-lost` fault switch loses `verb` on `def` (or its subresource `sub`): a
/// write path that acknowledges writes its storage never keeps.
fn write_lost(st: &AppState, def: &ResourceDef, sub: Option<&str>, verb: &str) -> bool {
    let resource = match sub {
        Some(sub) => format!("{}/{sub}", def.plural),
        None => def.plural.to_string(),
    };
    st.cfg.faults.applies_to("writes-lost", &format!("{resource}/{verb}"))
}

/// The answer to a lost PATCH or PUT: 200 with the object as it is stored, unchanged.
fn lost_write_answer(st: &AppState, t: &Target) -> ApiResult<Response> {
    let ns = scope_ns(t)?;
    let name = target_name(t)?;
    tracing::debug!(resource = t.def.plural, sub = ?t.sub, %ns, %name, "writes-lost: write acknowledged and dropped");
    let old = stored(st, t.def, &ns, &name)?;
    Ok(json_response(200, &present(t.def, old), &[]))
}

fn stored(st: &AppState, def: &ResourceDef, ns: &str, name: &str) -> ApiResult<Value> {
    st.store
        .get(&def.storage_key(), ns, name)
        .ok_or_else(|| ApiError::not_found(def.group, def.plural, name))
}

/// Checks `apiVersion`/`kind` of a body against the endpoint and fills them in when absent.
fn check_type(def: &ResourceDef, obj: &mut Value, kind: &str, api_version: &str) -> ApiResult<()> {
    let m = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the body of the request was not an object"))?;
    if let Some(v) = m.get("apiVersion").and_then(Value::as_str)
        && v != api_version
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({api_version})"
        )));
    }
    if let Some(k) = m.get("kind").and_then(Value::as_str)
        && k != kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({kind})"
        )));
    }
    m.insert("apiVersion".into(), json!(api_version));
    m.insert("kind".into(), json!(kind));
    let _ = def;
    Ok(())
}

/// Whether a watch was asked for (query flag or legacy path).
pub fn is_watch(t: &Target, q: &Query) -> bool {
    t.legacy_watch || flag(q, "watch")
}

#[cfg(test)]
mod dry_run_tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::state::StateConfig;

    #[test]
    fn dry_run_is_honoured_unless_the_fault_names_the_resource() {
        let st = AppState::new(StateConfig::new(AddressBlock(205)));
        let pods = crate::api::registry::find("", "v1", "pods").expect("pods are served");
        let services = crate::api::registry::find("", "v1", "services").expect("services are served");
        let q: Query = HashMap::from([("dryRun".to_string(), "All".to_string())]);
        assert!(is_dry_run(&st, pods, &q));
        assert!(!is_dry_run(&st, pods, &Query::new()));
        st.cfg.faults.set("dry-run-ignored", "pods", true);
        assert!(!is_dry_run(&st, pods, &q), "the fault stores dry-run writes of pods");
        assert!(is_dry_run(&st, services, &q), "other resources keep dry-run");
    }
}
