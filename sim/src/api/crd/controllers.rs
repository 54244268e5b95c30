//! The in-process controllers upstream's apiextensions-apiserver runs for CRDs, played
//! synchronously after each write: naming (accepted names, `NamesAccepted`), establishing
//! (`Established`, then the kind is served) and finalizing (a deleted CRD's instances go,
//! then the CRD), plus the delete strategy's first step and the handler's refusal of creates
//! while a CRD terminates.

use serde_json::{Value, json};

use super::{CLEANUP_FINALIZER, CRD_KEY, GROUP, defs_of, strs, text};
use crate::api::meta;
use crate::api::registry::ResourceDef;
use crate::api::state::AppState;

fn condition(ty: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": ty, "status": status, "lastTransitionTime": meta::now(), "reason": reason, "message": message})
}

/// Sets a condition as upstream's `SetCRDCondition`: replaces one of the same type, keeping
/// its transition time when the status did not change, else appends.
fn set_condition(crd: &mut Value, mut cond: Value) {
    if !crd.get("status").is_some_and(Value::is_object) {
        crd["status"] = json!({});
    }
    let conds = crd["status"]
        .as_object_mut()
        .expect("status is an object")
        .entry("conditions")
        .or_insert_with(|| json!([]));
    if !conds.is_array() {
        *conds = json!([]);
    }
    let list = conds.as_array_mut().expect("conditions is an array");
    match list.iter_mut().find(|c| c["type"] == cond["type"]) {
        Some(old) => {
            if old["status"] == cond["status"] {
                cond["lastTransitionTime"] = old["lastTransitionTime"].clone();
            }
            *old = cond;
        }
        None => list.push(cond),
    }
}

fn is_true(crd: &Value, ty: &str) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|l| l.iter().any(|c| c["type"] == ty && c["status"] == "True"))
}

/// The names other CRDs of `group` have been granted: (resource names, kinds), as the
/// naming controller collects them.
fn names_in_use(st: &AppState, group: &str, except: &str) -> (Vec<String>, Vec<String>) {
    let (all, _) = st.store.list(CRD_KEY, None);
    let mut resources = Vec::new();
    let mut kinds = Vec::new();
    for c in all
        .iter()
        .filter(|c| text(c, "/spec/group") == group && meta::name(c) != except)
    {
        let a = c.pointer("/status/acceptedNames").cloned().unwrap_or_default();
        resources.push(text(&a, "/plural"));
        resources.push(text(&a, "/singular"));
        resources.extend(strs(a.get("shortNames")));
        kinds.push(text(&a, "/kind"));
        kinds.push(text(&a, "/listKind"));
    }
    (resources, kinds)
}

/// The naming controller's verdict: accepted names and the `NamesAccepted` condition.
fn accept_names(st: &AppState, crd: &Value) -> (Value, Value) {
    let (resources, kinds) = names_in_use(st, &text(crd, "/spec/group"), meta::name(crd));
    let requested = crd.pointer("/spec/names").cloned().unwrap_or_default();
    let accepted = crd.pointer("/status/acceptedNames").cloned().unwrap_or_default();
    let mut names = accepted.clone();
    if !names.is_object() {
        names = json!({});
    }
    let mut failure: Option<(&str, String)> = None;
    // Upstream checks in this order and the last conflict found names the condition.
    let take = |field: &str,
                reason: &'static str,
                used: &[String],
                names: &mut Value,
                failure: &mut Option<(&str, String)>| {
        let want = text(&requested, &format!("/{field}"));
        let have = text(&accepted, &format!("/{field}"));
        if want == have || !used.contains(&want) {
            names[field] = json!(want);
        } else {
            *failure = Some((reason, format!("{want:?} is already in use")));
        }
    };
    take("plural", "PluralConflict", &resources, &mut names, &mut failure);
    take("singular", "SingularConflict", &resources, &mut names, &mut failure);
    let shorts = strs(requested.get("shortNames"));
    let had = strs(accepted.get("shortNames"));
    if shorts != had {
        let own = [text(&accepted, "/plural"), text(&accepted, "/singular")];
        let clash: Vec<String> = shorts
            .iter()
            .filter(|s| !had.contains(s) && !own.contains(s) && resources.contains(s))
            .map(|s| format!("{s:?} is already in use"))
            .collect();
        match clash.len() {
            0 => names["shortNames"] = json!(shorts),
            1 => failure = Some(("ShortNamesConflict", clash[0].clone())),
            _ => failure = Some(("ShortNamesConflict", format!("[{}]", clash.join(", ")))),
        }
    }
    take("kind", "KindConflict", &kinds, &mut names, &mut failure);
    take("listKind", "ListKindConflict", &kinds, &mut names, &mut failure);
    let cats = strs(requested.get("categories"));
    if !cats.is_empty() {
        names["categories"] = json!(cats);
    }
    let cond = match failure {
        None => condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
        Some((reason, msg)) => condition("NamesAccepted", "False", reason, &msg),
    };
    (names, cond)
}

