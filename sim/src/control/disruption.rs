//! The disruption controller (upstream's `pkg/controller/disruption/disruption.go`): keeps each
//! PodDisruptionBudget's status — expectedPods, desiredHealthy, currentHealthy,
//! disruptionsAllowed, observedGeneration, the `DisruptionAllowed` condition — in step with the
//! pods it selects, and confirms or expires the `disruptedPods` the eviction API recorded.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::error::Result;
use super::informer::{Informer, Requeue, Wake};
use super::plane::Ctx;
use super::util::{controller_of, is_ready, selector_matches};
use super::writes::patch_status;

/// How long an eviction's `disruptedPods` entry counts before the controller drops it
/// (upstream's `DeletionTimeout`).
const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// The caches the controller reads.
struct Caches {
    pdbs: Informer<PodDisruptionBudget>,
    pods: Informer<Pod>,
    replicasets: Informer<ReplicaSet>,
    deployments: Informer<Deployment>,
    rcs: Informer<ReplicationController>,
    statefulsets: Informer<StatefulSet>,
}

/// Runs the disruption controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let c = Caches {
        pdbs: ctx.informers.get(),
        pods: ctx.informers.get(),
        replicasets: ctx.informers.get(),
        deployments: ctx.informers.get(),
        rcs: ctx.informers.get(),
        statefulsets: ctx.informers.get(),
    };
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = async {
            c.pdbs.ready().await?;
            c.pods.ready().await?;
            c.replicasets.ready().await?;
            c.deployments.ready().await?;
            c.rcs.ready().await?;
            c.statefulsets.ready().await?;
            Ok::<_, super::error::Error>(())
        } => r?,
    }
    let receivers = vec![
        c.pdbs.subscribe(),
        c.pods.subscribe(),
        c.replicasets.subscribe(),
        c.deployments.subscribe(),
        c.rcs.subscribe(),
        c.statefulsets.subscribe(),
    ];
    let mut wake = Wake::new(receivers, ctx.cfg.resync);
    let mut requeue = Requeue::default();
    loop {
        for pdb in c.pdbs.list() {
            let ns = pdb.namespace().unwrap_or_default();
            let (status, recheck) = compute(&c, &pdb, ctx.now());
            if let Some(after) = recheck {
                requeue.after(after);
            }
            let current = serde_json::to_value(&pdb.status).unwrap_or_default();
            if same_status(&current, &status) {
                continue;
            }
            let api: Api<PodDisruptionBudget> = Api::namespaced(ctx.client.clone(), &ns);
            let name = pdb.name_any();
            let patch = with_removals(&current, status);
            if let Err(e) = patch_status(&api, &name, patch, || format!("poddisruptionbudget {ns}/{name}")).await {
                tracing::warn!(pdb = %name, namespace = %ns, error = %super::error::chain(&e), "failed to update the disruption budget status");
                requeue.after(Duration::from_secs(1));
            }
        }
        if !wake.next(requeue.take(), &ctx.cancel).await {
            return Ok(());
        }
    }
}

/// Whether two statuses differ only in the condition's transition time.
fn same_status(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        for c in v
            .pointer_mut("/conditions")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(m) = c.as_object_mut() {
                m.remove("lastTransitionTime");
            }
        }
        v
    };
    strip(a) == strip(b)
}

/// A merge patch of `status` that also removes `disruptedPods` entries no longer there.
fn with_removals(current: &Value, mut status: Value) -> Value {
    if let Some(old) = current.get("disruptedPods").and_then(Value::as_object) {
        let new = status["disruptedPods"].as_object().cloned().unwrap_or_default();
        let mut patch = serde_json::Map::new();
        for k in old.keys().filter(|k| !new.contains_key(*k)) {
            patch.insert(k.clone(), Value::Null);
        }
        patch.extend(new);
        status["disruptedPods"] = Value::Object(patch);
    }
    status
}

