//! The verbs on stored objects: get, list, create, update, patch, delete, deletecollection, and
//! the subresources that are object writes (status, scale, binding, finalize, eviction).
//!
//! Each handler takes the parsed [`Target`] and returns a response or an [`ApiError`] that
//! renders as a `Status`. Semantics follow the real server: system metadata is the server's,
//! a stale resourceVersion is a 409, writes that change nothing do not bump the
//! resourceVersion, and deletion honours finalizers and pod grace periods.

use std::collections::HashMap;

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use super::admission;
use super::convert;
use super::error::{ApiError, ApiResult, Cause};
use super::fieldcheck::{self, Decoded};
use super::meta;
use super::patch;
use super::registry::{self, ResourceDef};
use super::route::{Target, flag};
use super::selector::{FieldSelector, LabelSelector};
use super::state::AppState;
use super::store::{StoreError, rv_of};
use super::table;

/// Query parameters as a map.
pub type Query = HashMap<String, String>;

/// A JSON response with warnings from field validation.
pub fn json_response(code: u16, v: &Value, warnings: &[String]) -> Response {
    let mut resp = (
        axum::http::StatusCode::from_u16(code).unwrap_or(axum::http::StatusCode::OK),
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        v.to_string(),
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

fn is_dry_run(q: &Query) -> bool {
    q.get("dryRun").is_some_and(|v| v == "All")
}

fn store_err(def: &ResourceDef, name: &str, e: StoreError) -> ApiError {
    match e {
        StoreError::Exists => ApiError::already_exists(def.group, def.plural, name),
        StoreError::NotFound => ApiError::not_found(def.group, def.plural, name),
        StoreError::Conflict => ApiError::conflict(
            def.group,
            def.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ),
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
fn stored(st: &AppState, def: &ResourceDef, ns: &str, name: &str) -> ApiResult<Value> {
    st.store
        .get(&def.storage_key(), ns, name)
        .ok_or_else(|| ApiError::not_found(def.group, def.plural, name))
}

/// GET of one object.
pub fn get(st: &AppState, t: &Target, q: &Query, headers: &HeaderMap) -> ApiResult<Response> {
    let obj = stored(st, t.def, &scope_ns(t)?, &target_name(t)?)?;
    let obj = present(t.def, obj);
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
    let (labels, fields) = selectors(def, q)?;
    let (items, rv) = st.store.list(&def.storage_key(), ns);
    let items = items
        .into_iter()
        .map(|o| present(def, o))
        .filter(|o| labels.matches(o) && fields.matches(o))
        .collect();
    Ok((items, rv))
}

/// GET of a collection (list).
pub fn list(st: &AppState, t: &Target, q: &Query, headers: &HeaderMap) -> ApiResult<Response> {
    let def = t.def;
    let (mut items, mut rv) = select(st, def, t.namespace.as_deref(), q)?;
    if let Some(token) = q.get("continue").filter(|s| !s.is_empty()) {
        let (first_rv, ns, name) = decode_continue(token)?;
        items.retain(|o| (meta::namespace(o), meta::name(o)) > (ns.as_str(), name.as_str()));
        rv = first_rv;
    }
    let limit: usize = q
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let mut list_meta = json!({"resourceVersion": rv.to_string()});
    if items.len() > limit {
        let remaining = items.len() - limit;
        items.truncate(limit);
        let last = items.last().expect("limit > 0");
        list_meta["continue"] = json!(encode_continue(rv, meta::namespace(last), meta::name(last)));
        list_meta["remainingItemCount"] = json!(remaining);
    }
    if let Some(opts) = table::wants(headers, q.get("includeObject").map(String::as_str)) {
        return Ok(json_response(
            200,
            &table::render(def, &items, &opts, Some(list_meta)),
            &[],
        ));
    }
    let list = json!({
        "apiVersion": def.api_version(),
        "kind": def.list_kind(),
        "metadata": list_meta,
        "items": items,
    });
    Ok(json_response(200, &list, &[]))
}

/// Checks the namespace a new object goes into: it must exist and not be terminating.
fn check_namespace(st: &AppState, def: &ResourceDef, ns: &str, name: &str) -> ApiResult<()> {
    if !def.namespaced {
        return Ok(());
    }
    let nsobj = st
        .store
        .get("/namespaces", "", ns)
        .ok_or_else(|| ApiError::not_found("", "namespaces", ns))?;
    if meta::is_deleting(&nsobj) {
        let mut e = ApiError::forbidden(format!(
            "{} {name:?} is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            if def.group.is_empty() {
                def.plural.to_string()
            } else {
                format!("{}.{}", def.plural, def.group)
            }
        ));
        e.details = Some(json!({"name": name, "kind": def.plural, "group": def.group,
            "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]}));
        return Err(e);
    }
    Ok(())
}

/// Upstream's generateName alphabet (no vowels, no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn generated(prefix: &str) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
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

/// POST to a collection.
pub async fn create(st: &AppState, t: &Target, q: &Query, headers: &HeaderMap, body: &[u8]) -> ApiResult<Response> {
    let def = t.def;
    if !def.allows("create") {
        return Err(ApiError::method_not_allowed(format!(
            "create is not supported on {}",
            def.plural
        )));
    }
    let Decoded {
        value: mut obj,
        warnings,
    } = fieldcheck::decode(def, body, headers, q)?;
    check_type(def, &mut obj, def.kind, &def.api_version())?;
    if !registry::is_stored(def) {
        return admission::review(st, def, obj).map(|v| json_response(201, &v, &warnings));
    }
    let ns = scope_ns(t)?;
    let mut obj = convert::to_storage(def, obj);
    {
        let m = meta::meta_mut(&mut obj);
        if def.namespaced {
            match m.get("namespace").and_then(Value::as_str) {
                Some(b) if !b.is_empty() && b != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), json!(ns));
                }
            }
        } else {
            m.remove("namespace");
        }
        for f in [
            "uid",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ] {
            m.remove(f);
        }
        m.insert("creationTimestamp".into(), json!(meta::now()));
        m.insert("uid".into(), json!(meta::new_uid()));
        if def.tracks_generation() {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
    }
    let explicit = meta::name(&obj).to_string();
    let generate = obj
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if explicit.is_empty() && generate.is_empty() {
        return Err(ApiError::invalid(
            def.group,
            def.kind,
            "",
            vec![Cause {
                reason: "FieldValueRequired".into(),
                message: "Required value: name or generateName is required".into(),
                field: "metadata.name".into(),
            }],
        ));
    }
    check_namespace(st, def, &ns, if explicit.is_empty() { &generate } else { &explicit })?;
    // Allocation (ClusterIPs, NodePorts) reads the store; holding this lock until the create
    // lands keeps two creates from taking the same address.
    let _alloc = st.alloc.lock().await;
    let dry_run = is_dry_run(q);
    for attempt in 0..8 {
        let mut candidate = obj.clone();
        if explicit.is_empty() {
            meta::meta_mut(&mut candidate).insert("name".into(), json!(generated(&generate)));
        }
        let name = meta::name(&candidate).to_string();
        admission::on_create(st, def, &mut candidate)?;
        if dry_run {
            if st.store.get(&def.storage_key(), &ns, &name).is_some() {
                return Err(ApiError::already_exists(def.group, def.plural, &name));
            }
            return Ok(json_response(201, &present(def, candidate), &warnings));
        }
        match st.store.create(&def.storage_key(), &ns, &name, candidate) {
            Ok(written) => return Ok(json_response(201, &present(def, written), &warnings)),
            Err(StoreError::Exists) if explicit.is_empty() && attempt < 7 => continue,
            Err(e) => return Err(store_err(def, &name, e)),
        }
    }
    Err(ApiError::internal("could not generate a unique name"))
}

/// Fields of `metadata` only the server sets; an update keeps the stored values.
const SYSTEM_META: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "namespace",
    "selfLink",
];

/// Builds the object an update stores from the old one and what the client sent.
fn merge_system_fields(def: &ResourceDef, old: &Value, mut new: Value, sub: Option<&str>) -> Value {
    match sub {
        Some("status") => {
            // A status write changes status only (and never metadata beyond what the server sets).
            let mut out = old.clone();
            if let Some(s) = new.get("status") {
                out["status"] = s.clone();
            }
            out
        }
        _ => {
            let old_meta = old.get("metadata").cloned().unwrap_or_default();
            let m = meta::meta_mut(&mut new);
            for f in SYSTEM_META {
                match old_meta.get(*f) {
                    Some(v) => {
                        m.insert((*f).to_string(), v.clone());
                    }
                    None => {
                        m.remove(*f);
                    }
                }
            }
            m.remove("managedFields");
            if def.has_sub("status") && sub.is_none() {
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(o) = new.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
            }
            new
        }
    }
}

/// Whether an object whose deletion is pending can go now: no finalizers left and no grace
/// period to wait for (namespaces also wait for `spec.finalizers`).
fn ready_to_remove(def: &ResourceDef, obj: &Value) -> bool {
    if !meta::is_deleting(obj) || !meta::finalizers(obj).is_empty() {
        return false;
    }
    if def.plural == "namespaces" {
        return obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
    }
    obj.pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        == 0
}

/// Stores an update of `old` to `new`: system fields, admission, generation, no-op detection,
/// finalizer completion. `precondition` is the resourceVersion the client asked to update.
pub fn commit(
    st: &AppState,
    def: &ResourceDef,
    old: &Value,
    new: Value,
    sub: Option<&str>,
    precondition: Option<u64>,
    dry_run: bool,
) -> ApiResult<Value> {
    let name = meta::name(old).to_string();
    let ns = meta::namespace(old).to_string();
    if precondition.is_some_and(|p| p != rv_of(old)) {
        return Err(store_err(def, &name, StoreError::Conflict));
    }
    let mut new = merge_system_fields(def, old, new, sub);
    meta::drop_nulls(&mut new);
    if sub.is_none() {
        admission::on_update(st, def, old, &mut new)?;
    }
    if def.tracks_generation() && old.get("spec") != new.get("spec") {
        let g = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
        meta::meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    // Set before the comparison so an unchanged object compares equal.
    meta::meta_mut(&mut new).insert("resourceVersion".into(), json!(rv_of(old).to_string()));
    let key = def.storage_key();
    if ready_to_remove(def, &new) {
        if dry_run {
            return Ok(new);
        }
        return st
            .store
            .remove(&key, &ns, &name, Some(rv_of(old)))
            .map_err(|e| store_err(def, &name, e));
    }
    if &new == old || dry_run {
        return Ok(new);
    }
    st.store
        .update(&key, &ns, &name, new, Some(rv_of(old)))
        .map_err(|e| store_err(def, &name, e))
}

/// PUT of an object or of its status/finalize subresource (the target's).
pub fn update(st: &AppState, t: &Target, q: &Query, headers: &HeaderMap, body: &[u8]) -> ApiResult<Response> {
    let def = t.def;
    let sub = t.sub.as_deref();
    let ns = scope_ns(t)?;
    let name = target_name(t)?;
    let Decoded {
        value: mut obj,
        warnings,
    } = fieldcheck::decode(def, body, headers, q)?;
    check_type(def, &mut obj, def.kind, &def.api_version())?;
    let obj = convert::to_storage(def, obj);
    let body_name = meta::name(&obj);
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if def.namespaced {
        let body_ns = meta::namespace(&obj);
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    let old = stored(st, def, &ns, &name)?;
    let precondition = obj
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let precondition = match precondition {
        Some(s) => Some(
            s.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))?,
        ),
        None => None,
    };
    let mut obj = obj;
    if sub == Some("finalize") {
        // Only spec.finalizers changes through finalize.
        let mut out = old.clone();
        out["spec"]["finalizers"] = obj.pointer("/spec/finalizers").cloned().unwrap_or(json!([]));
        obj = out;
    }
    let written = commit(st, def, &old, obj, sub, precondition, is_dry_run(q))?;
    Ok(json_response(200, &present(def, written), &warnings))
}

/// The `autoscaling/v1` Scale view of a scalable object.
fn scale_of(obj: &Value) -> Value {
    let sel = obj.pointer("/spec/selector").map(selector_string).unwrap_or_default();
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            "name": meta::name(obj), "namespace": meta::namespace(obj),
            "uid": obj.pointer("/metadata/uid"), "resourceVersion": obj.pointer("/metadata/resourceVersion"),
            "creationTimestamp": obj.pointer("/metadata/creationTimestamp"),
        },
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {"replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)), "selector": sel},
    })
}

/// A label selector object in its string form (`app=web,tier in (a,b)`).
pub fn selector_string(sel: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str().unwrap_or_default()));
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default();
        let vals: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match e["operator"].as_str() {
            Some("In") => parts.push(format!("{key} in ({})", vals.join(","))),
            Some("NotIn") => parts.push(format!("{key} notin ({})", vals.join(","))),
            Some("Exists") => parts.push(key.to_string()),
            Some("DoesNotExist") => parts.push(format!("!{key}")),
            _ => {}
        }
    }
    parts.join(",")
}

