//! Decoding request bodies with server-side field validation.
//!
//! The main function is [`decode`]. Like the real server, a body is decoded into the typed
//! object, which drops fields the type does not know; `fieldValidation` decides what the client
//! hears about them: `Strict` is a 400 `strict decoding error: unknown field "spec.foo"`,
//! `Warn` (the default) a `Warning` header, `Ignore` nothing. Duplicate JSON keys are found on
//! the raw bytes, since a decoded map has already lost them. The typed round trip uses
//! k8s-openapi's types, so the set of known fields is exactly upstream's (v1.33).

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use axum::http::HeaderMap;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::error::{ApiError, ApiResult};
use super::objects::Query;
use super::registry::ResourceDef;
use crate::gates::FeatureGates;

/// The `fieldValidation` directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Reject unknown and duplicate fields.
    Strict,
    /// Drop them and warn (the server default).
    Warn,
    /// Drop them silently.
    Ignore,
}

impl Mode {
    /// Reads `fieldValidation` from the query.
    pub fn from_query(q: &Query) -> ApiResult<Self> {
        match q.get("fieldValidation").map(String::as_str) {
            None | Some("") | Some("Warn") => Ok(Mode::Warn),
            Some("Strict") => Ok(Mode::Strict),
            Some("Ignore") => Ok(Mode::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other}. Supported values: Ignore, Warn, Strict"
            ))),
        }
    }
}

/// A decoded body and the warnings to send back.
#[derive(Debug)]
pub struct Decoded {
    /// The object, with unknown fields dropped.
    pub value: Value,
    /// `Warning` header texts.
    pub warnings: Vec<String>,
}

/// Decodes a create/update body; `gates` decide which fields newer than 1.33 the types know.
pub fn decode(
    def: &ResourceDef,
    body: &[u8],
    headers: &HeaderMap,
    q: &Query,
    gates: &FeatureGates,
) -> ApiResult<Decoded> {
    let mode = Mode::from_query(q)?;
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let base = ct.split(';').next().unwrap_or_default().trim();
    let value: Value = match base {
        "application/json" | "" | "*/*" => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))?,
        "application/yaml" => {
            let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
            serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?
        }
        "application/vnd.kubernetes.protobuf" => super::protobuf::decode(body)?,
        other => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {other:?})"
            )));
        }
    };
    // Upstream's strict JSON decoder reports unknown and duplicate fields as it meets them, so
    // the problems are ordered by where they occur in the body.
    let keys = if base == "application/json" || base.is_empty() {
        key_order(body)
    } else {
        Vec::new()
    };
    let mut problems: Vec<(usize, String)> = keys
        .iter()
        .enumerate()
        .filter(|(_, (_, repeated))| *repeated)
        .map(|(i, (p, _))| (i, format!("duplicate field {p:?}")))
        .collect();
    let (value, unknown) = prune(def, value, gates)?;
    problems.extend(unknown.into_iter().map(|p| {
        let at = keys.iter().position(|(k, _)| *k == p).unwrap_or(usize::MAX);
        (at, format!("unknown field {p:?}"))
    }));
    problems.sort_by_key(|(at, _)| *at);
    let problems: Vec<String> = problems.into_iter().map(|(_, p)| p).collect();
    Ok(Decoded {
        value,
        warnings: report(mode, problems)?,
    })
}

/// Prunes and checks an object produced by a patch.
pub fn check_value(def: &ResourceDef, v: Value, mode: Mode, gates: &FeatureGates) -> ApiResult<(Value, Vec<String>)> {
    let (v, unknown) = prune(def, v, gates)?;
    let problems: Vec<String> = unknown.into_iter().map(|p| format!("unknown field {p:?}")).collect();
    Ok((v, report(mode, problems)?))
}

fn report(mode: Mode, problems: Vec<String>) -> ApiResult<Vec<String>> {
    if problems.is_empty() {
        return Ok(Vec::new());
    }
    match mode {
        Mode::Strict => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            problems.join(", ")
        ))),
        Mode::Warn => Ok(problems),
        Mode::Ignore => Ok(Vec::new()),
    }
}

