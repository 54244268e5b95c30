//! The clusterrole-aggregation controller: a ClusterRole with an `aggregationRule` gets, as
//! its rules, the union of the rules of every other ClusterRole its selectors match (how
//! `admin`, `edit` and `view` are built from the `system:aggregate-to-*` roles and from any
//! role a user labels `rbac.authorization.k8s.io/aggregate-to-view: "true"`).
//!
//! As upstream's: selectors in order, matching roles sorted by name, each rule added once.

use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{ApiContext, Result, is_not_found};
use super::informer::{Requeue, Wake};
use super::plane::Ctx;
use super::util::selector_matches;

/// Runs the controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let roles = ctx.informers.get::<ClusterRole>();
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = roles.ready() => r?,
    }
    let mut wake = Wake::new(vec![roles.subscribe()], ctx.cfg.resync);
    let mut requeue = Requeue::default();
    loop {
        let all = roles.list();
        for role in all.iter().filter(|r| r.aggregation_rule.is_some()) {
            let want = aggregate(role, &all);
            if role.rules.as_deref().unwrap_or_default() == want.as_slice() {
                continue;
            }
            if let Err(e) = write_rules(&ctx, &role.name_any(), &want).await {
                tracing::warn!(clusterrole = %role.name_any(), error = %super::error::chain(&e), "failed to aggregate the cluster role");
                requeue.after(Duration::from_secs(1));
            }
        }
        if !wake.next(requeue.take(), &ctx.cancel).await {
            return Ok(());
        }
    }
}

/// The rules `role`'s aggregation rule selects from `all`.
fn aggregate(role: &ClusterRole, all: &[std::sync::Arc<ClusterRole>]) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    let selectors = role
        .aggregation_rule
        .as_ref()
        .and_then(|a| a.cluster_role_selectors.as_ref());
    for selector in selectors.into_iter().flatten() {
        let mut matched: Vec<&ClusterRole> = all
            .iter()
            .map(|r| r.as_ref())
            .filter(|r| r.name_any() != role.name_any())
            .filter(|r| selector_matches(Some(selector), r.metadata.labels.as_ref()))
            .collect();
        matched.sort_by_key(|r| r.name_any());
        for r in matched {
            for rule in r.rules.iter().flatten() {
                if !out.contains(rule) {
                    out.push(rule.clone());
                }
            }
        }
    }
    out
}

async fn write_rules(ctx: &Ctx, name: &str, rules: &[PolicyRule]) -> Result<()> {
    let api: Api<ClusterRole> = Api::all(ctx.client.clone());
    // A merge patch replaces the whole list, as upstream's apply of `rules` does.
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(json!({"rules": rules})))
        .await
    {
        Ok(_) => {
            tracing::debug!(clusterrole = %name, rules = rules.len(), "aggregated cluster role");
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e).ctx("patch", || format!("clusterrole {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::AggregationRule;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn role(name: &str, label: Option<&str>, verbs: &[&str]) -> Arc<ClusterRole> {
        Arc::new(ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: label.map(|l| BTreeMap::from([(l.to_string(), "true".to_string())])),
                ..ObjectMeta::default()
            },
            rules: Some(vec![PolicyRule {
                verbs: verbs.iter().map(|v| v.to_string()).collect(),
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["pods".into()]),
                ..PolicyRule::default()
            }]),
            aggregation_rule: None,
        })
    }

    #[test]
    fn unions_matching_roles_by_name_once_each() {
        let view = ClusterRole {
            metadata: ObjectMeta {
                name: Some("view".into()),
                ..ObjectMeta::default()
            },
            aggregation_rule: Some(AggregationRule {
                cluster_role_selectors: Some(vec![LabelSelector {
                    match_labels: Some(BTreeMap::from([("agg".to_string(), "true".to_string())])),
                    ..LabelSelector::default()
                }]),
            }),
            rules: None,
        };
        let all = vec![
            role("b", Some("agg"), &["list"]),
            role("a", Some("agg"), &["get"]),
            role("c", Some("agg"), &["get"]),
            role("d", None, &["delete"]),
        ];
        let rules = aggregate(&view, &all);
        let verbs: Vec<_> = rules.iter().map(|r| r.verbs[0].as_str()).collect();
        assert_eq!(verbs, ["get", "list"]);
    }
}