/// GET/PUT/PATCH of the scale subresource.
pub fn scale(
    st: &AppState,
    t: &Target,
    q: &Query,
    headers: &HeaderMap,
    method: &axum::http::Method,
    body: &[u8],
) -> ApiResult<Response> {
    let def = t.def;
    let ns = scope_ns(t)?;
    let name = target_name(t)?;
    for _ in 0..5 {
        let old = stored(st, def, &ns, &name)?;
        let current = scale_of(&old);
        let wanted = match *method {
            axum::http::Method::GET => return Ok(json_response(200, &current, &[])),
            axum::http::Method::PUT => {
                serde_json::from_slice::<Value>(body).map_err(|e| ApiError::bad_request(e.to_string()))?
            }
            axum::http::Method::PATCH => patch::apply(headers, &current, body, def)?,
            _ => return Err(ApiError::method_not_allowed("scale supports get, update and patch")),
        };
        let user_rv = wanted
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<u64>().ok());
        if let Some(rv) = user_rv
            && rv != rv_of(&old)
        {
            return Err(store_err(def, &name, StoreError::Conflict));
        }
        let Some(replicas) = wanted.pointer("/spec/replicas").and_then(Value::as_i64) else {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                &name,
                vec![Cause::required("spec.replicas")],
            ));
        };
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                &name,
                vec![Cause::invalid(
                    "spec.replicas",
                    &json!(replicas),
                    "must be greater than or equal to 0",
                )],
            ));
        }
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(replicas);
        match commit(st, def, &old, new, None, Some(rv_of(&old)), is_dry_run(q)) {
            Ok(written) => return Ok(json_response(200, &scale_of(&written), &[])),
            Err(e) if e.reason == "Conflict" && user_rv.is_none() => continue,
            Err(e) => return Err(e),
        }
    }
    Err(store_err(def, &name, StoreError::Conflict))
}