/// The typed round trip of `v` for resources with a k8s-openapi type; None when the type is
/// not modelled.
fn roundtrip(def: &ResourceDef, v: &Value) -> Option<Result<Value, serde_json::Error>> {
    use k8s_openapi::api as a;
    macro_rules! rt {
        ($t:ty) => {
            Some(serde_json::from_value::<$t>(v.clone()).and_then(serde_json::to_value))
        };
    }
    match (def.group, def.plural) {
        ("", "namespaces") => rt!(a::core::v1::Namespace),
        ("", "pods") => rt!(a::core::v1::Pod),
        ("", "services") => rt!(a::core::v1::Service),
        ("", "endpoints") => rt!(a::core::v1::Endpoints),
        ("", "configmaps") => rt!(a::core::v1::ConfigMap),
        ("", "secrets") => rt!(a::core::v1::Secret),
        ("", "serviceaccounts") => rt!(a::core::v1::ServiceAccount),
        ("", "nodes") => rt!(a::core::v1::Node),
        ("", "events") => rt!(a::core::v1::Event),
        ("", "resourcequotas") => rt!(a::core::v1::ResourceQuota),
        ("", "limitranges") => rt!(a::core::v1::LimitRange),
        ("", "persistentvolumeclaims") => rt!(a::core::v1::PersistentVolumeClaim),
        ("", "persistentvolumes") => rt!(a::core::v1::PersistentVolume),
        ("", "bindings") => rt!(a::core::v1::Binding),
        ("apps", "deployments") => rt!(a::apps::v1::Deployment),
        ("apps", "replicasets") => rt!(a::apps::v1::ReplicaSet),
        ("apps", "daemonsets") => rt!(a::apps::v1::DaemonSet),
        ("apps", "statefulsets") => rt!(a::apps::v1::StatefulSet),
        ("apps", "controllerrevisions") => rt!(a::apps::v1::ControllerRevision),
        ("batch", "jobs") => rt!(a::batch::v1::Job),
        ("batch", "cronjobs") => rt!(a::batch::v1::CronJob),
        ("autoscaling", "horizontalpodautoscalers") if def.version == "v1" => {
            rt!(a::autoscaling::v1::HorizontalPodAutoscaler)
        }
        ("autoscaling", "horizontalpodautoscalers") => rt!(a::autoscaling::v2::HorizontalPodAutoscaler),
        ("discovery.k8s.io", "endpointslices") => rt!(a::discovery::v1::EndpointSlice),
        ("coordination.k8s.io", "leases") => rt!(a::coordination::v1::Lease),
        ("scheduling.k8s.io", "priorityclasses") => rt!(a::scheduling::v1::PriorityClass),
        ("node.k8s.io", "runtimeclasses") => rt!(a::node::v1::RuntimeClass),
        ("events.k8s.io", "events") => rt!(a::events::v1::Event),
        ("authorization.k8s.io", "selfsubjectaccessreviews") => rt!(a::authorization::v1::SelfSubjectAccessReview),
        ("authorization.k8s.io", "selfsubjectrulesreviews") => rt!(a::authorization::v1::SelfSubjectRulesReview),
        ("authorization.k8s.io", "subjectaccessreviews") => rt!(a::authorization::v1::SubjectAccessReview),
        ("authorization.k8s.io", "localsubjectaccessreviews") => rt!(a::authorization::v1::LocalSubjectAccessReview),
        ("authentication.k8s.io", "tokenreviews") => rt!(a::authentication::v1::TokenReview),
        ("rbac.authorization.k8s.io", "roles") => rt!(a::rbac::v1::Role),
        ("rbac.authorization.k8s.io", "clusterroles") => rt!(a::rbac::v1::ClusterRole),
        ("rbac.authorization.k8s.io", "rolebindings") => rt!(a::rbac::v1::RoleBinding),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => rt!(a::rbac::v1::ClusterRoleBinding),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            rt!(a::admissionregistration::v1::MutatingWebhookConfiguration)
        }
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            rt!(a::admissionregistration::v1::ValidatingWebhookConfiguration)
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
            rt!(a::admissionregistration::v1::ValidatingAdmissionPolicy)
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => {
            rt!(a::admissionregistration::v1::ValidatingAdmissionPolicyBinding)
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            rt!(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition)
        }
        _ => None,
    }
}

/// The paths of the fields of custom object `v` that its schema does not declare (nor keeps
/// as unknown): what server-side apply refuses for a custom kind, whose type it builds from
/// the schema. Empty for built-in kinds.
///
/// # Errors
/// When `v.metadata` is not an ObjectMeta.
pub fn undeclared(def: &ResourceDef, v: &Value) -> ApiResult<Vec<String>> {
    if def.custom.is_none() {
        return Ok(Vec::new());
    }
    Ok(prune(def, v.clone(), &FeatureGates::default())?.1)
}

