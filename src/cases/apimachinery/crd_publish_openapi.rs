//! `[sig-api-machinery] CustomResourcePublishOpenAPI` (upstream
//! test/e2e/apimachinery/crd_publish_openapi.go): the API server publishes each served version
//! of a CRD in its OpenAPI documents with the CRD's schema, follows renames and versions that
//! stop being served, and drops the definitions when the CRD goes.
//!
//! Departures from upstream, which reads the OpenAPI v2 document (`/openapi/v2`) and runs
//! `kubectl create`, `kubectl apply` and `kubectl explain`:
//! - the definitions are read from the OpenAPI v3 group-version documents
//!   (`/openapi/v3/apis/GROUP/VERSION`, `components.schemas["<reversed group>.<version>.<Kind>"]`),
//!   which is what kubectl 1.33's `explain` reads; the schema compared is the published one
//!   without the `apiVersion`, `kind` and `metadata` properties and the
//!   `x-kubernetes-group-version-kind` extension the server adds (upstream's `dropDefaults`);
//! - `kubectl explain` is replaced by checks of what it prints from that definition (the
//!   descriptions and types of the kind and its fields); the `metadata` field is checked for its
//!   description only, not followed into ObjectMeta;
//! - `kubectl create` and `kubectl apply` of a custom object are the requests they send for a
//!   new object: a POST, and a POST carrying the last-applied-configuration annotation.
//!
//! Only API calls, so one body serves both OSes. The CRDs are namespaced kinds in upstream's
//! groups (`crd-publish-openapi-test-<suffix>.example.com`) with kinds unique to the case.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionVersion, CustomResourceValidation,
};
use kube::api::{DeleteParams, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::crd::{case_suffix, create_established, delete_gone, random_crd};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::update::replace_retrying;
use crate::framework::{CaseError, CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream crd_publish_openapi.go "works for CRD with validation schema".
pub(crate) const WITH_SCHEMA: &str = "[sig-api-machinery] CustomResourcePublishOpenAPI [Privileged:ClusterAdmin] works for CRD with validation schema [Conformance]";
/// Upstream crd_publish_openapi.go "works for CRD without validation schema".
pub(crate) const WITHOUT_SCHEMA: &str = "[sig-api-machinery] CustomResourcePublishOpenAPI [Privileged:ClusterAdmin] works for CRD without validation schema [Conformance]";
/// Upstream crd_publish_openapi.go "works for CRD preserving unknown fields at the schema root".
pub(crate) const PRESERVE_ROOT: &str = "[sig-api-machinery] CustomResourcePublishOpenAPI [Privileged:ClusterAdmin] works for CRD preserving unknown fields at the schema root [Conformance]";
/// Upstream crd_publish_openapi.go "works for CRD preserving unknown fields in an embedded object".
pub(crate) const PRESERVE_NESTED: &str = "[sig-api-machinery] CustomResourcePublishOpenAPI [Privileged:ClusterAdmin] works for CRD preserving unknown fields in an embedded object [Conformance]";
/// Upstream crd_publish_openapi.go "works for multiple CRDs of different groups".
pub(crate) const DIFFERENT_GROUPS: &str = "[sig-api-machinery] CustomResourcePublishOpenAPI [Privileged:ClusterAdmin] works for multiple CRDs of different groups [Conformance]";
/// Upstream crd_publish_openapi.go "works for multiple CRDs of same group and version but
/// different kinds".
pub(crate) const DIFFERENT_KINDS: &str = "[sig-api-machinery] CustomResourcePublishOpenAPI [Privileged:ClusterAdmin] works for multiple CRDs of same group and version but different kinds [Conformance]";
/// Upstream crd_publish_openapi.go "works for multiple CRDs of same group but different versions".
pub(crate) const DIFFERENT_VERSIONS: &str = "[sig-api-machinery] CustomResourcePublishOpenAPI [Privileged:ClusterAdmin] works for multiple CRDs of same group but different versions [Conformance]";
/// Upstream crd_publish_openapi.go "updates the published spec when one version gets renamed".
pub(crate) const RENAMED: &str = "[sig-api-machinery] CustomResourcePublishOpenAPI [Privileged:ClusterAdmin] updates the published spec when one version gets renamed [Conformance]";
/// Upstream crd_publish_openapi.go "removes definition from spec when one version gets changed
/// to not be served".
pub(crate) const NOT_SERVED: &str = "[sig-api-machinery] CustomResourcePublishOpenAPI [Privileged:ClusterAdmin] removes definition from spec when one version gets changed to not be served [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(WITH_SCHEMA, Kind::Adapted, with_schema),
        case!(WITHOUT_SCHEMA, Kind::Adapted, without_schema),
        case!(PRESERVE_ROOT, Kind::Adapted, preserve_root),
        case!(PRESERVE_NESTED, Kind::Adapted, preserve_nested),
        case!(DIFFERENT_GROUPS, Kind::Adapted, different_groups),
        case!(DIFFERENT_KINDS, Kind::Adapted, different_kinds),
        case!(DIFFERENT_VERSIONS, Kind::Adapted, different_versions),
        case!(RENAMED, Kind::Adapted, renamed),
        case!(NOT_SERVED, Kind::Adapted, not_served),
    ]
}

