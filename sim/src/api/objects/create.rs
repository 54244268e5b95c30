//! POST of a new object: namespace checks (exists, not terminating), server-set metadata,
//! `generateName` with upstream's alphabet, admission, dry run, and the store write under the
//! allocation lock. [`insert`] is shared with server-side apply, which creates absent objects.

use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use super::{Query, check_type, is_dry_run, json_response, present, scope_ns, store_err};
use crate::api::admission;
use crate::api::convert;
use crate::api::error::{ApiError, ApiResult, Cause};
use crate::api::fieldcheck::{self, Decoded};
use crate::api::meta;
use crate::api::registry::{self, ResourceDef};
use crate::api::route::Target;
use crate::api::ssa::{self, Tracking};
use crate::api::state::AppState;
use crate::api::store::StoreError;
use crate::api::webhook::{self, Attributes, Operation};

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

/// Upstream's message when no acceptable media type can be served (`NewNotAcceptableError`).
const NOT_ACCEPTABLE: &str = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf";

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
    } = fieldcheck::decode(def, body, headers, q, &st.cfg.gates)?;
    check_type(def, &mut obj, def.kind, &def.api_version())?;
    if !registry::is_stored(def) {
        // `table-accept-ignored`: answered as JSON whatever the client accepts.
        if crate::api::table::only_table(headers) && !st.cfg.faults.is_on("table-accept-ignored") {
            return Err(ApiError::not_acceptable(NOT_ACCEPTABLE));
        }
        return admission::review(st, def, obj).map(|v| json_response(201, &v, &warnings));
    }
    crate::api::crd::refuse_create_while_terminating(st, def)?;
    let manager = ssa::manager_of(q, headers, "CreateOptions", false)?;
    insert(
        st,
        t,
        q,
        obj,
        &warnings,
        Tracking::Update {
            manager: &manager,
            subresource: "",
        },
    )
    .await
}

/// Stores a new object decoded from a POST or produced by a server-side apply that creates:
/// server-set metadata, namespace checks, admission, managed fields and the store write.
pub async fn insert(
    st: &AppState,
    t: &Target,
    q: &Query,
    obj: Value,
    warnings: &[String],
    tracking: Tracking<'_>,
) -> ApiResult<Response> {
    let def = t.def;
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
    let dry_run = is_dry_run(st, def, q);
    // Mutating webhooks run on the decoded, defaulted object, before the built-in admission
    // and validation (a generated name is not chosen yet, as upstream).
    let mut attrs = Attributes::new(def, Operation::Create, &ns, &explicit);
    attrs.dry_run = dry_run;
    if dry_run {
        attrs.options["dryRun"] = json!(["All"]);
    }
    crate::api::defaults::apply(def, &mut obj);
    webhook::mutate(st, &attrs, Some(&mut obj)).await?;
    // Allocation (ClusterIPs, NodePorts) reads the store; holding this lock until the create
    // lands keeps two creates from taking the same address. Validating webhooks run under it
    // too, because they must see the object as it will be stored (allocated addresses
    // included), as upstream's run inside the storage write.
    let _alloc = st.alloc.lock().await;
    for attempt in 0..8 {
        let mut candidate = obj.clone();
        if explicit.is_empty() {
            meta::meta_mut(&mut candidate).insert("name".into(), json!(generated(&generate)));
        }
        let name = meta::name(&candidate).to_string();
        admission::on_create(st, def, &mut candidate)?;
        attrs.name.clone_from(&name);
        webhook::validate(st, &attrs, Some(&candidate)).await?;
        if let Tracking::Update { manager, subresource } = tracking {
            ssa::track_update(def, None, &mut candidate, manager, subresource);
        }
        if dry_run {
            if st.store.get(&def.storage_key(), &ns, &name).is_some() {
                return Err(ApiError::already_exists(def.group, def.plural, &name));
            }
            return Ok(json_response(201, &present(def, candidate), warnings));
        }
        let candidate = crate::api::crd::conversion::to_storage(st, def, candidate)?;
        match st.store.create(&def.storage_key(), &ns, &name, candidate) {
            Ok(written) => {
                crate::api::crd::after_write(st, def, &name);
                let written = crate::api::crd::conversion::to_served(st, def, written)?;
                return Ok(json_response(201, &present(def, written), warnings));
            }
            Err(StoreError::Exists) if explicit.is_empty() && attempt < 7 => continue,
            Err(e) => return Err(store_err(def, &name, e)),
        }
    }
    Err(ApiError::internal("could not generate a unique name"))
}
