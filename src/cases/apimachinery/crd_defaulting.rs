//! `[sig-api-machinery] CustomResourceDefinition resources`: defaulting of custom objects
//! (upstream test/e2e/apimachinery/custom_resource_definition.go, "custom resource defaulting
//! for requests and from storage works").
//!
//! A default added to a CRD's schema applies on two paths: to objects written after it (the
//! request path, persisted) and to objects read from storage that were written before it
//! (applied on every read, never written back). Only API calls, so one body serves both OSes.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSON, JSONSchemaProps,
};
use kube::api::{DynamicObject, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::crd::{create_established, delete_gone, objects_api, random_crd};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::update::replace_retrying;
use crate::framework::{CaseError, CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream custom_resource_definition.go "custom resource defaulting for requests and from
/// storage works".
pub(crate) const DEFAULTING: &str = "[sig-api-machinery] CustomResourceDefinition resources [Privileged:ClusterAdmin] \
     custom resource defaulting for requests and from storage works [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(DEFAULTING, Kind::Adapted, defaulting)]
}

/// Upstream `wait.ForeverTestTimeout`, the bound of each of the case's polls.
const FOREVER_TEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Upstream polls every 100 ms.
const POLL: Duration = Duration::from_millis(100);

/// Upstream's random CRD with two string properties `a` and `b` and no defaults.
fn crd_with_a_and_b(f: &Framework) -> CustomResourceDefinition {
    let mut crd = random_crd(f, 0, &[]);
    if let Some(schema) = crd
        .spec
        .versions
        .first_mut()
        .and_then(|v| v.schema.as_mut())
        .and_then(|s| s.open_api_v3_schema.as_mut())
    {
        let string = JSONSchemaProps {
            type_: Some("string".into()),
            ..Default::default()
        };
        let props = schema.properties.get_or_insert_with(Default::default);
        props.insert("a".into(), string.clone());
        props.insert("b".into(), string);
    }
    crd
}

/// Creates a custom object with only a name, as upstream's unstructured `cr-N`.
async fn create_bare(api: &Api<DynamicObject>, crd: &CustomResourceDefinition, name: &str) -> Result<Value, CaseError> {
    let version = crd.spec.versions.first().map_or("", |v| v.name.as_str());
    let body = json!({
        "apiVersion": format!("{}/{version}", crd.spec.group),
        "kind": crd.spec.names.kind,
        "metadata": {"name": name},
    });
    let obj: DynamicObject =
        serde_json::from_value(body).map_err(|e| CaseError::failed(format!("building custom object {name}: {e}")))?;
    let created = api.create(&PostParams::default(), &obj).await?;
    Ok(created.data)
}

/// Sets (or, with `None`, removes) the defaults of top-level properties of the CRD's schema.
/// Upstream sends JSON patches; a replace of the read object makes the same change and can be
/// sent again when its answer is lost (a JSON patch's `remove` cannot).
async fn set_defaults(f: &Framework, crd: &CustomResourceDefinition, defaults: &[(&str, Option<&str>)]) -> CaseResult {
    let crds: Api<CustomResourceDefinition> = f.api_all();
    replace_retrying(&crds, &crd.name_any(), |c: &mut CustomResourceDefinition| {
        let mut props = c
            .spec
            .versions
            .first_mut()
            .and_then(|v| v.schema.as_mut())
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut());
        for (field, value) in defaults {
            if let Some(p) = props.as_deref_mut().and_then(|p| p.get_mut(*field)) {
                p.default = value.map(|v| JSON(json!(v)));
            }
        }
    })
    .await?;
    Ok(())
}

/// Reads custom object `name` every 100 ms until `check` says it is done (`Ok(true)`), for at
/// most 30 s; `check` fails the case at once when it sees a wrong value (as upstream's poll
/// function returning an error does).
async fn poll_object(
    f: &Framework,
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> Result<bool, String>,
) -> CaseResult {
    f.step(format!("reading custom object {name} until {what}"));
    let until = Instant::now() + FOREVER_TEST_TIMEOUT.min(f.remaining());
    let mut tick = tokio::time::interval(POLL);
    loop {
        tick.tick().await;
        let got = api.get(name).await?;
        match check(&got.data) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(wrong) => fail!("custom object {name}: {wrong} while waiting until {what}"),
        }
        if Instant::now() >= until {
            fail!(
                "custom object {name} did not show that {what} within {FOREVER_TEST_TIMEOUT:?}; last read: {}",
                got.data
            );
        }
    }
}

/// `Ok(true)` when top-level `field` is `want`, `Ok(false)` while absent, an error otherwise.
fn field_is(obj: &Value, field: &str, want: &str) -> Result<bool, String> {
    match obj.get(field) {
        None => Ok(false),
        Some(v) if v == want => Ok(true),
        Some(v) => Err(format!("expected {field}:{want:?}, but got {field}:{v}")),
    }
}

/// Upstream: a CRD with properties `a` and `b` and no defaults; `cr-1` is stored without
/// either; after `a` gets default "A", reads of `cr-1` show a:"A" (defaulted from storage) and
/// a new `cr-2` is created with a:"A" (defaulted on the request); after the default of `a` is
/// removed and `b` gets "B", reads of `cr-2` show b:"B" and still a:"A" (it was persisted).
async fn defaulting(f: &Framework) -> CaseResult {
    let crd = create_established(f, &crd_with_a_and_b(f)).await?;
    let result = async {
        let api = objects_api(f, &crd);
        let (cr1, cr2) = ("cr-1", "cr-2");
        f.step("creating a custom object without defaults in storage");
        create_bare(&api, &crd, cr1).await?;

        f.step("setting default \"A\" for a in the schema");
        set_defaults(f, &crd, &[("a", Some("A"))]).await?;
        poll_object(f, &api, cr1, "it is defaulted on read to a:\"A\"", |o| field_is(o, "a", "A")).await?;

        f.step("creating a custom object with the default in effect");
        let created = create_bare(&api, &crd, cr2).await?;
        ensure!(
            created.get("a") == Some(&json!("A")),
            "custom object {cr2}, created after a got default \"A\", was returned with a:{} (expected \"A\", defaulted on the request): {created}",
            created.get("a").map_or_else(|| "<absent>".to_string(), Value::to_string)
        );

        f.step("removing the default of a and setting default \"B\" for b");
        set_defaults(f, &crd, &[("a", None), ("b", Some("B"))]).await?;
        poll_object(
            f,
            &api,
            cr2,
            "it is defaulted on read to b:\"B\" and keeps a:\"A\"",
            |o| {
                if !field_is(o, "b", "B")? {
                    return Ok(false);
                }
                match o.get("a") {
                    None => Err("expected a:\"A\" to be unchanged, but it was removed".into()),
                    Some(a) if a == "A" => Ok(true),
                    Some(a) => Err(format!("expected a:\"A\" to be unchanged, but it changed to {a}")),
                }
            },
        )
        .await
    }
    .await;
    let cleanup = delete_gone(f, &crd.name_any()).await;
    result.and(cleanup)
}
