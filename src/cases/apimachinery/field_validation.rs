//! `[sig-api-machinery] FieldValidation` (upstream test/e2e/apimachinery/field_validation.go):
//! server-side field validation (`fieldValidation=Strict`) of typed objects sent as JSON and of
//! custom objects sent as server-side apply YAML.
//!
//! Only API calls, so one body serves both OSes. The bodies are upstream's, byte for byte where
//! it matters (a repeated key can only be sent as raw text; the YAML duplicate is reported by
//! line number). Each CRD is cluster-scoped with a name unique to the case (see [`super::crd`]);
//! upstream leaves its CRDs and their `test-finalizer` objects behind, this case releases the
//! object's finalizer and deletes the CRD.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, CustomResourceValidation,
};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::crd::{create_established, delete_gone, objects_api, random_crd};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream field_validation.go "should detect unknown and duplicate fields of a typed object".
pub(crate) const TYPED_UNKNOWN_DUPLICATE: &str =
    "[sig-api-machinery] FieldValidation should detect unknown and duplicate fields of a typed object [Conformance]";
/// Upstream field_validation.go "should detect unknown metadata fields of a typed object".
pub(crate) const TYPED_UNKNOWN_METADATA: &str =
    "[sig-api-machinery] FieldValidation should detect unknown metadata fields of a typed object [Conformance]";
/// Upstream field_validation.go "should create/apply a valid CR for CRD with validation schema".
pub(crate) const CR_VALID: &str =
    "[sig-api-machinery] FieldValidation should create/apply a valid CR for CRD with validation schema [Conformance]";
/// Upstream field_validation.go "should create/apply a CR with unknown fields for CRD with no
/// validation schema".
pub(crate) const CR_NO_SCHEMA: &str = "[sig-api-machinery] FieldValidation should create/apply a CR with unknown fields for CRD with no validation schema [Conformance]";
/// Upstream field_validation.go "should create/apply an invalid CR with extra properties for CRD
/// with validation schema".
pub(crate) const CR_EXTRA_PROPERTIES: &str = "[sig-api-machinery] FieldValidation should create/apply an invalid CR with extra properties for CRD with validation schema [Conformance]";
/// Upstream field_validation.go "should detect unknown metadata fields in both the root and
/// embedded object of a CR".
pub(crate) const CR_UNKNOWN_METADATA: &str = "[sig-api-machinery] FieldValidation should detect unknown metadata fields in both the root and embedded object of a CR [Conformance]";
/// Upstream field_validation.go "should detect duplicates in a CR when preserving unknown fields".
pub(crate) const CR_DUPLICATES: &str =
    "[sig-api-machinery] FieldValidation should detect duplicates in a CR when preserving unknown fields [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(TYPED_UNKNOWN_DUPLICATE, Kind::Adapted, typed_unknown_duplicate),
        case!(TYPED_UNKNOWN_METADATA, Kind::Adapted, typed_unknown_metadata),
        case!(CR_VALID, Kind::Adapted, cr_valid),
        case!(CR_NO_SCHEMA, Kind::Adapted, cr_no_schema),
        case!(CR_EXTRA_PROPERTIES, Kind::Adapted, cr_extra_properties),
        case!(CR_UNKNOWN_METADATA, Kind::Adapted, cr_unknown_metadata),
        case!(CR_DUPLICATES, Kind::Adapted, cr_duplicates),
    ]
}

/// Upstream's field manager for every request of these cases.
const MANAGER: &str = "field_validation_mgr";
/// The custom object's name.
const CR_NAME: &str = "mytest";

/// The query every request carries: upstream's manager and `fieldValidation=Strict`.
fn strict_query() -> String {
    format!("fieldManager={MANAGER}&fieldValidation=Strict")
}

/// Sends `req` and returns the object the server answered, or its refusal (a Status).
async fn send(
    f: &Framework,
    req: http::Request<Vec<u8>>,
    what: &str,
) -> Result<Result<Value, kube::core::Status>, CaseError> {
    f.step(what);
    match f.client().request_text(req).await {
        Ok(text) => serde_json::from_str(&text)
            .map(Ok)
            .map_err(|e| CaseError::failed(format!("{what}: the answer is not JSON: {e}: {text}"))),
        Err(kube::Error::Api(status)) => Ok(Err(*status)),
        Err(e) => Err(CaseError::from(e).context(what.to_string())),
    }
}

