//! Helpers the controllers share: pod state, label selectors, owner references, templates.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::Resource;

/// A pod's phase, `Pending` when unset.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Whether the pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// When the pod last became Ready, if it is.
pub fn ready_since(pod: &Pod) -> Option<jiff::Timestamp> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready" && c.status == "True"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// Whether the pod has been Ready for `min_ready_seconds` at `now` (upstream's "available").
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: jiff::Timestamp) -> bool {
    if !is_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    ready_since(pod).is_some_and(|t| now.duration_since(t).as_secs() >= i64::from(min_ready_seconds))
}

/// Whether the pod counts as an active replica: not terminal and not being deleted.
pub fn is_active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase(pod), "Succeeded" | "Failed")
}

/// The owner reference marked `controller: true`, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// Whether `meta` is controlled by the object with `uid`.
pub fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    controller_of(meta).is_some_and(|o| o.uid == uid)
}

/// The controller reference a controller puts on what it creates.
pub fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.meta().name.clone().unwrap_or_default(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `labels` satisfy the selector. An empty selector matches everything, a missing one
/// nothing (upstream's rule for workload selectors).
pub fn selector_matches(selector: Option<&LabelSelector>, labels: Option<&BTreeMap<String, String>>) -> bool {
    let Some(sel) = selector else { return false };
    let get = |k: &str| labels.and_then(|l| l.get(k));
    let labels_ok = sel.match_labels.iter().flatten().all(|(k, v)| get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => get(&e.key).is_some(),
            "DoesNotExist" => get(&e.key).is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// Renders a selector as a label-selector string (`a=b,c in (d)`), for status.selector.
pub fn selector_string(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    parts.join(",")
}

/// A pod built from a template, owned by `owner`, in `namespace`.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    owner: OwnerReference,
    name: Option<String>,
    generate_name: Option<String>,
) -> Pod {
    let tm = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            name,
            generate_name,
            namespace: Some(namespace.to_owned()),
            labels: tm.labels,
            annotations: tm.annotations,
            finalizers: tm.finalizers,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// The `generateName` prefix for pods of `owner`: `<owner>-`, shortened as upstream does so
/// generated names stay within 63 characters.
pub fn generate_name_prefix(owner: &str) -> String {
    let mut p = format!("{owner}-");
    if p.len() > 58 {
        p.truncate(57);
        p.push('-');
    }
    p
}

/// FNV-1a over bytes, the hash upstream uses for pod-template-hash and controller revisions.
pub fn fnv32a(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in data {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Upstream's `rand.SafeEncodeString`: maps each character to one of an alphabet without
/// vowels or confusable characters, so hashes never spell words.
pub fn safe_encode(s: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// A stable short hash of a pod template (plus a collision count), as `pod-template-hash` and
/// `controller-revision-hash` values.
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut bytes = serde_json::to_vec(template).unwrap_or_default();
    if let Some(c) = collision_count {
        bytes.extend_from_slice(c.to_string().as_bytes());
    }
    safe_encode(&fnv32a(&bytes).to_string())
}

/// Sets (or replaces) the condition of `type_` in a list of conditions, keeping the
/// transition time when the status did not change. Returns whether anything changed.
pub fn set_condition<C, F>(conditions: &mut Vec<C>, new: C, type_of: F) -> bool
where
    C: PartialEq + Clone + ConditionLike,
    F: Fn(&C) -> &str,
{
    match conditions.iter_mut().find(|c| type_of(c) == type_of(&new)) {
        Some(old) => {
            let mut new = new;
            if old.status() == new.status() {
                new.keep_transition_from(old);
                if old.same_content(&new) {
                    return false;
                }
            }
            *old = new;
            true
        }
        None => {
            conditions.push(new);
            true
        }
    }
}

/// What [`set_condition`] needs to know of a condition type.
pub trait ConditionLike {
    /// The condition's status string.
    fn status(&self) -> &str;
    /// Copies the last transition time from `old` (the status did not change).
    fn keep_transition_from(&mut self, old: &Self);
    /// Whether the two conditions differ only in heartbeat-like timestamps.
    fn same_content(&self, other: &Self) -> bool;
}

macro_rules! condition_like {
    ($t:ty) => {
        impl ConditionLike for $t {
            fn status(&self) -> &str {
                &self.status
            }
            fn keep_transition_from(&mut self, old: &Self) {
                self.last_transition_time = old.last_transition_time.clone();
            }
            fn same_content(&self, other: &Self) -> bool {
                self.status == other.status && self.reason == other.reason && self.message == other.message
            }
        }
    };
}

condition_like!(k8s_openapi::api::apps::v1::DeploymentCondition);
condition_like!(k8s_openapi::api::batch::v1::JobCondition);
condition_like!(k8s_openapi::api::core::v1::PodCondition);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_match_labels_and_expressions() {
        let sel: LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                 {"key": "old", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        let l = |v: serde_json::Value| serde_json::from_value::<BTreeMap<String, String>>(v).unwrap();
        assert!(selector_matches(
            Some(&sel),
            Some(&l(json!({"app": "web", "tier": "a"})))
        ));
        assert!(!selector_matches(
            Some(&sel),
            Some(&l(json!({"app": "web", "tier": "c"})))
        ));
        assert!(!selector_matches(
            Some(&sel),
            Some(&l(json!({"app": "web", "tier": "a", "old": "1"})))
        ));
        assert!(selector_matches(Some(&LabelSelector::default()), None));
        assert!(!selector_matches(None, Some(&l(json!({"app": "web"})))));
        assert_eq!(selector_string(&sel), "app=web,tier in (a,b),!old");
    }

    #[test]
    fn template_hash_is_stable_and_safe() {
        let t: PodTemplateSpec = serde_json::from_value(json!({"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}))
        .unwrap();
        let h = template_hash(&t, None);
        assert_eq!(h, template_hash(&t, None));
        assert_ne!(h, template_hash(&t, Some(1)));
        assert!(h.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)), "{h}");
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
    }

    #[test]
    fn generate_name_prefix_is_capped() {
        assert_eq!(generate_name_prefix("web"), "web-");
        assert_eq!(generate_name_prefix(&"x".repeat(80)).len(), 58);
    }
}
