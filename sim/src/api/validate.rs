//! Validation, as upstream's `Validate*` functions answer: a list of field causes that becomes a
//! 422 Invalid Status. Messages and field paths are upstream's, so kubectl prints the same.
//!
//! The main function is [`validate`].

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use super::error::Cause;
use super::registry::ResourceDef;
use super::selector::LabelSelector;

pub(crate) static SUBDOMAIN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").expect("regex"));
static LABEL_1123: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").expect("regex"));
pub(crate) static LABEL_1035: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z]([-a-z0-9]*[a-z0-9])?$").expect("regex"));
static LABEL_VALUE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$").expect("regex"));
static CONFIG_KEY: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[-._a-zA-Z0-9]+$").expect("regex"));

pub(crate) const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_1123_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
pub(crate) const LABEL_1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
/// The port protocols, in upstream's message order.
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

/// Which name rule a resource's names follow.
#[derive(Clone, Copy)]
pub(crate) enum NameRule {
    Subdomain,
    Label1123,
    Label1035,
    /// RBAC objects: any path segment (`system:basic-user` is valid).
    PathSegment,
}

fn name_rule(def: &ResourceDef) -> NameRule {
    match def.plural {
        "namespaces" => NameRule::Label1123,
        "services" => NameRule::Label1035,
        // Upstream validates custom object names as path segments only.
        _ if def.custom.is_some() => NameRule::PathSegment,
        _ if def.group == "rbac.authorization.k8s.io" => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

pub(crate) fn check_name(value: &str, rule: NameRule, field: &str, out: &mut Vec<Cause>) {
    if let NameRule::PathSegment = rule {
        // Upstream's path.IsValidPathSegmentName.
        let why = match value {
            "." => Some("may not be '.'"),
            ".." => Some("may not be '..'"),
            v if v.contains('/') => Some("may not contain '/'"),
            v if v.contains('%') => Some("may not contain '%'"),
            _ => None,
        };
        out.extend(why.map(|w| Cause::invalid(field, &json!(value), w)));
        return;
    }
    let (ok, max, msg) = match rule {
        NameRule::Subdomain => (SUBDOMAIN.is_match(value), 253, SUBDOMAIN_MSG),
        NameRule::Label1123 => (LABEL_1123.is_match(value), 63, LABEL_1123_MSG),
        NameRule::Label1035 => (LABEL_1035.is_match(value), 63, LABEL_1035_MSG),
        NameRule::PathSegment => return,
    };
    if value.len() > max {
        out.push(Cause::invalid(
            field,
            &json!(value),
            &format!("must be no more than {max} characters"),
        ));
    }
    if !ok {
        out.push(Cause::invalid(field, &json!(value), msg));
    }
}

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

/// The array at `key` of `v`, empty when absent.
fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// Validates an object (`old` is the stored one for updates).
pub fn validate(def: &ResourceDef, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let name = s(obj, "/metadata/name");
    if !name.is_empty() {
        check_name(name, name_rule(def), "metadata.name", &mut out);
    }
    if let Some(custom) = def.custom {
        out.extend(super::crd::schema::validate(&custom.schema, obj, old));
    }
    if (def.group, def.plural) == (super::vap::GROUP, super::vap::POLICIES) {
        super::vap::config::validate_policy(obj, &mut out);
    }
    if (def.group, def.plural) == (super::vap::GROUP, super::vap::BINDINGS) {
        super::vap::config::validate_binding(obj, &mut out);
    }
    if super::webhook::config::is_config(def.group, def.plural) {
        super::webhook::config::validate(obj, def.plural.starts_with("mutating"), &mut out);
    }
    if (def.group, def.plural) == (super::crd::GROUP, "customresourcedefinitions") {
        super::crd::validate::validate(obj, old, &mut out);
    }
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            let val = v.as_str().unwrap_or_default();
            if val.len() > 63 || !LABEL_VALUE.is_match(val) {
                out.push(Cause::invalid("metadata.labels", v, "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"));
            }
            let key_name = k.rsplit('/').next().unwrap_or(k);
            if key_name.is_empty() || key_name.len() > 63 {
                out.push(Cause::invalid(
                    "metadata.labels",
                    &json!(k),
                    "name part must be non-empty and no more than 63 characters",
                ));
            }
        }
    }
    match (def.group, def.plural) {
        ("rbac.authorization.k8s.io", _) => super::auth::validation::validate(def, obj, old, &mut out),
        ("", "pods") => {
            if let Some(spec) = obj.get("spec") {
                pod_spec(spec, "spec", &mut out);
                if old.is_none() {
                    super::validate_ephemeral::on_create(spec, &mut out);
                }
            } else {
                out.push(Cause::required("spec.containers"));
            }
            if let Some(old) = old {
                pod_update(old, obj, &mut out);
            }
        }
        ("", "services") => service(obj, old, &mut out),
        ("", "configmaps") | ("", "secrets") => {
            if s(obj, "/type") == "kubernetes.io/service-account-token"
                && s(obj, "/metadata/annotations/kubernetes.io~1service-account.name").is_empty()
            {
                out.push(Cause::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                ));
            }
            for key in ["data", "binaryData"] {
                for k in obj
                    .get(key)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k)
                {
                    if !CONFIG_KEY.is_match(k) {
                        out.push(Cause::invalid(format!("{key}[{k}]"), &json!(k), "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"));
                    }
                }
            }
            if let Some(old) = old {
                immutable_config(def.plural == "secrets", old, obj, &mut out);
            }
        }
        ("apps", "deployments" | "replicasets" | "daemonsets" | "statefulsets") => {
            workload(obj, "spec", &mut out);
            if let Some(old) = old
                && old.pointer("/spec/selector") != obj.pointer("/spec/selector")
            {
                out.push(Cause::invalid(
                    "spec.selector",
                    obj.pointer("/spec/selector").unwrap_or(&Value::Null),
                    "field is immutable",
                ));
            }
            if let Some(r) = obj.pointer("/spec/replicas").and_then(Value::as_i64)
                && r < 0
            {
                out.push(Cause::invalid(
                    "spec.replicas",
                    &json!(r),
                    "must be greater than or equal to 0",
                ));
            }
        }
        ("batch", "jobs") => {
            // The selector is generated at admission unless manualSelector is set.
            workload(obj, "spec", &mut out);
            job_restart_policy(obj, "spec.template.spec", "/spec/template/spec/restartPolicy", &mut out);
            for f in ["parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"] {
                if let Some(n) = obj.pointer(&format!("/spec/{f}")).and_then(Value::as_i64)
                    && n < 0
                {
                    out.push(Cause::invalid(
                        format!("spec.{f}"),
                        &json!(n),
                        "must be greater than or equal to 0",
                    ));
                }
            }
        }
        ("batch", "cronjobs") => {
            let sched = s(obj, "/spec/schedule");
            if sched.is_empty() {
                out.push(Cause::required("spec.schedule"));
            } else if sched.parse::<croner::Cron>().is_err()
                && !matches!(
                    sched,
                    "@yearly" | "@annually" | "@monthly" | "@weekly" | "@daily" | "@midnight" | "@hourly"
                )
            {
                out.push(Cause::invalid(
                    "spec.schedule",
                    &json!(sched),
                    "unparseable cron expression",
                ));
            }
            match obj.pointer("/spec/jobTemplate/spec/template/spec") {
                Some(ps) => pod_spec(ps, "spec.jobTemplate.spec.template.spec", &mut out),
                None => out.push(Cause::required("spec.jobTemplate.spec.template.spec.containers")),
            }
            job_restart_policy(
                obj,
                "spec.jobTemplate.spec.template.spec",
                "/spec/jobTemplate/spec/template/spec/restartPolicy",
                &mut out,
            );
            one_of(
                obj.pointer("/spec/concurrencyPolicy").and_then(Value::as_str),
                "spec.concurrencyPolicy",
                &["Allow", "Forbid", "Replace"],
                &mut out,
            );
        }
        ("", "events") => core_event_namespace(obj, &mut out),
        ("node.k8s.io", "runtimeclasses") if s(obj, "/handler").is_empty() => {
            out.push(Cause::required("handler"));
        }
        ("scheduling.k8s.io", "priorityclasses") if obj.get("value").and_then(Value::as_i64).is_none() => {
            out.push(Cause::required("value"));
        }
        _ => super::validate_kinds::validate(def, obj, old, &mut out),
    }
    out
}

