//! Probe and lifecycle-hook rules of a pod spec, as kube-apiserver 1.33 checks them
//! (pkg/apis/core/validation: `validateLivenessProbe`, `validateReadinessProbe`,
//! `validateStartupProbe`, `validateProbe`, `validateHandler`, `validateLifecycle`, and the
//! init-container branch of `validateInitContainers`), plus the port-name rule
//! (`IsValidPortName`) that container ports share with probe ports.
//!
//! Without them the simulator ran pods a real cluster refuses: a liveness probe with
//! `successThreshold: 2`, a probe with no handler (which the simulated kubelet would never
//! fail), or a readiness probe with its own `terminationGracePeriodSeconds`. Messages and field
//! paths are upstream's, so a client sees the same 422 either way.

use serde_json::{Value, json};

use super::error::Cause;

/// Which probe a rule is checking; liveness and startup probes must succeed once to count,
/// and only they may carry their own grace period.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

const PROBES: [(&str, ProbeKind); 3] = [
    ("livenessProbe", ProbeKind::Liveness),
    ("readinessProbe", ProbeKind::Readiness),
    ("startupProbe", ProbeKind::Startup),
];

/// The handler kinds of a probe and of a lifecycle hook, in upstream's checking order (the
/// first one set wins; any later one is "more than 1 handler type").
const PROBE_HANDLERS: &[&str] = &["exec", "httpGet", "tcpSocket", "grpc"];
const HOOK_HANDLERS: &[&str] = &["exec", "httpGet", "tcpSocket", "sleep"];

/// Upstream's `IsNegativeErrorMsg`.
const NEGATIVE: &str = "must be greater than or equal to 0";

fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn set<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|x| !x.is_null())
}

/// Every probe and hook rule of `spec` (a pod's or a template's), its paths under `base`.
pub fn rules(spec: &Value, base: &str, out: &mut Vec<Cause>) {
    let grace = spec.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
    for (i, c) in items(spec, "initContainers").iter().enumerate() {
        let path = format!("{base}.initContainers[{i}]");
        if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            // A sidecar: probed and hooked like a regular container.
            container(c, &path, grace, out);
            continue;
        }
        for key in ["lifecycle", "livenessProbe", "readinessProbe", "startupProbe"] {
            if set(c, key).is_some() {
                out.push(Cause::forbidden(
                    format!("{path}.{key}"),
                    "may not be set for init containers without restartPolicy=Always",
                ));
            }
        }
    }
    for (i, c) in items(spec, "containers").iter().enumerate() {
        container(c, &format!("{base}.containers[{i}]"), grace, out);
    }
}

fn container(c: &Value, path: &str, grace: Option<i64>, out: &mut Vec<Cause>) {
    if let Some(lifecycle) = set(c, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = set(lifecycle, hook) {
                handler(h, &format!("{path}.lifecycle.{hook}"), HOOK_HANDLERS, grace, out);
            }
        }
    }
    for (key, kind) in PROBES {
        if let Some(p) = set(c, key) {
            probe(p, &format!("{path}.{key}"), kind, grace, out);
        }
    }
}

fn probe(p: &Value, path: &str, kind: ProbeKind, grace: Option<i64>, out: &mut Vec<Cause>) {
    handler(p, path, PROBE_HANDLERS, grace, out);
    let int = |key: &str| p.get(key).and_then(Value::as_i64).unwrap_or(0);
    for key in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        if int(key) < 0 {
            out.push(Cause::invalid(format!("{path}.{key}"), &json!(int(key)), NEGATIVE));
        }
    }
    let own_grace = p.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
    if let Some(g) = own_grace.filter(|g| *g <= 0) {
        out.push(Cause::invalid(
            format!("{path}.terminationGracePeriodSeconds"),
            &json!(g),
            "must be greater than 0",
        ));
    }
    match kind {
        ProbeKind::Liveness | ProbeKind::Startup if int("successThreshold") != 1 => {
            out.push(Cause::invalid(
                format!("{path}.successThreshold"),
                &json!(int("successThreshold")),
                "must be 1",
            ));
        }
        ProbeKind::Readiness if own_grace.is_some() => {
            out.push(Cause::invalid(
                format!("{path}.terminationGracePeriodSeconds"),
                &json!(own_grace),
                "must not be set for readinessProbes",
            ));
        }
        _ => {}
    }
}

