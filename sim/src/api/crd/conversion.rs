//! Conversion of custom objects between the versions of their CRD (`spec.conversion`), as
//! upstream's apiextensions-apiserver converts them (pkg/apiserver/conversion): objects are
//! stored at the CRD's storage version, written objects are converted to it and read ones to
//! the version asked for.
//!
//! `None` only rewrites `apiVersion` (upstream's `nopConverter`). `Webhook` POSTs a
//! ConversionReview (v1 or v1beta1, the first of `conversionReviewVersions` the server knows)
//! to the CRD's `webhook.clientConfig` over the admission webhooks' HTTPS plumbing
//! ([`crate::api::webhook::call::post_json`]) and checks the answer as upstream's
//! `webhookConverter` does: the review's kind and uid, `result.status`, the number of objects,
//! each converted object's group-version and kind, name, namespace and uid; metadata other
//! than labels and annotations is restored from the original. A list sends every object
//! whose version differs in one review. Errors carry upstream's words
//! (`conversion webhook for GROUP/VERSION, Kind=KIND failed: ...`) and answer 500.
//!
//! Upstream's converter is a blocking call inside the codec; the simulator's read and write
//! paths are synchronous there too, so the call runs on the current thread with
//! `block_in_place` (other tasks of the runtime, the webhook pod's server among them, move to
//! another worker meanwhile).
//!
//! Gaps: watch events are served as stored (not converted), and the `isEmptyUnstructuredObject`
//! shortcut is not taken.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::CRD_KEY;
use crate::api::error::{ApiError, ApiResult};
use crate::api::meta;
use crate::api::registry::ResourceDef;
use crate::api::state::AppState;
use crate::api::webhook::call::{CallError, post_json};

/// Upstream's conversion webhook timeout (`webhookConverterFactory`: 30 s).
const TIMEOUT: Duration = Duration::from_secs(30);

/// The CRD's conversion settings, when it has a custom def.
fn crd_of(st: &AppState, def: &ResourceDef) -> Option<Value> {
    st.store.get(CRD_KEY, "", &def.custom?.crd_name)
}

/// The version the CRD of `def` stores its objects at.
fn storage_version(crd: &Value) -> Option<String> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .map(String::from)
}

fn api_version(obj: &Value) -> &str {
    obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default()
}

/// `GROUP/VERSION, Kind=KIND`, as Go prints a GroupVersionKind.
fn gvk_text(obj: &Value) -> String {
    format!(
        "{}, Kind={}",
        api_version(obj),
        obj.get("kind").and_then(Value::as_str).unwrap_or_default()
    )
}

/// A written custom object (at the request's version) in its storage form.
///
/// # Errors
/// The conversion webhook's failure, as a 500.
pub fn to_storage(st: &AppState, def: &ResourceDef, mut obj: Value) -> ApiResult<Value> {
    let Some(crd) = crd_of(st, def) else { return Ok(obj) };
    if api_version(&obj).is_empty()
        && let Some(m) = obj.as_object_mut()
    {
        m.insert("apiVersion".into(), json!(def.api_version()));
        m.insert("kind".into(), json!(def.kind));
    }
    let Some(version) = storage_version(&crd) else {
        return Ok(obj);
    };
    let mut out = convert_all(st, &crd, def, vec![obj], &version)?;
    Ok(out.pop().expect("one object in, one out"))
}

/// A stored custom object at `def`'s version.
///
/// # Errors
/// The conversion webhook's failure, as a 500.
pub fn to_served(st: &AppState, def: &ResourceDef, obj: Value) -> ApiResult<Value> {
    if def.custom.is_none() || api_version(&obj) == def.api_version() {
        return Ok(obj);
    }
    let Some(crd) = crd_of(st, def) else { return Ok(obj) };
    let mut out = convert_all(st, &crd, def, vec![obj], def.version)?;
    Ok(out.pop().expect("one object in, one out"))
}

/// Stored custom objects at `def`'s version, those at another version converted in one
/// review; objects already at it stay shared.
///
/// # Errors
/// The conversion webhook's failure, as a 500.
pub fn shared_to_served(st: &AppState, def: &ResourceDef, items: Vec<Arc<Value>>) -> ApiResult<Vec<Arc<Value>>> {
    let want = def.api_version();
    if def.custom.is_none() || items.iter().all(|o| api_version(o) == want) {
        return Ok(items);
    }
    let Some(crd) = crd_of(st, def) else { return Ok(items) };
    let stale: Vec<Value> = items
        .iter()
        .filter(|o| api_version(o) != want)
        .map(|o| Value::clone(o))
        .collect();
    let mut converted = convert_all(st, &crd, def, stale, def.version)?.into_iter();
    Ok(items
        .into_iter()
        .map(|o| {
            if api_version(&o) == want {
                o
            } else {
                Arc::new(converted.next().expect("one converted object per stale one"))
            }
        })
        .collect())
}