/// Upstream `waitForOpenAPISchema`'s bound (it polls every 500 ms for 60 s).
const PUBLISH_WITHIN: Duration = Duration::from_secs(60);

/// Upstream `schemaFoo`.
fn schema_foo() -> Value {
    json!({"description": "Foo CRD for Testing", "type": "object", "properties": {
        "spec": {"type": "object", "description": "Specification of Foo", "properties": {
            "bars": {"description": "List of Bars and their specs.", "type": "array", "items": {
                "type": "object", "required": ["name"], "properties": {
                    "name": {"description": "Name of Bar.", "type": "string"},
                    "age": {"description": "Age of Bar.", "type": "string"},
                    "feeling": {"description": "Whether Bar is feeling great.", "type": "string", "enum": ["Great", "Down"]},
                    "bazs": {"description": "List of Bazs.", "items": {"type": "string"}, "type": "array"}}}}}},
        "status": {"description": "Status of Foo", "type": "object", "properties": {
            "bars": {"description": "List of Bars and their statuses.", "type": "array", "items": {
                "type": "object", "properties": {
                    "name": {"description": "Name of Bar.", "type": "string"},
                    "available": {"description": "Whether the Bar is installed.", "type": "boolean"},
                    "quxType": {"description": "Indicates to external qux type.", "pattern": "in-tree|out-of-tree", "type": "string"}}}}}}}})
}

/// Upstream `schemaWaldo`'s `spec` and `status`, under `description`.
fn waldo_like(description: &str) -> Value {
    json!({"description": description, "type": "object", "properties": {
        "spec": {"description": "Specification of Waldo", "type": "object", "properties": {
            "dummy": {"description": "Dummy property.", "type": "object"}}},
        "status": {"description": "Status of Waldo", "type": "object", "properties": {
            "bars": {"description": "List of Bars and their statuses.", "type": "array", "items": {"type": "object"}}}}}})
}

/// Upstream `schemaWaldo`.
fn schema_waldo() -> Value {
    waldo_like("Waldo CRD for Testing")
}

/// Upstream `schemaPreserveRoot`.
fn schema_preserve_root() -> Value {
    let mut s = waldo_like("preserve-unknown-properties at root for Testing");
    s["x-kubernetes-preserve-unknown-fields"] = json!(true);
    s
}

