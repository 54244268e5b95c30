//! The scale subresource: the `autoscaling/v1` Scale view of a scalable object (with its
//! selector in string form) and GET/PUT/PATCH of it, retried on conflicts like upstream.

use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use super::update::commit;
use super::{Query, is_dry_run, json_response, scope_ns, store_err, stored, target_name};
use crate::api::error::{ApiError, ApiResult, Cause};
use crate::api::meta;
use crate::api::patch;
use crate::api::registry::ResourceDef;
use crate::api::route::Target;
use crate::api::ssa::{self, Tracking};
use crate::api::state::AppState;
use crate::api::store::{StoreError, rv_of};

/// The `autoscaling/v1` Scale view of a scalable object; a custom kind's counts and selector
/// come from the paths its CRD declares.
fn scale_of(def: &ResourceDef, obj: &Value) -> Value {
    let mut scale = match def.custom.and_then(|c| crate::api::crd::serve::scale_fields(c, obj)) {
        Some((spec, status, selector)) => scale_view(obj, json!(spec), json!(status), selector),
        None => scale_view(
            obj,
            obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1)),
            obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            obj.pointer("/spec/selector").map(selector_string).unwrap_or_default(),
        ),
    };
    if let Some(mf) = ssa::to_subresource(obj) {
        scale["metadata"]["managedFields"] = mf;
    }
    scale
}

/// A Scale with the given counts and selector for `obj`.
fn scale_view(obj: &Value, spec: Value, status: Value, selector: String) -> Value {
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            "name": meta::name(obj), "namespace": meta::namespace(obj),
            "uid": obj.pointer("/metadata/uid"), "resourceVersion": obj.pointer("/metadata/resourceVersion"),
            "creationTimestamp": obj.pointer("/metadata/creationTimestamp"),
        },
        "spec": {"replicas": spec},
        "status": {"replicas": status, "selector": selector},
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
pub async fn scale(
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
    let is_patch = *method == axum::http::Method::PATCH;
    let options = if is_patch { "PatchOptions" } else { "UpdateOptions" };
    if is_patch && patch::kind_of(headers)? == patch::PatchKind::Apply {
        return apply(st, t, q, headers, body).await;
    }
    let manager = ssa::manager_of(q, headers, options, false)?;
    // `writes-lost=<plural>/scale/patch|update`: the write is acknowledged with the Scale as
    // stored, unchanged (a `kubectl scale` then sees spec.replicas differ from what it asked and
    // stops waiting, as upstream's `scaleHasDesiredReplicas` does).
    let verb = if is_patch { "patch" } else { "update" };
    if *method != axum::http::Method::GET && super::write_lost(st, def, Some("scale"), verb) {
        let old = stored(st, def, &ns, &name)?;
        return Ok(json_response(200, &scale_of(def, &old), &[]));
    }
    let tracking = Tracking::Update {
        manager: &manager,
        subresource: "scale",
    };
    for _ in 0..5 {
        let old = stored(st, def, &ns, &name)?;
        let current = scale_of(def, &old);
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
        match def.custom {
            Some(c) => crate::api::crd::serve::set_replicas(c, &mut new, replicas),
            None => new["spec"]["replicas"] = json!(replicas),
        }
        match commit(
            st,
            def,
            &old,
            new,
            None,
            Some(rv_of(&old)),
            is_dry_run(st, def, q),
            tracking,
        )
        .await
        {
            Ok(written) => return Ok(json_response(200, &scale_of(def, &written), &[])),
            // Another write got in between our read and ours: start again from a fresh read,
            // as upstream's GuaranteedUpdate does, unless the client asked for the version it
            // had read (a PUT with a resourceVersion, a patch that sets one), which is now stale.
            // A patch that sets none carries the version it was applied to.
            Err(e) if e.reason == "Conflict" && user_rv.is_none_or(|rv| is_patch && rv == rv_of(&old)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(store_err(def, &name, StoreError::Conflict))
}

/// Server-side apply of a Scale: replicas ownership moves between the parent's entries (see
/// [`ssa::apply_scale`]), then the write goes the usual way.
async fn apply(st: &AppState, t: &Target, q: &Query, headers: &HeaderMap, body: &[u8]) -> ApiResult<Response> {
    let def = t.def;
    let ns = scope_ns(t)?;
    let name = target_name(t)?;
    let manager = ssa::manager_of(q, headers, "PatchOptions", true)?;
    let force = q.get("force").is_some_and(|v| v == "true");
    let config = ssa::parse_apply_body(body)?;
    if let Some(r) = config.pointer("/spec/replicas").and_then(Value::as_i64)
        && r < 0
    {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            &name,
            vec![Cause::invalid(
                "spec.replicas",
                &json!(r),
                "must be greater than or equal to 0",
            )],
        ));
    }
    for _ in 0..5 {
        let old = stored(st, def, &ns, &name)?;
        let new = ssa::apply_scale(def, &old, &config, &manager, force)?;
        match commit(
            st,
            def,
            &old,
            new,
            None,
            Some(rv_of(&old)),
            is_dry_run(st, def, q),
            Tracking::Applied,
        )
        .await
        {
            Ok(written) => return Ok(json_response(200, &scale_of(def, &written), &[])),
            Err(e) if e.reason == "Conflict" => continue,
            Err(e) => return Err(e),
        }
    }
    Err(store_err(def, &name, StoreError::Conflict))
}
