//! The conditions the namespace controller keeps on a terminating namespace's status, as
//! upstream's `namespaceConditionUpdater` (pkg/controller/namespace/deletion): five types, each
//! either the failure this pass saw (status True, with what remains or failed) or its "ok"
//! variant (status False). `kubectl describe namespace` and people staring at a namespace stuck
//! in Terminating read these to learn why.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{NamespaceCondition, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The types the controller maintains, in upstream's order, with their ok reason and message.
const TYPES: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
];

/// What one deletion pass saw, to be turned into conditions.
#[derive(Debug, Default)]
pub(crate) struct PassFindings {
    /// How many group versions failed discovery, and client-go's text for it.
    pub(crate) discovery_failure: Option<(usize, String)>,
    /// Errors listing or deleting content.
    pub(crate) content_errors: Vec<String>,
    /// Objects still present per resource (`pods.` for the core group, `flunders.wardle.example.com`).
    pub(crate) remaining: BTreeMap<String, usize>,
    /// Objects still present per finalizer they carry.
    pub(crate) finalizers: BTreeMap<String, usize>,
}

impl PassFindings {
    /// Counts an object still present after this pass's delete.
    pub(crate) fn still_there(&mut self, resource: &str, group: &str, finalizers: &[String]) {
        *self.remaining.entry(format!("{resource}.{group}")).or_default() += 1;
        for f in finalizers {
            *self.finalizers.entry(f.clone()).or_default() += 1;
        }
    }

    /// The failure conditions (status True) this pass found, by type.
    fn failures(&self) -> BTreeMap<&'static str, (&'static str, String)> {
        let mut out = BTreeMap::new();
        if let Some((failing, why)) = &self.discovery_failure {
            out.insert(
                "NamespaceDeletionDiscoveryFailure",
                (
                    "DiscoveryFailed",
                    format!("Discovery failed for some groups, {failing} failing: {why}"),
                ),
            );
        }
        if !self.content_errors.is_empty() {
            let mut msgs = self.content_errors.clone();
            msgs.sort();
            out.insert(
                "NamespaceDeletionContentFailure",
                (
                    "ContentDeletionFailed",
                    format!(
                        "Failed to delete all resource types, {} remaining: {}",
                        msgs.len(),
                        msgs.join(", ")
                    ),
                ),
            );
        }
        if !self.remaining.is_empty() {
            // BTreeMap order is upstream's sort of the rendered strings up to the count.
            let parts: Vec<String> = self
                .remaining
                .iter()
                .map(|(r, n)| format!("{r} has {n} resource instances"))
                .collect();
            out.insert(
                "NamespaceContentRemaining",
                (
                    "SomeResourcesRemain",
                    format!("Some resources are remaining: {}", parts.join(", ")),
                ),
            );
        }
        if !self.finalizers.is_empty() {
            let parts: Vec<String> = self
                .finalizers
                .iter()
                .map(|(f, n)| format!("{f} in {n} resource instances"))
                .collect();
            out.insert(
                "NamespaceFinalizersRemaining",
                (
                    "SomeFinalizerRemain",
                    format!("Some finalizers are remaining: {}", parts.join(", ")),
                ),
            );
        }
        out
    }
}

/// Upstream's `updateConditions`: sets each maintained type on `status` from `findings`,
/// keeping lastTransitionTime unless the status flips; whether anything changed.
pub(crate) fn update(status: &mut NamespaceStatus, findings: &PassFindings, now: Timestamp) -> bool {
    let failures = findings.failures();
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let mut changed = false;
    for (type_, ok_reason, ok_message) in TYPES {
        let (want_status, reason, message) = match failures.get(type_) {
            Some((reason, message)) => ("True", (*reason).to_string(), message.clone()),
            None => ("False", ok_reason.to_string(), ok_message.to_string()),
        };
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            None => {
                conditions.push(NamespaceCondition {
                    type_: type_.into(),
                    status: want_status.into(),
                    last_transition_time: Some(Time(now)),
                    reason: Some(reason),
                    message: Some(message),
                });
                changed = true;
            }
            Some(c) => {
                if c.status != want_status
                    || c.reason.as_deref() != Some(reason.as_str())
                    || c.message.as_deref() != Some(message.as_str())
                {
                    if c.status != want_status {
                        c.last_transition_time = Some(Time(now));
                    }
                    c.status = want_status.into();
                    c.reason = Some(reason);
                    c.message = Some(message);
                    changed = true;
                }
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_pass_sets_the_five_ok_conditions_once() {
        let mut status = NamespaceStatus::default();
        let t0 = Timestamp::from_second(1_000).unwrap();
        assert!(update(&mut status, &PassFindings::default(), t0));
        let c = status.conditions.as_ref().unwrap();
        assert_eq!(c.len(), 5);
        assert!(c.iter().all(|c| c.status == "False"));
        assert_eq!(c[0].reason.as_deref(), Some("ResourcesDiscovered"));
        assert!(!update(&mut status, &PassFindings::default(), t0));
    }

    #[test]
    fn failures_read_as_upstreams_and_transitions_move_the_time() {
        let mut status = NamespaceStatus::default();
        let t0 = Timestamp::from_second(1_000).unwrap();
        let t1 = Timestamp::from_second(2_000).unwrap();
        update(&mut status, &PassFindings::default(), t0);
        let mut f = PassFindings {
            discovery_failure: Some((
                1,
                "unable to retrieve the complete list of server APIs: wardle.example.com/v1alpha1: down".into(),
            )),
            ..Default::default()
        };
        f.still_there("pods", "", &[]);
        f.still_there("persistentvolumeclaims", "", &["kubernetes.io/pvc-protection".into()]);
        f.still_there("pods", "", &[]);
        assert!(update(&mut status, &f, t1));
        let get = |t: &str| {
            status
                .conditions
                .as_ref()
                .unwrap()
                .iter()
                .find(|c| c.type_ == t)
                .unwrap()
                .clone()
        };
        let d = get("NamespaceDeletionDiscoveryFailure");
        assert_eq!(d.status, "True");
        assert_eq!(d.reason.as_deref(), Some("DiscoveryFailed"));
        assert_eq!(
            d.message.as_deref(),
            Some(
                "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: \
                 wardle.example.com/v1alpha1: down"
            )
        );
        assert_eq!(d.last_transition_time, Some(Time(t1)));
        assert_eq!(
            get("NamespaceContentRemaining").message.as_deref(),
            Some(
                "Some resources are remaining: persistentvolumeclaims. has 1 resource instances, pods. has 2 resource instances"
            )
        );
        assert_eq!(
            get("NamespaceFinalizersRemaining").message.as_deref(),
            Some("Some finalizers are remaining: kubernetes.io/pvc-protection in 1 resource instances")
        );
        // Unchanged status keeps its transition time.
        assert_eq!(
            get("NamespaceDeletionGroupVersionParsingFailure").last_transition_time,
            Some(Time(t0))
        );
    }
}