/// PATCH of an object or its status subresource (the target's).
pub fn patch_object(st: &AppState, t: &Target, q: &Query, headers: &HeaderMap, body: &[u8]) -> ApiResult<Response> {
    let def = t.def;
    let sub = t.sub.as_deref();
    let ns = scope_ns(t)?;
    let name = target_name(t)?;
    let mode = fieldcheck::Mode::from_query(q)?;
    for _ in 0..5 {
        let old = stored(st, def, &ns, &name)?;
        let current = present(def, old.clone());
        let patched = patch::apply(headers, &current, body, def)?;
        let (patched, warnings) = fieldcheck::check_value(def, patched, mode)?;
        if meta::name(&patched) != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta::name(&patched)
            )));
        }
        let user_rv = patched
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<u64>().ok());
        let precondition = match user_rv {
            Some(rv) if rv != rv_of(&old) => Some(rv),
            _ => Some(rv_of(&old)),
        };
        let new = convert::to_storage(def, patched);
        match commit(st, def, &old, new, sub, precondition, is_dry_run(q)) {
            Ok(written) => return Ok(json_response(200, &present(def, written), &warnings)),
            Err(e) if e.reason == "Conflict" && user_rv.is_none_or(|rv| rv == rv_of(&old)) => {
                // Someone else wrote between our read and write: reapply, like upstream.
                continue;
            }
            Err(e) => return Err(e),
        }
    }
    Err(store_err(def, &name, StoreError::Conflict))
}

