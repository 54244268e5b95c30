//! `[sig-api-machinery] CustomResourceConversionWebhook` (upstream
//! test/e2e/apimachinery/crd_conversion_webhook.go): a CRD serving `stable.example.com` v1
//! (`hostPort`) and v2 (`host`, `port`) with `Webhook` conversion at upstream's agnhost
//! `crd-conversion-webhook`, deployed on the target OS behind Service
//! `e2e-test-crd-conversion-webhook` ([`Framework::deploy_conversion_webhook_server`]).
//! An object written at one version reads back converted at the other, one by one and in a
//! list mixing objects stored at v1 and at v2.
//!
//! The CRD is namespaced, as upstream's `CreateMultiVersionTestCRD` makes it, with a name
//! unique to the case; it is deleted at the end. Upstream also binds the webhook's service
//! account to `extension-apiserver-authentication-reader`, which its converter never uses;
//! that step is left out.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps, WebhookConversion,
};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::crd::{case_suffix, create_established, delete_gone};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::update::replace_retrying;
use crate::framework::webhook::ConversionServer;
use crate::framework::{CaseError, CaseResult, Framework, RUN_ID_LABEL};
use crate::{ensure, fail};

/// Upstream "should be able to convert from CR v1 to CR v2".
pub(crate) const CONVERT_V1_TO_V2: &str = "[sig-api-machinery] CustomResourceConversionWebhook \
     [Privileged:ClusterAdmin] should be able to convert from CR v1 to CR v2 [Conformance]";
/// Upstream "should be able to convert a non homogeneous list of CRs".
pub(crate) const CONVERT_LIST: &str = "[sig-api-machinery] CustomResourceConversionWebhook \
     [Privileged:ClusterAdmin] should be able to convert a non homogeneous list of CRs [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(CONVERT_V1_TO_V2, Kind::Adapted, convert_v1_to_v2),
        case!(CONVERT_LIST, Kind::Adapted, convert_list),
    ]
}

/// The only group upstream's converter knows.
const GROUP: &str = "stable.example.com";
/// Upstream `waitWebhookConversionReady`'s bound and interval.
const READY_WITHIN: Duration = Duration::from_secs(30);
const READY_EVERY: Duration = Duration::from_millis(100);

