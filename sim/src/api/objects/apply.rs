//! PATCH with `application/apply-patch+yaml`: server-side apply of the object or its status.
//!
//! The merge and ownership are [`ssa::apply`]'s; this file is the request around it, as
//! upstream's `applyPatcher` runs it: PatchOptions validation (`fieldManager` required,
//! `force`), a create (201) when the object is absent, field validation of the result, the
//! applied object's resourceVersion as a precondition, and the usual update path (defaults,
//! admission, validation, generation, dry run) with conflict retries.

use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::Value;

use super::create::insert;
use super::update::commit;
use super::{Query, is_dry_run, json_response, present, scope_ns, store_err, target_name};
use crate::api::convert;
use crate::api::error::{ApiError, ApiResult};
use crate::api::fieldcheck;
use crate::api::meta;
use crate::api::route::Target;
use crate::api::ssa::{self, Tracking};
use crate::api::state::AppState;
use crate::api::store::{StoreError, rv_of};

fn check_name(obj: &Value, name: &str) -> ApiResult<()> {
    let got = meta::name(obj);
    if got != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({got}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

/// Upstream's applyPatcher decodes the body strictly after the merge when `fieldValidation`
/// is Strict or Warn: a repeated key is a 400 (`error strict decoding YAML: ...`) or a
/// warning.
fn strict_yaml(mode: fieldcheck::Mode, body: &[u8]) -> ApiResult<Vec<String>> {
    let Some(problem) = ssa::strict_yaml_error(body) else {
        return Ok(Vec::new());
    };
    match mode {
        fieldcheck::Mode::Strict => Err(ApiError::bad_request(format!("error strict decoding YAML: {problem}"))),
        fieldcheck::Mode::Warn => Ok(vec![problem]),
        fieldcheck::Mode::Ignore => Ok(Vec::new()),
    }
}

/// Server-side apply to the target (the object or its status subresource).
pub async fn apply_patch(
    st: &AppState,
    t: &Target,
    q: &Query,
    headers: &HeaderMap,
    body: &[u8],
) -> ApiResult<Response> {
    let def = t.def;
    let sub = t.sub.as_deref().unwrap_or_default();
    let ns = scope_ns(t)?;
    let name = target_name(t)?;
    let manager = ssa::manager_of(q, headers, "PatchOptions", true)?;
    let force = q.get("force").is_some_and(|v| v == "true");
    let mode = fieldcheck::Mode::from_query(q)?;
    let config = ssa::parse_apply_body(body)?;
    // A custom kind's apply is typed by its schema: undeclared fields are an error whatever
    // `fieldValidation` says (`crd-apply-untyped`: typed as upstream deduces an unknown type).
    if !st.cfg.faults.is_on("crd-apply-untyped") {
        let undeclared = fieldcheck::undeclared(def, &config)?;
        if !undeclared.is_empty() {
            return Err(ssa::undeclared_error(def, &config, &undeclared));
        }
    }
    for _ in 0..5 {
        let Some(old) = st.store.get(&def.storage_key(), &ns, &name) else {
            if !sub.is_empty() {
                return Err(ApiError::not_found(def.group, def.plural, &name));
            }
            let merged = ssa::apply(def, "", None, &config, &manager, force)?;
            let yaml_warnings = strict_yaml(mode, body)?;
            let (merged, mut warnings) = fieldcheck::check_value(def, merged, mode, &st.cfg.gates)?;
            warnings.extend(yaml_warnings);
            check_name(&merged, &name)?;
            match insert(st, t, q, merged, &warnings, Tracking::Applied).await {
                // Created by someone else meanwhile: apply to theirs.
                Err(e) if e.reason == "AlreadyExists" => continue,
                other => return other,
            }
        };
        let current = present(def, crate::api::crd::conversion::to_served(st, def, old.clone())?);
        let merged = ssa::apply(def, sub, Some(&current), &config, &manager, force)?;
        let yaml_warnings = strict_yaml(mode, body)?;
        let (merged, mut warnings) = fieldcheck::check_value(def, merged, mode, &st.cfg.gates)?;
        warnings.extend(yaml_warnings);
        check_name(&merged, &name)?;
        let user_rv = config
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let user_rv = match user_rv {
            Some(s) => Some(
                s.parse::<u64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))?,
            ),
            None => None,
        };
        let precondition = user_rv.unwrap_or_else(|| rv_of(&old));
        let new = crate::api::crd::conversion::to_storage(st, def, convert::to_storage(def, merged))?;
        let sub_opt = (!sub.is_empty()).then_some(sub);
        match commit(
            st,
            def,
            &old,
            new,
            sub_opt,
            Some(precondition),
            is_dry_run(st, def, q),
            Tracking::Applied,
        )
        .await
        {
            Ok(written) => {
                let written = crate::api::crd::conversion::to_served(st, def, written)?;
                return Ok(json_response(200, &present(def, written), &warnings));
            }
            // Apply conflicts come from `ssa::apply` above; a Conflict here is the store's.
            Err(e) if e.reason == "Conflict" && user_rv.is_none() => {
                // Someone else wrote between our read and write: apply again to theirs.
                continue;
            }
            Err(e) => return Err(e),
        }
    }
    Err(store_err(def, &name, StoreError::Conflict))
}