/// Converts `objs` to `def.group`/`version`: a `None` strategy (or the
/// `conversion-webhook-skipped` fault) rewrites `apiVersion`, `Webhook` asks the webhook for
/// the objects at another version.
fn convert_all(
    st: &AppState,
    crd: &Value,
    def: &ResourceDef,
    mut objs: Vec<Value>,
    version: &str,
) -> ApiResult<Vec<Value>> {
    let want = format!("{}/{version}", def.group);
    let webhook = crd.pointer("/spec/conversion/strategy").and_then(Value::as_str) == Some("Webhook")
        && !st.cfg.faults.is_on("conversion-webhook-skipped");
    let stale: Vec<usize> = (0..objs.len()).filter(|&i| api_version(&objs[i]) != want).collect();
    if stale.is_empty() {
        return Ok(objs);
    }
    if !webhook {
        for i in stale {
            if let Some(m) = objs[i].as_object_mut() {
                m.insert("apiVersion".into(), json!(want));
            }
        }
        return Ok(objs);
    }
    let sent: Vec<Value> = stale.iter().map(|&i| objs[i].clone()).collect();
    let what = gvk_text(&sent[0]);
    let converted = call_blocking(st, crd, &sent, &want)
        .map_err(|e| ApiError::internal(format!("conversion webhook for {what} {e}")))?;
    if converted.len() != sent.len() {
        return Err(ApiError::internal(format!(
            "conversion webhook for {what} returned {} objects, expected {}",
            converted.len(),
            sent.len()
        )));
    }
    for (n, (i, mut out)) in stale.into_iter().zip(converted).enumerate() {
        check_converted(&objs[i], &out, &want).map_err(|e| {
            ApiError::internal(format!(
                "conversion webhook for {what} returned invalid converted object at index {n}: {e}"
            ))
        })?;
        restore_meta(&objs[i], &mut out).map_err(|e| {
            ApiError::internal(format!(
                "conversion webhook for {what} returned invalid metadata in object at index {n}: {e}"
            ))
        })?;
        objs[i] = out;
    }
    Ok(objs)
}

/// Upstream's per-object checks: the group-version asked for, and the same kind, name,
/// namespace and uid (`validateConvertedObject`).
fn check_converted(original: &Value, out: &Value, want: &str) -> Result<(), String> {
    if api_version(out) != want {
        return Err(format!(
            "invalid groupVersion (expected {want}, received {})",
            api_version(out)
        ));
    }
    let kind = |o: &Value| o.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    if kind(original) != kind(out) {
        return Err(format!(
            "invalid kind (expected {}, received {})",
            kind(original),
            kind(out)
        ));
    }
    for (what, f) in [
        ("name", meta::name as fn(&Value) -> &str),
        ("namespace", meta::namespace),
        ("UID", meta::uid),
    ] {
        if f(original) != f(out) {
            return Err(format!("must have the same {what}: {} != {}", f(original), f(out)));
        }
    }
    Ok(())
}

/// Upstream's `restoreObjectMeta`: the original's metadata, with the labels and annotations
/// the webhook answered (which must be string maps).
fn restore_meta(original: &Value, out: &mut Value) -> Result<(), String> {
    let answered = match out.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err("invalid metadata in converted object".into()),
    };
    let mut restored = original
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for field in ["labels", "annotations"] {
        match answered.get(field) {
            None | Some(Value::Null) => {
                restored.remove(field);
            }
            Some(Value::Object(m)) => {
                if let Some((k, _)) = m.iter().find(|(_, v)| !v.is_string()) {
                    return Err(format!("metadata.{field}[{k}] must be a string in converted object"));
                }
                restored.insert(field.into(), Value::Object(m.clone()));
            }
            Some(_) => return Err(format!("invalid metadata.{field} in converted object")),
        }
    }
    out["metadata"] = Value::Object(restored);
    Ok(())
}

/// The ConversionReview version sent: the first of `conversionReviewVersions` the server knows.
fn review_version(crd: &Value) -> Option<&'static str> {
    crd.pointer("/spec/conversion/webhook/conversionReviewVersions")?
        .as_array()?
        .iter()
        .find_map(|v| match v.as_str() {
            Some("v1") => Some("apiextensions.k8s.io/v1"),
            Some("v1beta1") => Some("apiextensions.k8s.io/v1beta1"),
            _ => None,
        })
}