/// Upstream `validateHandler`: exactly one handler kind, each checked on its own terms.
fn handler(h: &Value, path: &str, kinds: &[&str], grace: Option<i64>, out: &mut Vec<Cause>) {
    let mut found = false;
    for &kind in kinds {
        let Some(action) = set(h, kind) else { continue };
        let at = format!("{path}.{kind}");
        if found {
            out.push(Cause::forbidden(at, "may not specify more than 1 handler type"));
            continue;
        }
        found = true;
        match kind {
            "exec" if items(action, "command").is_empty() => out.push(Cause::required(format!("{at}.command"))),
            "httpGet" => http_get(action, &at, out),
            "tcpSocket" => port(action.get("port"), &format!("{at}.port"), out),
            "grpc" => port(action.get("port"), &format!("{at}.port"), out),
            "sleep" => sleep(action, &at, grace, out),
            _ => {}
        }
    }
    if !found {
        out.push(Cause::required(path).with_message("Required value: must specify a handler type"));
    }
}

fn http_get(action: &Value, at: &str, out: &mut Vec<Cause>) {
    if action
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .is_empty()
    {
        out.push(Cause::required(format!("{at}.path")));
    }
    port(action.get("port"), &format!("{at}.port"), out);
    let scheme = action.get("scheme").and_then(Value::as_str).unwrap_or_default();
    if !["HTTP", "HTTPS"].contains(&scheme) {
        out.push(Cause::not_supported(
            format!("{at}.scheme"),
            &json!(scheme),
            &["HTTP", "HTTPS"],
        ));
    }
    for header in items(action, "httpHeaders") {
        let name = header.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            out.push(Cause::invalid(
                format!("{at}.httpHeaders"),
                &json!(name),
                "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
            ));
        }
    }
}

/// Upstream `validateSleepAction` with `PodLifecycleSleepActionAllowZero` (beta, on in 1.33):
/// between 0 and the pod's grace period.
fn sleep(action: &Value, at: &str, grace: Option<i64>, out: &mut Vec<Cause>) {
    let seconds = action.get("seconds").and_then(Value::as_i64).unwrap_or(0);
    if let Some(g) = grace
        && (seconds < 0 || seconds > g)
    {
        out.push(Cause::invalid(
            at,
            &json!(seconds),
            &format!("must be non-negative and less than terminationGracePeriodSeconds ({g})"),
        ));
    }
}

/// Upstream `ValidatePortNumOrName` on an int-or-string port.
fn port(value: Option<&Value>, at: &str, out: &mut Vec<Cause>) {
    match value {
        Some(Value::String(name)) => {
            for why in port_name_errors(name) {
                out.push(Cause::invalid(at, &json!(name), why));
            }
        }
        other => {
            let n = other.and_then(Value::as_i64).unwrap_or(0);
            if !(1..=65535).contains(&n) {
                out.push(Cause::invalid(at, &json!(n), "must be between 1 and 65535, inclusive"));
            }
        }
    }
}

