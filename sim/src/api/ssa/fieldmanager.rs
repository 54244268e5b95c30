//! The field manager of a write: who the manager is, the bookkeeping of an ordinary write
//! ([`track_update`]) and the server-side apply merge ([`apply`]), as kube-apiserver's
//! `FieldManager` chain runs them (version check, last-applied sync, before-first-apply,
//! managers cap, timestamps, meta stripping, structured merge).

use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::fieldset::{FieldSet, PathElement, path_string};
use super::managed::{self, Entry, Managed, Operation, Writer};
use super::walk;
use crate::api::error::{ApiError, ApiResult, Cause};
use crate::api::meta;
use crate::api::objects::Query;
use crate::api::registry::ResourceDef;

/// Upstream's `FieldManagerMaxLength`.
const FIELD_MANAGER_MAX_LENGTH: usize = 128;
/// The manager an apply to an untracked object credits with what was already there.
pub(super) const BEFORE_FIRST_APPLY: &str = "before-first-apply";
/// kubectl's client-side apply annotation, kept in step by kubectl's server-side apply.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// How a write's managed fields are kept.
#[derive(Debug, Clone, Copy)]
pub enum Tracking<'a> {
    /// An ordinary write by `manager`, through `subresource` (empty for the object).
    Update {
        /// The field manager.
        manager: &'a str,
        /// `status`, `scale`, or empty.
        subresource: &'a str,
    },
    /// A server-side apply, whose managed fields [`apply`] already set on the object.
    Applied,
}

