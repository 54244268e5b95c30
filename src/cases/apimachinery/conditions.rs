//! Adapted cases: `[sig-api-machinery] AdmissionWebhook` cases on webhooks' `matchConditions`
//! (test/e2e/apimachinery/webhook.go): stored and updated as sent, refused when their CEL does
//! not compile, and deciding which objects a webhook sees.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

use super::webhook::{expect_data, with_server};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::webhook::{WebhookServer, core_rule};
use crate::framework::workloads::config_map;
use crate::framework::{CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream webhook.go "should be able to create and update validating webhook configurations
/// with match conditions".
pub(crate) const VALIDATING_MATCH_CONDITIONS: &str = "[sig-api-machinery] AdmissionWebhook \
    [Privileged:ClusterAdmin] should be able to create and update validating webhook configurations with \
    match conditions [Conformance]";
/// Upstream webhook.go "should be able to create and update mutating webhook configurations
/// with match conditions".
pub(crate) const MUTATING_MATCH_CONDITIONS: &str = "[sig-api-machinery] AdmissionWebhook \
    [Privileged:ClusterAdmin] should be able to create and update mutating webhook configurations with \
    match conditions [Conformance]";
/// Upstream webhook.go "should reject validating webhook configurations with invalid match
/// conditions".
pub(crate) const VALIDATING_INVALID_CONDITIONS: &str = "[sig-api-machinery] AdmissionWebhook \
    [Privileged:ClusterAdmin] should reject validating webhook configurations with invalid match conditions \
    [Conformance]";
/// Upstream webhook.go "should reject mutating webhook configurations with invalid match
/// conditions".
pub(crate) const MUTATING_INVALID_CONDITIONS: &str = "[sig-api-machinery] AdmissionWebhook \
    [Privileged:ClusterAdmin] should reject mutating webhook configurations with invalid match conditions \
    [Conformance]";
/// Upstream webhook.go "should mutate everything except 'skip-me' configmaps".
pub(crate) const SKIP_ME: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    should mutate everything except 'skip-me' configmaps [Conformance]";

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    vec![
        case!(VALIDATING_MATCH_CONDITIONS, Kind::Adapted, validating_match_conditions),
        case!(MUTATING_MATCH_CONDITIONS, Kind::Adapted, mutating_match_conditions),
        case!(
            VALIDATING_INVALID_CONDITIONS,
            Kind::Adapted,
            validating_invalid_conditions
        ),
        case!(MUTATING_INVALID_CONDITIONS, Kind::Adapted, mutating_invalid_conditions),
        case!(SKIP_ME, Kind::Adapted, skip_me),
    ]
}

/// A condition upstream's match-condition cases use.
fn condition(name: &str, expression: &str) -> MatchCondition {
    MatchCondition {
        name: name.into(),
        expression: expression.into(),
    }
}

/// Upstream's `initalMatchConditions`.
fn initial() -> Vec<MatchCondition> {
    vec![condition("expression-1", "object.metadata.namespace == 'production'")]
}

/// Upstream's `updatedMatchConditions`.
fn updated() -> Vec<MatchCondition> {
    vec![
        condition("expression-1", "object.metadata.namespace == 'production'"),
        condition("expression-2", "object.metadata.namespace == 'staging'"),
    ]
}

/// Upstream's invalid condition: CEL that does not parse.
fn invalid() -> Vec<MatchCondition> {
    vec![condition("invalid-expression-1", "... [] bad expression")]
}

/// Upstream's `newValidatingWebhookWithMatchConditions`: an `/always-deny` webhook on
/// ConfigMap creates with `conditions`, plus the marker.
fn validating_with(s: &WebhookServer, conditions: Vec<MatchCondition>) -> ValidatingWebhookConfiguration {
    let mut hook = s.validating(
        "validation-webhook-with-match-conditions.k8s.io",
        "/always-deny",
        vec![core_rule(&["CREATE"], &["configmaps"])],
    );
    hook.match_policy = Some("Equivalent".into());
    hook.match_conditions = Some(conditions);
    s.validating_config("match-conditions", vec![hook])
}

/// Upstream's `newMutatingWebhookWithMatchConditions`: a `/mutating-configmaps` webhook on
/// ConfigMap creates with `conditions`, plus the marker.
fn mutating_with(s: &WebhookServer, conditions: Vec<MatchCondition>) -> MutatingWebhookConfiguration {
    let mut hook = s.mutating(
        "adding-configmap-data.k8s.io",
        "/mutating-configmaps",
        vec![core_rule(&["CREATE"], &["configmaps"])],
    );
    hook.match_conditions = Some(conditions);
    s.mutating_config("match-conditions", vec![hook])
}

/// The first webhook's matchConditions.
fn first_validating(c: &mut ValidatingWebhookConfiguration) -> &mut Option<Vec<MatchCondition>> {
    &mut c.webhooks.get_or_insert_default()[0].match_conditions
}

