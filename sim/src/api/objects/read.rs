//! The read verbs: GET of one object and of a collection, with label and field selectors,
//! `limit`/`continue` paging and the Table form kubectl asks for.

use std::sync::Arc;

use axum::http::HeaderMap;
use axum::response::Response;
use base64::Engine;
use serde_json::{Value, json};

use super::{Query, json_response, present, scope_ns, stored, target_name};
use crate::api::convert;
use crate::api::error::{ApiError, ApiResult};
use crate::api::meta;
use crate::api::registry::ResourceDef;
use crate::api::route::Target;
use crate::api::selector::{FieldSelector, LabelSelector};
use crate::api::state::AppState;
use crate::api::table;

/// GET of one object.
pub fn get(st: &AppState, t: &Target, q: &Query, headers: &HeaderMap) -> ApiResult<Response> {
    let obj = stored(st, t.def, &scope_ns(t)?, &target_name(t)?)?;
    let obj = present(t.def, crate::api::crd::conversion::to_served(st, t.def, obj)?);
    if let Some(opts) = table::wants(headers, q.get("includeObject").map(String::as_str)) {
        return Ok(json_response(200, &table::render(t.def, &[obj], &opts, None), &[]));
    }
    Ok(json_response(200, &obj, &[]))
}

/// The selectors of a list, watch or deletecollection request.
pub fn selectors(def: &ResourceDef, q: &Query) -> ApiResult<(LabelSelector, FieldSelector)> {
    let labels = LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or_default())?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").map(String::as_str).unwrap_or_default(),
        def.plural,
        def.kind,
        &def.api_version(),
    )?;
    Ok((labels, fields))
}

/// The continue token: the resourceVersion of the first page and the last key served.
fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    let raw = json!({"rv": rv, "ns": ns, "name": name}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> ApiResult<(u64, String, String)> {
    let bad = || ApiError::bad_request("continue key is not valid: incorrect encoded start resourceVersion");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    Ok((
        v["rv"].as_u64().ok_or_else(bad)?,
        v["ns"].as_str().ok_or_else(bad)?.to_string(),
        v["name"].as_str().ok_or_else(bad)?.to_string(),
    ))
}

/// The objects of a list request after selectors, in order, with the list resourceVersion.
pub fn select(st: &AppState, def: &ResourceDef, ns: Option<&str>, q: &Query) -> ApiResult<(Vec<Value>, u64)> {
    let (items, rv) = select_shared(st, def, ns, q)?;
    Ok((items.into_iter().map(Arc::unwrap_or_clone).collect(), rv))
}

/// [`select`] without copies: an object whose served form is its stored form is the stored
/// `Arc` itself, so a LIST of a thousand pods copies pointers, not pods.
fn select_shared(st: &AppState, def: &ResourceDef, ns: Option<&str>, q: &Query) -> ApiResult<(Vec<Arc<Value>>, u64)> {
    let (labels, fields) = selectors(def, q)?;
    let (items, rv) = st.store.list_shared(&def.storage_key(), ns);
    // Labels read the same stored and served, so they filter before any copy (and before a
    // conversion webhook is asked for the rest); fields are matched on the served form
    // (events.k8s.io renames some).
    let items: Vec<Arc<Value>> = items.into_iter().filter(|o| labels.matches(o)).collect();
    let items = crate::api::crd::conversion::shared_to_served(st, def, items)?;
    let items = items
        .into_iter()
        .map(|o| {
            if convert::served_as_stored(def, &o) {
                o
            } else {
                Arc::new(present(def, Value::clone(&o)))
            }
        })
        .filter(|o| fields.matches(o))
        .collect();
    Ok((items, rv))
}

/// A list's JSON body, written item by item from the shared objects (no list value is built,
/// which would copy every item), keys in the order serde_json's sorted maps give every other
/// response.
fn list_body(def: &ResourceDef, list_meta: &Value, items: &[Arc<Value>]) -> Vec<u8> {
    fn put<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
        serde_json::to_writer(out, v).expect("JSON values and strings always serialise");
    }
    let mut out = Vec::with_capacity(256 + items.len() * 2048);
    out.extend_from_slice(b"{\"apiVersion\":");
    put(&mut out, &def.api_version());
    out.extend_from_slice(b",\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        put(&mut out, &**o);
    }
    out.extend_from_slice(b"],\"kind\":");
    put(&mut out, &def.list_kind());
    out.extend_from_slice(b",\"metadata\":");
    put(&mut out, list_meta);
    out.push(b'}');
    out
}

