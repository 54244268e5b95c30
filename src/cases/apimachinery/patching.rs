//! Adapted cases: `[sig-api-machinery] AdmissionWebhook` "patching/updating a validating
//! webhook should work" and its mutating twin (test/e2e/apimachinery/webhook.go): a
//! configuration's rules, changed by update and then by JSON patch, decide at once which
//! requests its webhook sees.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::fmt::Debug;

use super::webhook::{refusal, with_server};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::webhook::core_rule;
use crate::framework::workloads::config_map;
use crate::framework::{CaseError, CaseResult, Framework};

/// Upstream webhook.go "patching/updating a validating webhook should work".
pub(crate) const PATCH_VALIDATING: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    patching/updating a validating webhook should work [Conformance]";
/// Upstream webhook.go "patching/updating a mutating webhook should work".
pub(crate) const PATCH_MUTATING: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    patching/updating a mutating webhook should work [Conformance]";

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    vec![
        case!(PATCH_VALIDATING, Kind::Adapted, patch_validating),
        case!(PATCH_MUTATING, Kind::Adapted, patch_mutating),
    ]
}

/// How long a configuration change may take to be used: upstream polls for 30 s.
const CHANGE_WITHIN: Duration = Duration::from_secs(30);

/// Creates ConfigMaps `<prefix>-<n>` with `data` once a second (deleting each one admitted)
/// until `holds` accepts the API's answer, for at most 30 s.
///
/// # Errors
/// "`what` within 30s" with the last answer seen.
async fn until_answer(
    f: &Framework,
    prefix: &str,
    data: &[(&str, &str)],
    what: &str,
    holds: impl Fn(&Result<ConfigMap, kube::Error>) -> bool,
) -> CaseResult {
    let api = f.api::<ConfigMap>();
    let deadline = Instant::now() + CHANGE_WITHIN.min(f.remaining());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last = String::new();
    for n in 0.. {
        tick.tick().await;
        let name = format!("{prefix}-{n}");
        let answer = api.create(&PostParams::default(), &config_map(&name, data)).await;
        let done = holds(&answer);
        match &answer {
            Ok(cm) => {
                last = format!("ConfigMap {name} admitted with data {:?}", cm.data);
                api.delete(&name, &DeleteParams::default()).await?;
            }
            Err(e) => last = format!("ConfigMap {name} refused: {}", refusal(e)),
        }
        if done {
            return Ok(());
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    Err(CaseError::failed(format!(
        "{what} within {CHANGE_WITHIN:?}; last: {last}"
    )))
}

/// Whether the answer is a webhook's denial.
fn denied(answer: &Result<ConfigMap, kube::Error>) -> bool {
    matches!(answer, Err(e) if refusal(e).contains("denied"))
}

/// Whether the answer is a ConfigMap the stage-1 webhook mutated.
fn mutated(answer: &Result<ConfigMap, kube::Error>) -> bool {
    matches!(answer, Ok(cm) if cm.data.as_ref().is_some_and(|d| d.contains_key("mutation-stage-1")))
}

/// Sets the operations of the first rule of the first webhook of `name` to UPDATE with a
/// read-modify-write, then back to CREATE with a JSON patch; `after_update` and `after_patch`
/// check the effect of each.
async fn update_then_patch<K>(
    f: &Framework,
    name: &str,
    rules_of: fn(&mut K) -> Option<&mut Vec<String>>,
    after_update: impl AsyncFnOnce() -> CaseResult,
    after_patch: impl AsyncFnOnce() -> CaseResult,
) -> CaseResult
where
    K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
{
    let kind = K::kind(&());
    let api: Api<K> = Api::all(f.client());
    f.step(format!(
        "updating {kind} {name}'s rules to leave out the create operation"
    ));
    let mut cfg = api.get(name).await?;
    let Some(ops) = rules_of(&mut cfg) else {
        return Err(CaseError::failed(format!(
            "{kind} {name} was stored without rules on its first webhook"
        )));
    };
    *ops = vec!["UPDATE".into()];
    api.replace(name, &PostParams::default(), &cfg).await?;
    after_update().await?;
    f.step(format!(
        "patching {kind} {name}'s rules to include the create operation"
    ));
    // A JSON patch, as upstream sends; kube's typed JSON patch needs a feature this crate omits.
    let patch = json!([{"op": "replace", "path": "/webhooks/0/rules/0/operations", "value": ["CREATE"]}]);
    let url = format!("{}/{name}", K::url_path(&(), None));
    let request = http::Request::patch(url)
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .body(patch.to_string().into_bytes())
        .map_err(|e| CaseError::failed(format!("building the JSON patch of {kind} {name}: {e}")))?;
    f.client().request::<K>(request).await?;
    after_patch().await
}

/// The operations of the first rule of the first webhook.
fn validating_ops(c: &mut ValidatingWebhookConfiguration) -> Option<&mut Vec<String>> {
    c.webhooks
        .as_mut()?
        .first_mut()?
        .rules
        .as_mut()?
        .first_mut()?
        .operations
        .as_mut()
}

/// The operations of the first rule of the first webhook.
fn mutating_ops(c: &mut MutatingWebhookConfiguration) -> Option<&mut Vec<String>> {
    c.webhooks
        .as_mut()?
        .first_mut()?
        .rules
        .as_mut()?
        .first_mut()?
        .operations
        .as_mut()
}

/// Upstream webhook.go `It("patching/updating a validating webhook should work")`: a webhook
/// denying disallowed ConfigMaps on create stops denying them once an update leaves create out
/// of its rules, and denies them again once a JSON patch puts it back.
pub(crate) async fn patch_validating(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let hook = s.validating(
            "deny-unwanted-configmap-data.k8s.io",
            "/configmaps",
            vec![core_rule(&["CREATE"], &["configmaps"])],
        );
        let cfg = s.register_validating(f, "patch-validating", vec![hook]).await?;
        let bad = [("webhook-e2e-test", "webhook-disallow")];
        let name = cfg.metadata.name.clone().unwrap_or_default();
        until_answer(f, "before", &bad, "the disallowed ConfigMap was not denied", denied).await?;
        update_then_patch(
            f,
            &name,
            validating_ops,
            async || {
                until_answer(
                    f,
                    "updated",
                    &bad,
                    "the disallowed ConfigMap was still denied after the update left out CREATE",
                    |a| a.is_ok(),
                )
                .await
            },
            async || {
                until_answer(
                    f,
                    "patched",
                    &bad,
                    "the disallowed ConfigMap was not denied after the patch put back CREATE",
                    denied,
                )
                .await
            },
        )
        .await
    })
    .await
}

/// Upstream webhook.go `It("patching/updating a mutating webhook should work")`: as the
/// validating case, with a webhook that mutates ConfigMaps on create.
pub(crate) async fn patch_mutating(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let hook = s.mutating(
            "adding-configmap-data-stage-1.k8s.io",
            "/mutating-configmaps",
            vec![core_rule(&["CREATE"], &["configmaps"])],
        );
        let cfg = s.register_mutating(f, "patch-mutating", vec![hook]).await?;
        let sent = [("mutation-start", "yes")];
        let name = cfg.metadata.name.clone().unwrap_or_default();
        until_answer(f, "before", &sent, "the ConfigMap was not mutated", mutated).await?;
        update_then_patch(
            f,
            &name,
            mutating_ops,
            async || {
                until_answer(
                    f,
                    "updated",
                    &sent,
                    "the ConfigMap was still mutated after the update left out CREATE",
                    |a| a.is_ok() && !mutated(a),
                )
                .await
            },
            async || {
                until_answer(
                    f,
                    "patched",
                    &sent,
                    "the ConfigMap was not mutated after the patch put back CREATE",
                    mutated,
                )
                .await
            },
        )
        .await
    })
    .await
}
