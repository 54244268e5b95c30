//! The mutating chain: matching webhooks called one after another in configuration order,
//! each seeing the object as the previous ones left it, their JSONPatch answers applied, and
//! one more round for `reinvocationPolicy: IfNeeded` webhooks that ran before a later webhook
//! changed the object (upstream's reinvocation, limited to webhooks).

use serde_json::Value;

use super::{
    Attributes, add_warnings, call, dry_run_allowed, exempt, failed_call, hook_name, hooks, ignores_failures, internal,
    matching, rejection,
};
use crate::api::convert;
use crate::api::error::ApiError;
use crate::api::state::AppState;

/// Whether the webhook's answer changed the object.
type Changed = bool;

/// Calls one matching webhook and applies its patch to `obj` (absent for deletes).
async fn call_one(
    st: &AppState,
    hook: &Value,
    inv: &matching::Invocation,
    attrs: &Attributes,
    obj: &mut Option<Value>,
) -> Result<Changed, ApiError> {
    dry_run_allowed(hook, attrs)?;
    let answer = match call::review_version(hook) {
        Ok(version) => {
            let review = call::review(attrs, inv.def, version, &crate::api::meta::new_uid(), obj.as_ref());
            call::call(st, hook, &review, true).await
        }
        Err(e) => Err(e),
    };
    let answer = match answer {
        Err(e) if ignores_failures(hook) => {
            tracing::warn!(webhook = hook_name(hook), error = %e, "failed calling webhook, failing open");
            return Ok(false);
        }
        Err(e) => return Err(failed_call(hook, &e)),
        Ok(a) => a,
    };
    add_warnings(answer.warnings);
    if !answer.allowed {
        return Err(rejection(hook, answer.status.as_ref()));
    }
    let Some(patch) = answer.patch.filter(|p| p.as_array().is_some_and(|a| !a.is_empty())) else {
        return Ok(false);
    };
    let Some(current) = obj.as_mut() else {
        return Err(internal(format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            hook_name(hook)
        )));
    };
    let patch: json_patch::Patch = serde_json::from_value(patch).map_err(|e| {
        failed_call(
            hook,
            &call::CallError::Invalid(format!("received undecodable patch in webhook response: {e}")),
        )
    })?;
    // The patch is against the version the webhook was sent; the result goes back to storage.
    let convert = attrs.sub_kind.is_none();
    let mut versioned = if convert {
        convert::from_storage(inv.def, current.clone())
    } else {
        current.clone()
    };
    json_patch::patch(&mut versioned, &patch).map_err(|e| internal(e.to_string()))?;
    let patched = if convert {
        convert::to_storage(inv.def, versioned)
    } else {
        versioned
    };
    let changed = patched != *current;
    *current = patched;
    Ok(changed)
}

/// Runs the mutating webhooks on `obj` (absent for deletes), before the object is validated.
pub async fn mutate(st: &AppState, attrs: &Attributes, obj: Option<&mut Value>) -> Result<(), ApiError> {
    if exempt(attrs.def) || crate::api::admission::plugin_off(st, "MutatingAdmissionWebhook") {
        return Ok(());
    }
    let all = hooks(st, "mutatingwebhookconfigurations");
    if all.is_empty() {
        return Ok(());
    }
    let mut current = obj.as_deref().cloned();
    // IfNeeded webhooks called so far, and those a later change obliges to run again.
    let mut reinvocable: Vec<usize> = Vec::new();
    let mut reinvoke: Vec<usize> = Vec::new();
    for (i, hook) in all.iter().enumerate() {
        let Some(inv) = matching::should_call(st, hook, attrs, current.as_ref())? else {
            continue;
        };
        if call_one(st, hook, &inv, attrs, &mut current).await? {
            for j in &reinvocable {
                if !reinvoke.contains(j) {
                    reinvoke.push(*j);
                }
            }
        }
        if hook.get("reinvocationPolicy").and_then(Value::as_str) == Some("IfNeeded") {
            reinvocable.push(i);
        }
    }
    reinvoke.sort_unstable();
    for i in reinvoke {
        let hook = &all[i];
        // A webhook skipped in the first round is not called for the first time now.
        if let Some(inv) = matching::should_call(st, hook, attrs, current.as_ref())? {
            call_one(st, hook, &inv, attrs, &mut current).await?;
        }
    }
    if let (Some(out), Some(v)) = (obj, current) {
        *out = v;
    }
    Ok(())
}
