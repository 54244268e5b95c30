//! Patches: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch.
//!
//! The main function is [`apply`], chosen by `Content-Type` like the real server. Strategic
//! merge covers the lists kubectl patches, merged by their upstream patch merge keys
//! (containers, volumes and env by `name`, container ports by `containerPort`, service ports by
//! `port`, volumeMounts by `mountPath`...), `$patch: delete|replace`, `$retainKeys`,
//! `$deleteFromPrimitiveList/` and `$setElementOrder/` directives. Server-side apply
//! (`application/apply-patch+yaml`) is recognised here and merged by [`crate::api::ssa`]; its
//! CBOR form is answered with 415, which clients report plainly.

use axum::http::HeaderMap;
use serde_json::{Map, Value};

use super::error::{ApiError, ApiResult};
use super::registry::ResourceDef;

/// Patch formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

/// The patch kind named by a Content-Type header.
pub fn kind_of(headers: &HeaderMap) -> ApiResult<PatchKind> {
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let base = ct.split(';').next().unwrap_or_default().trim();
    match base {
        "application/json-patch+json" => Ok(PatchKind::Json),
        "application/merge-patch+json" => Ok(PatchKind::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
        "application/apply-patch+yaml" => Ok(PatchKind::Apply),
        other => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"
        ))),
    }
}

/// Applies the request's (non-apply) patch to `current`.
pub fn apply(headers: &HeaderMap, current: &Value, body: &[u8], def: &ResourceDef) -> ApiResult<Value> {
    let kind = kind_of(headers)?;
    let _ = def;
    if kind == PatchKind::Apply {
        // The handlers route apply patches to `ssa::apply`; one that arrives here (the scale
        // subresource) is not supported.
        return Err(ApiError::unsupported_media_type(
            "server-side apply is not supported on this endpoint",
        ));
    }
    let patch: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let mut doc = current.clone();
    match kind {
        PatchKind::Json => {
            let p: json_patch::Patch = serde_json::from_value(patch)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(&mut doc, &p).map_err(|e| {
                let mut err = ApiError::invalid("", "", "", vec![]);
                err.message = format!("the server rejected our request due to an error in our request: {e}");
                err.details = None;
                err
            })?;
        }
        PatchKind::Merge => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(&mut doc, &patch);
        }
        PatchKind::Apply => return Err(ApiError::internal("apply patches are merged by ssa::apply")),
        PatchKind::Strategic => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("a strategic merge patch must be a JSON object"));
            }
            doc = strategic_merge(current, &patch, "");
        }
    }
    if !doc.is_object() {
        return Err(ApiError::bad_request("the patch did not produce an object"));
    }
    Ok(doc)
}

/// The merge key of a list field, by its name and parent field (upstream's `patchMergeKey`).
fn merge_key(field: &str, parent: &str) -> Option<&'static str> {
    Some(match (field, parent) {
        ("containers" | "initContainers" | "ephemeralContainers" | "volumes" | "env" | "imagePullSecrets", _) => "name",
        ("resourceClaims" | "schedulingGates" | "claims", _) => "name",
        ("ports", "containers" | "initContainers" | "ephemeralContainers") => "containerPort",
        ("ports", _) => "port",
        ("volumeMounts", _) => "mountPath",
        ("volumeDevices", _) => "devicePath",
        ("hostAliases", _) => "ip",
        ("conditions", _) => "type",
        ("ownerReferences", _) => "uid",
        ("topologySpreadConstraints", _) => "topologyKey",
        ("addresses", "status") => "type",
        _ => return None,
    })
}

/// Primitive lists merged as sets (`patchStrategy: merge` on a list of strings).
fn is_set_list(field: &str) -> bool {
    matches!(field, "finalizers" | "podCIDRs")
}

/// Strategic merge of `patch` into `orig`; `parent` is the enclosing field name.
pub fn strategic_merge(orig: &Value, patch: &Value, parent: &str) -> Value {
    let (Some(o), Some(p)) = (orig.as_object(), patch.as_object()) else {
        return strip_directives(patch.clone());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut r = p.clone();
            r.remove("$patch");
            return strip_directives(Value::Object(r));
        }
        Some("delete") => return Value::Null,
        _ => {}
    }
    let mut out: Map<String, Value> = o.clone();
    if let Some(keep) = p.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        out.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, pv) in p {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(list), Some(del)) = (out.get_mut(field).and_then(Value::as_array_mut), pv.as_array()) {
                list.retain(|v| !del.contains(v));
            }
            continue;
        }
        if pv.is_null() {
            out.remove(k);
            continue;
        }
        let merged = match (out.get(k), pv) {
            (Some(ov @ Value::Object(_)), Value::Object(_)) => strategic_merge(ov, pv, k),
            (Some(Value::Array(ol)), Value::Array(pl)) => merge_list(k, parent, ol, pl),
            (None, Value::Array(pl)) => Value::Array(
                pl.iter()
                    .filter(|i| i.get("$patch").and_then(Value::as_str) != Some("delete"))
                    .cloned()
                    .map(strip_directives)
                    .collect(),
            ),
            _ => strip_directives(pv.clone()),
        };
        if merged.is_null() {
            out.remove(k);
        } else {
            out.insert(k.clone(), merged);
        }
    }
    Value::Object(out)
}

