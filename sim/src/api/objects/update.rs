//! Writes to an existing object: PUT (object, status, finalize) and PATCH, and [`commit`],
//! which every update goes through: server-owned metadata kept, admission, generation bumps,
//! no-op detection and removal once the last finalizer is gone.

use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use super::delete::ready_to_remove;
use super::{
    Query, check_type, is_dry_run, json_response, lost_write_answer, present, scope_ns, store_err, stored, target_name,
    write_lost,
};
use crate::api::admission;
use crate::api::convert;
use crate::api::error::{ApiError, ApiResult};
use crate::api::fieldcheck::{self, Decoded};
use crate::api::meta;
use crate::api::patch;
use crate::api::registry::ResourceDef;
use crate::api::route::Target;
use crate::api::ssa::{self, Tracking};
use crate::api::state::AppState;
use crate::api::store::{StoreError, rv_of};
use crate::api::webhook::{self, Attributes, Operation};

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

/// `field-dropped=RESOURCE:PATH`: the stored object loses field PATH (dotted, `status.message`)
/// of RESOURCE on every update, as a server that does not know the field drops it on decoding.
fn drop_faulted_fields(st: &AppState, def: &ResourceDef, obj: &mut Value) {
    for value in st.cfg.faults.values("field-dropped") {
        let Some((resource, path)) = value.split_once(':') else {
            continue;
        };
        if resource != def.plural {
            continue;
        }
        let (parent, field) = match path.rsplit_once('.') {
            Some((parent, field)) => (format!("/{}", parent.replace('.', "/")), field),
            None => (String::new(), path),
        };
        if let Some(m) = obj.pointer_mut(&parent).and_then(Value::as_object_mut) {
            m.remove(field);
        }
    }
}

/// Copies the labels and annotations a subresource write sent into the object it stores.
fn keep_sent_labels(sent: &Value, out: &mut Value) {
    for key in ["labels", "annotations"] {
        if let Some(v) = sent.pointer(&format!("/metadata/{key}")) {
            meta::meta_mut(out).insert(key.into(), v.clone());
        }
    }
}

/// Whether a status write of `def` keeps the labels and annotations it carries: the workload
/// kinds whose upstream status strategy resets only the spec. Newer kinds (admission policies,
/// resource claims) call `ResetObjectMetaForStatus`, and custom resources keep only the status.
fn keeps_meta_on_status_write(def: &ResourceDef) -> bool {
    def.custom.is_none()
        && matches!(
            (def.group, def.plural),
            ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets")
                | ("batch", "jobs" | "cronjobs")
                | ("", "replicationcontrollers")
                | ("policy", "poddisruptionbudgets")
        )
}