/// Why a conversion call failed: the text after `conversion webhook for GVK `.
fn call_blocking(st: &AppState, crd: &Value, objects: &[Value], want: &str) -> Result<Vec<Value>, String> {
    let Some(review_api) = review_version(crd) else {
        return Err("failed: webhook does not accept known ConversionReview versions (v1, v1beta1)".into());
    };
    let cc = crd
        .pointer("/spec/conversion/webhook/clientConfig")
        .cloned()
        .unwrap_or(Value::Null);
    let uid = meta::new_uid();
    let review = json!({"kind": "ConversionReview", "apiVersion": review_api,
        "request": {"uid": uid, "desiredAPIVersion": want, "objects": objects}});
    let answer = block_on(post_json(st, &cc, TIMEOUT, &review)).map_err(|e| match e {
        CallError::Post { url, reason } => format!("failed: Post {url:?}: {reason}"),
        CallError::Status(s) | CallError::Invalid(s) => format!("failed: {s}"),
        other => format!("failed: {other}"),
    })?;
    check_review(&answer, review_api, &uid).map_err(|e| format!("failed: {e}"))
}

/// Upstream's `getConvertedObjectsFromResponse`.
fn check_review(answer: &Value, sent: &str, uid: &str) -> Result<Vec<Value>, String> {
    let got = format!(
        "{}, Kind={}",
        api_version(answer),
        answer.get("kind").and_then(Value::as_str).unwrap_or_default()
    );
    if got != format!("{sent}, Kind=ConversionReview") {
        return Err(format!(
            "expected webhook response of {sent}, Kind=ConversionReview, got {got}"
        ));
    }
    let Some(resp) = answer.get("response").filter(|r| r.is_object()) else {
        return Err("no response provided".into());
    };
    let got_uid = resp.get("uid").and_then(Value::as_str).unwrap_or_default();
    if got_uid != uid {
        return Err(format!("expected response.uid={uid:?}, got {got_uid:?}"));
    }
    let status = resp
        .pointer("/result/status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if status != "Success" {
        let message = resp
            .pointer("/result/message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !message.is_empty() {
            return Err(message.to_string());
        }
        return Err(format!("response.result.status was '{status}', not 'Success'"));
    }
    Ok(resp
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

/// Runs `f` to completion from synchronous code inside the runtime (see the module doc).
fn block_on<F: std::future::Future + Send>(f: F) -> F::Output
where
    F::Output: Send,
{
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(|| h.block_on(f)),
        // A current-thread runtime cannot lend its thread: run the call on a thread of its own.
        _ => std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a current-thread runtime builds")
                    .block_on(f)
            })
            .join()
            .expect("the conversion call thread does not panic")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reviews_are_checked_as_upstream_checks_them() {
        let v1 = "apiextensions.k8s.io/v1";
        let ok = json!({"apiVersion": v1, "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Success"}, "convertedObjects": [{"a": 1}]}});
        assert_eq!(check_review(&ok, v1, "u").unwrap(), vec![json!({"a": 1})]);
        assert_eq!(
            check_review(&ok, v1, "x").unwrap_err(),
            "expected response.uid=\"x\", got \"u\""
        );
        let failed = json!({"apiVersion": v1, "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Failure", "message": "invalid hostPort value `x`"}}});
        assert_eq!(
            check_review(&failed, v1, "u").unwrap_err(),
            "invalid hostPort value `x`"
        );
        assert!(
            check_review(&json!({"apiVersion": "v1", "kind": "Status"}), v1, "u")
                .unwrap_err()
                .starts_with("expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview")
        );
    }

    #[test]
    fn converted_objects_keep_their_identity_and_original_metadata() {
        let original = json!({"apiVersion": "g/v1", "kind": "K",
            "metadata": {"name": "a", "namespace": "n", "uid": "1", "resourceVersion": "7", "labels": {"x": "1"}}});
        let mut out = json!({"apiVersion": "g/v2", "kind": "K",
            "metadata": {"name": "a", "namespace": "n", "uid": "1", "labels": {"y": "2"}}, "host": "h"});
        check_converted(&original, &out, "g/v2").unwrap();
        restore_meta(&original, &mut out).unwrap();
        assert_eq!(out["metadata"]["resourceVersion"], "7");
        assert_eq!(out["metadata"]["labels"], json!({"y": "2"}));
        assert_eq!(
            check_converted(&original, &out, "g/v3").unwrap_err(),
            "invalid groupVersion (expected g/v3, received g/v2)"
        );
        out["metadata"]["name"] = json!("b");
        assert_eq!(
            check_converted(&original, &out, "g/v2").unwrap_err(),
            "must have the same name: a != b"
        );
    }
}