fn merge_list(field: &str, parent: &str, orig: &[Value], patch: &[Value]) -> Value {
    if patch
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Value::Array(
            patch
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .cloned()
                .map(strip_directives)
                .collect(),
        );
    }
    if is_set_list(field) {
        let mut out = orig.to_vec();
        for v in patch {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
        return Value::Array(out);
    }
    let Some(key) = merge_key(field, parent) else {
        return Value::Array(patch.iter().cloned().map(strip_directives).collect());
    };
    let mut out = orig.to_vec();
    for item in patch {
        let id = item.get(key);
        let pos = id.and_then(|id| out.iter().position(|o| o.get(key) == Some(id)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                out.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => out[i] = strategic_merge(&out[i], item, field),
            (None, false) => out.push(strip_directives(item.clone())),
        }
    }
    Value::Array(out)
}

/// Removes `$...` directive keys from a value that is inserted as is.
fn strip_directives(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k, strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(strip_directives).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"containers": [
                {"name": "c1", "image": "i1", "ports": [{"containerPort": 80, "name": "http"}],
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "c2", "image": "i2"}],
              "tolerations": [{"key": "k"}]}})
    }

    #[test]
    fn strategic_merges_containers_by_name() {
        let p = json!({"metadata": {"labels": {"b": null, "c": "3"}, "finalizers": ["y"]},
            "spec": {"containers": [
                {"name": "c1", "image": "new", "env": [{"name": "B", "$patch": "delete"}, {"name": "C", "value": "3"}],
                 "ports": [{"containerPort": 8080}]},
                {"name": "c2", "$patch": "delete"}],
              "tolerations": [{"key": "z"}]}});
        let r = strategic_merge(&pod(), &p, "");
        assert_eq!(r["metadata"]["labels"], json!({"a": "1", "c": "3"}));
        assert_eq!(r["metadata"]["finalizers"], json!(["x", "y"]));
        let cs = r["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0]["image"], "new");
        assert_eq!(
            cs[0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "C", "value": "3"}])
        );
        assert_eq!(cs[0]["ports"].as_array().unwrap().len(), 2);
        assert_eq!(r["spec"]["tolerations"], json!([{"key": "z"}]));
    }

    #[test]
    fn service_ports_merge_by_port_and_replace_directive() {
        let svc = json!({"spec": {"ports": [{"port": 80, "name": "a"}, {"port": 81}]}});
        let r = strategic_merge(&svc, &json!({"spec": {"ports": [{"port": 80, "name": "b"}]}}), "");
        assert_eq!(r["spec"]["ports"], json!([{"port": 80, "name": "b"}, {"port": 81}]));
        let r = strategic_merge(
            &svc,
            &json!({"spec": {"ports": [{"$patch": "replace"}, {"port": 9}]}}),
            "",
        );
        assert_eq!(r["spec"]["ports"], json!([{"port": 9}]));
        let r = strategic_merge(&svc, &json!({"spec": {"$patch": "replace", "type": "NodePort"}}), "");
        assert_eq!(r["spec"], json!({"type": "NodePort"}));
    }

    #[test]
    fn content_types_select_patch_kind() {
        let mut h = HeaderMap::new();
        h.insert("content-type", "application/json-patch+json".parse().unwrap());
        assert_eq!(kind_of(&h).unwrap(), PatchKind::Json);
        h.insert("content-type", "application/apply-patch+yaml".parse().unwrap());
        assert_eq!(kind_of(&h).unwrap(), PatchKind::Apply);
        h.insert("content-type", "application/apply-patch+cbor".parse().unwrap());
        assert_eq!(kind_of(&h).unwrap_err().code, 415);
        let def = crate::api::registry::find("", "v1", "pods").unwrap();
        h.insert("content-type", "application/json-patch+json".parse().unwrap());
        let out = apply(
            &h,
            &pod(),
            br#"[{"op":"replace","path":"/spec/containers/0/image","value":"z"}]"#,
            def,
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"][0]["image"], "z");
        let e = apply(
            &h,
            &pod(),
            br#"[{"op":"test","path":"/metadata/name","value":"q"}]"#,
            def,
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(apply(&h, &pod(), b"{", def).unwrap_err().code, 400);
    }
}