/// The budget's status from the pods it selects; the second value asks for a later pass when a
/// `disruptedPods` entry will expire.
fn compute(c: &Caches, pdb: &PodDisruptionBudget, now: jiff::Timestamp) -> (Value, Option<Duration>) {
    let ns = pdb.namespace().unwrap_or_default();
    let spec = pdb.spec.clone().unwrap_or_default();
    let generation = pdb.metadata.generation.unwrap_or(0);
    // A budget without a selector selects nothing (policy/v1).
    let pods: Vec<_> = match &spec.selector {
        None => Vec::new(),
        Some(sel) => c
            .pods
            .in_namespace(&ns)
            .into_iter()
            .filter(|p| selector_matches(Some(sel), p.metadata.labels.as_ref()))
            .collect(),
    };
    let old = pdb.status.clone().unwrap_or_default();
    let old_conditions = old.conditions.clone().unwrap_or_default();
    let counts = expected_and_desired(c, &spec, &pods);
    let (expected, desired) = match counts {
        Ok(v) => v,
        Err(why) => {
            // upstream's failSafe: nothing may be disrupted while the budget cannot be computed.
            let mut status = json!({
                "observedGeneration": old.observed_generation.unwrap_or(0),
                "disruptionsAllowed": 0,
                "currentHealthy": old.current_healthy,
                "desiredHealthy": old.desired_healthy,
                "expectedPods": old.expected_pods,
            });
            status["conditions"] = condition(&old_conditions, generation, "False", "SyncFailed", &why);
            return (status, None);
        }
    };
    // disruptedPods: an entry stays until its pod is gone or deleting, or the timeout passes.
    let mut disrupted = BTreeMap::new();
    let mut recheck = None;
    for (pod, at) in old.disrupted_pods.clone().unwrap_or_default() {
        let alive = pods
            .iter()
            .any(|p| p.name_any() == pod && p.metadata.deletion_timestamp.is_none());
        let Ok(at) = at.0.to_string().parse::<jiff::Timestamp>() else {
            continue;
        };
        let age = now.duration_since(at).unsigned_abs();
        if alive && age < DELETION_TIMEOUT {
            disrupted.insert(pod, json!(at.to_string()));
            let left = DELETION_TIMEOUT - age;
            recheck = Some(recheck.map_or(left, |r: Duration| r.min(left)));
        }
    }
    let healthy = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p) && !disrupted.contains_key(&p.name_any()))
        .count() as i64;
    let allowed = (healthy - desired).max(0);
    let (cond_status, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let mut status = json!({
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
    });
    if !disrupted.is_empty() {
        status["disruptedPods"] = json!(disrupted);
    }
    status["conditions"] = condition(&old_conditions, generation, cond_status, reason, "");
    (status, recheck)
}

/// The conditions with `DisruptionAllowed` set, keeping its transition time when the status
/// did not change (`apimeta.SetStatusCondition`).
fn condition(
    old: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    generation: i64,
    status: &str,
    reason: &str,
    message: &str,
) -> Value {
    let mut out: Vec<Value> = old
        .iter()
        .filter(|c| c.type_ != "DisruptionAllowed")
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    let since = old
        .iter()
        .find(|c| c.type_ == "DisruptionAllowed" && c.status == status)
        .and_then(|c| serde_json::to_value(&c.last_transition_time).ok())
        .unwrap_or_else(|| json!(crate::api::meta::now()));
    out.push(
        json!({"type": "DisruptionAllowed", "status": status, "observedGeneration": generation,
        "lastTransitionTime": since, "reason": reason, "message": message}),
    );
    json!(out)
}

/// upstream's `getExpectedPodCount`: (expectedCount, desiredHealthy), or why it cannot be known.
fn expected_and_desired(
    c: &Caches,
    spec: &k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec,
    pods: &[std::sync::Arc<Pod>],
) -> std::result::Result<(i64, i64), String> {
    if let Some(max) = &spec.max_unavailable {
        let expected = expected_scale(c, pods)?;
        let max = scaled(max, expected)?;
        return Ok((expected, (expected - max).max(0)));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok((pods.len() as i64, i64::from(*n))),
        Some(p @ IntOrString::String(_)) => {
            let expected = expected_scale(c, pods)?;
            Ok((expected, scaled(p, expected)?))
        }
        None => Ok((pods.len() as i64, 0)),
    }
}

