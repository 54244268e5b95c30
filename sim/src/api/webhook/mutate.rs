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
    prune_custom(st, inv.def, &mut versioned);
    let patched = if convert {
        convert::to_storage(inv.def, versioned)
    } else {
        versioned
    };
    let changed = patched != *current;
    *current = patched;
    Ok(changed)
}

/// Upstream decodes a patched custom object through the CRD's schema-coercing converter, which
/// prunes the fields its structural schema does not declare: what a webhook adds there is
/// dropped, silently, as the apiextensions server does after admission. Off under the
/// `webhook-patches-unpruned` fault.
fn prune_custom(st: &AppState, def: &crate::api::registry::ResourceDef, obj: &mut Value) {
    let Some(custom) = def.custom else {
        return;
    };
    if st.cfg.faults.is_on("webhook-patches-unpruned") {
        return;
    }
    let dropped = crate::api::crd::prune::prune(&custom.schema, obj);
    if !dropped.is_empty() {
        tracing::debug!(kind = def.kind, ?dropped, "pruned fields a mutating webhook added");
    }
}

/// Runs the mutating webhooks on `obj` (absent for deletes), before the object is validated.
pub async fn mutate(st: &AppState, attrs: &Attributes, obj: Option<&mut Value>) -> Result<(), ApiError> {
    if exempt(st, attrs.def) || crate::api::admission::plugin_off(st, "MutatingAdmissionWebhook") {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::crd::Custom;
    use crate::api::registry::ResourceDef;
    use crate::api::state::StateConfig;

    /// A served custom version whose schema declares `data.kept` only (upstream's pruning case).
    fn def() -> &'static ResourceDef {
        let custom: &'static Custom = Box::leak(Box::new(Custom {
            crd_name: "widgets.example.com".into(),
            schema: json!({"type": "object", "properties": {"data": {"type": "object",
                "properties": {"kept": {"type": "string"}}}}}),
            columns: Vec::new(),
            scale: None,
            list_kind: "WidgetList".into(),
            default_on_read: true,
        }));
        Box::leak(Box::new(ResourceDef {
            group: "example.com",
            version: "v1",
            kind: "Widget",
            plural: "widgets",
            singular: "widget",
            short_names: &[],
            categories: &[],
            namespaced: true,
            verbs: &[],
            subresources: &[],
            storage_of: None,
            custom: Some(custom),
        }))
    }

    fn state(faults: &str) -> AppState {
        let mut cfg = StateConfig::new(AddressBlock(205));
        cfg.faults = std::sync::Arc::new(crate::faults::Faults::parse(faults).expect("fault spec"));
        AppState::new(cfg)
    }

    #[test]
    fn fields_a_patch_adds_outside_the_schema_are_pruned_unless_the_fault_is_on() {
        let patched = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "data": {"kept": "yes", "added": "yes"}});
        let mut obj = patched.clone();
        prune_custom(&state(""), def(), &mut obj);
        assert_eq!(obj["data"], json!({"kept": "yes"}));
        assert_eq!(obj["metadata"]["name"], "w");
        let mut obj = patched.clone();
        prune_custom(&state("webhook-patches-unpruned"), def(), &mut obj);
        assert_eq!(obj, patched);
    }
}