/// Upstream `legacyValidateEvent` (core/v1 events): the involved object's namespace must agree
/// with the event's; an event about a cluster-scoped object (no involved namespace) may live only
/// in `default` (or, with an eventTime, `kube-system`). Upstream requires nothing else of the
/// involved object, so an event about a namespace names just that namespace.
fn core_event_namespace(obj: &Value, out: &mut Vec<Cause>) {
    let involved = s(obj, "/involvedObject/namespace");
    let ns = s(obj, "/metadata/namespace");
    let new_style = !s(obj, "/eventTime").is_empty();
    let agrees = if involved.is_empty() {
        ns == "default" || ns.is_empty() || (new_style && ns == "kube-system")
    } else {
        involved == ns
    };
    if !agrees {
        out.push(Cause::invalid(
            "involvedObject.namespace",
            &json!(involved),
            "does not match event.namespace",
        ));
    }
}

fn job_restart_policy(obj: &Value, path: &str, pointer: &str, out: &mut Vec<Cause>) {
    let rp = obj.pointer(pointer).and_then(Value::as_str).unwrap_or("Always");
    one_of(Some(rp), format!("{path}.restartPolicy"), &["OnFailure", "Never"], out);
}

/// Upstream's `NotSupported` check of an enum field: a `value` that is set and is not one of
/// `supported` gets a cause listing them in the order given (upstream's order, not always
/// sorted). Every enum field of the validated kinds is checked through it.
fn one_of(value: Option<&str>, field: impl Into<String>, supported: &[&str], out: &mut Vec<Cause>) {
    if let Some(v) = value
        && !supported.contains(&v)
    {
        out.push(Cause::not_supported(field, &json!(v), supported));
    }
}

