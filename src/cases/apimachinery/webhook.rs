//! Adapted cases: `[sig-api-machinery] AdmissionWebhook` (test/e2e/apimachinery/webhook.go).
//!
//! Every case deploys upstream's webhook server ([`WebhookServer`]) in its namespace, registers
//! configurations scoped to that namespace and checks what the API server does with requests
//! the webhooks see; the configurations are deleted at the end whatever the outcome.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::webhook::{WebhookServer, core_rule};
use crate::framework::workloads::config_map;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};
use crate::{ensure, fail};

/// Upstream webhook.go "should be able to deny pod and configmap creation".
pub(crate) const DENY_POD_CONFIGMAP: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    should be able to deny pod and configmap creation [Conformance]";
/// Upstream webhook.go "should mutate configmap".
pub(crate) const MUTATE_CONFIGMAP: &str =
    "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should mutate configmap [Conformance]";
/// Upstream webhook.go "should unconditionally reject operations on fail closed webhook".
pub(crate) const FAIL_CLOSED: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    should unconditionally reject operations on fail closed webhook [Conformance]";
/// Upstream webhook.go "should honor timeout".
pub(crate) const HONOR_TIMEOUT: &str =
    "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should honor timeout [Conformance]";
/// Upstream webhook.go "listing validating webhooks should work".
pub(crate) const LIST_VALIDATING: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    listing validating webhooks should work [Conformance]";
/// Upstream webhook.go "listing mutating webhooks should work".
pub(crate) const LIST_MUTATING: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    listing mutating webhooks should work [Conformance]";
/// Upstream webhook.go "should mutate pod and apply defaults after mutation".
pub(crate) const MUTATE_POD: &str = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] \
    should mutate pod and apply defaults after mutation [Conformance]";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        case!(DENY_POD_CONFIGMAP, Kind::Adapted, deny_pod_configmap),
        case!(MUTATE_CONFIGMAP, Kind::Adapted, mutate_configmap),
        case!(FAIL_CLOSED, Kind::Adapted, fail_closed),
        case!(HONOR_TIMEOUT, Kind::Adapted, honor_timeout),
        case!(LIST_VALIDATING, Kind::Adapted, list_validating),
        case!(LIST_MUTATING, Kind::Adapted, list_mutating),
        case!(MUTATE_POD, Kind::Adapted, mutate_pod),
    ]
}

/// The label and value upstream's `/pods` and `/configmaps` handlers refuse.
const DISALLOW_KEY: &str = "webhook-e2e-test";
const DISALLOW_VALUE: &str = "webhook-disallow";
/// Upstream's `skipNamespaceLabelKey`/`Value`: a namespace the ConfigMap webhook skips.
const SKIP_KEY: &str = "skip-webhook-admission";
/// Upstream's `failNamespaceLabelKey`: the namespace the fail-closed webhook covers.
const FAIL_CLOSED_KEY: &str = "fail-closed-webhook";
/// The denial upstream's `/configmaps` handler gives a ConfigMap with the disallowed data.
const CONFIGMAP_DENIED: &str = "the configmap contains unwanted key and value";
/// Upstream's `testListSize`: configurations the listing cases create.
const LIST_SIZE: usize = 10;

/// Deploys the server, runs `checks` and deletes the case's configurations whatever happened;
/// the checks' failure wins over a cleanup failure.
pub(super) async fn with_server<'a, Fut>(f: &'a Framework, checks: impl FnOnce(WebhookServer) -> Fut) -> CaseResult
where
    Fut: Future<Output = CaseResult> + 'a,
{
    let server = f.deploy_webhook_server().await?;
    let result = checks(server.clone()).await;
    let cleaned = server.cleanup(f).await;
    result.and(cleaned)
}

/// The text of an API refusal (the Status message), or of any other error.
pub(super) fn refusal(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// Creates `obj` (a `what`) through `api` and expects a refusal containing every one of
/// `fragments`; returns the refusal.
///
/// A create that lost its connection (an API server restarting while the webhook was being
/// called) got no answer at all, so it is sent again (up to three times): a refusal is what is
/// checked, and an object admitted by the lost attempt shows up as AlreadyExists, which fails.
async fn expect_refused<K>(api: &Api<K>, obj: &K, what: &str, fragments: &[&str]) -> Result<String, CaseError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let mut answer = api.create(&PostParams::default(), obj).await;
    for _ in 0..3 {
        match &answer {
            Err(kube::Error::Api(_)) | Ok(_) => break,
            Err(_) => answer = api.create(&PostParams::default(), obj).await,
        }
    }
    match answer {
        Ok(_) => fail!(
            "{what} {} was admitted; expected the webhook to refuse it",
            obj.name_any()
        ),
        Err(e) => {
            let msg = refusal(&e);
            for want in fragments {
                ensure!(
                    msg.contains(want),
                    "creating {what} {}: expected an error containing {want:?}, got {msg:?}",
                    obj.name_any()
                );
            }
            Ok(msg)
        }
    }
}