/// `intstr.GetScaledValueFromIntOrPercent(v, total, roundUp=true)`.
fn scaled(v: &IntOrString, total: i64) -> std::result::Result<i64, String> {
    match v {
        IntOrString::Int(n) => Ok(i64::from(*n)),
        IntOrString::String(s) => {
            let p: i64 = s
                .strip_suffix('%')
                .and_then(|d| d.parse().ok())
                .ok_or_else(|| "invalid value for IntOrString: invalid type: string is not a percentage".to_string())?;
            Ok((p * total + 99) / 100)
        }
    }
}

/// upstream's `getExpectedScale`: the sum of the replicas of every controller owning a selected
/// pod; a pod without a controller, or one whose controller has no scale, is an error.
fn expected_scale(c: &Caches, pods: &[std::sync::Arc<Pod>]) -> std::result::Result<i64, String> {
    let mut seen: BTreeMap<String, i64> = BTreeMap::new();
    for pod in pods {
        let ns = pod.namespace().unwrap_or_default();
        let Some(owner) = controller_of(&pod.metadata) else {
            return Err(format!("found no controller ref for pod {:?}", pod.name_any()));
        };
        if seen.contains_key(&owner.uid) {
            continue;
        }
        let replicas = match owner.kind.as_str() {
            "ReplicaSet" => {
                let rs = c
                    .replicasets
                    .get(Some(&ns), &owner.name)
                    .ok_or_else(|| missing(&owner.kind, &owner.name))?;
                // A Deployment's ReplicaSets count as the Deployment's scale.
                match controller_of(&rs.metadata).filter(|o| o.kind == "Deployment") {
                    Some(d) => {
                        if seen.contains_key(&d.uid) {
                            seen.insert(owner.uid.clone(), 0);
                            continue;
                        }
                        let dep = c
                            .deployments
                            .get(Some(&ns), &d.name)
                            .ok_or_else(|| missing("Deployment", &d.name))?;
                        seen.insert(d.uid.clone(), 0);
                        dep.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
                    }
                    None => rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                }
            }
            "ReplicationController" => c
                .rcs
                .get(Some(&ns), &owner.name)
                .ok_or_else(|| missing(&owner.kind, &owner.name))?
                .spec
                .as_ref()
                .and_then(|s| s.replicas)
                .unwrap_or(1),
            "StatefulSet" => c
                .statefulsets
                .get(Some(&ns), &owner.name)
                .ok_or_else(|| missing(&owner.kind, &owner.name))?
                .spec
                .as_ref()
                .and_then(|s| s.replicas)
                .unwrap_or(1),
            other => {
                return Err(format!(
                    "controller {other}/{} has no scale the disruption controller can read",
                    owner.name
                ));
            }
        };
        seen.insert(owner.uid.clone(), i64::from(replicas));
    }
    Ok(seen.values().sum())
}

fn missing(kind: &str, name: &str) -> String {
    format!("{kind} {name:?} not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_up() {
        assert_eq!(scaled(&IntOrString::String("50%".into()), 3), Ok(2));
        assert_eq!(scaled(&IntOrString::String("10%".into()), 10), Ok(1));
        assert_eq!(scaled(&IntOrString::Int(2), 10), Ok(2));
        assert!(scaled(&IntOrString::String("half".into()), 10).is_err());
    }

    #[test]
    fn removed_disrupted_pods_become_nulls() {
        let cur = json!({"disruptedPods": {"a": "t", "b": "t"}});
        let p = with_removals(&cur, json!({"disruptedPods": {"b": "t"}}));
        assert_eq!(p["disruptedPods"], json!({"a": null, "b": "t"}));
        assert!(same_status(
            &json!({"conditions": [{"type": "X", "lastTransitionTime": "1"}]}),
            &json!({"conditions": [{"type": "X", "lastTransitionTime": "2"}]})
        ));
    }
}