/// What upstream's naming and establishing controllers and its CRD handler do after a CRD
/// write: grant names (`NamesAccepted`), establish (`Established`), serve the versions.
/// A CRD being deleted is finalized instead.
pub fn reconcile(st: &AppState, name: &str) {
    for _ in 0..5 {
        let Some(crd) = st.store.get(CRD_KEY, "", name) else {
            st.crds.set(name, Vec::new());
            return;
        };
        if meta::is_deleting(&crd) {
            finalize(st, name);
            return;
        }
        let mut next = crd.clone();
        let (names, named) = accept_names(st, &crd);
        let accepted = named["status"] == "True";
        next["status"]["acceptedNames"] = names;
        set_condition(&mut next, named);
        // `crd-establishing-stopped`: the names are accepted but nothing establishes the CRD.
        if accepted && !is_true(&crd, "Established") && st.cfg.faults.is_on("crd-establishing-stopped") {
            // Left without an Established condition, as before the establishing controller ran.
        } else if accepted && !is_true(&crd, "Established") {
            set_condition(
                &mut next,
                condition(
                    "Established",
                    "True",
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                ),
            );
        } else if !accepted && !is_true(&crd, "Established") {
            set_condition(
                &mut next,
                condition("Established", "False", "NotAccepted", "not all names are accepted"),
            );
        }
        let written = if next == crd {
            crd
        } else {
            match st
                .store
                .update(CRD_KEY, "", name, next, Some(crate::api::store::rv_of(&crd)))
            {
                Ok(w) => w,
                Err(crate::api::store::StoreError::Conflict) => continue,
                Err(e) => {
                    tracing::warn!(crd = name, error = ?e, "CRD status update failed");
                    return;
                }
            }
        };
        let defs = if is_true(&written, "Established") {
            defs_of(st, &written)
        } else {
            Vec::new()
        };
        st.crds.set(name, defs);
        return;
    }
    tracing::warn!(crd = name, "CRD status update kept conflicting");
}

/// Runs [`reconcile`] after a write that landed, when it was a CRD's (and records a written
/// ValidatingAdmissionPolicy's status, [`crate::api::vap::after_write`]); after a custom
/// object's write, finishes its CRD's finalization if that was waiting for it.
pub fn after_write(st: &AppState, def: &ResourceDef, name: &str) {
    crate::api::vap::after_write(st, def, name);
    if (def.group, def.plural) == (GROUP, "customresourcedefinitions") {
        reconcile(st, name);
    } else if let Some(custom) = def.custom
        && st
            .store
            .get(CRD_KEY, "", &custom.crd_name)
            .is_some_and(|c| meta::is_deleting(&c))
    {
        finalize(st, &custom.crd_name);
    }
}

/// Upstream's CRD delete (first call): adds the cleanup finalizer and the `Terminating`
/// condition to the stored CRD before the generic delete sets `deletionTimestamp`.
pub fn mark_for_deletion(obj: &mut Value) {
    let m = meta::meta_mut(obj);
    let fins = m.entry("finalizers").or_insert_with(|| json!([]));
    if let Some(list) = fins.as_array_mut()
        && !list.iter().any(|f| f == CLEANUP_FINALIZER)
    {
        list.push(json!(CLEANUP_FINALIZER));
    }
    set_condition(
        obj,
        condition(
            "Terminating",
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        ),
    );
}

