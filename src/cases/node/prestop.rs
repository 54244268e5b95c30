//! `[sig-node] PreStop` (upstream `test/e2e/node/pre_stop.go`): deleting a pod runs its preStop
//! exec hook, which reaches another pod over the pod network before the container stops.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ExecAction, Lifecycle, LifecycleHandler};
use kube::api::DeleteParams;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::fail;
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_ip, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(CALL_PRESTOP, Kind::Adapted, call_prestop)]
}

/// Upstream pre_stop.go "should call prestop when killing a pod".
pub(crate) const CALL_PRESTOP: &str = "[sig-node] PreStop should call prestop when killing a pod [Conformance]";

/// Upstream polls the server's state every 5 s for 60 s after the delete.
const VALIDATE_WITHIN: Duration = Duration::from_secs(60);
/// We poll once a second (a rate limit on repeated reads, not a fixed wait).
const VALIDATE_EVERY: Duration = Duration::from_secs(1);

/// Whether agnhost nettest's `/read` state counts a message from `prestop`.
fn received_prestop(state: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(state)
        .ok()
        .and_then(|v| v["Received"]["prestop"].as_i64())
        .is_some_and(|n| n != 0)
}

/// Upstream pre_stop.go: a `server` pod runs agnhost nettest on 8080; a `tester` busybox pod
/// (`sleep 600`) has a preStop hook `wget -O- --post-data={"Source": "prestop"}
/// http://<server IP>:8080/write`. After the tester is deleted, the server's `/read` state,
/// fetched through the API server's pod proxy, must count one message from `prestop`.
async fn call_prestop(f: &Framework) -> CaseResult {
    let server = f
        .create_pod_ready(
            &f.pod("server").container(
                ContainerBuilder::new("server", "agnhost")
                    .args(["nettest"])
                    .port(8080, "TCP"),
            ),
        )
        .await?;
    let url = format!("http://{}:8080/write", pod_ip(&server)?);
    let hook = vec![
        "wget".to_string(),
        "-O-".into(),
        "--post-data={\"Source\": \"prestop\"}".into(),
        url,
    ];
    let tester = f
        .create_pod_ready(
            &f.pod("tester").container(
                ContainerBuilder::new("tester", "busybox")
                    .command(["sleep", "600"])
                    .with(move |c: &mut Container| {
                        c.lifecycle = Some(Lifecycle {
                            pre_stop: Some(LifecycleHandler {
                                exec: Some(ExecAction {
                                    command: Some(hook.clone()),
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        });
                    }),
            ),
        )
        .await?;
    f.step("deleting pre-stop pod tester");
    f.delete_pod_and_wait(&tester, &DeleteParams::default(), Duration::from_secs(60))
        .await?;
    let deadline =
        tokio::time::Instant::now() + VALIDATE_WITHIN.min(f.remaining().saturating_sub(Duration::from_secs(3)));
    let mut last = String::new();
    let mut tick = tokio::time::interval(VALIDATE_EVERY);
    while tokio::time::Instant::now() < deadline {
        tick.tick().await;
        match f.pod_proxy_get("server", 8080, "read").await {
            Ok(state) if received_prestop(&state) => {
                f.property("server_state", state.trim());
                return Ok(());
            }
            Ok(state) => last = state,
            Err(e) => last = format!("error: {e}"),
        }
    }
    fail!(
        "validating pre-stop: server pod server on node {} never counted a message from \"prestop\" within {:?} \
         of deleting pod tester (node {}); last /read: {}",
        pod_node(&server),
        VALIDATE_WITHIN,
        pod_node(&tester),
        last.trim()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_counted_prestop_message_counts() {
        assert!(received_prestop(r#"{"Received":{"prestop":1}}"#));
        assert!(!received_prestop(r#"{"Received":{}}"#));
        assert!(!received_prestop(r#"{"Received":{"prestop":0}}"#));
        assert!(!received_prestop("not json"));
    }
}
