//! The Deployment controller's answer to a scaling event (upstream
//! pkg/controller/deployment/sync.go `isScalingEvent` and `scale`, util/deployment_util.go
//! `GetReplicaSetProportion`): when `spec.replicas` changes while several ReplicaSets are
//! active (a rollout in progress or stuck), the change is spread over them in proportion to
//! their size, so the mix of old and new pods stays what it was.
//!
//! Everything here is pure: it reads ReplicaSets and returns the sizes to write; the controller
//! writes them (with the `desired-replicas` and `max-replicas` annotations).

use std::cmp::Reverse;

use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::ResourceExt;

/// The annotation recording the Deployment's `spec.replicas` a ReplicaSet was last sized for.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// The annotation recording `spec.replicas + maxSurge` a ReplicaSet was last sized for.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

fn replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    rs.annotations().get(key).and_then(|v| v.parse().ok())
}

/// Upstream `isScalingEvent`: an active ReplicaSet (one with replicas) was sized for another
/// `spec.replicas` than `want`.
pub fn is_scaling_event(want: i32, sets: &[&ReplicaSet]) -> bool {
    sets.iter()
        .filter(|rs| replicas(rs) > 0)
        .any(|rs| annotation(rs, DESIRED_REPLICAS).is_some_and(|d| d != want))
}

/// Upstream `IsSaturated`: the new ReplicaSet holds every replica, all available.
fn is_saturated(want: i32, new: Option<&ReplicaSet>) -> bool {
    new.is_some_and(|rs| {
        replicas(rs) == want
            && annotation(rs, DESIRED_REPLICAS) == Some(want)
            && rs.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0) == want
    })
}

/// Upstream `getReplicaSetFraction`: how many replicas `rs` gains (or loses) when the
/// Deployment's maximum goes to `max_now`.
fn fraction(rs: &ReplicaSet, want: i32, max_now: i32, status_replicas: i32) -> i32 {
    if want == 0 {
        return -replicas(rs);
    }
    let before = match annotation(rs, MAX_REPLICAS) {
        Some(m) if m != 0 => m,
        // No annotation: fall back to the Deployment's current size (scaled from zero).
        _ if status_replicas == 0 => return 0,
        _ => status_replicas,
    };
    let scaled = f64::from(replicas(rs)) * f64::from(max_now) / f64::from(before);
    // Go's math.Round: half away from zero, as f64::round.
    scaled.round() as i32 - replicas(rs)
}