/// `kubectl/v1.33.0 (linux/amd64) kubernetes/abc` → `kubectl`: the user agent up to its first
/// `/`, printable characters only, at most 128 bytes (upstream's `prefixFromUserAgent`).
fn prefix_from_user_agent(ua: &str) -> String {
    let head = ua.split('/').next().unwrap_or_default();
    let mut out = String::new();
    for c in head.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// The field manager of a request: `fieldManager`, validated as upstream's
/// `ValidateFieldManager`, else the user agent's prefix. `options` names the options kind in
/// errors (`CreateOptions`, `UpdateOptions`, `PatchOptions`); an apply requires the parameter.
pub fn manager_of(q: &Query, headers: &HeaderMap, options: &str, apply: bool) -> ApiResult<String> {
    let given = q.get("fieldManager").map(String::as_str).unwrap_or_default();
    let mut causes = Vec::new();
    if apply && given.is_empty() {
        causes.push(Cause::required("fieldManager"));
        if let Some(c) = causes.last_mut() {
            c.message = "Required value: is required for apply patch".into();
        }
    }
    if !apply && q.contains_key("force") && options == "PatchOptions" {
        causes.push(Cause::forbidden("force", "may not be specified for non-apply patch"));
    }
    if given.len() > FIELD_MANAGER_MAX_LENGTH {
        causes.push(Cause {
            reason: "FieldValueTooLong".into(),
            message: format!("Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"),
            field: "fieldManager".into(),
        });
    }
    for (i, c) in given.chars().enumerate() {
        if c.is_control() {
            causes.push(Cause::invalid(
                "fieldManager",
                &json!(given),
                &format!("invalid characters at index {i}"),
            ));
        }
    }
    if !causes.is_empty() {
        let mut e = ApiError::invalid("meta.k8s.io", options, "", causes);
        e.message = e
            .message
            .replacen(&format!("{options} "), &format!("{options}.meta.k8s.io "), 1);
        return Err(e);
    }
    if !given.is_empty() {
        return Ok(given.to_string());
    }
    let ua = headers
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    Ok(prefix_from_user_agent(ua))
}

/// The empty object a create starts from: the structs a Go zero value always has, so a create
/// does not own `.spec` itself, as upstream (whose live object is `New()`) does not.
pub fn zero_like(v: &Value) -> Value {
    const STRUCTS: &[&[&str]] = &[
        &["metadata"],
        &["spec"],
        &["status"],
        &["spec", "template"],
        &["spec", "template", "metadata"],
        &["spec", "template", "spec"],
        &["spec", "strategy"],
        &["spec", "updateStrategy"],
        &["spec", "jobTemplate"],
        &["spec", "jobTemplate", "spec"],
        &["spec", "jobTemplate", "spec", "template"],
        &["spec", "jobTemplate", "spec", "template", "spec"],
    ];
    let mut out = json!({});
    for path in STRUCTS {
        let ptr: String = path.iter().map(|p| format!("/{p}")).collect();
        if v.pointer(&ptr).is_some_and(Value::is_object) {
            let (last, parent) = path.split_last().unwrap_or((&"", &[]));
            let pptr: String = parent.iter().map(|p| format!("/{p}")).collect();
            if let Some(Value::Object(m)) = out.pointer_mut(&pptr) {
                m.insert((*last).to_string(), json!({}));
            }
        }
    }
    out
}

/// The paths a write through `subresource` does not own (upstream's reset fields): the
/// status of an object with a status subresource, everything but status through `/status`.
fn ignored_fields(def: &ResourceDef, subresource: &str, obj: &Value) -> FieldSet {
    let mut s = FieldSet::default();
    match subresource {
        "status" => {
            for k in obj.as_object().into_iter().flatten().map(|(k, _)| k) {
                if k != "status" {
                    s.insert(&[PathElement::Field(k.clone())]);
                }
            }
        }
        "" if def.has_sub("status") => s.insert(&[PathElement::Field("status".into())]),
        _ => {}
    }
    s
}

fn without_managed(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

fn set_managed(obj: &mut Value, managed: &Managed) {
    let m = meta::meta_mut(obj);
    match managed.encode() {
        Some(v) => m.insert("managedFields".into(), v),
        None => m.remove("managedFields"),
    };
}

/// Records an ordinary write of `old` (`None` for a create) to `new` in `new`'s managedFields.
/// The base is what the client sent when it sent valid entries (how kubectl migrates
/// client-side apply ownership), nothing when it sent `[]` or `[{}]` (a reset), else the
/// live object's; through a subresource always the live object's.
pub fn track_update(def: &ResourceDef, old: Option<&Value>, new: &mut Value, manager: &str, subresource: &str) {
    let live_managed = || Managed::decode(old.and_then(|o| o.pointer("/metadata/managedFields"))).unwrap_or_default();
    let sent = new.pointer("/metadata/managedFields");
    let mut managed = if !subresource.is_empty() {
        live_managed()
    } else if managed::is_reset(sent) {
        Managed::default()
    } else {
        match Managed::decode(sent) {
            Ok(m) if !m.entries.is_empty() => m,
            _ => live_managed(),
        }
    };
    let clean_new = without_managed(new);
    let clean_old = old.map_or_else(|| zero_like(&clean_new), without_managed);
    let ignored = ignored_fields(def, subresource, &clean_new);
    let (api_version, now) = (def.api_version(), meta::now());
    let who = Writer {
        manager,
        subresource,
        api_version: &api_version,
        now: &now,
    };
    let before = (subresource == "scale").then(|| managed.clone());
    if let Err(e) = managed.record_update(def.kind, &clean_old, &clean_new, &who, &ignored) {
        // Upstream's UpdateNoErrors: keep the live entries rather than fail the write.
        tracing::warn!(kind = def.kind, name = meta::name(new), error = %e, "managed fields not updated");
        managed = live_managed();
    }
    if let Some(before) = before {
        super::scale::keep_time(&mut managed, &before, manager, Operation::Update, &api_version);
    }
    set_managed(new, &managed);
}

/// `/v1, Kind=ConfigMap`: upstream's `GroupVersionKind.String()`.
fn gvk_string(api_version: &str, kind: &str) -> String {
    let (g, v) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{g}/{v}, Kind={kind}")
}

/// The 409 of an apply that would take fields other managers own (upstream's
/// `NewConflictError`).
pub(super) fn conflict_error(conflicts: &[(Entry, FieldSet)]) -> ApiError {
    let mut sorted: Vec<&(Entry, FieldSet)> = conflicts.iter().collect();
    sorted.sort_by(|a, b| a.0.manager.cmp(&b.0.manager));
    let mut causes = Vec::new();
    let mut lines = Vec::new();
    let mut count = 0;
    for (entry, set) in &sorted {
        let who = entry.describe();
        lines.push(format!("conflicts with {who}:"));
        for p in set.paths() {
            let path = path_string(&p);
            causes.push(
                json!({"reason": "FieldManagerConflict", "message": format!("conflict with {who}"), "field": path}),
            );
            lines.push(format!("- {path}"));
            count += 1;
        }
    }
    let message = if count == 1 {
        let field = causes[0]["field"].as_str().unwrap_or_default().to_string();
        format!(
            "Apply failed with 1 conflict: conflict with {}: {field}",
            sorted[0].0.describe()
        )
    } else {
        format!("Apply failed with {count} conflicts: {}", lines.join("\n"))
    };
    let mut e = ApiError::conflict("", "", "", "");
    e.message = message;
    e.details = Some(json!({"causes": causes}));
    e
}

/// The fields kubectl's last-applied annotation sets to what the live object holds: those a
/// `kubectl` apply may take from their owners without force. `None` without a usable
/// annotation of the live object's version.
fn allowed_from_last_applied(kind: &str, api_version: &str, live: &Value) -> Option<FieldSet> {
    let text = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())?;
    let last: Value = serde_json::from_str(text).ok()?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return None;
    }
    let set = walk::to_field_set(kind, &last).ok()?;
    let cmp = walk::compare(kind, &last, live).ok()?;
    Some(
        set.difference(&cmp.modified)
            .difference(&cmp.added)
            .difference(&cmp.removed),
    )
}