/// DeleteOptions from the body and query.
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    grace: Option<i64>,
    propagation: Option<String>,
    uid: Option<String>,
    rv: Option<String>,
    dry_run: bool,
}

impl DeleteOptions {
    /// Reads body (may be empty) and query.
    pub fn parse(q: &Query, body: &[u8]) -> ApiResult<Self> {
        let b: Value = if body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
        };
        let b = if b.get("deleteOptions").is_some() {
            b["deleteOptions"].clone()
        } else {
            b
        };
        let grace = q
            .get("gracePeriodSeconds")
            .and_then(|g| g.parse().ok())
            .or_else(|| b.get("gracePeriodSeconds").and_then(Value::as_i64));
        let propagation = q
            .get("propagationPolicy")
            .cloned()
            .or_else(|| b.get("propagationPolicy").and_then(Value::as_str).map(String::from))
            .or_else(|| match b.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => Some("Orphan".into()),
                Some(false) => Some("Background".into()),
                None => None,
            });
        if let Some(p) = &propagation
            && !matches!(p.as_str(), "Orphan" | "Foreground" | "Background")
        {
            return Err(ApiError::invalid(
                "",
                "DeleteOptions",
                "",
                vec![Cause::not_supported(
                    "propagationPolicy",
                    &json!(p),
                    &["Foreground", "Background", "Orphan"],
                )],
            ));
        }
        let dry_run = q.get("dryRun").is_some_and(|v| v == "All")
            || b.get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|v| v == "All"));
        Ok(Self {
            grace,
            propagation,
            uid: b
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(String::from),
            rv: b
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from),
            dry_run,
        })
    }
}