/// Upstream `schemaPreserveNested`.
fn schema_preserve_nested() -> Value {
    let mut s = waldo_like("preserve-unknown-properties in nested field for Testing");
    s["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] = json!(true);
    s
}

/// The schema a CRD without one gets (upstream's `setupCRD` with a nil schema).
fn schema_empty() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// Upstream `crd.CreateMultiVersionTestCRD` for `setupCRD`: a namespaced CRD in group
/// `crd-publish-openapi-test-<group>.example.com` serving `versions` (the first stored), each
/// with `schema`; `index` tells a case's CRDs apart.
fn test_crd(
    f: &Framework,
    group: &str,
    index: usize,
    versions: &[&str],
    schema: &Value,
) -> Result<CustomResourceDefinition, CaseError> {
    let group = format!("crd-publish-openapi-test-{group}.example.com");
    let kind = format!("E2e-test-crd-publish-openapi-{}{index}-crd", case_suffix(f));
    let plural = format!("{}s", kind.to_lowercase());
    let validation: CustomResourceValidation = serde_json::from_value(json!({"openAPIV3Schema": schema}))
        .map_err(|e| CaseError::failed(format!("building the CRD schema: {e}")))?;
    let mut crd = random_crd(f, index, &[]);
    crd.metadata.name = Some(format!("{plural}.{group}"));
    crd.spec.group = group;
    crd.spec.scope = "Namespaced".into();
    crd.spec.names = CustomResourceDefinitionNames {
        plural,
        singular: Some(kind.to_lowercase()),
        kind: kind.clone(),
        list_kind: Some(format!("{kind}List")),
        ..Default::default()
    };
    crd.spec.versions = versions
        .iter()
        .enumerate()
        .map(|(i, v)| CustomResourceDefinitionVersion {
            name: (*v).into(),
            served: true,
            storage: i == 0,
            schema: Some(validation.clone()),
            ..Default::default()
        })
        .collect();
    Ok(crd)
}

/// The definition name upstream's `definitionName` gives (`ToRESTFriendlyName` of
/// `group/version/Kind`): the reversed group, the version and the kind, dot-separated.
fn definition_name(crd: &CustomResourceDefinition, version: &str) -> String {
    let reversed: Vec<&str> = crd.spec.group.split('.').rev().collect();
    format!("{}.{version}.{}", reversed.join("."), crd.spec.names.kind)
}

/// The published definition of `crd`'s `version`, if the group-version document has it.
async fn definition(f: &Framework, crd: &CustomResourceDefinition, version: &str) -> Result<Option<Value>, CaseError> {
    let path = format!("/openapi/v3/apis/{}/{version}", crd.spec.group);
    let req = http::Request::get(&path)
        .body(Vec::new())
        .map_err(|e| CaseError::failed(format!("building a GET of {path}: {e}")))?;
    let text = match f.client().request_text(req).await {
        Ok(t) => t,
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
        Err(e) => return Err(CaseError::from(e).context(format!("fetching {path}"))),
    };
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| CaseError::failed(format!("{path} answered what is not JSON: {e}")))?;
    Ok(doc["components"]["schemas"].get(definition_name(crd, version)).cloned())
}

/// The published definition of `crd`'s `version`, which must be there (the case created the
/// CRD and saw it published before).
async fn published(f: &Framework, crd: &CustomResourceDefinition, version: &str) -> Result<Value, CaseError> {
    match definition(f, crd, version).await? {
        Some(d) => Ok(d),
        None => fail!(
            "definition {} vanished from the OpenAPI v3 document",
            definition_name(crd, version)
        ),
    }
}

/// A published definition without what the server adds (upstream `dropDefaults`).
fn without_defaults(mut d: Value) -> Value {
    if let Some(m) = d.as_object_mut() {
        m.remove("x-kubernetes-group-version-kind");
        if let Some(props) = m.get_mut("properties").and_then(Value::as_object_mut) {
            for k in ["metadata", "apiVersion", "kind"] {
                props.remove(k);
            }
            if props.is_empty() {
                m.remove("properties");
            }
        }
    }
    d
}

/// Upstream `waitForDefinition`: polls until `crd`'s `version` is published with `expect`.
async fn wait_for_definition(
    f: &Framework,
    crd: &CustomResourceDefinition,
    version: &str,
    expect: &Value,
) -> Result<Value, CaseError> {
    let name = definition_name(crd, version);
    f.step(format!("waiting for definition {name} in the OpenAPI v3 document"));
    let until = Instant::now() + PUBLISH_WITHIN.min(f.remaining());
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        let last = match definition(f, crd, version).await? {
            Some(d) if without_defaults(d.clone()) == *expect => return Ok(d),
            Some(d) => format!(
                "definition {name} does not match; expected {expect}, published {}",
                without_defaults(d)
            ),
            None => format!("definition {name} not found"),
        };
        if Instant::now() >= until {
            fail!(
                "failed to wait for definition {name} to be served with the right OpenAPI schema within {PUBLISH_WITHIN:?}: {last}"
            );
        }
    }
}

/// Upstream `waitForDefinitionCleanup`: polls until `crd`'s `version` is no longer published.
async fn wait_for_cleanup(f: &Framework, crd: &CustomResourceDefinition, version: &str) -> CaseResult {
    let name = definition_name(crd, version);
    f.step(format!(
        "waiting for definition {name} to leave the OpenAPI v3 document"
    ));
    let until = Instant::now() + PUBLISH_WITHIN.min(f.remaining());
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        if definition(f, crd, version).await?.is_none() {
            return Ok(());
        }
        if Instant::now() >= until {
            fail!(
                "failed to wait for definition {name} not to be served anymore within {PUBLISH_WITHIN:?}: it is still published"
            );
        }
    }
}