/// Parses an apply patch body (YAML, of which JSON is a part). A key repeated in a mapping
/// keeps its last value, as upstream's lenient `yaml.Unmarshal` does; [`strict_yaml_errors`]
/// reports the repeats for `fieldValidation`.
pub fn parse_apply_body(body: &[u8]) -> ApiResult<Value> {
    let text =
        std::str::from_utf8(body).map_err(|_| ApiError::bad_request("error decoding YAML: the body is not UTF-8"))?;
    let lenient = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::LastWins,
    };
    let v: Value = serde_saphyr::from_str_with_options(text, lenient)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the apply patch is not an object",
        ));
    }
    Ok(v)
}

/// What upstream's strict YAML decoding (`yaml.UnmarshalStrict`, run on an apply body when
/// `fieldValidation` is Strict or Warn) says about `body`: a repeated mapping key, as
/// `error converting YAML to JSON: yaml: unmarshal errors:\n  line 11: key "foo" already set in
/// map`. Only the first repeat is named (the YAML parser stops there).
pub fn strict_yaml_error(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let strict = serde_saphyr::options! {
        with_snippet: false,
    };
    let mut err = serde_saphyr::from_str_with_options::<Value>(text, strict).err()?;
    while let serde_saphyr::Error::WithSnippet { error, .. } = err {
        err = *error;
    }
    let serde_saphyr::Error::DuplicateMappingKey { key, location } = &err else {
        return None;
    };
    Some(format!(
        "error converting YAML to JSON: yaml: unmarshal errors:\n  line {}: key {:?} already set in map",
        location.line(),
        key.as_deref().unwrap_or_default()
    ))
}

/// How upstream's apply messages name the object: `ns/name; group/version, Kind=Kind`.
fn who(def: &ResourceDef, config: &Value) -> String {
    format!(
        "{}/{}; {}",
        config
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        meta::name(config),
        gvk_string(&def.api_version(), def.kind)
    )
}