fn success_status(def: &ResourceDef, obj: &Value) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": meta::name(obj), "group": def.group, "kind": def.plural,
                    "uid": obj.pointer("/metadata/uid")}
    })
}

/// Deletes one object following its deletion rules; returns the HTTP body (the object while
/// deletion is pending, else the deleted object or a Status, as upstream's registries do).
pub fn delete_one(st: &AppState, def: &ResourceDef, ns: &str, name: &str, opts: &DeleteOptions) -> ApiResult<Value> {
    let key = def.storage_key();
    let obj = stored(st, def, ns, name)?;
    if opts
        .uid
        .as_deref()
        .is_some_and(|u| Some(u) != obj.pointer("/metadata/uid").and_then(Value::as_str))
    {
        return Err(ApiError::conflict(
            def.group,
            def.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                opts.uid.as_deref().unwrap_or_default(),
                obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default()
            ),
        ));
    }
    if let Some(rv) = &opts.rv
        && rv.parse::<u64>().ok() != Some(rv_of(&obj))
    {
        return Err(ApiError::conflict(
            def.group,
            def.plural,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                rv_of(&obj)
            ),
        ));
    }
    let returns_object = matches!(def.plural, "pods" | "services" | "namespaces");
    let done = |removed: Value| {
        if returns_object {
            present(def, removed)
        } else {
            success_status(def, &removed)
        }
    };

    if def.plural == "namespaces" {
        if matches!(name, "default" | "kube-system" | "kube-public") {
            return Err(ApiError::forbidden(format!(
                "namespaces {name:?} is forbidden: this namespace may not be deleted"
            )));
        }
        if meta::is_deleting(&obj) {
            return Ok(present(def, obj));
        }
        let mut new = obj.clone();
        meta::meta_mut(&mut new).insert("deletionTimestamp".into(), json!(meta::now()));
        meta::meta_mut(&mut new).insert("deletionGracePeriodSeconds".into(), json!(0));
        add_propagation_finalizer(&mut new, opts);
        new["status"]["phase"] = json!("Terminating");
        if opts.dry_run {
            return Ok(present(def, new));
        }
        return st
            .store
            .update(&key, ns, name, new, Some(rv_of(&obj)))
            .map(|v| present(def, v))
            .map_err(|e| store_err(def, name, e));
    }

    let mut grace = 0i64;
    if def.plural == "pods" {
        let bound = obj
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let terminal = matches!(
            obj.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        );
        grace = opts
            .grace
            .or_else(|| {
                obj.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30)
            .max(0);
        if !bound || terminal {
            grace = 0;
        }
    }
    if meta::is_deleting(&obj) {
        // Already being deleted: only a shorter grace period changes anything (the kubelet's
        // final delete uses 0).
        let current = obj
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if def.plural == "pods" && opts.grace.is_some() && grace < current {
            let mut new = obj.clone();
            meta::meta_mut(&mut new).insert("deletionGracePeriodSeconds".into(), json!(grace));
            meta::meta_mut(&mut new).insert("deletionTimestamp".into(), json!(meta::now_plus(grace)));
            if opts.dry_run {
                return Ok(present(def, new));
            }
            if ready_to_remove(def, &new) {
                return st
                    .store
                    .remove(&key, ns, name, Some(rv_of(&obj)))
                    .map(done)
                    .map_err(|e| store_err(def, name, e));
            }
            return st
                .store
                .update(&key, ns, name, new, Some(rv_of(&obj)))
                .map(|v| present(def, v))
                .map_err(|e| store_err(def, name, e));
        }
        return Ok(present(def, obj));
    }
    let mut new = obj.clone();
    add_propagation_finalizer(&mut new, opts);
    if grace == 0 && meta::finalizers(&new).is_empty() {
        if opts.dry_run {
            return Ok(done(obj));
        }
        return st
            .store
            .remove(&key, ns, name, Some(rv_of(&obj)))
            .map(done)
            .map_err(|e| store_err(def, name, e));
    }
    meta::meta_mut(&mut new).insert("deletionTimestamp".into(), json!(meta::now_plus(grace)));
    meta::meta_mut(&mut new).insert("deletionGracePeriodSeconds".into(), json!(grace));
    if def.tracks_generation() {
        let g = obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
        meta::meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    if opts.dry_run {
        return Ok(present(def, new));
    }
    st.store
        .update(&key, ns, name, new, Some(rv_of(&obj)))
        .map(|v| present(def, v))
        .map_err(|e| store_err(def, name, e))
}

fn add_propagation_finalizer(obj: &mut Value, opts: &DeleteOptions) {
    let f = match opts.propagation.as_deref() {
        Some("Orphan") => "orphan",
        Some("Foreground") => "foregroundDeletion",
        _ => return,
    };
    let mut fins = meta::finalizers(obj);
    if !fins.iter().any(|x| x == f) {
        fins.push(f.to_string());
        meta::meta_mut(obj).insert("finalizers".into(), json!(fins));
    }
}

/// DELETE of one object.
pub fn delete(st: &AppState, t: &Target, q: &Query, body: &[u8]) -> ApiResult<Response> {
    let ns = scope_ns(t)?;
    let name = target_name(t)?;
    let opts = DeleteOptions::parse(q, body)?;
    let out = delete_one(st, t.def, &ns, &name, &opts)?;
    Ok(json_response(200, &out, &[]))
}

/// DELETE of a collection: every selected object, each by its own rules.
pub fn delete_collection(st: &AppState, t: &Target, q: &Query, body: &[u8]) -> ApiResult<Response> {
    let def = t.def;
    if !def.allows("deletecollection") {
        return Err(ApiError::method_not_allowed(format!(
            "deletecollection is not supported on {}",
            def.plural
        )));
    }
    let opts = DeleteOptions::parse(q, body)?;
    let (items, rv) = select(st, def, t.namespace.as_deref(), q)?;
    let mut out = Vec::new();
    for o in &items {
        match delete_one(st, def, meta::namespace(o), meta::name(o), &opts) {
            Ok(v) if v.get("kind").and_then(Value::as_str) == Some("Status") => out.push(o.clone()),
            Ok(v) => out.push(v),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({"apiVersion": def.api_version(), "kind": def.list_kind(),
        "metadata": {"resourceVersion": rv.to_string()}, "items": out});
    Ok(json_response(200, &list, &[]))
}

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
        Err(super::store::ModifyError::NotFound) => Err(ApiError::not_found(def.group, def.plural, pod)),
        Err(super::store::ModifyError::Rejected(e)) => Err(e),
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

/// POST serviceaccounts/{name}/token: a TokenRequest answered with a token the server accepts.
pub fn token_request(st: &AppState, ns: &str, sa: &str, body: &[u8]) -> ApiResult<Response> {
    if st.store.get("/serviceaccounts", ns, sa).is_none() {
        return Err(ApiError::not_found("", "serviceaccounts", sa));
    }
    let mut req: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?
    };
    let secs = req
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    let token = st.issue_token(&format!("system:serviceaccount:{ns}:{sa}"));
    req["apiVersion"] = json!("authentication.k8s.io/v1");
    req["kind"] = json!("TokenRequest");
    req["metadata"] = json!({"name": sa, "namespace": ns, "creationTimestamp": null});
    req["spec"]["expirationSeconds"] = json!(secs);
    req["status"] = json!({"token": token, "expirationTimestamp": meta::now_plus(secs)});
    Ok(json_response(201, &req, &[]))
}

/// Whether a watch was asked for (query flag or legacy path).
pub fn is_watch(t: &Target, q: &Query) -> bool {
    t.legacy_watch || flag(q, "watch")
}