/// The finalizing controller: marks deletion in progress, deletes every instance (those
/// with finalizers get `deletionTimestamp` and are waited for: the pass ends here and runs
/// again when the last one goes, see [`after_write`]), then records completion and drops the
/// cleanup finalizer, which lets the CRD go. The kind stays served until then, so clients can
/// still clear their finalizers.
pub fn finalize(st: &AppState, name: &str) {
    let Some(crd) = st.store.get(CRD_KEY, "", name) else {
        return;
    };
    if !meta::is_deleting(&crd) || !meta::finalizers(&crd).iter().any(|f| f == CLEANUP_FINALIZER) {
        return;
    }
    let mut next = crd.clone();
    set_condition(
        &mut next,
        condition(
            "Terminating",
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        ),
    );
    let mut crd = if next == crd {
        crd
    } else {
        match st
            .store
            .update(CRD_KEY, "", name, next, Some(crate::api::store::rv_of(&crd)))
        {
            Ok(w) => w,
            Err(e) => {
                tracing::debug!(crd = name, error = ?e, "CRD changed meanwhile; its next write finalizes it");
                return;
            }
        }
    };
    let cond = if is_true(&crd, "Established") {
        if delete_instances(st, &crd) > 0 {
            return;
        }
        condition(
            "Terminating",
            "False",
            "InstanceDeletionCompleted",
            "removed all instances",
        )
    } else {
        condition(
            "Terminating",
            "False",
            "NeverEstablished",
            "resource was never established",
        )
    };
    set_condition(&mut crd, cond);
    let rest: Vec<Value> = meta::finalizers(&crd)
        .into_iter()
        .filter(|f| f != CLEANUP_FINALIZER)
        .map(Value::from)
        .collect();
    let empty = rest.is_empty();
    meta::meta_mut(&mut crd).insert("finalizers".into(), Value::Array(rest));
    let rv = crate::api::store::rv_of(&crd);
    let result = if empty {
        st.store.remove(CRD_KEY, "", name, Some(rv)).map(|_| ())
    } else {
        st.store.update(CRD_KEY, "", name, crd, Some(rv)).map(|_| ())
    };
    match result {
        Ok(()) if empty => st.crds.set(name, Vec::new()),
        Ok(()) => {}
        Err(e) => tracing::warn!(crd = name, error = ?e, "CRD finalization write failed"),
    }
}

/// Deletes every instance of a CRD's kind as a delete collection would: objects without
/// finalizers go, the others are marked deleted. Returns how many are still there.
fn delete_instances(st: &AppState, crd: &Value) -> usize {
    let key = format!(
        "{}/{}",
        text(crd, "/spec/group"),
        text(crd, "/status/acceptedNames/plural")
    );
    let (items, _) = st.store.list(&key, None);
    let mut left = 0;
    for o in items {
        let (ns, n) = (meta::namespace(&o).to_string(), meta::name(&o).to_string());
        let result = if meta::finalizers(&o).is_empty() {
            st.store.remove(&key, &ns, &n, None).map(|_| ())
        } else {
            left += 1;
            if meta::is_deleting(&o) {
                Ok(())
            } else {
                let mut marked = o.clone();
                meta::meta_mut(&mut marked).insert("deletionTimestamp".into(), json!(meta::now()));
                meta::meta_mut(&mut marked).insert("deletionGracePeriodSeconds".into(), json!(0));
                st.store.update(&key, &ns, &n, marked, None).map(|_| ())
            }
        };
        if let Err(e) = result {
            tracing::debug!(object = %n, error = ?e, "instance changed meanwhile");
        }
    }
    left
}

/// Upstream's custom resource handler refuses creates of a kind whose CRD is terminating.
pub fn refuse_create_while_terminating(st: &AppState, def: &ResourceDef) -> Result<(), crate::api::ApiError> {
    let Some(custom) = def.custom else { return Ok(()) };
    match st.store.get(CRD_KEY, "", &custom.crd_name) {
        Some(crd) if meta::is_deleting(&crd) => Err(crate::api::ApiError::method_not_allowed(
            "create not allowed while custom resource definition is terminating",
        )),
        _ => Ok(()),
    }
}