/// A version of upstream's `apiVersions`: a schema of top-level string `fields`.
fn version(name: &str, storage: bool, fields: &[&str]) -> CustomResourceDefinitionVersion {
    let props = fields
        .iter()
        .map(|f| {
            (
                (*f).to_string(),
                JSONSchemaProps {
                    type_: Some("string".into()),
                    ..Default::default()
                },
            )
        })
        .collect::<BTreeMap<_, _>>();
    CustomResourceDefinitionVersion {
        name: name.into(),
        served: true,
        storage,
        schema: Some(CustomResourceValidation {
            open_api_v3_schema: Some(JSONSchemaProps {
                type_: Some("object".into()),
                properties: Some(props),
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
}

/// Upstream's `apiVersions` (v1 stored) or `alternativeAPIVersions` (v2 stored).
fn versions(v2_stored: bool) -> Vec<CustomResourceDefinitionVersion> {
    vec![
        version("v1", !v2_stored, &["hostPort"]),
        version("v2", v2_stored, &["host", "port"]),
    ]
}

/// Upstream `CreateMultiVersionTestCRD` with the conversion webhook: namespaced, named
/// `e2e-test-crd-webhook-<random>-crd`.
fn conversion_crd(f: &Framework, server: &ConversionServer) -> CustomResourceDefinition {
    let base = format!("e2e-test-crd-webhook-{}-crd", case_suffix(f));
    let plural = format!("{base}s");
    let kind = format!("E2e-test-crd-webhook-{}-crd", case_suffix(f));
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{plural}.{GROUP}")),
            labels: Some(BTreeMap::from([(RUN_ID_LABEL.to_string(), f.run().run_id.clone())])),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: GROUP.into(),
            names: CustomResourceDefinitionNames {
                plural,
                singular: Some(base),
                kind: kind.clone(),
                list_kind: Some(format!("{kind}List")),
                ..Default::default()
            },
            scope: "Namespaced".into(),
            versions: versions(false),
            conversion: Some(CustomResourceConversion {
                strategy: "Webhook".into(),
                webhook: Some(WebhookConversion {
                    client_config: Some(server.client_config()),
                    conversion_review_versions: vec!["v1".into(), "v1beta1".into()],
                }),
            }),
            preserve_unknown_fields: Some(false),
        },
        status: None,
    }
}

/// The case namespace's objects of `crd` at `version` (upstream's `DynamicClients[version]`).
fn objects_at(f: &Framework, crd: &CustomResourceDefinition, version: &str) -> (Api<DynamicObject>, ApiResource) {
    let gvk = GroupVersionKind::gvk(GROUP, version, &crd.spec.names.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
    (Api::namespaced_with(f.client(), f.ns(), &resource), resource)
}

/// A custom object `name` at `resource`'s version with top-level `fields`.
fn instance(resource: &ApiResource, name: &str, fields: Value) -> DynamicObject {
    DynamicObject::new(name, resource).data(fields)
}

/// Upstream `waitWebhookConversionReady`: creates a stub object at `version` (which needs a
/// conversion to the storage version) every 100 ms until one is accepted, then deletes it.
async fn wait_conversion_ready(f: &Framework, crd: &CustomResourceDefinition, version: &str) -> CaseResult {
    f.step(format!(
        "waiting for the conversion webhook to answer writes at {version}"
    ));
    let (api, resource) = objects_at(f, crd, version);
    let stub = instance(&resource, f.ns(), json!({}));
    let deadline = Instant::now() + READY_WITHIN.min(f.remaining());
    let mut tick = tokio::time::interval(READY_EVERY);
    loop {
        tick.tick().await;
        match api.create(&PostParams::default(), &stub).await {
            Ok(_) => {
                api.delete(f.ns(), &DeleteParams::default())
                    .await
                    .map_err(|e| CaseError::from(e).context("cleaning up the stub object"))?;
                return Ok(());
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // An earlier create landed though its answer was lost: it proves the same.
                api.delete(f.ns(), &DeleteParams::default()).await?;
                return Ok(());
            }
            Err(e) if Instant::now() >= deadline => {
                fail!(
                    "creating a stub {} at {version} (which the conversion webhook must convert to the storage version) \
                     did not succeed within {READY_WITHIN:?}; last error: {}",
                    crd.spec.names.kind,
                    crate::framework::render_kube_error(&e)
                );
            }
            Err(_) => {}
        }
    }
}

fn field<'a>(obj: &'a DynamicObject, name: &str) -> Option<&'a Value> {
    obj.data.get(name)
}

/// Upstream `verifyV1Object`.
fn verify_v1(obj: &DynamicObject) -> CaseResult {
    let name = obj.name_any();
    let api_version = obj.types.as_ref().map(|t| t.api_version.as_str()).unwrap_or_default();
    ensure!(
        api_version == format!("{GROUP}/v1"),
        "{name}: expected apiVersion {GROUP}/v1, got {api_version:?}"
    );
    ensure!(
        field(obj, "hostPort") == Some(&json!("localhost:8080")),
        "{name} at v1: expected hostPort \"localhost:8080\" (converted by the webhook), got {:?}; object: {}",
        field(obj, "hostPort"),
        obj.data
    );
    ensure!(
        field(obj, "host").is_none() && field(obj, "port").is_none(),
        "{name} at v1: expected no v2 fields host/port, got {}",
        obj.data
    );
    Ok(())
}

/// Upstream `verifyV2Object`.
fn verify_v2(obj: &DynamicObject) -> CaseResult {
    let name = obj.name_any();
    let api_version = obj.types.as_ref().map(|t| t.api_version.as_str()).unwrap_or_default();
    ensure!(
        api_version == format!("{GROUP}/v2"),
        "{name}: expected apiVersion {GROUP}/v2, got {api_version:?}"
    );
    ensure!(
        field(obj, "hostPort").is_none(),
        "{name} at v2: expected no v1 field hostPort, got {}",
        obj.data
    );
    ensure!(
        field(obj, "host") == Some(&json!("localhost")) && field(obj, "port") == Some(&json!("8080")),
        "{name} at v2: expected host \"localhost\" and port \"8080\" (converted by the webhook), got host {:?}, \
         port {:?}; object: {}",
        field(obj, "host"),
        field(obj, "port"),
        obj.data
    );
    Ok(())
}

/// Deploys the converter, creates the CRD and waits until conversions to `ready_at` work.
async fn setup(f: &Framework) -> Result<CustomResourceDefinition, CaseError> {
    let server = f.deploy_conversion_webhook_server().await?;
    let crd = create_established(f, &conversion_crd(f, &server)).await?;
    wait_conversion_ready(f, &crd, "v2").await?;
    Ok(crd)
}

/// Runs `body` on a fresh conversion CRD and deletes the CRD afterwards, whatever happened.
async fn with_crd<F, Fut>(f: &Framework, body: F) -> CaseResult
where
    F: FnOnce(CustomResourceDefinition) -> Fut,
    Fut: std::future::Future<Output = CaseResult>,
{
    let crd = setup(f).await?;
    let name = crd.name_any();
    let result = body(crd).await;
    let cleanup = delete_gone(f, &name).await;
    result.and(cleanup)
}

/// Upstream `testCustomResourceConversionWebhook`: created at v1, read at v2.
async fn convert_v1_to_v2(f: &Framework) -> CaseResult {
    with_crd(f, |crd| async move {
        let (v1, v1_res) = objects_at(f, &crd, "v1");
        let (v2, _) = objects_at(f, &crd, "v2");
        f.step("creating a v1 custom resource");
        let name = "cr-instance-1";
        v1.create(
            &PostParams::default(),
            &instance(&v1_res, name, json!({"hostPort": "localhost:8080"})),
        )
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating {name} at v1")))?;
        f.step("reading the custom resource at v2");
        let got = v2
            .get(name)
            .await
            .map_err(|e| CaseError::from(e).context(format!("getting v2 of custom resource {name}")))?;
        verify_v2(&got)
    })
    .await
}

/// Upstream `testCRListConversion`: one object stored at v1, the storage version moved to v2,
/// one object stored at v2; both list at v1 and at v2.
async fn convert_list(f: &Framework) -> CaseResult {
    with_crd(f, |crd| async move {
        let (v1, v1_res) = objects_at(f, &crd, "v1");
        let (v2, _) = objects_at(f, &crd, "v2");
        let (name1, name2) = ("cr-instance-1", "cr-instance-2");
        f.step("creating a v1 custom resource (stored at v1)");
        v1.create(
            &PostParams::default(),
            &instance(&v1_res, name1, json!({"hostPort": "localhost:8080"})),
        )
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating {name1} at v1")))?;

        f.step("moving the storage version to v2");
        let crds: Api<CustomResourceDefinition> = f.api_all();
        replace_retrying(&crds, &crd.name_any(), |c| c.spec.versions = versions(true)).await?;

        f.step("creating another custom resource at v1 (stored at v2)");
        let second = instance(&v1_res, name2, json!({"hostPort": "localhost:8080"}));
        let mut last = None;
        // Upstream retries this create up to five times: the storage version change re-creates
        // the served resources and may cut a request.
        for _ in 0..5 {
            match v1.create(&PostParams::default(), &second).await {
                Ok(_) => {
                    last = None;
                    break;
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    last = None;
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            return Err(CaseError::from(e).context(format!("creating {name2} at v1")));
        }

        for (version, api) in [("v1", &v1), ("v2", &v2)] {
            f.step(format!("listing the custom resources at {version}"));
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| CaseError::from(e).context(format!("listing at {version}")))?;
            let mut names: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
            names.sort();
            ensure!(
                names == [name1, name2],
                "list at {version}: expected exactly {name1} and {name2}, got {names:?}"
            );
            for item in &list.items {
                if version == "v1" {
                    verify_v1(item)?;
                } else {
                    verify_v2(item)?;
                }
            }
        }
        Ok(())
    })
    .await
}