/// POSTs a raw JSON Deployment to the case namespace with `fieldValidation=Strict` and checks
/// the refusal holds `expected`.
async fn create_typed_refused(f: &Framework, body: &str, expected: &str) -> CaseResult {
    let req = http::Request::post(format!(
        "/apis/apps/v1/namespaces/{}/deployments?{}",
        f.ns(),
        strict_query()
    ))
    .header(http::header::CONTENT_TYPE, "application/json")
    .body(body.as_bytes().to_vec())
    .map_err(|e| CaseError::failed(format!("building the Deployment create: {e}")))?;
    match send(f, req, "creating a Deployment with fieldValidation=Strict").await? {
        Ok(obj) => fail!(
            "the Deployment was created although its body holds fields fieldValidation=Strict must refuse \
             (expected an error containing {expected:?}); stored: {obj}"
        ),
        Err(status) => {
            ensure!(
                status.message.contains(expected),
                "the Deployment create was refused with {:?} ({} {}), expected an error containing {expected:?}",
                status.message,
                status.code,
                status.reason
            );
            Ok(())
        }
    }
}

/// Upstream's Deployment `my-dep` with `spec.unknownField` and `spec.replicas` twice.
const DEPLOYMENT_UNKNOWN_DUPLICATE: &str = r#"{
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "my-dep", "labels": {"app": "nginx"}},
    "spec": {
        "unknownField": "foo",
        "replicas": 2,
        "replicas": 3,
        "selector": {"matchLabels": {"app": "nginx"}},
        "template": {
            "metadata": {"labels": {"app": "nginx"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}
        }
    }
}"#;

/// Upstream's Deployment `my-dep` with `metadata.unknownMeta`.
const DEPLOYMENT_UNKNOWN_METADATA: &str = r#"{
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "my-dep", "unknownMeta": "foo", "labels": {"app": "nginx"}},
    "spec": {
        "selector": {"matchLabels": {"app": "nginx"}},
        "template": {
            "metadata": {"labels": {"app": "nginx"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}
        }
    }
}"#;

/// Upstream: a Deployment with an unknown spec field and a repeated one is refused, naming both
/// in the order the body has them.
async fn typed_unknown_duplicate(f: &Framework) -> CaseResult {
    create_typed_refused(
        f,
        DEPLOYMENT_UNKNOWN_DUPLICATE,
        r#"strict decoding error: unknown field "spec.unknownField", duplicate field "spec.replicas""#,
    )
    .await
}

/// Upstream: a Deployment with an unknown metadata field is refused, naming it.
async fn typed_unknown_metadata(f: &Framework) -> CaseResult {
    create_typed_refused(
        f,
        DEPLOYMENT_UNKNOWN_METADATA,
        r#"strict decoding error: unknown field "metadata.unknownMeta""#,
    )
    .await
}

/// Upstream's `spec` schema: `foo`, a cron-like `cronSpec` and a map-list of `ports`; with
/// `preserve`, unknown fields of `spec` are kept; `extra` adds properties (the embedded
/// `template`).
fn spec_schema(preserve: bool, extra: Value) -> Value {
    let mut properties = json!({
        "foo": {"type": "string"},
        "cronSpec": {"type": "string", "pattern": r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$"},
        "ports": {
            "type": "array",
            "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
            "x-kubernetes-list-type": "map",
            "items": {
                "type": "object",
                "required": ["containerPort", "protocol"],
                "properties": {
                    "containerPort": {"format": "int32", "type": "integer"},
                    "hostIP": {"type": "string"},
                    "hostPort": {"format": "int32", "type": "integer"},
                    "name": {"type": "string"},
                    "protocol": {"type": "string"}
                }
            }
        }
    });
    if let (Some(p), Value::Object(more)) = (properties.as_object_mut(), extra) {
        p.extend(more);
    }
    let mut spec = json!({"type": "object", "properties": properties});
    if preserve {
        spec["x-kubernetes-preserve-unknown-fields"] = json!(true);
    }
    json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}})
}

