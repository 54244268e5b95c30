//! Decoding the protobuf request bodies kubectl sends for built-in types.
//!
//! kubectl's typed clients (`create namespace|configmap|secret|serviceaccount|deployment|
//! service|job|cronjob|quota|priorityclass|token`, `create job --from=cronjob/…`, `auth can-i`,
//! `auth whoami`) write `application/vnd.kubernetes.protobuf` and do not fall back to JSON, so
//! the server must read it. A body is the `k8s\0` magic and a `runtime.Unknown` envelope whose
//! `raw` is the object. Each supported kind has a field table (numbers from upstream's
//! `generated.proto`); responses are always JSON, which clients accept.
//!
//! Go's protobuf writes every non-pointer field, zero or not, so a field a table does not list
//! is skipped only when it holds the zero value; a set field the tables do not know fails the
//! request with 415 naming its path, rather than being dropped silently (the simulator must
//! never store less than it was sent). The main function is [`decode`].
//!
//! Split in two: `schema` holds the field tables of each kind (data only), `wire` the
//! protobuf wire-format reader that walks a message against a table. This file keeps the
//! vocabulary both share (the `Kind` of a field and the field triple) and the envelope handling.

use serde_json::{Value, json};

use super::error::{ApiError, ApiResult};
use schema::{UNKNOWN, schema};
use wire::message;

mod schema;
mod wire;