/// The first webhook's matchConditions.
fn first_mutating(c: &mut MutatingWebhookConfiguration) -> &mut Option<Vec<MatchCondition>> {
    &mut c.webhooks.get_or_insert_default()[0].match_conditions
}

/// Creates `cfg`, checks the stored first webhook's conditions are `initial()`, replaces them
/// with `updated()` and checks the stored ones again; `conditions` reads them from an object.
async fn create_then_update<K>(
    f: &Framework,
    cfg: K,
    conditions: fn(&mut K) -> &mut Option<Vec<MatchCondition>>,
) -> CaseResult
where
    K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
{
    let kind = K::kind(&());
    let api: Api<K> = Api::all(f.client());
    f.step(format!("creating a {kind} with match conditions"));
    api.create(&PostParams::default(), &cfg).await?;
    let name = cfg.name_any();
    let mut stored = api.get(&name).await?;
    let seen = conditions(&mut stored).clone();
    ensure!(
        seen == Some(initial()),
        "{kind} {name} was stored with matchConditions {seen:?}, expected {:?}",
        initial()
    );
    f.step(format!("updating the {kind}'s match conditions"));
    *conditions(&mut stored) = Some(updated());
    api.replace(&name, &PostParams::default(), &stored).await?;
    let mut again = api.get(&name).await?;
    let seen = conditions(&mut again).clone();
    ensure!(
        seen == Some(updated()),
        "{kind} {name} was stored with matchConditions {seen:?} after the update, expected {:?}",
        updated()
    );
    Ok(())
}

/// Creates `cfg` and expects the API to refuse it with "compilation failed".
async fn expect_compilation_failed<K>(f: &Framework, cfg: K) -> CaseResult
where
    K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
{
    let kind = K::kind(&());
    let api: Api<K> = Api::all(f.client());
    f.step(format!("creating a {kind} with an invalid match condition"));
    match api.create(&PostParams::default(), &cfg).await {
        Ok(_) => fail!(
            "{kind} {} with matchCondition \"... [] bad expression\" was accepted; expected \"compilation failed\"",
            cfg.name_any()
        ),
        Err(e) => {
            let msg = super::webhook::refusal(&e);
            ensure!(
                msg.contains("compilation failed"),
                "creating {kind} {}: expected \"compilation failed\", got {msg:?}",
                cfg.name_any()
            );
            Ok(())
        }
    }
}

/// Upstream webhook.go `It("should be able to create and update validating webhook
/// configurations with match conditions")`: the API stores a validating webhook's
/// matchConditions as sent, on create and on update.
pub(crate) async fn validating_match_conditions(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        create_then_update(f, validating_with(&s, initial()), first_validating).await
    })
    .await
}

/// Upstream webhook.go `It("should be able to create and update mutating webhook
/// configurations with match conditions")`: as the validating case, for a mutating webhook.
pub(crate) async fn mutating_match_conditions(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        create_then_update(f, mutating_with(&s, initial()), first_mutating).await
    })
    .await
}

/// Upstream webhook.go `It("should reject validating webhook configurations with invalid match
/// conditions")`: a condition whose CEL does not compile is refused with "compilation failed".
pub(crate) async fn validating_invalid_conditions(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        expect_compilation_failed(f, validating_with(&s, invalid())).await
    })
    .await
}

/// Upstream webhook.go `It("should reject mutating webhook configurations with invalid match
/// conditions")`: as the validating case, for a mutating webhook.
pub(crate) async fn mutating_invalid_conditions(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        expect_compilation_failed(f, mutating_with(&s, invalid())).await
    })
    .await
}

/// Upstream webhook.go `It("should mutate everything except 'skip-me' configmaps")`: a mutating
/// webhook with the condition `object.metadata.name != 'skip-me'` mutates a ConfigMap with any
/// other name and leaves `skip-me` as sent.
pub(crate) async fn skip_me(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let mut hook = s.mutating(
            "adding-configmap-data-stage-1.k8s.io",
            "/mutating-configmaps",
            vec![core_rule(&["CREATE"], &["configmaps"])],
        );
        hook.match_conditions = Some(vec![condition("skip-me", "object.metadata.name != 'skip-me'")]);
        s.register_mutating(f, "skip-me", vec![hook]).await?;
        let cms = f.api::<ConfigMap>();
        let sent = [("mutation-start", "yes")];
        f.step("creating a ConfigMap with another name than skip-me");
        let mutated = cms
            .create(&PostParams::default(), &config_map("mutate-me", &sent))
            .await?;
        expect_data(&mutated, &[("mutation-start", "yes"), ("mutation-stage-1", "yes")])?;
        f.step("creating ConfigMap skip-me");
        let skipped = cms
            .create(&PostParams::default(), &config_map("skip-me", &sent))
            .await?;
        expect_data(&skipped, &sent)
    })
    .await
}