/// The sizes upstream's `scale` gives the Deployment's ReplicaSets on a scaling event, as
/// `(name, replicas)` for every ReplicaSet it writes (unchanged sizes included: the write
/// refreshes the annotations). `old` in any order; `surge` is 0 for Recreate.
pub fn scaling_targets(
    want: i32,
    surge: i32,
    rolling: bool,
    status_replicas: i32,
    new: Option<&ReplicaSet>,
    old: &[ReplicaSet],
) -> Vec<(String, i32)> {
    let mut old_sorted: Vec<&ReplicaSet> = old.iter().collect();
    old_sorted.sort_by_key(|rs| (rs.metadata.creation_timestamp.clone(), rs.name_any()));
    let active: Vec<&ReplicaSet> = old_sorted
        .iter()
        .copied()
        .chain(new)
        .filter(|rs| replicas(rs) > 0)
        .collect();
    // One active ReplicaSet (or none: the newest) takes the whole count.
    let only = match active.len() {
        0 => new.or(old_sorted.last().copied()),
        1 => Some(active[0]),
        _ => None,
    };
    if active.len() <= 1 {
        return only.map(|rs| vec![(rs.name_any(), want)]).unwrap_or_default();
    }
    if is_saturated(want, new) {
        let new_name = new.map(ResourceExt::name_any);
        return active
            .iter()
            .filter(|rs| Some(rs.name_any()) != new_name)
            .map(|rs| (rs.name_any(), 0))
            .collect();
    }
    if !rolling {
        return Vec::new();
    }
    let total: i32 = active.iter().map(|rs| replicas(rs)).sum();
    let allowed = if want > 0 { want + surge } else { 0 };
    let to_add = allowed - total;
    let mut sorted = active;
    if to_add > 0 {
        // Larger first; between equals, newer first when scaling up.
        sorted.sort_by_key(|rs| {
            (
                Reverse(replicas(rs)),
                Reverse(rs.metadata.creation_timestamp.clone()),
                Reverse(rs.name_any()),
            )
        });
    } else {
        // Larger first; between equals, older first when scaling down.
        sorted.sort_by_key(|rs| {
            (
                Reverse(replicas(rs)),
                rs.metadata.creation_timestamp.clone(),
                rs.name_any(),
            )
        });
    }
    let mut added = 0;
    let mut sizes: Vec<(String, i32)> = Vec::new();
    for rs in &sorted {
        let proportion = if to_add == 0 || added == to_add {
            0
        } else {
            let f = fraction(rs, want, allowed, status_replicas);
            let left = to_add - added;
            if to_add > 0 { f.min(left) } else { f.max(left) }
        };
        added += proportion;
        sizes.push((rs.name_any(), replicas(rs) + proportion));
    }
    // Leftovers go to the largest.
    if to_add != 0
        && let Some(first) = sizes.first_mut()
    {
        first.1 = (first.1 + to_add - added).max(0);
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(name: &str, replicas: i32, max: i32, created: &str, available: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": created, "annotations": {
                DESIRED_REPLICAS: "10", MAX_REPLICAS: max.to_string()}},
            "spec": {"replicas": replicas, "selector": {}},
            "status": {"replicas": replicas, "availableReplicas": available}
        }))
        .unwrap()
    }

    #[test]
    fn upstream_proportional_example_10_to_30() {
        // deployment.go testProportionalScalingDeployment: 8 old + 5 new (stuck), maxSurge 3,
        // scaled from 10 to 30: 8 + 12 = 20 and 5 + 8 = 13.
        let first = rs("first", 8, 13, "2026-01-01T00:00:00Z", 8);
        let second = rs("second", 5, 13, "2026-01-01T00:01:00Z", 0);
        assert!(is_scaling_event(30, &[&first, &second]));
        assert!(!is_scaling_event(10, &[&first, &second]));
        let mut got = scaling_targets(30, 3, true, 13, Some(&second), std::slice::from_ref(&first));
        got.sort();
        assert_eq!(got, vec![("first".to_string(), 20), ("second".to_string(), 13)]);
    }

    #[test]
    fn scaling_down_takes_from_the_larger_and_never_below_zero() {
        let first = rs("first", 8, 13, "2026-01-01T00:00:00Z", 8);
        let second = rs("second", 5, 13, "2026-01-01T00:01:00Z", 0);
        // 10 -> 5 with maxSurge 3: allowed 8, remove 5 proportionally (8*8/13=5 -> -3, 5*8/13=3 -> -2).
        let mut got = scaling_targets(5, 3, true, 13, Some(&second), std::slice::from_ref(&first));
        got.sort();
        assert_eq!(got, vec![("first".to_string(), 5), ("second".to_string(), 3)]);
        // To zero: every active set goes to zero.
        let got = scaling_targets(0, 0, true, 13, Some(&second), std::slice::from_ref(&first));
        assert!(got.iter().all(|(_, n)| *n == 0), "{got:?}");
    }

    #[test]
    fn one_active_set_takes_everything_and_a_saturated_new_set_empties_the_old() {
        let only = rs("only", 3, 4, "2026-01-01T00:00:00Z", 3);
        let idle = rs("idle", 0, 4, "2025-01-01T00:00:00Z", 0);
        assert_eq!(
            scaling_targets(7, 2, true, 3, Some(&only), std::slice::from_ref(&idle)),
            vec![("only".to_string(), 7)]
        );
        let new = rs("new", 10, 13, "2026-01-01T00:01:00Z", 10);
        let old = rs("old", 2, 13, "2026-01-01T00:00:00Z", 2);
        assert_eq!(
            scaling_targets(10, 3, true, 12, Some(&new), std::slice::from_ref(&old)),
            vec![("old".to_string(), 0)]
        );
        // Recreate: nothing proportional.
        let a = rs("a", 2, 2, "2026-01-01T00:00:00Z", 2);
        let b = rs("b", 2, 2, "2026-01-01T00:01:00Z", 0);
        assert!(scaling_targets(6, 0, false, 4, Some(&b), std::slice::from_ref(&a)).is_empty());
    }
}