/// What a field holds.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Bytes,
    /// A pointer int: present means set, zero included.
    Int,
    /// A plain int: zero is the Go zero value, omitted like JSON `omitempty`.
    Int0,
    /// A pointer bool.
    Bool,
    /// A plain bool: false is omitted.
    Bool0,
    IntOrString,
    Time,
    Msg(&'static [Field]),
    RepStr,
    RepMsg(&'static [Field]),
    MapStr,
    MapBytes,
    /// A `resource.Quantity` (a message holding its string form).
    Qty,
    /// `map<string, Quantity>`.
    MapQty,
    /// Repeated int64, packed or not.
    RepInt,
    /// An embedded Go struct whose fields JSON inlines into the parent (`ProbeHandler` in
    /// `Probe`, `VolumeSource` in `Volume`, `LocalObjectReference` in key selectors).
    Inline(&'static [Field]),
    /// A `FieldsV1` message: field 1 holds JSON bytes, which JSON shows as the value itself
    /// (`managedFields[].fieldsV1`).
    RawJson,
}

/// A field: number, JSON name, kind.
type Field = (u32, &'static str, Kind);

/// Decodes an enveloped protobuf body into the JSON form of the object.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let bad = |why: &str| ApiError::bad_request(format!("unable to decode protobuf body: {why}"));
    let inner = body
        .strip_prefix(b"k8s\0")
        .ok_or_else(|| bad("missing the k8s envelope magic"))?;
    let env = message(inner, UNKNOWN, "").map_err(|e| e.into_api(&bad))?;
    let kind = env
        .pointer("/typeMeta/kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let api_version = env
        .pointer("/typeMeta/apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let fields = schema(&kind).ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the simulated server reads protobuf only for Namespace, ConfigMap, Secret, ServiceAccount, Service, Pod, Deployment, Job, CronJob, ResourceQuota, PriorityClass, HorizontalPodAutoscaler, CertificateSigningRequest, Binding, Eviction, Scale, DeleteOptions and review objects, not {kind}; send application/json"
        ))
    })?;
    use base64::Engine;
    let raw = env
        .get("raw")
        .and_then(Value::as_str)
        .map(|b| base64::engine::general_purpose::STANDARD.decode(b))
        .transpose()
        .map_err(|_| bad("raw is not bytes"))?
        .unwrap_or_default();
    let mut obj = message(&raw, fields, "").map_err(|e| e.into_api(&bad))?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn field(num: u64, payload: &[u8], out: &mut Vec<u8>) {
        varint(num << 3 | 2, out);
        varint(payload.len() as u64, out);
        out.extend_from_slice(payload);
    }

    #[test]
    fn decodes_an_enveloped_namespace() {
        let mut meta = Vec::new();
        field(1, b"demo", &mut meta);
        let mut label = Vec::new();
        field(1, b"team", &mut label);
        field(2, b"a", &mut label);
        field(11, &label, &mut meta);
        let mut ns = Vec::new();
        field(1, &meta, &mut ns);
        let mut tm = Vec::new();
        field(1, b"v1", &mut tm);
        field(2, b"Namespace", &mut tm);
        let mut env = b"k8s\0".to_vec();
        field(1, &tm, &mut env);
        field(2, &ns, &mut env);
        let v = decode(&env).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo", "labels": {"team": "a"}}})
        );
        assert_eq!(decode(b"nope").unwrap_err().code, 400);
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        field(1, api_version.as_bytes(), &mut tm);
        field(2, kind.as_bytes(), &mut tm);
        let mut env = b"k8s\0".to_vec();
        field(1, &tm, &mut env);
        field(2, raw, &mut env);
        field(3, b"", &mut env);
        env
    }

    fn int_field(num: u64, v: u64, out: &mut Vec<u8>) {
        varint(num << 3, out);
        varint(v, out);
    }

    /// A Job as `kubectl create job` writes it: zero-valued non-pointer fields present, a
    /// Quantity map, an inlined probe handler, and a pointer int that is zero.
    #[test]
    fn decodes_a_job_with_go_zero_values_and_quantities() {
        let mut qty = Vec::new();
        field(1, b"100m", &mut qty);
        let mut entry = Vec::new();
        field(1, b"cpu", &mut entry);
        field(2, &qty, &mut entry);
        let mut resources = Vec::new();
        field(1, &entry, &mut resources);
        let mut exec = Vec::new();
        field(1, b"true", &mut exec);
        let mut handler = Vec::new();
        field(1, &exec, &mut handler);
        let mut probe = Vec::new();
        field(1, &handler, &mut probe);
        int_field(4, 5, &mut probe);
        let mut container = Vec::new();
        field(1, b"j", &mut container);
        field(2, b"busybox", &mut container);
        field(3, b"echo", &mut container);
        field(5, b"", &mut container);
        field(8, &resources, &mut container);
        field(10, &probe, &mut container);
        int_field(16, 0, &mut container);
        // volumeDevices (21) empty: a zero value of a field the tables skip.
        field(21, b"", &mut container);
        let mut spec = Vec::new();
        field(2, &container, &mut spec);
        field(3, b"Never", &mut spec);
        let mut tmeta = Vec::new();
        let mut zero_time = Vec::new();
        int_field(1, (-62_135_596_800i64) as u64, &mut zero_time);
        field(8, &zero_time, &mut tmeta);
        let mut template = Vec::new();
        field(1, &tmeta, &mut template);
        field(2, &spec, &mut template);
        let mut job_spec = Vec::new();
        field(6, &template, &mut job_spec);
        int_field(7, 0, &mut job_spec);
        let mut meta = Vec::new();
        field(1, b"j", &mut meta);
        let mut job = Vec::new();
        field(1, &meta, &mut job);
        field(2, &job_spec, &mut job);
        field(3, b"", &mut job);
        let v = decode(&envelope("batch/v1", "Job", &job)).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {
                "backoffLimit": 0,
                "template": {"metadata": {}, "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "j", "image": "busybox", "command": ["echo"],
                    "resources": {"limits": {"cpu": "100m"}},
                    "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
                }]}}
            }})
        );

        // A set field the tables do not know is refused, never dropped.
        let mut container = Vec::new();
        field(1, b"j", &mut container);
        let mut dev = Vec::new();
        field(1, b"disk", &mut dev);
        field(21, &dev, &mut container);
        let mut spec = Vec::new();
        field(2, &container, &mut spec);
        let mut pod = Vec::new();
        field(2, &spec, &mut pod);
        let err = decode(&envelope("v1", "Pod", &pod)).unwrap_err();
        assert_eq!(err.code, 415, "{}", err.message);
        assert!(err.message.contains("#21 of spec.containers[]"), "{}", err.message);
    }
}