/// Upstream `setupCRD`: creates the CRD and waits until every version is published with
/// `schema`.
async fn setup(
    f: &Framework,
    group: &str,
    index: usize,
    versions: &[&str],
    schema: &Value,
) -> Result<CustomResourceDefinition, CaseError> {
    let crd = create_established(f, &test_crd(f, group, index, versions, schema)?).await?;
    for v in versions {
        wait_for_definition(f, &crd, v, schema).await?;
    }
    Ok(crd)
}

/// Upstream `cleanupCRD`: deletes the CRD and waits until none of its versions is published.
async fn cleanup(f: &Framework, crd: &CustomResourceDefinition) -> CaseResult {
    delete_gone(f, &crd.name_any()).await?;
    for v in &crd.spec.versions {
        wait_for_cleanup(f, crd, &v.name).await?;
    }
    Ok(())
}

/// Runs `body` on the CRDs `setups` create, then cleans up every one that was created.
async fn with_crds(
    f: &Framework,
    setups: &[(&str, &[&str], Value)],
    body: impl AsyncFnOnce(&[CustomResourceDefinition]) -> CaseResult,
) -> CaseResult {
    let mut crds = Vec::new();
    let mut result = Ok(());
    for (i, (group, versions, schema)) in setups.iter().enumerate() {
        match setup(f, group, i, versions, schema).await {
            Ok(c) => crds.push(c),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if result.is_ok() {
        result = body(&crds).await;
    }
    for crd in &crds {
        let cleaned = cleanup(f, crd).await;
        result = result.and(cleaned);
    }
    result
}

/// The namespaced handle of `crd`'s first version's objects.
fn objects(f: &Framework, crd: &CustomResourceDefinition) -> Api<DynamicObject> {
    let version = crd.spec.versions.first().map_or("", |v| v.name.as_str());
    let gvk = GroupVersionKind::gvk(&crd.spec.group, version, &crd.spec.names.kind);
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
    Api::namespaced_with(f.client(), f.ns(), &resource)
}

/// Upstream's `kubectl create -f -` and `kubectl apply -f -` of `body` (the object's fields
/// beside its type and name), each followed by `kubectl delete`: both must be accepted.
async fn create_and_apply(f: &Framework, crd: &CustomResourceDefinition, name: &str, body: Value) -> CaseResult {
    let api = objects(f, crd);
    let version = crd.spec.versions.first().map_or("", |v| v.name.as_str());
    let mut obj = json!({"kind": crd.spec.names.kind, "apiVersion": format!("{}/{version}", crd.spec.group),
        "metadata": {"name": name}});
    if let (Some(o), Value::Object(more)) = (obj.as_object_mut(), body) {
        o.extend(more);
    }
    let applied = obj.to_string();
    for (how, annotations) in [
        ("create", None),
        (
            "apply",
            Some(BTreeMap::from([(
                "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                applied.clone(),
            )])),
        ),
    ] {
        f.step(format!("kubectl {how} of custom object {name}"));
        let mut o: DynamicObject = serde_json::from_value(obj.clone())
            .map_err(|e| CaseError::failed(format!("building custom object {name}: {e}")))?;
        o.metadata.annotations = annotations;
        api.create(&PostParams::default(), &o)
            .await
            .map_err(|e| CaseError::from(e).context(format!("failed to {how} custom object {obj}")))?;
        api.delete(name, &DeleteParams::default())
            .await
            .map_err(|e| CaseError::from(e).context(format!("failed to delete custom object {name}")))?;
    }
    Ok(())
}

/// The field at `path` (dot-separated, `[]` stepping into array items) of definition `d`, as
/// `kubectl explain KIND.PATH` resolves it.
fn field<'a>(d: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = d;
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        if cur["type"] == "array" {
            cur = cur.get("items")?;
        }
        cur = cur.get("properties")?.get(seg)?;
    }
    Some(cur)
}

/// Checks what `kubectl explain` prints for `path`: the field exists with `ty` (`string`,
/// `object` or `array`) and a description containing `description`.
fn explains(d: &Value, kind: &str, path: &str, ty: &str, description: &str) -> CaseResult {
    let Some(fd) = field(d, path) else {
        fail!(
            "kubectl explain {kind}.{path} would fail: field {path:?} does not exist in the published definition {d}"
        );
    };
    // A field published as a reference (`metadata`: allOf ObjectMeta) explains as an object.
    let seen = fd["type"]
        .as_str()
        .or_else(|| (fd.get("allOf").is_some() || fd.get("$ref").is_some()).then_some("object"));
    ensure!(
        seen == Some(ty) && fd["description"].as_str().is_some_and(|s| s.contains(description)),
        "kubectl explain {kind}.{path} would show type {} and description {}, expected <{ty}> and a description containing {description:?}",
        fd["type"],
        fd["description"]
    );
    Ok(())
}