/// Drops unknown fields, returning their paths. A body the type cannot hold because a
/// required field is missing is returned unpruned: validation answers that with a 422, as
/// upstream does; any other type mismatch is a 400, as upstream's decoder answers. Fields that
/// a gate adds to a type newer than 1.33 are kept when `gates` turn it on.
fn prune(def: &ResourceDef, mut v: Value, gates: &FeatureGates) -> ApiResult<(Value, Vec<String>)> {
    if let Some(m) = v.as_object_mut() {
        m.entry("apiVersion")
            .or_insert_with(|| Value::String(def.api_version()));
        m.entry("kind").or_insert_with(|| Value::String(def.kind.to_string()));
    }
    // Custom objects have no Go type: upstream prunes them against their structural schema.
    // Their metadata is an ObjectMeta all the same, decoded as the typed field it is.
    if let Some(custom) = def.custom {
        let mut unknown = Vec::new();
        if let Some(m) = v.get("metadata").filter(|m| m.is_object()) {
            let typed = serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(m.clone())
                .and_then(serde_json::to_value)
                .map_err(|e| ApiError::bad_request(format!("{} in body is invalid: {e}", def.kind)))?;
            v["metadata"] = keep_known(m, &typed, "metadata", &mut unknown);
        }
        unknown.extend(super::crd::prune::prune(&custom.schema, &mut v));
        return Ok((v, unknown));
    }
    match roundtrip(def, &v) {
        None => Ok((v, Vec::new())),
        Some(Err(e)) if e.to_string().contains("missing field") => Ok((v, Vec::new())),
        Some(Err(e)) => Err(ApiError::bad_request(format!("{} in body is invalid: {e}", def.kind))),
        Some(Ok(typed)) => {
            let mut unknown = Vec::new();
            let mut pruned = keep_known(&v, &typed, "", &mut unknown);
            if super::restart_rules::applies(gates, def.kind) {
                restore_restart_rules(def, &v, &mut pruned, &mut unknown)?;
            }
            Ok((pruned, unknown))
        }
    }
}

/// Puts back the `restartPolicyRules` of pod `input`'s containers that the 1.33 round trip
/// dropped (gate `ContainerRestartRules` on), decoded as the 1.34 types decode them.
fn restore_restart_rules(
    def: &ResourceDef,
    input: &Value,
    pruned: &mut Value,
    unknown: &mut Vec<String>,
) -> ApiResult<()> {
    for (pointer, path) in super::restart_rules::locations(input) {
        let Some(rules) = input.pointer(&pointer) else { continue };
        let typed = super::restart_rules::typed(rules)
            .map_err(|e| ApiError::bad_request(format!("{} in body is invalid: {path}: {e}", def.kind)))?;
        unknown.retain(|p| *p != path);
        let kept = keep_known(rules, &typed, &path, unknown);
        let Some((parent, _)) = pointer.rsplit_once('/') else {
            continue;
        };
        if let Some(c) = pruned.pointer_mut(parent).and_then(Value::as_object_mut) {
            c.insert("restartPolicyRules".into(), kept);
        }
    }
    Ok(())
}

/// `input` restricted to the keys the typed form kept (values stay as the client wrote them).
fn keep_known(input: &Value, typed: &Value, path: &str, unknown: &mut Vec<String>) -> Value {
    match (input, typed) {
        (Value::Object(i), Value::Object(t)) => {
            let mut out = serde_json::Map::new();
            for (k, iv) in i {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match t.get(k) {
                    Some(tv) => {
                        out.insert(k.clone(), keep_known(iv, tv, &p, unknown));
                    }
                    None if iv.is_null() => {}
                    None => unknown.push(p),
                }
            }
            Value::Object(out)
        }
        (Value::Array(i), Value::Array(t)) if i.len() == t.len() => Value::Array(
            i.iter()
                .zip(t)
                .enumerate()
                .map(|(n, (iv, tv))| keep_known(iv, tv, &format!("{path}[{n}]"), unknown))
                .collect(),
        ),
        _ => input.clone(),
    }
}

/// Paths of keys that appear twice in one JSON object.
pub fn duplicates(body: &[u8]) -> Vec<String> {
    key_order(body)
        .into_iter()
        .filter_map(|(p, repeated)| repeated.then_some(p))
        .collect()
}

/// Every key of a JSON body in document order, by path, each marked whether it repeats a key
/// already seen in its object.
fn key_order(body: &[u8]) -> Vec<(String, bool)> {
    let found = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(body);
    // Malformed JSON was already rejected by the caller's parse.
    let _ = Dup {
        path: String::new(),
        found: &found,
    }
    .deserialize(&mut de);
    found.into_inner()
}