/// The error of an apply whose body holds fields the object's schema does not declare, as
/// structured-merge-diff's typed conversion of the patch reports them (a 500, as upstream's):
/// one `.spec.foo: field not declared in schema`, or several under `errors:`.
pub fn undeclared_error(def: &ResourceDef, config: &Value, paths: &[String]) -> ApiError {
    let lines: Vec<String> = paths
        .iter()
        .map(|p| format!(".{p}: field not declared in schema"))
        .collect();
    let message = match lines.as_slice() {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    ApiError::unknown(format!(
        "failed to create typed patch object ({}): {message}",
        who(def, config)
    ))
}

/// Server-side apply of `config` by `manager` to `live` (`None` when the object does not
/// exist yet), through `subresource`. Returns the merged object carrying its new
/// managedFields; defaulting, admission and validation run on it afterwards, as upstream
/// defaults after the merge.
pub fn apply(
    def: &ResourceDef,
    subresource: &str,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
) -> ApiResult<Value> {
    let kind = def.kind;
    let api_version = def.api_version();
    let s = |k: &str| config.get(k).and_then(Value::as_str).unwrap_or_default();
    if s("apiVersion") != api_version || s("kind") != kind {
        return Err(ApiError::bad_request(format!(
            "invalid object type: {}",
            gvk_string(s("apiVersion"), s("kind"))
        )));
    }
    if config.pointer("/metadata/managedFields").is_some() {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let who = who(def, config);
    let typed = |e: String| ApiError::unknown(format!("failed to create typed patch object ({who}): {e}"));
    let typed_live = |e: String| ApiError::unknown(format!("failed to create typed live object ({who}): {e}"));
    let mut managed = match live {
        Some(l) => Managed::decode(l.pointer("/metadata/managedFields"))
            .map_err(|e| ApiError::internal(format!("failed to decode managed fields: {e}")))?,
        None => Managed::default(),
    };
    let live_clean = live.map_or_else(|| zero_like(config), without_managed);
    if managed.entries.is_empty() && live.is_some() {
        // Upstream's skipNonAppliedManager: what an untracked object already holds is credited
        // to a manager of its own, so the first apply can conflict with it rather than own it.
        let now = meta::now();
        let first = Writer {
            manager: BEFORE_FIRST_APPLY,
            subresource,
            api_version: &api_version,
            now: &now,
        };
        let ignored = ignored_fields(def, subresource, &live_clean);
        managed
            .record_update(kind, &zero_like(&live_clean), &live_clean, &first, &ignored)
            .map_err(typed_live)?;
    }
    let ignored = ignored_fields(def, subresource, config);
    let mut merged = walk::merge(kind, &live_clean, config).map_err(typed)?;
    let applied_set = walk::to_field_set(kind, config)
        .map_err(typed)?
        .recursive_difference(&ignored);
    let mine = managed
        .entries
        .iter()
        .position(|e| e.is(manager, Operation::Apply, subresource, &api_version));
    let last = mine.map(|i| managed.entries[i].set.clone());
    let mine = match mine {
        Some(i) => {
            managed.entries[i].set = applied_set;
            managed.entries[i].api_version.clone_from(&api_version);
            i
        }
        None => {
            managed.entries.push(Entry {
                manager: manager.to_string(),
                operation: Operation::Apply,
                api_version: api_version.clone(),
                time: None,
                subresource: subresource.to_string(),
                set: applied_set,
            });
            managed.entries.len() - 1
        }
    };
    if let Some(last) = last.filter(|l| !l.is_empty()) {
        // Prune: what this applier owned last time and no manager owns now goes away.
        let mut owned = FieldSet::default();
        for e in &managed.entries {
            owned.union_in(&e.set);
        }
        let remove = walk::ensure_named_fields(kind, &last).difference(&walk::ensure_named_fields(kind, &owned));
        merged = walk::remove_items(kind, &merged, &remove);
    }
    let mut cmp = walk::compare(kind, &live_clean, &merged).map_err(typed_live)?;
    cmp.filter(&ignored);
    let conflicts = managed.take_changed(&cmp, Some(mine));
    if !conflicts.is_empty() && !force {
        // Upstream's lastAppliedManager: kubectl may take, without force, the conflicting
        // fields its client-side apply annotation still describes as they are live.
        let allowed = (manager == "kubectl")
            .then(|| allowed_from_last_applied(kind, &api_version, &live_clean))
            .flatten()
            .unwrap_or_default();
        let remaining: Vec<(Entry, FieldSet)> = conflicts
            .iter()
            .map(|(i, set)| (managed.entries[*i].clone(), set.difference(&allowed)))
            .filter(|(_, set)| !set.is_empty())
            .collect();
        if !remaining.is_empty() {
            return Err(conflict_error(&remaining));
        }
    }
    managed.give_up(&cmp, &conflicts, Some(mine));
    let changed = merged != live_clean;
    let entry = &mut managed.entries[mine];
    entry.set = managed::strip(&entry.set);
    if changed {
        entry.time = Some(meta::now());
    }
    managed.entries.retain(|e| !e.set.is_empty());
    if manager == "kubectl"
        && live_clean
            .pointer(&format!("/metadata/annotations/{}", LAST_APPLIED.replace('/', "~1")))
            .is_some()
    {
        // Upstream's lastAppliedUpdater keeps kubectl's client-side annotation in step.
        let mut last_applied = config.clone();
        if let Some(a) = last_applied
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            a.remove(LAST_APPLIED);
        }
        meta::meta_mut(&mut merged)
            .entry("annotations")
            .or_insert_with(|| json!({}))[LAST_APPLIED] = json!(format!("{last_applied}\n"));
    }
    set_managed(&mut merged, &managed);
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_yaml_key_keeps_the_last_value_and_is_named_with_its_line() {
        let body = b"\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  foo: first\n  foo: second\n";
        assert_eq!(parse_apply_body(body).unwrap()["data"]["foo"], "second");
        assert_eq!(
            strict_yaml_error(body).as_deref(),
            Some("error converting YAML to JSON: yaml: unmarshal errors:\n  line 8: key \"foo\" already set in map")
        );
        assert_eq!(strict_yaml_error(b"a: 1\nb: 2\n"), None);
    }
    use crate::api::registry;

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "data": data})
    }

    #[test]
    fn manager_names_and_their_validation() {
        let h = HeaderMap::new();
        let mut q = Query::new();
        assert_eq!(
            prefix_from_user_agent("kubectl/v1.37.0 (linux/amd64) kubernetes/x"),
            "kubectl"
        );
        let e = manager_of(&q, &h, "PatchOptions", true).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        q.insert("fieldManager".into(), "x".repeat(129));
        assert_eq!(manager_of(&q, &h, "UpdateOptions", false).unwrap_err().code, 422);
        q.insert("fieldManager".into(), "mine".into());
        assert_eq!(manager_of(&q, &h, "PatchOptions", true).unwrap(), "mine");
    }

    #[test]
    fn apply_owns_prunes_and_conflicts() {
        let def = registry::find("", "v1", "configmaps").unwrap();
        let created = apply(def, "", None, &cm(json!({"a": "1", "b": "2"})), "alice", false).unwrap();
        assert_eq!(created["metadata"]["managedFields"][0]["manager"], "alice");
        assert_eq!(
            created["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        // alice stops sending b: it goes.
        let second = apply(def, "", Some(&created), &cm(json!({"a": "1"})), "alice", false).unwrap();
        assert_eq!(second["data"], json!({"a": "1"}));
        // bob changes a: conflict, unless forced.
        let e = apply(def, "", Some(&second), &cm(json!({"a": "2"})), "bob", false).unwrap_err();
        assert_eq!((e.code, &*e.reason), (409, "Conflict"));
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"alice\": .data.a"
        );
        assert_eq!(e.details.as_ref().unwrap()["causes"][0]["field"], ".data.a");
        let forced = apply(def, "", Some(&second), &cm(json!({"a": "2"})), "bob", true).unwrap();
        let mf = forced["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.len(), 1);
        assert_eq!(mf[0]["manager"], "bob");
        // Both own a when they agree; alice dropping it leaves bob's value.
        let shared = apply(def, "", Some(&forced), &cm(json!({"a": "2"})), "alice", false).unwrap();
        assert_eq!(shared["metadata"]["managedFields"].as_array().unwrap().len(), 2);
        let dropped = apply(def, "", Some(&shared), &cm(json!({"z": "9"})), "alice", false).unwrap();
        assert_eq!(dropped["data"], json!({"a": "2", "z": "9"}));
        let pods = registry::find("", "v1", "pods").unwrap();
        let dup = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c"}, {"name": "c"}]}});
        let e = apply(pods, "", None, &dup, "x", false).unwrap_err();
        assert_eq!((e.code, &*e.reason), (500, ""));
        assert_eq!(
            e.message,
            "failed to create typed patch object (default/p; /v1, Kind=Pod): .spec.containers: duplicate entries for key [name=\"c\"]"
        );
        let wrong = json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert_eq!(
            apply(def, "", None, &wrong, "x", false).unwrap_err().message,
            "invalid object type: apps/v1, Kind=ConfigMap"
        );
    }

    #[test]
    fn kubectl_may_take_what_its_last_applied_annotation_describes() {
        let def = registry::find("", "v1", "configmaps").unwrap();
        let last = r#"{"apiVersion":"v1","data":{"a":"1","b":"1"},"kind":"ConfigMap","metadata":{"name":"c"}}"#;
        let mut live = cm(json!({"a": "1", "b": "2"}));
        live["metadata"]["annotations"] = json!({LAST_APPLIED: last});
        track_update(def, None, &mut live, "kubectl-client-side-apply", "");
        // a is live as last applied: kubectl takes it; b is not: it still conflicts.
        let out = apply(def, "", Some(&live), &cm(json!({"a": "9"})), "kubectl", false).unwrap();
        assert_eq!(out["data"]["a"], "9");
        let e = apply(def, "", Some(&live), &cm(json!({"a": "9", "b": "9"})), "kubectl", false).unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.b"
        );
        // Only kubectl's own manager gets the allowance.
        assert!(apply(def, "", Some(&live), &cm(json!({"a": "9"})), "other", false).is_err());
    }

    #[test]
    fn status_apply_neither_owns_nor_conflicts_outside_status() {
        let def = registry::find("apps", "v1", "deployments").unwrap();
        let mut live = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default", "labels": {"a": "1"}}, "spec": {"replicas": 1}});
        track_update(def, None, &mut live, "kubectl-create", "");
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"a": "2"}}, "spec": {"replicas": 4}, "status": {"replicas": 1}});
        let out = apply(def, "status", Some(&live), &config, "ctrl", false).unwrap();
        let mf = out["metadata"]["managedFields"].as_array().unwrap();
        let ctrl = mf.iter().find(|e| e["manager"] == "ctrl").unwrap();
        assert_eq!(ctrl["subresource"], "status");
        assert_eq!(ctrl["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));
        let create = mf.iter().find(|e| e["manager"] == "kubectl-create").unwrap();
        assert_eq!(create["fieldsV1"]["f:spec"], json!({"f:replicas": {}}));
    }

    #[test]
    fn update_conflicts_name_the_version_and_first_apply_credits_existing_fields() {
        let def = registry::find("", "v1", "configmaps").unwrap();
        let mut live = cm(json!({"a": "1"}));
        track_update(def, None, &mut live, "kubectl-create", "");
        assert_eq!(
            live["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {".": {}, "f:a": {}}})
        );
        let e = apply(def, "", Some(&live), &cm(json!({"a": "2"})), "kubectl", false).unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .data.a"
        );
        let mut untracked = cm(json!({"a": "1"}));
        let e = apply(def, "", Some(&untracked), &cm(json!({"a": "2"})), "kubectl", false).unwrap_err();
        assert!(e.message.contains("\"before-first-apply\" using v1"), "{}", e.message);
        // A reset empties managedFields.
        untracked["metadata"]["managedFields"] = json!([]);
        track_update(def, Some(&live), &mut untracked, "kubectl-edit", "");
        assert!(untracked["metadata"].get("managedFields").is_none());
    }
}
