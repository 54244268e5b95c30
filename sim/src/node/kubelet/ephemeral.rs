//! Ephemeral containers (KEP-277): containers added to a running pod through the
//! `pods/ephemeralcontainers` subresource, which the kubelet starts on its next sync of the
//! pod. Like upstream's `computePodActions`, they start once the sandbox exists whatever the
//! init containers are doing, and they are never restarted, probed or stopped on their own:
//! they go with the pod.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, EphemeralContainer};
use tracing::{debug, warn};

use super::restart::supervise;
use super::{Ctr, Kubelet, PodRt, Role};

/// The container an ephemeral container runs as: the same fields but `targetContainerName`
/// (process namespace sharing, which the simulated runtime does not model).
fn as_container(ec: &EphemeralContainer) -> Container {
    let mut v = serde_json::to_value(ec).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.remove("targetContainerName");
    }
    serde_json::from_value(v).unwrap_or_else(|e| {
        // The two types share their fields; a failure here is a bug, reported rather than hidden.
        warn!(container = %ec.name, error = %e, "ephemeral container fields not carried over; running it with name and image only");
        Container {
            name: ec.name.clone(),
            image: ec.image.clone(),
            ..Default::default()
        }
    })
}

/// Starts the pod's ephemeral containers that have not been started yet, once its sandbox and
/// volumes are set up (before that, the pod worker calls again when they are). A pod being
/// torn down starts nothing new; nor does a kubelet with the `ephemeral-containers-ignored` fault.
pub(super) fn start_new(kl: &Arc<Kubelet>, rt: &Arc<PodRt>) {
    if rt.halted.is_cancelled() || kl.net.faults().is_on("ephemeral-containers-ignored") {
        return;
    }
    let specs = rt.pod().spec.and_then(|s| s.ephemeral_containers).unwrap_or_default();
    if specs.is_empty() {
        return;
    }
    let mut new = Vec::new();
    {
        let mut st = rt.state.lock().expect("state lock");
        if st.volumes.is_none() {
            return;
        }
        for ec in &specs {
            if st.ephemeral.iter().any(|c| c.name == ec.name) {
                continue;
            }
            let c = as_container(ec);
            st.ephemeral.push(Ctr::new(&c, false));
            new.push((st.ephemeral.len() - 1, c));
        }
    }
    for (idx, c) in new {
        debug!(node = %kl.cfg.name, pod = %rt.name, container = %c.name, "starting ephemeral container");
        tokio::spawn(supervise(
            kl.clone(),
            rt.clone(),
            c,
            Role::Ephemeral,
            idx,
            "Never".into(),
        ));
    }
    rt.touch();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ephemeral_container_runs_as_a_container_without_its_target() {
        let ec: EphemeralContainer = serde_json::from_value(serde_json::json!({
            "name": "debugger", "image": "busybox", "command": ["sh"], "stdin": true, "tty": true,
            "targetContainerName": "app"
        }))
        .unwrap();
        let c = as_container(&ec);
        assert_eq!(c.name, "debugger");
        assert_eq!(c.command.as_deref(), Some(&["sh".to_string()][..]));
        assert_eq!((c.stdin, c.tty), (Some(true), Some(true)));
    }
}