/// Builds the object an update stores from the old one and what the client sent.
fn merge_system_fields(def: &ResourceDef, old: &Value, mut new: Value, sub: Option<&str>) -> Value {
    match sub {
        Some("status") if keeps_meta_on_status_write(def) => {
            // Upstream's status strategies of these kinds only put the old spec back
            // (`newJob.Spec = oldJob.Spec`): labels and annotations sent with the status stay,
            // as the CronJob and Job API conformance cases check.
            let status = new.get("status").cloned();
            let mut out = merge_system_fields(def, old, new, None);
            if let Some(o) = out.as_object_mut() {
                match old.get("spec") {
                    Some(s) => o.insert("spec".into(), s.clone()),
                    None => o.remove("spec"),
                };
                match status {
                    Some(s) => o.insert("status".into(), s),
                    None => o.remove("status"),
                };
            }
            out
        }
        Some("status") => {
            // A status write changes status, and for built-in kinds the labels and annotations
            // it carries too: their status strategies reset only spec (and, for pods, the
            // deletion timestamp and owner references), so upstream's Ingress and Service status
            // cases see an annotation patched through /status. A custom resource's status
            // strategy copies the old object whole but for status.
            let mut out = old.clone();
            if let Some(s) = new.get("status") {
                out["status"] = s.clone();
            }
            if def.custom.is_none() {
                keep_sent_labels(&new, &mut out);
            }
            // An apply through /status brings its managedFields; an update's are recomputed
            // from the live object's.
            match new.pointer("/metadata/managedFields") {
                Some(mf) => meta::meta_mut(&mut out).insert("managedFields".into(), mf.clone()),
                None => meta::meta_mut(&mut out).remove("managedFields"),
            };
            out
        }
        Some("ephemeralcontainers") => {
            // upstream's podEphemeralContainersStrategy: every change but to
            // spec.ephemeralContainers (and the labels and annotations, as for /status) is
            // dropped.
            let mut out = old.clone();
            match new.pointer("/spec/ephemeralContainers") {
                Some(list) => out["spec"]["ephemeralContainers"] = list.clone(),
                None => {
                    if let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) {
                        spec.remove("ephemeralContainers");
                    }
                }
            }
            keep_sent_labels(&new, &mut out);
            match new.pointer("/metadata/managedFields") {
                Some(mf) => meta::meta_mut(&mut out).insert("managedFields".into(), mf.clone()),
                None => meta::meta_mut(&mut out).remove("managedFields"),
            };
            out
        }
        Some("approval") => {
            // upstream's csr approvalStrategy: only the conditions change, the issued
            // certificate and everything else stay as stored.
            let mut out = old.clone();
            let mut conds = new.pointer("/status/conditions").cloned().unwrap_or(json!([]));
            // "If unset, when a new condition type is added ... the server defaults this to
            // the current time" (CertificateSigningRequestCondition.lastTransitionTime).
            for c in conds.as_array_mut().into_iter().flatten() {
                if c.get("lastTransitionTime").is_none_or(Value::is_null) {
                    c["lastTransitionTime"] = json!(meta::now());
                }
            }
            out["status"]["conditions"] = conds;
            // Its metadata goes through as for /status: upstream's CSR approval case sees an
            // annotation patched through /approval.
            keep_sent_labels(&new, &mut out);
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

/// Whether an update changes what bumps `metadata.generation`: the spec, or for a custom
/// object everything but metadata (and status, when it is a subresource), as upstream's
/// custom resource strategy compares.
fn spec_changed(def: &ResourceDef, old: &Value, new: &Value) -> bool {
    if def.custom.is_none() {
        return old.get("spec") != new.get("spec");
    }
    let content = |v: &Value| {
        let mut m = v.as_object().cloned().unwrap_or_default();
        m.remove("metadata");
        if def.has_sub("status") {
            m.remove("status");
        }
        m
    };
    content(old) != content(new)
}

/// Stores an update of `old` to `new`: system fields, admission, generation, managed fields,
/// no-op detection, finalizer completion. `precondition` is the resourceVersion the client
/// asked to update; `tracking` says how managedFields are kept (an apply has set them).
#[expect(
    clippy::too_many_arguments,
    reason = "one write's whole context, passed by each verb"
)]
pub async fn commit(
    st: &AppState,
    def: &'static ResourceDef,
    old: &Value,
    new: Value,
    sub: Option<&str>,
    precondition: Option<u64>,
    dry_run: bool,
    tracking: Tracking<'_>,
) -> ApiResult<Value> {
    let name = meta::name(old).to_string();
    let ns = meta::namespace(old).to_string();
    if precondition.is_some_and(|p| p != rv_of(old)) {
        return Err(store_err(def, &name, StoreError::Conflict));
    }
    let mut new = merge_system_fields(def, old, new, sub);
    meta::drop_nulls(&mut new);
    drop_faulted_fields(st, def, &mut new);
    // Mutating webhooks see the decoded, defaulted object; validating ones the object as it
    // will be stored, after the built-in admission and validation.
    let mut attrs = Attributes::new(def, Operation::Update, &ns, &name);
    attrs.sub = sub.unwrap_or_default().to_string();
    attrs.old = Some(old.clone());
    attrs.dry_run = dry_run;
    if dry_run {
        attrs.options["dryRun"] = json!(["All"]);
    }
    if sub.is_none() {
        crate::api::defaults::apply(def, &mut new);
    } else if sub == Some("ephemeralcontainers")
        && let Some(spec) = new.get_mut("spec")
    {
        crate::api::defaults::pod_spec(spec);
    }
    webhook::mutate(st, &attrs, Some(&mut new)).await?;
    // An update can allocate too (a Service turned from ExternalName to ClusterIP, new
    // NodePorts): as on create, the allocation lock is held until the write lands, else a
    // concurrent create takes the same address and both Services share one ClusterIP.
    let _alloc = if (def.group, def.plural) == ("", "services") {
        Some(st.alloc.lock().await)
    } else {
        None
    };
    if sub.is_none() {
        admission::on_update(st, def, old, &mut new)?;
    }
    if sub == Some("ephemeralcontainers") {
        let causes = crate::api::validate_ephemeral::update(old, &new);
        if !causes.is_empty() {
            return Err(ApiError::invalid(def.group, def.kind, &name, causes));
        }
    }
    webhook::validate(st, &attrs, Some(&new)).await?;
    if (def.group, def.plural) == ("certificates.k8s.io", "certificatesigningrequests") {
        let mut causes = Vec::new();
        crate::api::validate_kinds::csr_update(sub, &new, old, &mut causes);
        if !causes.is_empty() {
            return Err(ApiError::invalid(def.group, def.kind, &name, causes));
        }
    }
    if def.tracks_generation() && spec_changed(def, old, &new) {
        let g = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
        meta::meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    if let Tracking::Update { manager, subresource } = tracking {
        ssa::track_update(def, Some(old), &mut new, manager, subresource);
    }
    // Set before the comparison so an unchanged object compares equal.
    meta::meta_mut(&mut new).insert("resourceVersion".into(), json!(rv_of(old).to_string()));
    let key = def.storage_key();
    if ready_to_remove(def, &new) {
        if dry_run {
            return Ok(new);
        }
        let removed = st
            .store
            .remove(&key, &ns, &name, Some(rv_of(old)))
            .map_err(|e| store_err(def, &name, e))?;
        crate::api::crd::after_write(st, def, &name);
        return Ok(removed);
    }
    if &new == old || dry_run {
        return Ok(new);
    }
    let written = st
        .store
        .update(&key, &ns, &name, new, Some(rv_of(old)))
        .map_err(|e| store_err(def, &name, e))?;
    crate::api::crd::after_write(st, def, &name);
    Ok(written)
}

/// PUT of an object or of its status/finalize subresource (the target's).
pub async fn update(st: &AppState, t: &Target, q: &Query, headers: &HeaderMap, body: &[u8]) -> ApiResult<Response> {
    let def = t.def;
    let sub = t.sub.as_deref();
    if write_lost(st, def, sub, "update") {
        return lost_write_answer(st, t);
    }
    let ns = scope_ns(t)?;
    let name = target_name(t)?;
    let Decoded {
        value: mut obj,
        warnings,
    } = fieldcheck::decode(def, body, headers, q, &st.cfg.gates)?;
    check_type(def, &mut obj, def.kind, &def.api_version())?;
    let obj = crate::api::crd::conversion::to_storage(st, def, convert::to_storage(def, obj))?;
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
    let manager = ssa::manager_of(q, headers, "UpdateOptions", false)?;
    let tracking = Tracking::Update {
        manager: &manager,
        subresource: sub.unwrap_or_default(),
    };
    // An update without a resourceVersion is unconditional: upstream's GuaranteedUpdate
    // starts again from a fresh read when another write got in between, so only a client's
    // own stale resourceVersion answers 409.
    let mut tries = 0;
    loop {
        let old = stored(st, def, &ns, &name)?;
        let mut new = obj.clone();
        if sub == Some("finalize") {
            // Only spec.finalizers changes through finalize.
            let mut out = old.clone();
            out["spec"]["finalizers"] = new.pointer("/spec/finalizers").cloned().unwrap_or(json!([]));
            new = out;
        }
        match commit(st, def, &old, new, sub, precondition, is_dry_run(st, def, q), tracking).await {
            Ok(written) => {
                let written = crate::api::crd::conversion::to_served(st, def, written)?;
                return Ok(json_response(200, &present(def, written), &warnings));
            }
            Err(e) if precondition.is_none() && super::is_stale_write(&e) && tries < 32 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// PATCH of an object or its status subresource (the target's).
pub async fn patch_object(
    st: &AppState,
    t: &Target,
    q: &Query,
    headers: &HeaderMap,
    body: &[u8],
) -> ApiResult<Response> {
    let def = t.def;
    let sub = t.sub.as_deref();
    if write_lost(st, def, sub, "patch") {
        return lost_write_answer(st, t);
    }
    let ns = scope_ns(t)?;
    let name = target_name(t)?;
    let mode = fieldcheck::Mode::from_query(q)?;
    let manager = ssa::manager_of(q, headers, "PatchOptions", false)?;
    let tracking = Tracking::Update {
        manager: &manager,
        subresource: sub.unwrap_or_default(),
    };
    for _ in 0..5 {
        let old = stored(st, def, &ns, &name)?;
        let current = present(def, crate::api::crd::conversion::to_served(st, def, old.clone())?);
        let patched = patch::apply(headers, &current, body, def)?;
        let (patched, warnings) = fieldcheck::check_value(def, patched, mode, &st.cfg.gates)?;
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
        let new = crate::api::crd::conversion::to_storage(st, def, convert::to_storage(def, patched))?;
        match commit(st, def, &old, new, sub, precondition, is_dry_run(st, def, q), tracking).await {
            Ok(written) => {
                let written = crate::api::crd::conversion::to_served(st, def, written)?;
                return Ok(json_response(200, &present(def, written), &warnings));
            }
            Err(e) if e.reason == "Conflict" && user_rv.is_none_or(|rv| rv == rv_of(&old)) => {
                // Someone else wrote between our read and write: reapply, like upstream.
                continue;
            }
            Err(e) => return Err(e),
        }
    }
    Err(store_err(def, &name, StoreError::Conflict))
}