/// The disallowed ConfigMap upstream's `nonCompliantConfigMap` builds.
fn non_compliant_config_map(name: &str) -> ConfigMap {
    config_map(name, &[(DISALLOW_KEY, DISALLOW_VALUE)])
}

/// Upstream's `failingWebhook`: a webhook on ConfigMap creates whose call cannot succeed (no
/// CA bundle, so the server's certificate is never trusted).
fn failing_hook(s: &WebhookServer, name: &str) -> k8s_openapi::api::admissionregistration::v1::ValidatingWebhook {
    let mut hook = s.validating(name, "/configmaps", vec![core_rule(&["CREATE"], &["configmaps"])]);
    hook.client_config.ca_bundle = None;
    hook
}

/// Upstream webhook.go `It("should be able to deny pod and configmap creation")`: a validating
/// webhook refuses a pod with an unwanted container name and label (both reasons reported), a
/// pod that makes the webhook hang fails on the webhook's deadline and is not created, a
/// ConfigMap with unwanted data is refused on create, update and patch, and a namespace
/// labelled to skip the webhook admits it; a fail-open webhook that cannot be called is ignored.
pub(crate) async fn deny_pod_configmap(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let mut fail_open = failing_hook(&s, "fail-open.k8s.io");
        fail_open.failure_policy = Some("Ignore".into());
        let mut configmaps = s.validating(
            "deny-unwanted-configmap-data.k8s.io",
            "/configmaps",
            vec![core_rule(&["CREATE", "UPDATE"], &["configmaps"])],
        );
        configmaps.namespace_selector = Some(s.namespace_selector(vec![LabelSelectorRequirement {
            key: SKIP_KEY.into(),
            operator: "NotIn".into(),
            values: Some(vec!["yes".into()]),
        }]));
        let hooks = vec![
            s.validating(
                "deny-unwanted-pod-container-name-and-label.k8s.io",
                "/pods",
                vec![core_rule(&["CREATE"], &["pods"])],
            ),
            configmaps,
            fail_open,
        ];
        s.register_validating(f, "deny-webhook-configuration", hooks).await?;

        f.step("creating a pod that the webhook should deny");
        let pods = f.api::<Pod>();
        let bad = f
            .pod("disallowed-pod")
            .label(DISALLOW_KEY, DISALLOW_VALUE)
            .container(ContainerBuilder::new(DISALLOW_VALUE, "pause"))
            .build(f)?;
        expect_refused(
            &pods,
            &bad,
            "pod",
            &[
                "the pod contains unwanted container name",
                "the pod contains unwanted label",
            ],
        )
        .await?;

        f.step("creating a pod that makes the webhook hang");
        let hanging = f
            .pod("hanging-pod")
            .label(DISALLOW_KEY, "wait-forever")
            .container(ContainerBuilder::new("wait-forever", "pause"))
            .build(f)?;
        expect_refused(&pods, &hanging, "pod", &["webhook", "deadline"]).await?;
        ensure!(
            pods.get_opt("hanging-pod").await?.is_none(),
            "pod hanging-pod exists although its create failed on the webhook's deadline"
        );

        f.step("creating a ConfigMap that the webhook should deny");
        let cms = f.api::<ConfigMap>();
        expect_refused(
            &cms,
            &non_compliant_config_map("disallowed-configmap"),
            "ConfigMap",
            &[CONFIGMAP_DENIED],
        )
        .await?;

        f.step("updating an admitted ConfigMap to a disallowed one");
        let admitted = cms
            .create(
                &PostParams::default(),
                &config_map("allowed-configmap", &[("admit", "this")]),
            )
            .await?;
        let mut update = admitted.clone();
        update.data = non_compliant_config_map("allowed-configmap").data;
        match cms.replace("allowed-configmap", &PostParams::default(), &update).await {
            Ok(_) => fail!("the update (PUT) of ConfigMap allowed-configmap to disallowed data was admitted"),
            Err(e) => ensure!(
                refusal(&e).contains(CONFIGMAP_DENIED),
                "updating (PUT) ConfigMap allowed-configmap: expected {CONFIGMAP_DENIED:?}, got {:?}",
                refusal(&e)
            ),
        }
        let patch = json!({"data": {DISALLOW_KEY: DISALLOW_VALUE}});
        match cms
            .patch("allowed-configmap", &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => fail!("the update (PATCH) of ConfigMap allowed-configmap to disallowed data was admitted"),
            Err(e) => ensure!(
                refusal(&e).contains(CONFIGMAP_DENIED),
                "updating (PATCH) ConfigMap allowed-configmap: expected {CONFIGMAP_DENIED:?}, got {:?}",
                refusal(&e)
            ),
        }

        f.step("creating the disallowed ConfigMap in a namespace that skips the webhook");
        let exempt = f.create_scoped_namespace("exempted", &[(SKIP_KEY, "yes")]).await?;
        let created = Api::<ConfigMap>::namespaced(f.client(), &exempt)
            .create(
                &PostParams::default(),
                &non_compliant_config_map("disallowed-configmap"),
            )
            .await;
        f.delete_extra_namespace(&exempt).await?;
        if let Err(e) = created {
            fail!(
                "namespace {exempt} is labelled {SKIP_KEY}=yes, yet the ConfigMap was refused: {}",
                refusal(&e)
            );
        }
        Ok(())
    })
    .await
}

