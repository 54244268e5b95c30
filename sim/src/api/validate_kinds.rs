//! Validation of the networking, policy, storage, certificates, flowcontrol and pod-template
//! kinds: the essentials of upstream's `pkg/apis/<group>/validation/validation.go`, with its
//! field paths and messages, so kubectl prints what a real cluster prints.
//!
//! The main function is [`validate`], reached from [`super::validate::validate`]; [`csr_update`]
//! holds the CertificateSigningRequest rules that depend on which subresource wrote.

use base64::Engine;
use serde_json::{Value, json};

use super::error::Cause;
use super::registry::ResourceDef;
use super::validate::pod_spec;

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

fn items<'a>(v: &'a Value, p: &str) -> &'a [Value] {
    v.pointer(p).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn not_supported(v: Option<&Value>, field: impl Into<String>, supported: &[&str], out: &mut Vec<Cause>) {
    if let Some(x) = v.and_then(Value::as_str)
        && !supported.contains(&x)
    {
        out.push(Cause::not_supported(field, &json!(x), supported));
    }
}

/// `field.Required(path, detail)`: "Required value: detail".
fn required_because(field: impl Into<String>, detail: &str) -> Cause {
    let mut c = Cause::required(field);
    c.message = format!("Required value: {detail}");
    c
}

/// Validates an object of one of this module's kinds (`old` is the stored one on updates).
pub fn validate(def: &ResourceDef, obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    match (def.group, def.plural) {
        ("", "podtemplates") => match obj.pointer("/template/spec") {
            Some(ps) => pod_spec(ps, "template.spec", out),
            None => out.push(Cause::required("template.spec.containers")),
        },
        ("networking.k8s.io", "networkpolicies") => network_policy(obj, out),
        ("networking.k8s.io", "ingresses") => ingress(obj, out),
        ("networking.k8s.io", "ingressclasses") => {
            let c = s(obj, "/spec/controller");
            if c.is_empty() {
                out.push(Cause::required("spec.controller"));
            } else if c.len() > 250 {
                out.push(Cause::invalid(
                    "spec.controller",
                    &json!(c),
                    "must be no more than 250 bytes",
                ));
            }
            if let Some(old) = old
                && s(old, "/spec/controller") != c
            {
                out.push(Cause::invalid("spec.controller", &json!(c), "field is immutable"));
            }
        }
        ("policy", "poddisruptionbudgets") => pdb(obj, out),
        ("storage.k8s.io", "storageclasses") => storage_class(obj, old, out),
        ("scheduling.k8s.io", "priorityclasses") => priority_class(obj, old, out),
        ("storage.k8s.io", "csinodes") => {
            for (i, d) in items(obj, "/spec/drivers").iter().enumerate() {
                for f in ["name", "nodeID"] {
                    if s(d, &format!("/{f}")).is_empty() {
                        out.push(Cause::required(format!("spec.drivers[{i}].{f}")));
                    }
                }
            }
        }
        ("storage.k8s.io", "volumeattachments") => {
            for f in ["attacher", "nodeName"] {
                if s(obj, &format!("/spec/{f}")).is_empty() {
                    out.push(Cause::required(format!("spec.{f}")));
                }
            }
            let pv = !s(obj, "/spec/source/persistentVolumeName").is_empty();
            let inline = obj
                .pointer("/spec/source/inlineVolumeSpec")
                .is_some_and(|v| !v.is_null());
            if pv == inline {
                out.push(Cause::invalid(
                    "spec.source",
                    obj.pointer("/spec/source").unwrap_or(&Value::Null),
                    "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
                ));
            }
            if let Some(old) = old
                && old.get("spec") != obj.get("spec")
            {
                out.push(Cause::invalid(
                    "spec",
                    obj.get("spec").unwrap_or(&Value::Null),
                    "field is immutable",
                ));
            }
        }
        ("storage.k8s.io", "csistoragecapacities") if s(obj, "/storageClassName").is_empty() => {
            out.push(Cause::required("storageClassName"));
        }
        // Updates go through `csr_update`, which knows the subresource.
        ("certificates.k8s.io", "certificatesigningrequests") if old.is_none() => csr(obj, out),
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => {
            if s(obj, "/spec/priorityLevelConfiguration/name").is_empty() {
                out.push(required_because(
                    "spec.priorityLevelConfiguration.name",
                    "must reference a priority level",
                ));
            }
            if let Some(p) = obj.pointer("/spec/matchingPrecedence").and_then(Value::as_i64)
                && !(1..=10000).contains(&p)
            {
                out.push(Cause::invalid(
                    "spec.matchingPrecedence",
                    &json!(p),
                    "must be between 1 and 10000, inclusive",
                ));
            }
            not_supported(
                obj.pointer("/spec/distinguisherMethod/type"),
                "spec.distinguisherMethod.type",
                &["ByNamespace", "ByUser"],
                out,
            );
        }
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => match obj.pointer("/spec/type") {
            None | Some(Value::Null) => out.push(required_because("spec.type", "must not be empty")),
            t => not_supported(t, "spec.type", &["Exempt", "Limited"], out),
        },
        _ => {}
    }
}

