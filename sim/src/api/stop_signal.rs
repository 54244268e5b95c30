//! A container's `lifecycle.stopSignal` (KEP-4960, feature gate `ContainerStopSignals`, alpha
//! and off by default in 1.33) as kube-apiserver 1.33 treats it:
//! - gate off: the pod strategy drops the field on write unless the old pod already used it
//!   (pkg/api/pod/util.go `dropDisabledFields`), so a create succeeds without it;
//! - gate on: pkg/apis/core/validation `validateStopSignal` requires `spec.os.name` and checks
//!   the signal against that OS's list; Windows pods accept only SIGTERM and SIGKILL, the two
//!   signals hcsshim maps to a container stop.

use serde_json::Value;

use super::error::Cause;
use super::state::AppState;

/// The containers that may carry a stop signal.
const CONTAINER_KEYS: [&str; 2] = ["initContainers", "containers"];

/// Upstream's `supportedStopSignalsWindows`, sorted as `sets.List` returns it.
pub const WINDOWS: &[&str] = &["SIGKILL", "SIGTERM"];

/// Upstream's `supportedStopSignalsLinux`, sorted.
const LINUX: &[&str] = &[
    "SIGABRT",
    "SIGALRM",
    "SIGBUS",
    "SIGCHLD",
    "SIGCLD",
    "SIGCONT",
    "SIGFPE",
    "SIGHUP",
    "SIGILL",
    "SIGINT",
    "SIGIO",
    "SIGIOT",
    "SIGKILL",
    "SIGPIPE",
    "SIGPOLL",
    "SIGPROF",
    "SIGPWR",
    "SIGQUIT",
    "SIGRTMAX",
    "SIGRTMAX-1",
    "SIGRTMAX-10",
    "SIGRTMAX-11",
    "SIGRTMAX-12",
    "SIGRTMAX-13",
    "SIGRTMAX-14",
    "SIGRTMAX-2",
    "SIGRTMAX-3",
    "SIGRTMAX-4",
    "SIGRTMAX-5",
    "SIGRTMAX-6",
    "SIGRTMAX-7",
    "SIGRTMAX-8",
    "SIGRTMAX-9",
    "SIGRTMIN",
    "SIGRTMIN+1",
    "SIGRTMIN+10",
    "SIGRTMIN+11",
    "SIGRTMIN+12",
    "SIGRTMIN+13",
    "SIGRTMIN+14",
    "SIGRTMIN+15",
    "SIGRTMIN+2",
    "SIGRTMIN+3",
    "SIGRTMIN+4",
    "SIGRTMIN+5",
    "SIGRTMIN+6",
    "SIGRTMIN+7",
    "SIGRTMIN+8",
    "SIGRTMIN+9",
    "SIGSEGV",
    "SIGSTKFLT",
    "SIGSTOP",
    "SIGSYS",
    "SIGTERM",
    "SIGTRAP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGUSR1",
    "SIGUSR2",
    "SIGVTALRM",
    "SIGWINCH",
    "SIGXCPU",
    "SIGXFSZ",
];

/// Whether any container of pod spec `spec` sets a stop signal.
fn in_use(spec: Option<&Value>) -> bool {
    let Some(spec) = spec else { return false };
    CONTAINER_KEYS.iter().any(|key| {
        spec.get(key)
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| c.pointer("/lifecycle/stopSignal").is_some()))
    })
}

/// With the gate off, removes every container's stop signal from the pod `obj` unless `old`
/// (the stored pod of an update) already used one.
pub fn drop_disabled(st: &AppState, obj: &mut Value, old: Option<&Value>) {
    if st.cfg.gates.enabled(crate::gates::CONTAINER_STOP_SIGNALS) || in_use(old.and_then(|o| o.get("spec"))) {
        return;
    }
    for key in CONTAINER_KEYS {
        let Some(list) = obj.pointer_mut(&format!("/spec/{key}")).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in list {
            if let Some(lifecycle) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
                lifecycle.remove("stopSignal");
            }
        }
    }
}

/// Appends the stop-signal causes of pod spec `spec` at `base`.
pub fn rules(spec: &Value, base: &str, out: &mut Vec<Cause>) {
    let os = spec.pointer("/os/name").and_then(Value::as_str);
    for key in CONTAINER_KEYS {
        let list = spec
            .get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (i, c) in list.iter().enumerate() {
            let Some(signal) = c.pointer("/lifecycle/stopSignal") else {
                continue;
            };
            let field = format!("{base}.{key}[{i}].lifecycle.stopSignal");
            let supported = match os {
                None => {
                    out.push(Cause::forbidden(
                        field,
                        "may not be set for containers with empty `spec.os.name`",
                    ));
                    continue;
                }
                Some("windows") => WINDOWS,
                Some("linux") => LINUX,
                // Another OS name already fails `spec.os.name` validation.
                Some(_) => continue,
            };
            if !signal.as_str().is_some_and(|s| supported.contains(&s)) {
                out.push(Cause::not_supported(field, signal, supported));
            }
        }
    }
}

/// Whether `cause` is a stop-signal check of a Windows pod (what the `pod-os-validation-off`
/// and `windows-stop-signals-refused` faults act on).
pub fn is_stop_signal_cause(cause: &Cause) -> bool {
    cause.field.ends_with(".lifecycle.stopSignal")
}

/// `windows-stop-signals-refused`: causes for every stop signal of a Windows pod, the allowed
/// ones included (an API server whose Windows list is empty).
pub fn refuse_all_windows(spec: &Value, base: &str, out: &mut Vec<Cause>) {
    if spec.pointer("/os/name").and_then(Value::as_str) != Some("windows") {
        return;
    }
    for key in CONTAINER_KEYS {
        let list = spec
            .get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (i, c) in list.iter().enumerate() {
            if let Some(signal) = c.pointer("/lifecycle/stopSignal")
                && signal.as_str().is_some_and(|s| WINDOWS.contains(&s))
            {
                out.push(Cause::not_supported(
                    format!("{base}.{key}[{i}].lifecycle.stopSignal"),
                    signal,
                    &[],
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn causes(spec: Value) -> Vec<String> {
        let mut out = Vec::new();
        rules(&spec, "spec", &mut out);
        out.into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    fn pod(os: Option<&str>, signal: &str) -> Value {
        let mut spec = json!({"containers": [{"name": "c", "lifecycle": {"stopSignal": signal}}]});
        if let Some(os) = os {
            spec["os"] = json!({"name": os});
        }
        spec
    }

    #[test]
    fn windows_pods_take_only_sigterm_and_sigkill() {
        assert!(causes(pod(Some("windows"), "SIGTERM")).is_empty());
        assert!(causes(pod(Some("windows"), "SIGKILL")).is_empty());
        assert_eq!(
            causes(pod(Some("windows"), "SIGQUIT")),
            [
                "spec.containers[0].lifecycle.stopSignal: Unsupported value: \"SIGQUIT\": supported values: \"SIGKILL\", \"SIGTERM\""
            ]
        );
        assert!(causes(pod(Some("linux"), "SIGUSR1")).is_empty());
        assert_eq!(causes(pod(Some("linux"), "SIGFOO")).len(), 1);
        assert_eq!(
            causes(pod(None, "SIGTERM")),
            [
                "spec.containers[0].lifecycle.stopSignal: Forbidden: may not be set for containers with empty `spec.os.name`"
            ]
        );
    }

    #[test]
    fn in_use_reads_every_container() {
        assert!(in_use(Some(&pod(None, "SIGTERM"))));
        assert!(!in_use(Some(&json!({"containers": [{"name": "c"}]}))));
        assert!(!in_use(None));
    }
}