/// Upstream webhook.go `It("should mutate configmap")`: two mutating webhooks on
/// `/mutating-configmaps` add their stages to a ConfigMap created with `mutation-start`.
pub(crate) async fn mutate_configmap(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let rules = || vec![core_rule(&["CREATE"], &["configmaps"])];
        let hooks = vec![
            s.mutating("adding-configmap-data-stage-1.k8s.io", "/mutating-configmaps", rules()),
            s.mutating("adding-configmap-data-stage-2.k8s.io", "/mutating-configmaps", rules()),
        ];
        s.register_mutating(f, "mutating-webhook-configuration", hooks).await?;
        f.step("creating a ConfigMap the webhooks should mutate");
        let created = f
            .api::<ConfigMap>()
            .create(
                &PostParams::default(),
                &config_map("to-be-mutated", &[("mutation-start", "yes")]),
            )
            .await?;
        expect_data(
            &created,
            &[
                ("mutation-start", "yes"),
                ("mutation-stage-1", "yes"),
                ("mutation-stage-2", "yes"),
            ],
        )
    })
    .await
}

/// Fails unless `cm`'s data is exactly `want`.
pub(super) fn expect_data(cm: &ConfigMap, want: &[(&str, &str)]) -> CaseResult {
    let want: BTreeMap<String, String> = want.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let got = cm.data.clone().unwrap_or_default();
    ensure!(
        got == want,
        "ConfigMap {} was stored with data {got:?}, expected {want:?}",
        cm.name_any()
    );
    Ok(())
}

/// Upstream webhook.go `It("should unconditionally reject operations on fail closed
/// webhook")`: a webhook with failurePolicy Fail that cannot be called refuses every ConfigMap
/// create in the namespace it covers, with an internal error.
pub(crate) async fn fail_closed(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let mut hook = failing_hook(&s, "fail-closed.k8s.io");
        hook.failure_policy = Some("Fail".into());
        hook.namespace_selector = Some(s.namespace_selector(vec![LabelSelectorRequirement {
            key: FAIL_CLOSED_KEY.into(),
            operator: "In".into(),
            values: Some(vec!["yes".into()]),
        }]));
        s.register_validating(f, "fail-closed-webhook-configuration", vec![hook])
            .await?;
        f.step("creating a ConfigMap the fail-closed webhook should reject");
        let ns = f
            .create_scoped_namespace("fail-closed", &[(FAIL_CLOSED_KEY, "yes")])
            .await?;
        let created = Api::<ConfigMap>::namespaced(f.client(), &ns)
            .create(&PostParams::default(), &config_map("foo", &[("foo", "bar")]))
            .await;
        f.delete_extra_namespace(&ns).await?;
        match created {
            Ok(_) => fail!("ConfigMap foo in {ns} was admitted although the fail-closed webhook cannot be called"),
            Err(kube::Error::Api(st)) => ensure!(
                st.code == 500 && st.message.contains("failed calling webhook"),
                "ConfigMap foo in {ns}: expected an internal error (500) \"failed calling webhook\", got {} {:?}",
                st.code,
                st.message
            ),
            Err(e) => fail!("ConfigMap foo in {ns}: expected the API's internal error, got {e}"),
        }
        Ok(())
    })
    .await
}