/// Upstream `IsValidPortName`: at most 15 characters of `[-a-z0-9]`, at least one letter, no
/// `--`, no hyphen at either end.
pub fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters");
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen");
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(spec: Value) -> Vec<String> {
        let mut out = Vec::new();
        rules(&spec, "spec", &mut out);
        out.iter().map(Cause::line).collect()
    }

    fn with_container(c: Value) -> Value {
        json!({"terminationGracePeriodSeconds": 30, "containers": [c]})
    }

    const DEFAULTED: &str =
        r#"{"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}"#;

    fn probe_with(extra: Value) -> Value {
        let mut p: Value = serde_json::from_str(DEFAULTED).unwrap();
        p.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        p
    }

    #[test]
    fn a_well_formed_probe_and_hook_pass() {
        let c = json!({"name": "c", "image": "i",
            "livenessProbe": probe_with(json!({"httpGet": {"path": "/", "port": 8080, "scheme": "HTTP"}})),
            "readinessProbe": probe_with(json!({"tcpSocket": {"port": "http"}, "successThreshold": 3})),
            "startupProbe": probe_with(json!({"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 5})),
            "lifecycle": {"preStop": {"sleep": {"seconds": 0}}, "postStart": {"exec": {"command": ["true"]}}}});
        assert_eq!(lines(with_container(c)), Vec::<String>::new());
    }

    #[test]
    fn probe_rules_give_upstream_messages() {
        let c = json!({"name": "c", "image": "i",
            "livenessProbe": probe_with(json!({"exec": {"command": ["x"]}, "successThreshold": 2, "periodSeconds": -1})),
            "readinessProbe": probe_with(json!({"exec": {"command": ["x"]}, "terminationGracePeriodSeconds": 3})),
            "startupProbe": probe_with(json!({"exec": {"command": []}, "grpc": {"port": 0}, "terminationGracePeriodSeconds": 0}))});
        assert_eq!(
            lines(with_container(c)),
            [
                "spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
                "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 3: must not be set for readinessProbes",
                "spec.containers[0].startupProbe.exec.command: Required value",
                "spec.containers[0].startupProbe.grpc: Forbidden: may not specify more than 1 handler type",
                "spec.containers[0].startupProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0",
            ]
        );
    }

    #[test]
    fn a_handler_is_required_and_ports_are_checked() {
        let c = json!({"name": "c", "image": "i",
            "livenessProbe": probe_with(json!({})),
            "readinessProbe": probe_with(json!({"httpGet": {"path": "/", "port": "Web--Port", "scheme": "FTP",
                "httpHeaders": [{"name": "X Bad", "value": "1"}]}})),
            "lifecycle": {"preStop": {"sleep": {"seconds": 31}}}});
        assert_eq!(
            lines(with_container(c)),
            [
                "spec.containers[0].lifecycle.preStop.sleep: Invalid value: 31: must be non-negative and less than terminationGracePeriodSeconds (30)",
                "spec.containers[0].livenessProbe: Required value: must specify a handler type",
                "spec.containers[0].readinessProbe.httpGet.port: Invalid value: \"Web--Port\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "spec.containers[0].readinessProbe.httpGet.port: Invalid value: \"Web--Port\": must not contain consecutive hyphens",
                "spec.containers[0].readinessProbe.httpGet.scheme: Unsupported value: \"FTP\": supported values: \"HTTP\", \"HTTPS\"",
                "spec.containers[0].readinessProbe.httpGet.httpHeaders: Invalid value: \"X Bad\": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
            ]
        );
    }

    #[test]
    fn only_sidecar_init_containers_may_be_probed() {
        let probe = probe_with(json!({"exec": {"command": ["true"]}}));
        let spec = json!({"terminationGracePeriodSeconds": 30, "containers": [{"name": "c", "image": "i"}],
            "initContainers": [
                {"name": "init", "image": "i", "readinessProbe": probe, "lifecycle": {"postStart": {"exec": {"command": ["true"]}}}},
                {"name": "side", "image": "i", "restartPolicy": "Always", "readinessProbe": probe}]});
        assert_eq!(
            lines(spec),
            [
                "spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers without restartPolicy=Always",
                "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
            ]
        );
    }

    #[test]
    fn port_names_follow_rfc_6335_as_upstream_reads_it() {
        assert!(port_name_errors("http").is_empty());
        assert!(port_name_errors("metrics-2").is_empty());
        assert_eq!(port_name_errors("8080"), ["must contain at least one letter (a-z)"]);
        assert_eq!(port_name_errors("-web"), ["must not begin or end with a hyphen"]);
        assert_eq!(
            port_name_errors("a-very-long-port-name"),
            ["must be no more than 15 characters"]
        );
    }
}