/// Upstream `NewRandomNameMultipleVersionCustomResourceDefinition`: versions v1beta1 (stored)
/// and v1, both served; `schema` replaces the fixture's (which keeps every unknown field).
fn multi_version_crd(f: &Framework, schema: Option<Value>) -> Result<CustomResourceDefinition, CaseError> {
    let mut crd = random_crd(f, 0, &[]);
    let mut v1 = crd.spec.versions.first().cloned().unwrap_or_default();
    v1.name = "v1".into();
    v1.storage = false;
    crd.spec.versions.push(v1);
    if let Some(schema) = schema {
        let validation: CustomResourceValidation =
            serde_json::from_value(schema).map_err(|e| CaseError::failed(format!("building the CRD schema: {e}")))?;
        crd.spec
            .versions
            .iter_mut()
            .for_each(|v: &mut CustomResourceDefinitionVersion| v.schema = Some(validation.clone()));
    }
    Ok(crd)
}

/// Creates `crd`, applies upstream's YAML (`body` gets the apiVersion, kind and name, in that
/// order, then `extra` arguments) to object `mytest` with `fieldValidation=Strict`, hands the
/// answer to `check`, then releases the object's finalizer and deletes the CRD.
async fn with_applied(
    f: &Framework,
    crd: CustomResourceDefinition,
    body: impl Fn(&str, &str, &str) -> String,
    check: impl Fn(Result<Value, kube::core::Status>) -> CaseResult,
) -> CaseResult {
    let crd = create_established(f, &crd).await?;
    let api = objects_api(f, &crd);
    let result = async {
        let api_version = format!(
            "{}/{}",
            crd.spec.group,
            crd.spec.versions.first().map_or("", |v| v.name.as_str())
        );
        let yaml = body(&api_version, &crd.spec.names.kind, CR_NAME);
        let req = http::Request::patch(format!("{}/{CR_NAME}?{}", api.resource_url(), strict_query()))
            .header(http::header::CONTENT_TYPE, "application/apply-patch+yaml")
            .body(yaml.into_bytes())
            .map_err(|e| CaseError::failed(format!("building the apply: {e}")))?;
        check(send(f, req, "applying the custom object with fieldValidation=Strict").await?)
    }
    .await;
    let cleanup = async {
        release(f, &api).await?;
        delete_gone(f, &crd.name_any()).await
    }
    .await;
    result.and(cleanup)
}

/// Clears the finalizers of object `mytest`, if it was stored, so the CRD can go.
async fn release(f: &Framework, api: &Api<DynamicObject>) -> CaseResult {
    if api.get_opt(CR_NAME).await?.is_none() {
        return Ok(());
    }
    f.step(format!("releasing the finalizer of {CR_NAME}"));
    let patch = json!({"metadata": {"finalizers": null}});
    match api.patch(CR_NAME, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(CaseError::from(e).context(format!("releasing the finalizer of {CR_NAME}"))),
    }
}

/// The apply was accepted.
fn accepted(answer: Result<Value, kube::core::Status>) -> CaseResult {
    match answer {
        Ok(_) => Ok(()),
        Err(s) => fail!(
            "the apply of {CR_NAME} with fieldValidation=Strict was refused with {:?} ({} {}), expected it to be accepted",
            s.message,
            s.code,
            s.reason
        ),
    }
}

/// The apply was refused with a message holding one of `expected`.
fn refused_with(answer: Result<Value, kube::core::Status>, expected: &[&str]) -> CaseResult {
    match answer {
        Ok(obj) => fail!(
            "the apply of {CR_NAME} with fieldValidation=Strict was accepted, expected a refusal containing {}; stored: {obj}",
            expected.join(" or ")
        ),
        Err(s) => {
            ensure!(
                expected.iter().any(|e| s.message.contains(e)),
                "the apply of {CR_NAME} was refused with {:?} ({} {}), expected a refusal containing {}",
                s.message,
                s.code,
                s.reason,
                expected.join(" or ")
            );
            Ok(())
        }
    }
}