fn network_policy(obj: &Value, out: &mut Vec<Cause>) {
    let types = items(obj, "/spec/policyTypes");
    for (i, t) in types.iter().enumerate() {
        not_supported(Some(t), format!("spec.policyTypes[{i}]"), &["Egress", "Ingress"], out);
    }
    if types.len() > 2 {
        out.push(Cause::invalid(
            "spec.policyTypes",
            &json!(types),
            "may not specify more than two policyTypes",
        ));
    }
    for (dir, peers_key) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in items(obj, &format!("/spec/{dir}")).iter().enumerate() {
            for (j, p) in items(rule, "/ports").iter().enumerate() {
                not_supported(
                    p.get("protocol"),
                    format!("spec.{dir}[{i}].ports[{j}].protocol"),
                    &["SCTP", "TCP", "UDP"],
                    out,
                );
            }
            for (j, peer) in items(rule, &format!("/{peers_key}")).iter().enumerate() {
                let base = format!("spec.{dir}[{i}].{peers_key}[{j}]");
                let kinds = ["podSelector", "namespaceSelector", "ipBlock"]
                    .iter()
                    .filter(|k| peer.get(**k).is_some_and(|v| !v.is_null()))
                    .count();
                if kinds == 0 {
                    out.push(required_because(base.clone(), "must specify a peer"));
                } else if peer.get("ipBlock").is_some_and(|v| !v.is_null()) && kinds > 1 {
                    out.push(Cause::forbidden(
                        base.clone(),
                        "may not specify both ipBlock and another peer",
                    ));
                }
                if let Some(b) = peer.get("ipBlock").filter(|v| !v.is_null()) {
                    let cidr = s(b, "/cidr");
                    if cidr.is_empty() {
                        out.push(Cause::required(format!("{base}.ipBlock.cidr")));
                    } else if !is_cidr(cidr) {
                        out.push(Cause::invalid(
                            format!("{base}.ipBlock.cidr"),
                            &json!(cidr),
                            "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                        ));
                    }
                }
            }
        }
    }
}

fn is_cidr(v: &str) -> bool {
    let Some((ip, bits)) = v.split_once('/') else {
        return false;
    };
    match (ip.parse::<std::net::IpAddr>(), bits.parse::<u8>()) {
        (Ok(std::net::IpAddr::V4(_)), Ok(b)) => b <= 32,
        (Ok(std::net::IpAddr::V6(_)), Ok(b)) => b <= 128,
        _ => false,
    }
}

fn ingress_backend(b: &Value, base: &str, out: &mut Vec<Cause>) {
    let service = b.get("service").is_some_and(|v| !v.is_null());
    let resource = b.get("resource").is_some_and(|v| !v.is_null());
    if service && resource {
        out.push(Cause::invalid(
            base,
            &json!(""),
            "cannot set both resource and service backends",
        ));
    } else if !service && !resource {
        out.push(Cause::invalid(
            base,
            &json!(""),
            "resource or service backend is required",
        ));
    }
    if service {
        if s(b, "/service/name").is_empty() {
            out.push(Cause::required(format!("{base}.service.name")));
        }
        let name = !s(b, "/service/port/name").is_empty();
        let number = b
            .pointer("/service/port/number")
            .and_then(Value::as_i64)
            .is_some_and(|n| n != 0);
        if name && number {
            out.push(Cause::invalid(
                format!("{base}.service.port"),
                b.pointer("/service/port").unwrap_or(&Value::Null),
                "cannot set both port name & port number",
            ));
        } else if !name && !number {
            out.push(required_because(
                format!("{base}.service.port"),
                "port name or number is required",
            ));
        }
    }
}

fn ingress(obj: &Value, out: &mut Vec<Cause>) {
    let rules = items(obj, "/spec/rules");
    let default = obj.pointer("/spec/defaultBackend").filter(|v| !v.is_null());
    if rules.is_empty() && default.is_none() {
        out.push(Cause::invalid(
            "spec",
            &json!(rules),
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = default {
        ingress_backend(b, "spec.defaultBackend", out);
    }
    for (i, r) in rules.iter().enumerate() {
        for (j, p) in items(r, "/http/paths").iter().enumerate() {
            let base = format!("spec.rules[{i}].http.paths[{j}]");
            let path = s(p, "/path");
            match p.get("pathType").and_then(Value::as_str) {
                None => out.push(required_because(
                    format!("{base}.pathType"),
                    "pathType must be specified",
                )),
                Some(t @ ("Exact" | "Prefix")) => {
                    if !path.starts_with('/') {
                        out.push(Cause::invalid(
                            format!("{base}.path"),
                            &json!(path),
                            "must be an absolute path",
                        ));
                    }
                    let _ = t;
                }
                Some("ImplementationSpecific") => {
                    if !path.is_empty() && !path.starts_with('/') {
                        out.push(Cause::invalid(
                            format!("{base}.path"),
                            &json!(path),
                            "must be an absolute path",
                        ));
                    }
                }
                Some(other) => out.push(Cause::not_supported(
                    format!("{base}.pathType"),
                    &json!(other),
                    &["Exact", "ImplementationSpecific", "Prefix"],
                )),
            }
            match p.get("backend") {
                Some(b) => ingress_backend(b, &format!("{base}.backend"), out),
                None => out.push(Cause::required(format!("{base}.backend"))),
            }
        }
    }
}

/// `ValidateNonnegativeIntOrPercent` plus the 100% cap of PDB fields.
fn int_or_percent(v: &Value, field: &str, out: &mut Vec<Cause>) {
    match v {
        Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => {
            out.push(Cause::invalid(field, v, "must be greater than or equal to 0"));
        }
        Value::String(p) => {
            let digits = p
                .strip_suffix('%')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
            match digits {
                None => out.push(Cause::invalid(field, v, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")),
                Some(d) if d.parse::<u64>().is_ok_and(|n| n > 100) => {
                    out.push(Cause::invalid(field, v, "must not be greater than 100%"));
                }
                Some(_) => {}
            }
        }
        _ => {}
    }
}

fn pdb(obj: &Value, out: &mut Vec<Cause>) {
    let min = obj.pointer("/spec/minAvailable").filter(|v| !v.is_null());
    let max = obj.pointer("/spec/maxUnavailable").filter(|v| !v.is_null());
    if min.is_some() && max.is_some() {
        out.push(Cause::invalid(
            "spec",
            obj.get("spec").unwrap_or(&Value::Null),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    if let Some(v) = min {
        int_or_percent(v, "spec.minAvailable", out);
    }
    if let Some(v) = max {
        int_or_percent(v, "spec.maxUnavailable", out);
    }
    not_supported(
        obj.pointer("/spec/unhealthyPodEvictionPolicy"),
        "spec.unhealthyPodEvictionPolicy",
        &["AlwaysAllow", "IfHealthyBudget"],
        out,
    );
}

fn storage_class(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    if s(obj, "/provisioner").is_empty() {
        out.push(Cause::required("provisioner"));
    }
    not_supported(obj.get("reclaimPolicy"), "reclaimPolicy", &["Delete", "Retain"], out);
    not_supported(
        obj.get("volumeBindingMode"),
        "volumeBindingMode",
        &["Immediate", "WaitForFirstConsumer"],
        out,
    );
    let Some(old) = old else { return };
    for (f, why) in [
        ("parameters", "updates to parameters are forbidden."),
        ("provisioner", "updates to provisioner are forbidden."),
        ("reclaimPolicy", "updates to reclaimPolicy are forbidden."),
    ] {
        if old.get(f) != obj.get(f) {
            out.push(Cause::forbidden(f, why));
        }
    }
    if old.get("volumeBindingMode") != obj.get("volumeBindingMode") {
        out.push(Cause::invalid(
            "volumeBindingMode",
            obj.get("volumeBindingMode").unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
}

/// Upstream `ValidatePriorityClass` and `ValidatePriorityClassUpdate`
/// (pkg/apis/scheduling/validation): a user class may not exceed `HighestUserDefinablePriority`;
/// `value` and `preemptionPolicy` never change once stored. (The `system-` name reservation is
/// not checked: the built-in classes are stored by the simulator itself.)
fn priority_class(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    const HIGHEST_USER_DEFINABLE: i64 = 1_000_000_000;
    let value = obj.get("value").and_then(Value::as_i64).unwrap_or(0);
    if !s(obj, "/metadata/name").starts_with("system-") && value > HIGHEST_USER_DEFINABLE {
        out.push(Cause::forbidden(
            "value",
            &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE}"),
        ));
    }
    not_supported(
        obj.get("preemptionPolicy"),
        "preemptionPolicy",
        &["Never", "PreemptLowerPriority"],
        out,
    );
    let Some(old) = old else { return };
    if old.get("value") != obj.get("value") {
        out.push(Cause::forbidden("value", "may not be changed in an update."));
    }
    if old.get("preemptionPolicy") != obj.get("preemptionPolicy") {
        out.push(Cause::invalid(
            "preemptionPolicy",
            obj.get("preemptionPolicy").unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
}

/// Key usages upstream accepts (`allValidUsages`), sorted as its `sets.List()` prints them.
const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// The PEM text of `spec.request` (base64 of the PEM bytes on the wire) when it holds a
/// `CERTIFICATE REQUEST` block, else upstream's `ParseCSR` error.
pub fn csr_request_pem(obj: &Value) -> Result<String, String> {
    const WRONG: &str = "PEM block type must be CERTIFICATE REQUEST";
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s(obj, "/spec/request"))
        .map_err(|_| WRONG.to_string())?;
    let text = String::from_utf8(bytes).map_err(|_| WRONG.to_string())?;
    match first_pem_block(&text) {
        Some(("CERTIFICATE REQUEST", der)) if !der.is_empty() => Ok(text),
        _ => Err(WRONG.into()),
    }
}

/// The type and body of the first PEM block in `text`, as Go's `pem.Decode` finds it (text
/// before the block is skipped); `None` when there is no well-formed block.
fn first_pem_block(text: &str) -> Option<(&str, Vec<u8>)> {
    let start = text.find("-----BEGIN ")?;
    let rest = &text[start + "-----BEGIN ".len()..];
    let (ty, rest) = rest.split_once("-----")?;
    let end = rest.find(&format!("-----END {ty}-----"))?;
    let body: String = rest[..end].chars().filter(|c| !c.is_whitespace()).collect();
    let der = base64::engine::general_purpose::STANDARD.decode(body).ok()?;
    Some((ty, der))
}

fn csr(obj: &Value, out: &mut Vec<Cause>) {
    if let Err(e) = csr_request_pem(obj) {
        out.push(Cause::invalid(
            "spec.request",
            obj.pointer("/spec/request").unwrap_or(&Value::Null),
            &e,
        ));
    }
    let usages = items(obj, "/spec/usages");
    if usages.is_empty() {
        out.push(Cause::required("spec.usages"));
    }
    let mut seen = Vec::new();
    for (i, u) in usages.iter().enumerate() {
        not_supported(Some(u), format!("spec.usages[{i}]"), USAGES, out);
        if seen.contains(&u) {
            out.push(Cause::duplicate(format!("spec.usages[{i}]"), u));
        }
        seen.push(u);
    }
    signer_name(s(obj, "/spec/signerName"), out);
    if let Some(e) = obj.pointer("/spec/expirationSeconds").and_then(Value::as_i64)
        && e < 600
    {
        out.push(Cause::invalid(
            "spec.expirationSeconds",
            &json!(e),
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    let (mut approved, mut denied) = (false, false);
    let mut types = Vec::new();
    for (i, c) in items(obj, "/status/conditions").iter().enumerate() {
        let ty = s(c, "/type");
        let base = format!("status.conditions[{i}]");
        if ty.is_empty() {
            out.push(Cause::required(format!("{base}.type")));
        }
        let true_only = matches!(ty, "Approved" | "Denied" | "Failed");
        match s(c, "/status") {
            "" => out.push(Cause::required(format!("{base}.status"))),
            "True" => {}
            "False" | "Unknown" if !true_only => {}
            other => out.push(Cause::not_supported(
                format!("{base}.status"),
                &json!(other),
                if true_only {
                    &["True"]
                } else {
                    &["False", "True", "Unknown"]
                },
            )),
        }
        let clash = match ty {
            "Approved" => {
                approved = true;
                denied
            }
            "Denied" => {
                denied = true;
                approved
            }
            _ => false,
        };
        if clash {
            out.push(Cause::invalid(
                format!("{base}.type"),
                &json!(ty),
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        if types.contains(&ty) {
            out.push(Cause::duplicate(format!("{base}.type"), &json!(ty)));
        }
        types.push(ty);
    }
}

/// `ValidateSignerName`: a domain-prefixed path such as `example.com/signer-name`.
fn signer_name(name: &str, out: &mut Vec<Cause>) {
    const FIELD: &str = "spec.signerName";
    if name.is_empty() {
        out.push(Cause::required(FIELD));
        return;
    }
    let Some((domain, path)) = name.split_once('/') else {
        out.push(Cause::invalid(
            FIELD,
            &json!(name),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    };
    if path.is_empty() || !domain.contains('.') {
        out.push(Cause::invalid(
            FIELD,
            &json!(name),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
    }
}

fn conditions_of<'a>(obj: &'a Value, ty: &str) -> Vec<&'a Value> {
    items(obj, "/status/conditions")
        .iter()
        .filter(|c| c["type"] == ty)
        .collect()
}

/// `validateCertificateSigningRequestUpdate`: conditions Approved/Denied/Failed are never
/// removed, only the `approval` subresource adds or changes Approved/Denied, and only `status`
/// sets the certificate, once.
pub fn csr_update(sub: Option<&str>, obj: &Value, old: &Value, out: &mut Vec<Cause>) {
    csr(obj, out);
    for t in ["Approved", "Denied", "Failed"] {
        if conditions_of(obj, t).len() < conditions_of(old, t).len() {
            out.push(Cause::forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type {t:?}"),
            ));
        }
    }
    if sub != Some("approval") {
        for t in ["Approved", "Denied"] {
            let (n, o) = (conditions_of(obj, t), conditions_of(old, t));
            if n.len() > o.len() {
                out.push(Cause::forbidden(
                    "status.conditions",
                    &format!("updates may not add a condition of type {t:?}"),
                ));
            } else if n.len() == o.len() && n != o {
                out.push(Cause::forbidden(
                    "status.conditions",
                    &format!("updates may not modify a condition of type {t:?}"),
                ));
            }
        }
    }
    let (new_cert, old_cert) = (s(obj, "/status/certificate"), s(old, "/status/certificate"));
    if new_cert != old_cert {
        if sub != Some("status") {
            out.push(Cause::forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        } else if !old_cert.is_empty() {
            out.push(Cause::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::registry::find;

    fn causes(plural: &str, group: &str, obj: Value) -> Vec<String> {
        let def = crate::api::registry::RESOURCES
            .iter()
            .find(|d| d.group == group && d.plural == plural)
            .unwrap();
        let mut out = Vec::new();
        validate(def, &obj, None, &mut out);
        out.iter().map(Cause::line).collect()
    }

    #[test]
    fn priority_class_value_is_bounded_and_immutable() {
        let def = find("scheduling.k8s.io", "v1", "priorityclasses").unwrap();
        let old = json!({"metadata": {"name": "p"}, "value": 1, "preemptionPolicy": "PreemptLowerPriority"});
        let mut out = Vec::new();
        validate(def, &old, None, &mut out);
        assert!(out.is_empty(), "{out:?}");
        let changed = json!({"metadata": {"name": "p"}, "value": 10, "preemptionPolicy": "Never"});
        validate(def, &changed, Some(&old), &mut out);
        let lines: Vec<String> = out.iter().map(Cause::line).collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains("value: Forbidden: may not be changed in an update."),
            "{lines:?}"
        );
        assert!(
            lines[1].contains("preemptionPolicy: Invalid value: \"Never\": field is immutable"),
            "{lines:?}"
        );
        let described = json!({"metadata": {"name": "p"}, "value": 1, "preemptionPolicy": "PreemptLowerPriority",
            "description": "updated description"});
        out.clear();
        validate(def, &described, Some(&old), &mut out);
        assert!(out.is_empty(), "{out:?}");
        out.clear();
        validate(
            def,
            &json!({"metadata": {"name": "big"}, "value": 1_000_000_001}),
            None,
            &mut out,
        );
        assert!(Cause::line(&out[0]).contains("maximum allowed value of a user defined priority is 1000000000"));
    }

    #[test]
    fn pdb_fields_are_exclusive_and_percent_checked() {
        let c = causes(
            "poddisruptionbudgets",
            "policy",
            json!({"spec": {"minAvailable": 1, "maxUnavailable": "150%"}}),
        );
        assert!(
            c.iter()
                .any(|l| l.contains("minAvailable and maxUnavailable cannot be both set")),
            "{c:?}"
        );
        assert!(
            c.iter()
                .any(|l| l.starts_with("spec.maxUnavailable") && l.contains("100%")),
            "{c:?}"
        );
        assert!(
            causes(
                "poddisruptionbudgets",
                "policy",
                json!({"spec": {"minAvailable": "50%"}})
            )
            .is_empty()
        );
    }

    #[test]
    fn ingress_needs_rules_or_backend_and_path_types() {
        let c = causes("ingresses", "networking.k8s.io", json!({"spec": {}}));
        assert_eq!(
            c,
            ["spec: Invalid value: []: either `defaultBackend` or `rules` must be specified"]
        );
        let c = causes(
            "ingresses",
            "networking.k8s.io",
            json!({"spec": {"rules": [{"http": {"paths": [
            {"path": "x", "pathType": "Prefix", "backend": {"service": {"name": "s", "port": {"number": 80}}}},
            {"path": "/", "backend": {"service": {"name": "s"}}}]}}]}}),
        );
        assert_eq!(c.len(), 3, "{c:?}");
        assert!(
            c[0].starts_with("spec.rules[0].http.paths[0].path: Invalid value"),
            "{c:?}"
        );
        assert_eq!(
            c[1],
            "spec.rules[0].http.paths[1].pathType: Required value: pathType must be specified"
        );
    }

    #[test]
    fn csr_request_usages_and_signer() {
        let c = causes(
            "certificatesigningrequests",
            "certificates.k8s.io",
            json!({"spec": {"request": "bm9wZQ==", "signerName": "bad"}}),
        );
        assert!(
            c.iter()
                .any(|l| l.contains("PEM block type must be CERTIFICATE REQUEST")),
            "{c:?}"
        );
        assert!(c.contains(&"spec.usages: Required value".to_string()), "{c:?}");
        assert!(
            c.iter().any(|l| l.starts_with("spec.signerName: Invalid value")),
            "{c:?}"
        );
        let old = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        let mut out = Vec::new();
        csr_update(Some("approval"), &json!({"status": {"conditions": []}}), &old, &mut out);
        assert!(
            out.iter()
                .any(|c| c.message.contains("may not remove a condition of type \"Approved\""))
        );
        let _ = find("", "v1", "pods");
    }
}
