//! OpenAPI v3: the `/openapi/v3` index and one document per group-version.
//!
//! kubectl `apply` reads these to learn that writes accept `fieldValidation` (then it sends
//! `fieldValidation=Strict` and relies on the server to reject unknown fields). The documents
//! carry every served path with `x-kubernetes-action` and `x-kubernetes-group-version-kind`
//! and a component schema per kind listing its top-level properties. Schemas are deliberately
//! shallow and carry no `x-kubernetes-group-version-kind`: with it, kubectl computes apply
//! patches from these schemas and warns that it cannot find nested fields; without it, kubectl
//! uses its compiled-in types for patch merge keys, which is exact for built-in kinds. The cost
//! is that `kubectl explain` finds no schema for a built-in kind. Custom kinds carry their CRD's
//! schema with the kind's identity, as upstream publishes them: kubectl computes no
//! strategic patch for a kind it has no Go type for, and `kubectl explain` finds them.

use serde_json::{Map, Value, json};

use super::discovery::GIT_VERSION;
use super::registry::{self, ResourceDef};

fn doc_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A stable hash of a document, for the `?hash=` clients cache on.
fn hash(v: &Value) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}{:016X}", h.finish(), h.finish().rotate_left(17))
}

/// `/openapi/v3`.
pub fn index() -> Value {
    index_in(&registry::builtin())
}