/// Upstream webhook.go `It("should honor timeout")`: a webhook that answers after 5 s fails a
/// request under `timeoutSeconds: 1` and failurePolicy Fail (`context deadline exceeded`), is
/// ignored under Ignore, and is waited for under 10 s or the default.
pub(crate) async fn honor_timeout(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let cms = f.api::<ConfigMap>();
        let slow = |policy: &str, timeout: Option<i32>| {
            let mut hook = s.validating(
                "allow-configmap-with-delay-webhook.k8s.io",
                "/always-allow-delay-5s",
                vec![core_rule(&["CREATE"], &["configmaps"])],
            );
            hook.failure_policy = Some(policy.into());
            hook.timeout_seconds = timeout;
            vec![hook]
        };
        let steps: [(&str, &str, Option<i32>, bool); 4] = [
            ("slow-fail-1s", "Fail", Some(1), false),
            ("slow-ignore-1s", "Ignore", Some(1), true),
            ("slow-fail-10s", "Fail", Some(10), true),
            ("slow-fail-default", "Fail", None, true),
        ];
        for (i, (base, policy, timeout, admits)) in steps.into_iter().enumerate() {
            let cfg = s.register_validating(f, base, slow(policy, timeout)).await?;
            f.step(format!("creating a ConfigMap under failurePolicy {policy}, timeoutSeconds {timeout:?}"));
            let name = format!("to-be-attached-{i}");
            let created = cms
                .create(&PostParams::default(), &config_map(&name, &[("a", "b")]))
                .await;
            f.api_all::<ValidatingWebhookConfiguration>()
                .delete(&cfg.name_any(), &DeleteParams::default())
                .await?;
            match (created, admits) {
                (Ok(_), true) => {}
                (Err(e), true) => fail!(
                    "ConfigMap {name} under failurePolicy {policy}, timeoutSeconds {timeout:?} (webhook latency 5 s): expected it admitted, got {}",
                    refusal(&e)
                ),
                (Ok(_), false) => fail!(
                    "ConfigMap {name} was admitted although the 5 s webhook exceeds timeoutSeconds 1 under failurePolicy Fail; expected \"context deadline exceeded\""
                ),
                (Err(e), false) => {
                    let want = "/always-allow-delay-5s?timeout=1s\": context deadline exceeded";
                    ensure!(refusal(&e).contains(want), "ConfigMap {name}: expected an error containing {want:?}, got {:?}", refusal(&e));
                }
            }
        }
        Ok(())
    })
    .await
}

/// The label the listing cases put on their configurations, valued with the case namespace.
const LIST_LABEL: &str = "e2e-list-test";

/// Upstream webhook.go `It("listing validating webhooks should work")`: ten configurations
/// denying disallowed ConfigMaps are listed by label, a disallowed ConfigMap is refused, the
/// collection is deleted, and the same ConfigMap is then admitted.
pub(crate) async fn list_validating(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let api = f.api_all::<ValidatingWebhookConfiguration>();
        for i in 0..LIST_SIZE {
            let hook = s.validating(
                "deny-unwanted-configmap-data.k8s.io",
                "/configmaps",
                vec![core_rule(&["CREATE"], &["configmaps"])],
            );
            let mut cfg = s.validating_config(&format!("list-validating-{i}"), vec![hook]);
            cfg.labels_mut().insert(LIST_LABEL.into(), f.ns().into());
            let created = api.create(&PostParams::default(), &cfg).await?;
            s.wait_ready(f, &created.name_any()).await?;
        }
        let lp = ListParams::default().labels(&format!("{LIST_LABEL}={}", f.ns()));
        f.step("listing the validating webhook configurations by label");
        let listed = api.list(&lp).await?;
        ensure!(
            listed.items.len() == LIST_SIZE,
            "listing validating webhook configurations labelled {LIST_LABEL}={}: expected {LIST_SIZE}, got {}",
            f.ns(),
            listed.items.len()
        );
        let cms = f.api::<ConfigMap>();
        expect_refused(
            &cms,
            &non_compliant_config_map("disallowed-configmap-1"),
            "ConfigMap",
            &[CONFIGMAP_DENIED],
        )
        .await?;
        f.step("deleting the collection of validating webhook configurations");
        api.delete_collection(&DeleteParams::default(), &lp).await?;
        let left = api.list(&lp).await?.items.len();
        ensure!(
            left == 0,
            "{left} validating webhook configurations are left after deleting the collection"
        );
        if let Err(e) = cms
            .create(
                &PostParams::default(),
                &non_compliant_config_map("disallowed-configmap-2"),
            )
            .await
        {
            fail!(
                "the disallowed ConfigMap was still refused after its webhooks were deleted: {}",
                refusal(&e)
            );
        }
        Ok(())
    })
    .await
}