/// Selector presence, template labels matching it, and the template's pod spec.
fn workload(obj: &Value, base: &str, out: &mut Vec<Cause>) {
    let spec = obj.get("spec").cloned().unwrap_or_default();
    let sel = spec.get("selector");
    match sel {
        None | Some(Value::Null) => out.push(Cause::required(format!("{base}.selector"))),
        Some(sel) => {
            let empty = sel
                .get("matchLabels")
                .and_then(Value::as_object)
                .is_none_or(|m| m.is_empty())
                && sel
                    .get("matchExpressions")
                    .and_then(Value::as_array)
                    .is_none_or(|a| a.is_empty());
            if empty {
                out.push(Cause::invalid(
                    format!("{base}.selector"),
                    sel,
                    "empty selector is invalid for deployment",
                ));
            } else {
                let tmpl = json!({"metadata": {"labels": spec.pointer("/template/metadata/labels").cloned().unwrap_or(json!({}))}});
                if !LabelSelector::from_object(sel).matches(&tmpl) {
                    let labels = spec.pointer("/template/metadata/labels").cloned().unwrap_or(json!({}));
                    out.push(Cause::invalid(
                        format!("{base}.template.metadata.labels"),
                        &json!(go_map(&labels)),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        }
    }
    match spec.pointer("/template/spec") {
        Some(ps) => pod_spec(ps, &format!("{base}.template.spec"), out),
        None => out.push(Cause::required(format!("{base}.template.spec.containers"))),
    }
}

/// Go's `%#v` of a string map, as upstream prints it in these messages.
fn go_map(v: &Value) -> String {
    let inner: Vec<String> = v
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, x)| format!("{k:?}:{:?}", x.as_str().unwrap_or_default()))
        .collect();
    format!("map[string]string{{{}}}", inner.join(", "))
}

/// Upstream's `ValidateConfigMapUpdate` / `ValidateSecretUpdate`: once `immutable: true` is
/// stored, the payload and the flag itself are frozen (a Secret's `type` never changes).
fn immutable_config(secret: bool, old: &Value, new: &Value, out: &mut Vec<Cause>) {
    if secret && old.get("type") != new.get("type") {
        out.push(Cause::invalid(
            "type",
            new.get("type").unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    const WHY: &str = "field is immutable when `immutable` is set";
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        out.push(Cause::forbidden("immutable", WHY));
    }
    // An absent map and an empty one are the same payload.
    let payload = |v: &Value, key: &str| {
        v.get(key)
            .filter(|m| m.as_object().is_none_or(|o| !o.is_empty()))
            .cloned()
    };
    let keys: &[&str] = if secret { &["data"] } else { &["data", "binaryData"] };
    for key in keys {
        if payload(old, key) != payload(new, key) {
            out.push(Cause::forbidden(*key, WHY));
        }
    }
}

/// Pod spec rules, with `base` the field path of the spec.
pub fn pod_spec(spec: &Value, base: &str, out: &mut Vec<Cause>) {
    let containers = items(spec, "containers");
    if containers.is_empty() {
        out.push(Cause::required(format!("{base}.containers")));
    }
    let mut names: Vec<String> = Vec::new();
    for key in ["initContainers", "containers"] {
        for (i, c) in items(spec, key).iter().enumerate() {
            let path = format!("{base}.{key}[{i}]");
            let name = s(c, "/name");
            if name.is_empty() {
                out.push(Cause::required(format!("{path}.name")));
            } else {
                if !LABEL_1123.is_match(name) || name.len() > 63 {
                    out.push(Cause::invalid(format!("{path}.name"), &json!(name), LABEL_1123_MSG));
                }
                if names.iter().any(|n| n == name) {
                    out.push(Cause::duplicate(format!("{path}.name"), &json!(name)));
                }
                names.push(name.to_string());
            }
            if s(c, "/image").trim().is_empty() {
                out.push(Cause::required(format!("{path}.image")));
            }
            // Upstream `validateContainerPorts`.
            let mut port_names: Vec<&str> = Vec::new();
            for (j, p) in items(c, "ports").iter().enumerate() {
                let at = format!("{path}.ports[{j}]");
                let port_name = s(p, "/name");
                if !port_name.is_empty() {
                    let errs = super::validate_probes::port_name_errors(port_name);
                    if errs.is_empty() && port_names.contains(&port_name) {
                        out.push(Cause::duplicate(format!("{at}.name"), &json!(port_name)));
                    } else if errs.is_empty() {
                        port_names.push(port_name);
                    }
                    for why in errs {
                        out.push(Cause::invalid(format!("{at}.name"), &json!(port_name), why));
                    }
                }
                for (key, required) in [("containerPort", true), ("hostPort", false)] {
                    let n = p.get(key).and_then(Value::as_i64).unwrap_or(0);
                    if n == 0 && required {
                        out.push(Cause::required(format!("{at}.{key}")));
                    } else if n != 0 && !(1..=65535).contains(&n) {
                        out.push(Cause::invalid(
                            format!("{at}.{key}"),
                            &json!(n),
                            "must be between 1 and 65535, inclusive",
                        ));
                    }
                }
                one_of(
                    p.get("protocol").and_then(Value::as_str),
                    format!("{path}.ports[{j}].protocol"),
                    PROTOCOLS,
                    out,
                );
            }
            one_of(
                c.get("imagePullPolicy").and_then(Value::as_str),
                format!("{path}.imagePullPolicy"),
                &["Always", "IfNotPresent", "Never"],
                out,
            );
        }
    }
    one_of(
        spec.get("restartPolicy").and_then(Value::as_str),
        format!("{base}.restartPolicy"),
        &["Always", "OnFailure", "Never"],
        out,
    );
    one_of(
        spec.get("dnsPolicy").and_then(Value::as_str),
        format!("{base}.dnsPolicy"),
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
        out,
    );
    if spec.get("dnsPolicy").and_then(Value::as_str) == Some("None")
        && spec
            .pointer("/dnsConfig/nameservers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    {
        out.push(
            Cause::required(format!("{base}.dnsConfig.nameservers"))
                .with_message("Required value: must provide at least one DNS nameserver when `dnsPolicy` is `None`"),
        );
    }
    let mut vol_names: Vec<&str> = Vec::new();
    for (i, v) in items(spec, "volumes").iter().enumerate() {
        let n = s(v, "/name");
        if n.is_empty() {
            out.push(Cause::required(format!("{base}.volumes[{i}].name")));
        } else if vol_names.contains(&n) {
            out.push(Cause::duplicate(format!("{base}.volumes[{i}].name"), &json!(n)));
        }
        vol_names.push(n);
    }
    for key in ["initContainers", "containers"] {
        for (i, c) in items(spec, key).iter().enumerate() {
            for (j, m) in items(c, "volumeMounts").iter().enumerate() {
                let n = s(m, "/name");
                if !vol_names.contains(&n) {
                    out.push(Cause {
                        reason: "FieldValueNotFound".into(),
                        message: format!("Not found: {n:?}"),
                        field: format!("{base}.{key}[{i}].volumeMounts[{j}].name"),
                    });
                }
            }
        }
    }
    super::validate_probes::rules(spec, base, out);
    os_rules(spec, base, out);
    super::validate_windows::host_process_rules(spec, base, out);
    super::stop_signal::rules(spec, base, out);
}

impl Cause {
    pub(crate) fn with_message(mut self, m: &str) -> Self {
        self.message = m.to_string();
        self
    }
}

/// `spec.os.name` rules: Linux-only security fields are forbidden on Windows pods and
/// `windowsOptions` on Linux pods (upstream `validateWindows` / `validateLinux`).
fn os_rules(spec: &Value, base: &str, out: &mut Vec<Cause>) {
    let Some(os) = spec.pointer("/os/name").and_then(Value::as_str) else {
        return;
    };
    let present = |v: Option<&Value>| v.is_some_and(|x| !x.is_null());
    match os {
        "windows" => {
            let msg = "cannot be set for a windows pod";
            let psc = spec.get("securityContext").cloned().unwrap_or_default();
            for f in [
                "appArmorProfile",
                "seLinuxOptions",
                "runAsUser",
                "runAsGroup",
                "supplementalGroups",
                "supplementalGroupsPolicy",
                "fsGroup",
                "fsGroupChangePolicy",
                "seccompProfile",
                "seLinuxChangePolicy",
            ] {
                if present(psc.get(f)) {
                    out.push(Cause::forbidden(format!("{base}.securityContext.{f}"), msg));
                }
            }
            if psc
                .get("sysctls")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
            {
                out.push(Cause::forbidden(format!("{base}.securityContext.sysctls"), msg));
            }
            if present(spec.get("shareProcessNamespace")) {
                out.push(Cause::forbidden(
                    format!("{base}.securityContext.shareProcessNamespace"),
                    msg,
                ));
            }
            for key in ["initContainers", "containers", "ephemeralContainers"] {
                for (i, c) in items(spec, key).iter().enumerate() {
                    let Some(sc) = c.get("securityContext") else { continue };
                    for f in [
                        "seLinuxOptions",
                        "seccompProfile",
                        "appArmorProfile",
                        "capabilities",
                        "readOnlyRootFilesystem",
                        "privileged",
                        "allowPrivilegeEscalation",
                        "procMount",
                        "runAsUser",
                        "runAsGroup",
                    ] {
                        if present(sc.get(f)) {
                            out.push(Cause::forbidden(format!("{base}.{key}[{i}].securityContext.{f}"), msg));
                        }
                    }
                }
            }
        }
        "linux" => {
            let msg = "windows options cannot be set for a linux pod";
            if present(spec.pointer("/securityContext/windowsOptions")) {
                out.push(Cause::forbidden(format!("{base}.securityContext.windowsOptions"), msg));
            }
            for key in ["initContainers", "containers", "ephemeralContainers"] {
                for (i, c) in items(spec, key).iter().enumerate() {
                    if present(c.pointer("/securityContext/windowsOptions")) {
                        out.push(Cause::forbidden(
                            format!("{base}.{key}[{i}].securityContext.windowsOptions"),
                            msg,
                        ));
                    }
                }
            }
        }
        other => out.push(Cause::not_supported(
            format!("{base}.os.name"),
            &json!(other),
            &["linux", "windows"],
        )),
    }
}

/// The pod spec fields an update may change (upstream `ValidatePodUpdate`).
fn pod_update(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    let (Some(os), Some(ns)) = (old.get("spec"), new.get("spec")) else {
        return;
    };
    let mut a = os.clone();
    let mut b = ns.clone();
    for key in ["containers", "initContainers"] {
        let olds = items(os, key);
        if let Some(list) = b.get_mut(key).and_then(Value::as_array_mut) {
            for (i, c) in list.iter_mut().enumerate() {
                if let Some(img) = olds.get(i).and_then(|o| o.get("image")) {
                    c["image"] = img.clone();
                }
            }
        }
    }
    for f in ["activeDeadlineSeconds", "terminationGracePeriodSeconds"] {
        if let Some(m) = a.as_object_mut() {
            m.remove(f);
        }
        if let Some(m) = b.as_object_mut() {
            m.remove(f);
        }
    }
    // Tolerations may only be added.
    let old_tol = items(os, "tolerations");
    let new_tol = items(ns, "tolerations");
    if old_tol.iter().all(|t| new_tol.contains(t)) {
        a["tolerations"] = json!(null);
        b["tolerations"] = json!(null);
    }
    // Scheduling gates may only be removed.
    let old_g = items(os, "schedulingGates");
    let new_g = items(ns, "schedulingGates");
    if new_g.iter().all(|g| old_g.contains(g)) {
        a["schedulingGates"] = json!(null);
        b["schedulingGates"] = json!(null);
    }
    if a != b {
        out.push(Cause::forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
}

fn service(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let spec = obj.get("spec").cloned().unwrap_or_default();
    let ty = s(&spec, "/type");
    one_of(
        Some(ty),
        "spec.type",
        &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        out,
    );
    let ports = items(&spec, "ports");
    if ty == "ExternalName" {
        let en = s(&spec, "/externalName");
        if en.is_empty() {
            out.push(Cause::required("spec.externalName"));
        } else if !SUBDOMAIN.is_match(en.trim_end_matches('.')) {
            out.push(Cause::invalid("spec.externalName", &json!(en), SUBDOMAIN_MSG));
        }
    } else if ports.is_empty() && s(&spec, "/clusterIP") != "None" {
        out.push(Cause::required("spec.ports"));
    }
    let mut names = Vec::new();
    let mut seen = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&port) {
            out.push(Cause::invalid(
                format!("spec.ports[{i}].port"),
                &json!(port),
                "must be between 1 and 65535, inclusive",
            ));
        }
        let name = s(p, "/name");
        if ports.len() > 1 && name.is_empty() {
            out.push(Cause::required(format!("spec.ports[{i}].name")));
        }
        if !name.is_empty() {
            if names.contains(&name) {
                out.push(Cause::duplicate(format!("spec.ports[{i}].name"), &json!(name)));
            }
            names.push(name);
        }
        let key = (port, s(p, "/protocol").to_string());
        if seen.contains(&key) {
            out.push(Cause::duplicate(
                format!("spec.ports[{i}]"),
                &json!({"port": port, "protocol": key.1}),
            ));
        }
        seen.push(key);
        one_of(
            p.get("protocol").and_then(Value::as_str),
            format!("spec.ports[{i}].protocol"),
            PROTOCOLS,
            out,
        );
        if p.get("nodePort").is_some() && ty == "ClusterIP" {
            out.push(Cause::forbidden(
                format!("spec.ports[{i}].nodePort"),
                "may not be used when `type` is 'ClusterIP'",
            ));
        }
    }
    if let Some(old) = old {
        let (oc, nc) = (s(old, "/spec/clusterIP"), s(obj, "/spec/clusterIP"));
        if !oc.is_empty()
            && oc != nc
            && s(obj, "/spec/type") != "ExternalName"
            && s(old, "/spec/type") != "ExternalName"
        {
            out.push(Cause::invalid(
                "spec.clusterIPs[0]",
                &json!(nc),
                "may not change once set",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::registry::find;

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn core_events_need_only_an_involved_namespace_that_agrees() {
        let def = find("", "v1", "events").unwrap();
        let ev =
            |ns: &str, involved: Value| json!({"metadata": {"name": "e", "namespace": ns}, "involvedObject": involved});
        assert!(validate(def, &ev("ns-a", json!({"namespace": "ns-a"})), None).is_empty());
        assert!(validate(def, &ev("default", json!({"kind": "Node", "name": "n"})), None).is_empty());
        for bad in [
            ev("ns-a", json!({"namespace": "ns-b"})),
            ev("ns-a", json!({"kind": "Node", "name": "n"})),
        ] {
            let c = validate(def, &bad, None);
            assert_eq!(c.len(), 1, "{bad}");
            assert_eq!(c[0].field, "involvedObject.namespace");
        }
    }

    #[test]
    fn windows_pod_with_linux_fields_gets_a_cause_per_field() {
        let p = pod(
            json!({"os": {"name": "windows"}, "securityContext": {"runAsUser": 1, "fsGroup": 2},
            "containers": [{"name": "c", "image": "i", "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN"]}}}]}),
        );
        let c = validate(find("", "v1", "pods").unwrap(), &p, None);
        let fields: Vec<&str> = c.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.securityContext.runAsUser",
                "spec.securityContext.fsGroup",
                "spec.containers[0].securityContext.capabilities",
                "spec.containers[0].securityContext.privileged",
            ]
        );
        assert!(
            c.iter()
                .all(|c| c.message == "Forbidden: cannot be set for a windows pod")
        );
        let p = pod(
            json!({"os": {"name": "linux"}, "containers": [{"name": "c", "image": "i",
            "securityContext": {"windowsOptions": {"runAsUserName": "x"}}}]}),
        );
        assert_eq!(validate(find("", "v1", "pods").unwrap(), &p, None).len(), 1);
    }

    #[test]
    fn required_and_name_rules() {
        let c = validate(
            find("", "v1", "pods").unwrap(),
            &json!({"metadata": {"name": "Bad_Name"}, "spec": {"containers": [{"name": "c"}]}}),
            None,
        );
        let fields: Vec<&str> = c.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["metadata.name", "spec.containers[0].image"]);
        let c = validate(
            find("", "v1", "services").unwrap(),
            &json!({"metadata": {"name": "1svc"}, "spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}]}}),
            None,
        );
        assert_eq!(c.len(), 1);
        assert!(c[0].message.contains("DNS-1035"));
    }

    #[test]
    fn selector_must_match_template() {
        let d = json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let c = validate(find("apps", "v1", "deployments").unwrap(), &d, None);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "spec.template.metadata.labels");
        assert!(c[0].message.contains("`selector` does not match template `labels`"));
    }

    #[test]
    fn pod_update_allows_only_image_changes() {
        let def = find("", "v1", "pods").unwrap();
        let old = pod(json!({"containers": [{"name": "c", "image": "a"}], "tolerations": [{"key": "x"}]}));
        let img =
            pod(json!({"containers": [{"name": "c", "image": "b"}], "tolerations": [{"key": "x"}, {"key": "y"}]}));
        assert!(validate(def, &img, Some(&old)).is_empty());
        let bad =
            pod(json!({"containers": [{"name": "c", "image": "a", "command": ["x"]}], "tolerations": [{"key": "x"}]}));
        let c = validate(def, &bad, Some(&old));
        assert_eq!(c[0].field, "spec");
        assert!(
            c[0].message
                .starts_with("Forbidden: pod updates may not change fields other than")
        );
    }
}