/// Upstream's valid object: a finalizer, `foo`, `cronSpec` and one port.
fn valid_yaml(api_version: &str, kind: &str, name: &str) -> String {
    format!(
        "\napiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n  finalizers:\n  - test-finalizer\n\
         spec:\n  foo: foo1\n  cronSpec: \"* * * * */5\"\n  ports:\n  - name: x\n    containerPort: 80\n    protocol: TCP"
    )
}

/// Upstream: a CRD with a validation schema; an object that fits it applies under Strict.
async fn cr_valid(f: &Framework) -> CaseResult {
    let crd = multi_version_crd(f, Some(spec_schema(false, json!({}))))?;
    with_applied(f, crd, valid_yaml, accepted).await
}

/// Upstream: a CRD whose schema keeps every unknown field; an object with `spec.unknown`
/// applies under Strict.
async fn cr_no_schema(f: &Framework) -> CaseResult {
    let crd = multi_version_crd(f, None)?;
    let body = |api_version: &str, kind: &str, name: &str| {
        format!(
            "\napiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n  finalizers:\n  - test-finalizer\n\
             spec:\n  unknown: uk1\n  cronSpec: \"* * * * */5\"\n  ports:\n  - name: x\n    containerPort: 80\n    protocol: TCP"
        )
    };
    with_applied(f, crd, body, accepted).await
}

/// Upstream: a CRD with a validation schema; an object with a top-level `unknownField` is
/// refused by the apply, naming the field.
async fn cr_extra_properties(f: &Framework) -> CaseResult {
    let crd = multi_version_crd(f, Some(spec_schema(false, json!({}))))?;
    let body = |api_version: &str, kind: &str, name: &str| {
        format!(
            "\napiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n  finalizers:\n  - test-finalizer\n\
             unknownField: unknown\nspec:\n  foo: foo1\n  cronSpec: \"* * * * */5\"\n  ports:\n  - name: x\n    containerPort: 80\n    protocol: TCP"
        )
    };
    with_applied(f, crd, body, |a| {
        refused_with(a, &[".unknownField: field not declared in schema"])
    })
    .await
}

/// Upstream: a CRD whose `spec` keeps unknown fields and embeds a resource `template`; an
/// object with an unknown field in its own metadata and in the template's is refused, naming
/// one of them.
async fn cr_unknown_metadata(f: &Framework) -> CaseResult {
    let template = json!({"template": {
        "type": "object",
        "x-kubernetes-embedded-resource": true,
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": {"type": "object"}
        }
    }});
    let crd = multi_version_crd(f, Some(spec_schema(true, template)))?;
    let ns = f.ns().to_string();
    let body = move |api_version: &str, kind: &str, name: &str| {
        format!(
            "\napiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n  unknownMeta: unknown\n  finalizers:\n  - test-finalizer\n\
             spec:\n  template:\n    apiversion: foo/v1\n    kind: Sub\n    metadata:\n        unknownSubMeta: unknown\n        name: subobject\n        namespace: {ns}\n\
             \x20 foo: foo1\n  cronSpec: \"* * * * */5\"\n  ports:\n  - name: x\n    containerPort: 80\n    protocol: TCP"
        )
    };
    with_applied(f, crd, body, |a| {
        refused_with(
            a,
            &[
                ".spec.template.metadata.unknownSubMeta: field not declared in schema",
                ".metadata.unknownMeta: field not declared in schema",
            ],
        )
    })
    .await
}

/// Upstream: a CRD whose `spec` keeps unknown fields; an object repeating `spec.foo` is
/// refused by the strict YAML decoding, naming the line of the repeat.
async fn cr_duplicates(f: &Framework) -> CaseResult {
    let crd = multi_version_crd(f, Some(spec_schema(true, json!({}))))?;
    let body = |api_version: &str, kind: &str, name: &str| {
        format!(
            "\napiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n  finalizers:\n  - test-finalizer\n\
             spec:\n  unknown: uk1\n  foo: foo1\n  foo: foo2\n  cronSpec: \"* * * * */5\"\n  ports:\n  - name: x\n    containerPort: 80\n    protocol: TCP"
        )
    };
    with_applied(f, crd, body, |a| {
        refused_with(a, &[r#"line 11: key "foo" already set in map"#])
    })
    .await
}