/// `/openapi/v3` over `defs` (built-in and custom kinds).
pub fn index_in(defs: &[&'static ResourceDef]) -> Value {
    let mut paths = Map::new();
    for (g, v) in registry::group_versions_of(defs) {
        let p = doc_path(g, v);
        let url = format!("/openapi/v3/{p}?hash={}", hash(&document_in(defs, g, v)));
        paths.insert(p, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// The schema name upstream uses for a kind, e.g. `io.k8s.api.core.v1.Pod`; custom kinds
/// are named by their reversed group (`com.example.v1.Widget`), as upstream's CRD builder does.
pub fn schema_name(def: &ResourceDef) -> String {
    if def.custom.is_some() {
        let reversed: Vec<&str> = def.group.split('.').rev().collect();
        return format!("{}.{}.{}", reversed.join("."), def.version, def.kind);
    }
    let short = def.group.split('.').next().filter(|s| !s.is_empty()).unwrap_or("core");
    format!("io.k8s.api.{short}.{}.{}", def.version, def.kind)
}

fn gvk(def: &ResourceDef) -> Value {
    json!({"group": def.group, "version": def.version, "kind": def.kind})
}

fn param(name: &str, location: &str, description: &str) -> Value {
    json!({"name": name, "in": location, "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn query_params(write: bool) -> Vec<Value> {
    let mut p = vec![param(
        "pretty",
        "query",
        "If 'true', then the output is pretty printed.",
    )];
    if write {
        p.push(param(
            "dryRun",
            "query",
            "When present, indicates that modifications should not be persisted.",
        ));
        p.push(param(
            "fieldManager",
            "query",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ));
        p.push(param(
            "fieldValidation",
            "query",
            "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: Ignore, Warn (default), Strict.",
        ));
    }
    p
}

fn op(def: &ResourceDef, action: &str, id: &str, write: bool, body: bool, patch: bool) -> Value {
    let r = json!({"$ref": format!("#/components/schemas/{}", schema_name(def))});
    let mut o = json!({
        "tags": [format!("{}_{}", if def.group.is_empty() { "core" } else { def.group }, def.version)],
        "description": format!("{action} {}", def.kind),
        "operationId": id,
        "parameters": query_params(write),
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": r}}},
                      "401": {"description": "Unauthorized"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(def),
    });
    if body {
        let types: Vec<&str> = if patch {
            vec![
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
            ]
        } else {
            vec!["*/*"]
        };
        let schema = if patch { json!({"type": "object"}) } else { r };
        let content: Map<String, Value> = types
            .into_iter()
            .map(|t| (t.to_string(), json!({"schema": schema})))
            .collect();
        o["requestBody"] = json!({"content": content, "required": true});
    }
    o
}

fn op_id(verb: &str, def: &ResourceDef, namespaced: bool) -> String {
    let gv: String = format!(
        "{}{}",
        if def.group.is_empty() {
            "core"
        } else {
            def.group.split('.').next().unwrap_or("")
        },
        def.version
    );
    let mut gv_c = gv.clone();
    if let Some(f) = gv_c.get_mut(0..1) {
        f.make_ascii_uppercase();
    }
    format!("{verb}{gv_c}{}{}", if namespaced { "Namespaced" } else { "" }, def.kind)
}

/// The document of one built-in group-version.
pub fn document(group: &str, version: &str) -> Value {
    document_in(&registry::builtin(), group, version)
}

/// The document of one group-version of `defs`.
pub fn document_in(defs: &[&'static ResourceDef], group: &str, version: &str) -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    for d in defs
        .iter()
        .copied()
        .filter(|d| d.group == group && d.version == version)
    {
        let scope = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/{}", d.plural)
        };
        let mut coll = Map::new();
        let mut path_params = vec![];
        if d.namespaced {
            path_params.push(json!({"name": "namespace", "in": "path", "required": true, "description": "object name and auth scope, such as for teams and projects", "schema": {"type": "string", "uniqueItems": true}}));
        }
        if d.allows("list") {
            coll.insert(
                "get".into(),
                op(d, "list", &op_id("list", d, d.namespaced), false, false, false),
            );
        }
        if d.allows("create") {
            coll.insert(
                "post".into(),
                op(d, "post", &op_id("create", d, d.namespaced), true, true, false),
            );
        }
        if d.allows("deletecollection") {
            coll.insert(
                "delete".into(),
                op(
                    d,
                    "deletecollection",
                    &op_id("deleteCollection", d, d.namespaced),
                    false,
                    false,
                    false,
                ),
            );
        }
        coll.insert("parameters".into(), json!(path_params));
        paths.insert(scope.clone(), Value::Object(coll));
        if d.allows("get") {
            let mut item = Map::new();
            item.insert(
                "get".into(),
                op(d, "get", &op_id("read", d, d.namespaced), false, false, false),
            );
            item.insert(
                "put".into(),
                op(d, "put", &op_id("replace", d, d.namespaced), true, true, false),
            );
            item.insert(
                "patch".into(),
                op(d, "patch", &op_id("patch", d, d.namespaced), true, true, true),
            );
            item.insert(
                "delete".into(),
                op(d, "delete", &op_id("delete", d, d.namespaced), false, false, false),
            );
            let mut pp = vec![
                json!({"name": "name", "in": "path", "required": true, "description": format!("name of the {}", d.kind), "schema": {"type": "string", "uniqueItems": true}}),
            ];
            pp.extend(path_params.clone());
            item.insert("parameters".into(), json!(pp));
            paths.insert(format!("{scope}/{{name}}"), Value::Object(item));
            for sub in d
                .subresources
                .iter()
                .filter(|s| matches!(**s, "status" | "scale" | "approval" | "ephemeralcontainers"))
            {
                let mut s = Map::new();
                s.insert(
                    "get".into(),
                    op(
                        d,
                        "get",
                        &op_id(&format!("read{}", cap(sub)), d, d.namespaced),
                        false,
                        false,
                        false,
                    ),
                );
                s.insert(
                    "put".into(),
                    op(
                        d,
                        "put",
                        &op_id(&format!("replace{}", cap(sub)), d, d.namespaced),
                        true,
                        true,
                        false,
                    ),
                );
                s.insert(
                    "patch".into(),
                    op(
                        d,
                        "patch",
                        &op_id(&format!("patch{}", cap(sub)), d, d.namespaced),
                        true,
                        true,
                        true,
                    ),
                );
                s.insert("parameters".into(), json!(pp));
                paths.insert(format!("{scope}/{{name}}/{sub}"), Value::Object(s));
            }
        }
        if d.namespaced && d.allows("list") {
            let mut all = Map::new();
            all.insert(
                "get".into(),
                op(
                    d,
                    "list",
                    &format!("{}ForAllNamespaces", op_id("list", d, false)),
                    false,
                    false,
                    false,
                ),
            );
            paths.insert(format!("{prefix}/{}", d.plural), Value::Object(all));
        }
        if let Some(custom) = d.custom {
            let name = schema_name(d);
            let item_ref = format!("#/components/schemas/{name}");
            schemas.insert(
                format!("{name}List"),
                super::crd::serve::openapi_list_schema(d, custom, &item_ref),
            );
            schemas.insert(name, super::crd::serve::openapi_schema(d, custom));
            continue;
        }
        schemas.insert(
            schema_name(d),
            json!({
                "description": format!("{} is a {} object served by the simulated cluster.", d.kind, d.api_version()),
                "type": "object",
                "properties": {
                    "apiVersion": {"description": "APIVersion defines the versioned schema of this representation of an object.", "type": "string"},
                    "kind": {"description": "Kind is a string value representing the REST resource this object represents.", "type": "string"},
                    "metadata": {"description": "Standard object's metadata.", "type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }
            }),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas}
    })
}

fn cap(s: &str) -> String {
    let mut c = s.to_string();
    if let Some(f) = c.get_mut(0..1) {
        f.make_ascii_uppercase();
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_operations_carry_gvk_and_field_validation() {
        let d = document("apps", "v1");
        let p = &d["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(p["x-kubernetes-action"], "patch");
        assert_eq!(p["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert!(
            p["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["name"] == "fieldValidation" && x["in"] == "query")
        );
        assert!(d["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"].is_object());
        let idx = index();
        assert!(
            idx["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/api/v1?hash=")
        );
    }
}