struct Dup<'a> {
    path: String,
    found: &'a RefCell<Vec<(String, bool)>>,
}

impl<'de> DeserializeSeed<'de> for Dup<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Dup<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(k) = map.next_key::<String>()? {
            let p = if self.path.is_empty() {
                k.clone()
            } else {
                format!("{}.{k}", self.path)
            };
            let repeated = !seen.insert(k);
            self.found.borrow_mut().push((p.clone(), repeated));
            map.next_value_seed(Dup {
                path: p,
                found: self.found,
            })?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Dup {
                path: format!("{}[{i}]", self.path),
                found: self.found,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::registry::find;

    fn off() -> FeatureGates {
        FeatureGates::default()
    }

    fn q(mode: &str) -> Query {
        [("fieldValidation".to_string(), mode.to_string())]
            .into_iter()
            .collect()
    }

    #[test]
    fn strict_rejects_unknown_and_duplicate_fields() {
        let def = find("", "v1", "configmaps").unwrap();
        let h = HeaderMap::new();
        let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"},"foo":1}"#;
        let e = decode(def, body, &h, &q("Strict"), &off()).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(e.message, "strict decoding error: unknown field \"foo\"");
        let d = decode(def, body, &h, &q("Warn"), &off()).unwrap();
        assert_eq!(d.warnings, ["unknown field \"foo\""]);
        assert!(d.value.get("foo").is_none());
        assert_eq!(d.value["data"]["k"], "v");
        let dup = br#"{"metadata":{"name":"a","name":"b"}}"#;
        let e = decode(def, dup, &h, &q("Strict"), &off()).unwrap_err();
        assert!(e.message.contains("duplicate field \"metadata.name\""), "{}", e.message);
        assert!(decode(def, dup, &h, &q("Ignore"), &off()).unwrap().warnings.is_empty());
    }

    #[test]
    fn nested_unknown_fields_are_found_in_pods() {
        let def = find("", "v1", "pods").unwrap();
        let body = br#"{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i","bogus":true}]}}"#;
        let e = decode(def, body, &HeaderMap::new(), &q("Strict"), &off()).unwrap_err();
        assert!(
            e.message.contains("unknown field \"spec.containers[0].bogus\""),
            "{}",
            e.message
        );
        let e = decode(
            def,
            br#"{"metadata":{"name":"p"},"spec":{"containers":"x"}}"#,
            &HeaderMap::new(),
            &q("Warn"),
            &off(),
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
    }

    #[test]
    fn problems_come_in_the_order_of_the_body() {
        let def = find("apps", "v1", "deployments").unwrap();
        let body = br#"{"metadata":{"name":"d"},"spec":{"unknownField":"foo","replicas":2,"replicas":3,
            "selector":{"matchLabels":{"a":"b"}},"template":{"spec":{"containers":[{"name":"c","image":"i"}]}}}}"#;
        let e = decode(def, body, &HeaderMap::new(), &q("Strict"), &off()).unwrap_err();
        assert_eq!(
            e.message,
            "strict decoding error: unknown field \"spec.unknownField\", duplicate field \"spec.replicas\""
        );
    }

    #[test]
    fn restart_rules_are_kept_only_with_their_gate() {
        let def = find("", "v1", "pods").unwrap();
        let body = br#"{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i","restartPolicy":"Never",
            "restartPolicyRules":[{"action":"Restart","when":1,"exitCodes":{"operator":"In","values":[42]}}]}]}}"#;
        let d = decode(def, body, &HeaderMap::new(), &q("Warn"), &off()).unwrap();
        assert_eq!(d.warnings, ["unknown field \"spec.containers[0].restartPolicyRules\""]);
        assert!(d.value.pointer("/spec/containers/0/restartPolicyRules").is_none());
        let on = FeatureGates::parse("ContainerRestartRules=true").unwrap();
        let d = decode(def, body, &HeaderMap::new(), &q("Warn"), &on).unwrap();
        assert_eq!(
            d.warnings,
            ["unknown field \"spec.containers[0].restartPolicyRules[0].when\""]
        );
        assert_eq!(
            d.value["spec"]["containers"][0]["restartPolicyRules"],
            serde_json::json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}])
        );
        let bad = br#"{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i",
            "restartPolicyRules":[{"exitCodes":{"values":["x"]}}]}]}}"#;
        assert_eq!(
            decode(def, bad, &HeaderMap::new(), &q("Warn"), &on).unwrap_err().code,
            400
        );
    }
}
