//! kube-apiserver's HostProcess rules for pod specs (pkg/apis/core/validation
//! `validateWindowsHostProcessPod`): a pod with any HostProcess container has only
//! HostProcess containers and uses the host network, and a container may not contradict the
//! pod's setting. Apart from `validate` because these rules are Windows-specific and read
//! the pod-level and container-level settings together.

use serde_json::{Value, json};

use super::error::Cause;

/// `windowsOptions.hostProcess` of a security context, if set.
fn host_process(security_context: Option<&Value>) -> Option<bool> {
    security_context?.pointer("/windowsOptions/hostProcess")?.as_bool()
}

/// Appends the HostProcess causes of pod spec `spec` at `base` (`spec`, `spec.template.spec`).
pub fn host_process_rules(spec: &Value, base: &str, out: &mut Vec<Cause>) {
    let pod = host_process(spec.get("securityContext"));
    let mut containers = 0;
    let mut hpc = 0;
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        let list = spec
            .get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (i, c) in list.iter().enumerate() {
            containers += 1;
            let own = host_process(c.get("securityContext"));
            if let (Some(p), Some(o)) = (pod, own)
                && p != o
            {
                out.push(Cause::invalid(
                    format!("{base}.{key}[{i}].securityContext.windowsOptions.hostProcess"),
                    &json!(o),
                    &format!("pod hostProcess value must be identical if both are specified, was {p}"),
                ));
            }
            if own.or(pod) == Some(true) {
                hpc += 1;
            }
        }
    }
    if hpc == 0 {
        return;
    }
    if hpc != containers {
        out.push(Cause::invalid(
            base,
            &json!(""),
            "If pod contains any hostProcess containers then all containers must be HostProcess containers",
        ));
    }
    if spec.get("hostNetwork").and_then(Value::as_bool) != Some(true) {
        out.push(Cause::invalid(
            format!("{base}.hostNetwork"),
            &json!(false),
            "hostNetwork must be true if pod contains any hostProcess containers",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn causes(spec: Value) -> Vec<String> {
        let mut out = Vec::new();
        host_process_rules(&spec, "spec", &mut out);
        out.into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    #[test]
    fn host_process_pods_are_all_host_process_and_host_network() {
        let hp = json!({"windowsOptions": {"hostProcess": true}});
        assert!(causes(json!({"securityContext": hp, "hostNetwork": true, "containers": [{"name": "a"}]})).is_empty());
        let mixed =
            causes(json!({"hostNetwork": true, "containers": [{"name": "a", "securityContext": hp}, {"name": "b"}]}));
        assert_eq!(
            mixed,
            [
                "spec: Invalid value: \"\": If pod contains any hostProcess containers then all containers must be HostProcess containers"
            ]
        );
        let no_net = causes(json!({"securityContext": hp, "containers": [{"name": "a"}]}));
        assert_eq!(
            no_net,
            [
                "spec.hostNetwork: Invalid value: false: hostNetwork must be true if pod contains any hostProcess containers"
            ]
        );
        let contra = causes(json!({"securityContext": hp, "hostNetwork": true,
            "containers": [{"name": "a", "securityContext": {"windowsOptions": {"hostProcess": false}}}]}));
        assert!(contra[0].starts_with("spec.containers[0].securityContext.windowsOptions.hostProcess: Invalid value: false: pod hostProcess value must be identical"), "{contra:?}");
        assert!(causes(json!({"containers": [{"name": "a"}]})).is_empty());
    }
}