/// Upstream: the Foo CRD; a valid object is created and applied; explain shows the kind's
/// description, `apiVersion`, `spec`, `metadata`, `spec.bars` and the fields of its items, and
/// fails for `spec.bars2`.
async fn with_schema(f: &Framework) -> CaseResult {
    with_crds(
        f,
        &[("foo", &["v1"][..], schema_foo())],
        async |crds: &[CustomResourceDefinition]| {
            let crd = &crds[0];
            create_and_apply(f, crd, "test-foo", json!({"spec": {"bars": [{"name": "test-bar"}]}})).await?;
            let d = published(f, crd, "v1").await?;
            let kind = crd.spec.names.plural.as_str();
            ensure!(
                d["description"]
                    .as_str()
                    .is_some_and(|s| s.contains("Foo CRD for Testing")),
                "kubectl explain {kind} would show DESCRIPTION {}, expected \"Foo CRD for Testing\"",
                d["description"]
            );
            explains(&d, kind, "apiVersion", "string", "APIVersion defines")?;
            explains(&d, kind, "spec", "object", "Specification of Foo")?;
            explains(&d, kind, "metadata", "object", "Standard object's metadata")?;
            explains(&d, kind, "spec.bars", "array", "List of Bars and their specs")?;
            explains(&d, kind, "spec.bars.bazs", "array", "List of Bazs")?;
            explains(&d, kind, "spec.bars.name", "string", "Name of Bar")?;
            ensure!(
                field(&d, "spec.bars2").is_none(),
                "kubectl explain {kind}.spec.bars2 would succeed, expected field \"bars2\" does not exist"
            );
            Ok(())
        },
    )
    .await
}

/// Upstream: a CRD without a schema (it keeps every field); any object is created and applied;
/// explain shows an empty description.
async fn without_schema(f: &Framework) -> CaseResult {
    with_crds(
        f,
        &[("empty", &["v1"][..], schema_empty())],
        async |crds: &[CustomResourceDefinition]| {
            let crd = &crds[0];
            create_and_apply(f, crd, "test-cr", json!({"a": {"b": [{"c": "d"}]}})).await?;
            let d = published(f, crd, "v1").await?;
            ensure!(
                d["description"].as_str().is_none_or(str::is_empty),
                "kubectl explain {} would show DESCRIPTION {}, expected <empty>",
                crd.spec.names.plural,
                d["description"]
            );
            Ok(())
        },
    )
    .await
}

