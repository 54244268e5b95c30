//! POST pods/{name}/eviction, as upstream's `pkg/registry/core/pod/storage/eviction.go`: a pod
//! delete that honours the one PodDisruptionBudget covering the pod, decrements its
//! `disruptionsAllowed` and records the pod in `disruptedPods` (the disruption controller
//! confirms or expires the entry), and marks the pod with the `DisruptionTarget` condition
//! before deleting it.

use axum::response::Response;
use serde_json::{Value, json};

use super::delete::{DeleteOptions, delete_one};
use super::{Query, json_response};
use crate::api::error::{ApiError, ApiResult};
use crate::api::meta;
use crate::api::registry;
use crate::api::selector::LabelSelector;
use crate::api::state::AppState;
use crate::api::store::ModifyError;

const PDBS: &str = "policy/poddisruptionbudgets";
/// upstream's `MaxDisruptedPodSize`.
const MAX_DISRUPTED_PODS: usize = 2000;
/// The message of a refused eviction.
pub const VIOLATES_BUDGET: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// `errors.NewTooManyRequests(message, retryAfter)`, with the `DisruptionBudget` cause when
/// `cause` is given.
fn too_many_requests(message: String, retry_after: i64, cause: Option<String>) -> ApiError {
    let mut details = json!({});
    if retry_after > 0 {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    if let Some(c) = cause {
        details["causes"] = json!([{"reason": "DisruptionBudget", "message": c}]);
    }
    ApiError {
        code: 429,
        reason: "TooManyRequests".into(),
        message,
        details: Some(details),
    }
}

fn i(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The budgets whose selector matches the pod (a budget without a selector matches nothing).
fn budgets_of(st: &AppState, pod: &Value) -> Vec<Value> {
    let (pdbs, _) = st.store.list(PDBS, Some(meta::namespace(pod)));
    pdbs.into_iter()
        .filter(|b| {
            b.pointer("/spec/selector")
                .filter(|s| !s.is_null())
                .is_some_and(|s| LabelSelector::from_object(s).matches(pod))
        })
        .collect()
}

/// `checkAndDecrement`: refuses when the budget allows no disruption, else takes one.
fn take_disruption(st: &AppState, pdb: &Value, pod: &str, dry_run: bool) -> ApiResult<()> {
    let name = meta::name(pdb).to_string();
    let ns = meta::namespace(pdb).to_string();
    let res = st.store.modify(PDBS, &ns, &name, |b| {
        if i(b, "/status/observedGeneration") < i(b, "/metadata/generation") {
            return Err(too_many_requests(
                format!("{VIOLATES_BUDGET} The disruption budget {name} is still being processed by the server."),
                10,
                None,
            ));
        }
        let allowed = i(b, "/status/disruptionsAllowed");
        if allowed < 0 {
            return Err(ApiError::forbidden(format!(
                "poddisruptionbudgets.policy {name:?} is forbidden: pdb disruptions allowed is negative"
            )));
        }
        let disrupted = b.pointer("/status/disruptedPods").and_then(Value::as_object).map_or(0, |m| m.len());
        if disrupted > MAX_DISRUPTED_PODS {
            return Err(ApiError::forbidden(format!(
                "poddisruptionbudgets.policy {name:?} is forbidden: DisruptedPods map too big - too many evictions not confirmed by PDB controller"
            )));
        }
        if allowed == 0 {
            return Err(too_many_requests(
                VIOLATES_BUDGET.into(),
                0,
                Some(format!(
                    "The disruption budget {name} needs {} healthy pods and has {} currently",
                    i(b, "/status/desiredHealthy"),
                    i(b, "/status/currentHealthy")
                )),
            ));
        }
        if dry_run {
            return Ok(None);
        }
        let mut new = b.clone();
        new["status"]["disruptionsAllowed"] = json!(allowed - 1);
        if allowed - 1 == 0 {
            set_disruption_allowed(&mut new, false);
        }
        if !new["status"]["disruptedPods"].is_object() {
            new["status"]["disruptedPods"] = json!({});
        }
        new["status"]["disruptedPods"][pod] = json!(meta::now());
        Ok(Some(new))
    });
    match res {
        Ok(_) => Ok(()),
        // The budget went away meanwhile: nothing protects the pod any more.
        Err(ModifyError::NotFound) => Ok(()),
        Err(ModifyError::Rejected(e)) => Err(e),
    }
}

/// `UpdateDisruptionAllowedCondition`: the `DisruptionAllowed` condition of a budget's status
/// (the disruption controller and the eviction path both write it).
pub fn set_disruption_allowed(pdb: &mut Value, allowed: bool) {
    let (status, reason) = if allowed {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let generation = i(pdb, "/metadata/generation");
    let mut conds: Vec<Value> = pdb
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let old = conds.iter().position(|c| c["type"] == "DisruptionAllowed");
    let since = match old.map(|k| &conds[k]) {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(meta::now()),
    };
    let cond = json!({"type": "DisruptionAllowed", "status": status, "observedGeneration": generation,
        "lastTransitionTime": since, "reason": reason, "message": ""});
    match old {
        Some(k) => conds[k] = cond,
        None => conds.push(cond),
    }
    pdb["status"]["conditions"] = json!(conds);
}

/// Adds `DisruptionTarget` (reason `EvictionByEvictionAPI`) to the pod's conditions.
fn mark_disruption_target(st: &AppState, ns: &str, pod: &str) -> ApiResult<()> {
    let res = st.store.modify("/pods", ns, pod, |p| {
        let mut new = p.clone();
        let mut conds: Vec<Value> = p
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let cond = json!({"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
            "lastTransitionTime": meta::now(), "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"});
        match conds.iter().position(|c| c["type"] == "DisruptionTarget") {
            Some(k) if conds[k]["status"] == "True" && conds[k]["reason"] == "EvictionByEvictionAPI" => {
                return Ok(None);
            }
            Some(k) => conds[k] = cond,
            None => conds.push(cond),
        }
        new["status"]["conditions"] = json!(conds);
        Ok::<_, ApiError>(Some(new))
    });
    match res {
        Ok(_) | Err(ModifyError::NotFound) => Ok(()),
        Err(ModifyError::Rejected(e)) => Err(e),
    }
}

/// POST of an Eviction.
pub fn evict(st: &AppState, ns: &str, pod: &str, q: &Query, body: &[u8]) -> ApiResult<Response> {
    let def = registry::find("", "v1", "pods").expect("pods");
    if !body.is_empty()
        && let Ok(ev) = serde_json::from_slice::<Value>(body)
    {
        let named = meta::name(&ev);
        if !named.is_empty() && named != pod {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
    }
    let opts = DeleteOptions::parse(q, body)?;
    let dry_run = q.get("dryRun").is_some_and(|v| v == "All")
        || serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v.pointer("/deleteOptions/dryRun").cloned())
            .and_then(|v| v.as_array().cloned())
            .is_some_and(|a| a.iter().any(|x| x == "All"));
    let current = st
        .store
        .get("/pods", ns, pod)
        .ok_or_else(|| ApiError::not_found("", "pods", pod))?;
    let phase = current
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // `canIgnorePDB`: terminal, pending and already-deleting pods are not protected.
    // `eviction-budget-ignored`: an API server whose eviction path deletes without checking
    // budgets (as a plain DELETE does).
    let ignore = matches!(phase, "Succeeded" | "Failed" | "Pending")
        || meta::is_deleting(&current)
        || st.cfg.faults.is_on("eviction-budget-ignored");
    if !ignore {
        let pdbs = budgets_of(st, &current);
        if pdbs.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = pdbs.first() {
            let policy = pdb
                .pointer("/spec/unhealthyPodEvictionPolicy")
                .and_then(Value::as_str)
                .unwrap_or("IfHealthyBudget");
            let healthy_budget = i(pdb, "/status/currentHealthy") >= i(pdb, "/status/desiredHealthy")
                && i(pdb, "/status/desiredHealthy") > 0;
            let unready_may_go = !is_ready(&current) && (policy == "AlwaysAllow" || healthy_budget);
            if !unready_may_go {
                take_disruption(st, pdb, pod, dry_run)?;
            }
        }
    }
    if !dry_run {
        mark_disruption_target(st, ns, pod)?;
    }
    tracing::debug!(namespace = ns, pod, "evicting pod");
    delete_one(st, def, ns, pod, &opts)?;
    Ok(json_response(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        &[],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::state::StateConfig;
    use axum::response::IntoResponse;

    fn state_with(pdb_status: Value) -> AppState {
        let st = AppState::new(StateConfig::new(AddressBlock(203)));
        st.store
            .create(
                "/pods",
                "default",
                "a",
                json!({"metadata": {"name": "a", "namespace": "default", "labels": {"app": "web"}},
                    "spec": {"nodeName": "n"},
                    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
            )
            .unwrap();
        st.store
            .create(
                PDBS,
                "default",
                "web",
                json!({"metadata": {"name": "web", "namespace": "default", "generation": 1},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
                    "status": pdb_status}),
            )
            .unwrap();
        st
    }

    #[test]
    fn unobserved_budget_asks_to_retry_after_ten_seconds() {
        let st = state_with(json!({"disruptionsAllowed": 1}));
        let e = evict(&st, "default", "a", &Query::new(), b"").unwrap_err();
        assert_eq!((e.code, &*e.reason), (429, "TooManyRequests"));
        assert_eq!(
            e.message,
            "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web is still being processed by the server."
        );
        let resp = e.into_response();
        assert_eq!(resp.headers()["retry-after"], "10");
        assert!(st.store.get("/pods", "default", "a").is_some(), "the pod stays");
    }

    #[test]
    fn exhausted_budget_names_its_counts() {
        let st = state_with(
            json!({"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1}),
        );
        let e = evict(&st, "default", "a", &Query::new(), b"").unwrap_err();
        assert_eq!(e.message, VIOLATES_BUDGET);
        let d = e.details.unwrap();
        assert_eq!(d["causes"][0]["reason"], "DisruptionBudget");
        assert_eq!(
            d["causes"][0]["message"],
            "The disruption budget web needs 1 healthy pods and has 1 currently"
        );
        assert!(d.get("retryAfterSeconds").is_none());
    }
}