/// Upstream webhook.go `It("listing mutating webhooks should work")`: ten configurations
/// mutating ConfigMaps are listed by label, a new ConfigMap gets `mutation-stage-1`, the
/// collection is deleted, and a ConfigMap created then does not.
pub(crate) async fn list_mutating(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let api = f.api_all::<MutatingWebhookConfiguration>();
        for i in 0..LIST_SIZE {
            let hook = s.mutating(
                "adding-configmap-data-stage-1.k8s.io",
                "/mutating-configmaps",
                vec![core_rule(&["CREATE"], &["configmaps"])],
            );
            let mut cfg = s.mutating_config(&format!("list-mutating-{i}"), vec![hook]);
            cfg.labels_mut().insert(LIST_LABEL.into(), f.ns().into());
            let created = api.create(&PostParams::default(), &cfg).await?;
            s.wait_ready(f, &created.name_any()).await?;
        }
        let lp = ListParams::default().labels(&format!("{LIST_LABEL}={}", f.ns()));
        f.step("listing the mutating webhook configurations by label");
        let listed = api.list(&lp).await?;
        ensure!(
            listed.items.len() == LIST_SIZE,
            "listing mutating webhook configurations labelled {LIST_LABEL}={}: expected {LIST_SIZE}, got {}",
            f.ns(),
            listed.items.len()
        );
        let cms = f.api::<ConfigMap>();
        let sent = [("mutation-start", "yes")];
        let first = cms
            .create(&PostParams::default(), &config_map("to-be-mutated-1", &sent))
            .await?;
        let stage = |cm: &ConfigMap| cm.data.as_ref().and_then(|d| d.get("mutation-stage-1")).cloned();
        ensure!(
            stage(&first).as_deref() == Some("yes"),
            "ConfigMap to-be-mutated-1 was stored with data {:?}; expected the webhooks to add mutation-stage-1=yes",
            first.data
        );
        f.step("deleting the collection of mutating webhook configurations");
        api.delete_collection(&DeleteParams::default(), &lp).await?;
        let left = api.list(&lp).await?.items.len();
        ensure!(
            left == 0,
            "{left} mutating webhook configurations are left after deleting the collection"
        );
        let second = cms
            .create(&PostParams::default(), &config_map("to-be-mutated-2", &sent))
            .await?;
        ensure!(
            stage(&second).is_none(),
            "ConfigMap to-be-mutated-2 was mutated ({:?}) after its webhook configurations were deleted",
            second.data
        );
        Ok(())
    })
    .await
}

/// Upstream webhook.go `It("should mutate pod and apply defaults after mutation")`: a mutating
/// webhook adds an init container to a new pod, and the API server defaults the added
/// container (its terminationMessagePolicy becomes `File`) before storing it.
pub(crate) async fn mutate_pod(f: &Framework) -> CaseResult {
    with_server(f, async move |s| {
        let hook = s.mutating(
            "adding-init-container.k8s.io",
            "/mutating-pods",
            vec![core_rule(&["CREATE"], &["pods"])],
        );
        s.register_mutating(f, "mutating-pod-webhook-configuration", vec![hook]).await?;
        f.step("creating a pod the webhook should mutate");
        let pod = f
            .pod("webhook-to-be-mutated")
            .container(ContainerBuilder::new("example", "pause"))
            .build(f)?;
        let created = f.api::<Pod>().create(&PostParams::default(), &pod).await?;
        let inits = created.spec.as_ref().and_then(|s| s.init_containers.clone()).unwrap_or_default();
        let names: Vec<&str> = inits.iter().map(|c| c.name.as_str()).collect();
        ensure!(
            names == ["webhook-added-init-container"],
            "pod webhook-to-be-mutated was stored with init containers {names:?}, expected [\"webhook-added-init-container\"] added by the webhook"
        );
        let policy = inits[0].termination_message_policy.as_deref();
        ensure!(
            policy == Some("File"),
            "the webhook-added init container's terminationMessagePolicy is {policy:?}, expected the default \"File\" applied after mutation"
        );
        Ok(())
    })
    .await
}