/// Upstream: a CRD keeping unknown fields at its root; any object is created and applied;
/// explain shows the kind.
async fn preserve_root(f: &Framework) -> CaseResult {
    with_crds(
        f,
        &[("unknown-at-root", &["v1"][..], schema_preserve_root())],
        async |crds: &[CustomResourceDefinition]| {
            let crd = &crds[0];
            create_and_apply(f, crd, "test-cr", json!({"a": {"b": [{"c": "d"}]}})).await?;
            let d = published(f, crd, "v1").await?;
            let kinds: Vec<&str> = d["x-kubernetes-group-version-kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| g["kind"].as_str())
                .collect();
            ensure!(
                kinds.contains(&crd.spec.names.kind.as_str()),
                "kubectl explain {} would not show KIND {}: the definition names kinds {kinds:?}",
                crd.spec.names.plural,
                crd.spec.names.kind
            );
            Ok(())
        },
    )
    .await
}

/// Upstream: a CRD keeping unknown fields in `spec`; an object with unknown `spec` fields is
/// created and applied; explain shows the kind's description.
async fn preserve_nested(f: &Framework) -> CaseResult {
    with_crds(f, &[("unknown-in-nested", &["v1"][..], schema_preserve_nested())], async |crds: &[CustomResourceDefinition]| {
        let crd = &crds[0];
        create_and_apply(f, crd, "test-cr", json!({"spec": {"a": null, "b": [{"c": "d"}]}})).await?;
        let d = published(f, crd, "v1").await?;
        ensure!(
            d["description"]
                .as_str()
                .is_some_and(|s| s.contains("preserve-unknown-properties in nested field for Testing")),
            "kubectl explain {} would show DESCRIPTION {}, expected \"preserve-unknown-properties in nested field for Testing\"",
            crd.spec.names.plural,
            d["description"]
        );
        Ok(())
    })
    .await
}

/// Upstream: Foo (group foo, v1) and Waldo (group waldo, v1beta1) are both published.
async fn different_groups(f: &Framework) -> CaseResult {
    let setups = [
        ("foo", &["v1"][..], schema_foo()),
        ("waldo", &["v1beta1"][..], schema_waldo()),
    ];
    with_crds(f, &setups, async |crds: &[CustomResourceDefinition]| {
        ensure!(
            crds[0].spec.group != crds[1].spec.group,
            "unexpected: CRDs should be of different group {}, {}",
            crds[0].spec.group,
            crds[1].spec.group
        );
        wait_for_definition(f, &crds[1], "v1beta1", &schema_waldo()).await?;
        wait_for_definition(f, &crds[0], "v1", &schema_foo()).await?;
        Ok(())
    })
    .await
}

/// Upstream: one CRD serving v2 and v3 has both published; then two CRDs of one group in v4
/// and v5 have theirs.
async fn different_versions(f: &Framework) -> CaseResult {
    with_crds(
        f,
        &[("multi-ver", &["v2", "v3"][..], schema_foo())],
        async |crds: &[CustomResourceDefinition]| {
            wait_for_definition(f, &crds[0], "v3", &schema_foo()).await?;
            wait_for_definition(f, &crds[0], "v2", &schema_foo()).await?;
            Ok(())
        },
    )
    .await?;
    let setups = [
        ("common-group", &["v4"][..], schema_foo()),
        ("common-group", &["v5"][..], schema_waldo()),
    ];
    with_crds(f, &setups, async |crds: &[CustomResourceDefinition]| {
        wait_for_definition(f, &crds[1], "v5", &schema_waldo()).await?;
        wait_for_definition(f, &crds[0], "v4", &schema_foo()).await?;
        Ok(())
    })
    .await
}

/// Upstream: two CRDs of one group and version v6 with different kinds are both published.
async fn different_kinds(f: &Framework) -> CaseResult {
    let setups = [
        ("common-group", &["v6"][..], schema_foo()),
        ("common-group", &["v6"][..], schema_waldo()),
    ];
    with_crds(f, &setups, async |crds: &[CustomResourceDefinition]| {
        wait_for_definition(f, &crds[1], "v6", &schema_waldo()).await?;
        wait_for_definition(f, &crds[0], "v6", &schema_foo()).await?;
        Ok(())
    })
    .await
}

/// Replaces `crd` after `edit`, retrying on conflict.
async fn edit_crd(
    f: &Framework,
    crd: &CustomResourceDefinition,
    edit: impl Fn(&mut CustomResourceDefinition),
) -> Result<CustomResourceDefinition, CaseError> {
    let crds: Api<CustomResourceDefinition> = f.api_all();
    replace_retrying(&crds, &crd.name_any(), edit).await
}

/// Upstream: a CRD serving v2 and v3; v3 renamed to v4 is published as v4, v3 leaves, v2 stays.
async fn renamed(f: &Framework) -> CaseResult {
    with_crds(
        f,
        &[("multi-ver", &["v2", "v3"][..], schema_foo())],
        async |crds: &[CustomResourceDefinition]| {
            f.step("renaming version v3 to v4");
            let renamed = edit_crd(f, &crds[0], |c| {
                if let Some(v) = c.spec.versions.get_mut(1).filter(|v| v.name == "v3") {
                    v.name = "v4".into();
                }
            })
            .await?;
            wait_for_definition(f, &renamed, "v4", &schema_foo()).await?;
            wait_for_cleanup(f, &renamed, "v3").await?;
            wait_for_definition(f, &renamed, "v2", &schema_foo()).await?;
            Ok(())
        },
    )
    .await
}

/// Upstream: a CRD serving v5 and v6alpha1; once v6alpha1 is not served its definition
/// leaves and v5's stays.
async fn not_served(f: &Framework) -> CaseResult {
    with_crds(
        f,
        &[("multi-to-single-ver", &["v5", "v6alpha1"][..], schema_foo())],
        async |crds: &[CustomResourceDefinition]| {
            f.step("marking version v6alpha1 not served");
            let updated = edit_crd(f, &crds[0], |c| {
                if let Some(v) = c.spec.versions.get_mut(1) {
                    v.served = false;
                }
            })
            .await?;
            wait_for_cleanup(f, &updated, "v6alpha1").await?;
            wait_for_definition(f, &updated, "v5", &schema_foo()).await?;
            Ok(())
        },
    )
    .await
}