/// Upstream's message for a list at a compacted resourceVersion (`etcd3/errors.go`).
const LIST_EXPIRED: &str = "The resourceVersion for the provided list is too old.";

/// Upstream's message for a continue token from before a compaction.
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. \
     You can start a new list without the continue parameter, or use the continue token in this response to \
     retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list \
     - objects that were created, modified, or deleted between the time the first chunk was returned and now \
     may show up in the list.";

/// 410 for a list that must be read at an exact resourceVersion etcd has compacted away.
///
/// kube-apiserver 1.33 reads such lists from etcd rather than its watch cache:
/// `resourceVersionMatch=Exact`, and the legacy form, a resourceVersion other than `0` with a
/// limit. Other lists (no resourceVersion, `0`, `NotOlderThan`) are served whatever the history.
fn exact_read_possible(st: &AppState, q: &Query, limited: bool) -> ApiResult<()> {
    let Some(rv) = q.get("resourceVersion").filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    let exact = match q.get("resourceVersionMatch").map(String::as_str).unwrap_or_default() {
        "Exact" => true,
        "" => limited && rv != "0",
        _ => false,
    };
    let Ok(rv) = rv.parse::<u64>() else {
        return Ok(());
    };
    if exact && st.store.readable_at(rv).is_err() {
        return Err(ApiError::expired(LIST_EXPIRED));
    }
    Ok(())
}

/// The 410 for a continue token from before a compaction: upstream hands a token that goes on
/// at the current state in the Status's `metadata.continue`.
fn continue_expired(st: &AppState, ns: &str, name: &str) -> Response {
    let mut status = ApiError::expired(CONTINUE_EXPIRED).status();
    status["metadata"] = json!({"continue": encode_continue(st.store.current_rv(), ns, name)});
    json_response(410, &status, &[])
}

/// GET of a collection (list).
pub fn list(st: &AppState, t: &Target, q: &Query, headers: &HeaderMap) -> ApiResult<Response> {
    let def = t.def;
    let limit: usize = q
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    // `list-continue-ignored`: every page starts again at the first object.
    let token = q
        .get("continue")
        .filter(|s| !s.is_empty() && !st.cfg.faults.is_on("list-continue-ignored"));
    let continued = match token {
        Some(token) => {
            let (first_rv, ns, name) = decode_continue(token)?;
            if st.store.readable_at(first_rv).is_err() {
                return Ok(continue_expired(st, &ns, &name));
            }
            Some((first_rv, ns, name))
        }
        None => {
            exact_read_possible(st, q, limit != usize::MAX)?;
            None
        }
    };
    let (mut items, mut rv) = select_shared(st, def, t.namespace.as_deref(), q)?;
    if let Some((first_rv, ns, name)) = continued {
        items.retain(|o| (meta::namespace(o), meta::name(o)) > (ns.as_str(), name.as_str()));
        rv = first_rv;
    }
    let mut list_meta = json!({"resourceVersion": rv.to_string()});
    if items.len() > limit {
        let remaining = items.len() - limit;
        items.truncate(limit);
        let last = items.last().expect("limit > 0");
        list_meta["continue"] = json!(encode_continue(rv, meta::namespace(last), meta::name(last)));
        list_meta["remainingItemCount"] = json!(remaining);
    }
    if let Some(opts) = table::wants(headers, q.get("includeObject").map(String::as_str)) {
        let items: Vec<Value> = items.into_iter().map(Arc::unwrap_or_clone).collect();
        return Ok(json_response(
            200,
            &table::render(def, &items, &opts, Some(list_meta)),
            &[],
        ));
    }
    Ok(super::json_bytes_response(200, list_body(def, &list_meta, &items)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::registry::find;

    #[test]
    fn list_body_is_byte_for_byte_the_list_value_serialised() {
        let def = find("", "v1", "pods").unwrap();
        let items = vec![
            Arc::new(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a\"b"}, "spec": {}})),
            Arc::new(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"}})),
        ];
        let list_meta = json!({"resourceVersion": "7", "continue": "x"});
        let whole = json!({
            "apiVersion": "v1",
            "kind": "PodList",
            "metadata": list_meta,
            "items": items.iter().map(|o| Value::clone(o)).collect::<Vec<_>>(),
        });
        assert_eq!(
            String::from_utf8(list_body(def, &list_meta, &items)).unwrap(),
            whole.to_string()
        );
        let empty = json!({"apiVersion": "v1", "kind": "PodList", "metadata": list_meta, "items": []});
        assert_eq!(
            String::from_utf8(list_body(def, &list_meta, &[])).unwrap(),
            empty.to_string()
        );
    }
}
