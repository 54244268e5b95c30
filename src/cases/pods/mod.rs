//! Adapted cases: pods (`[sig-node] Pods`, InitContainer, Container Runtime, Kubelet, Variable
//! Expansion, Downward API env).
//!
//! Each body is written once and runs on the OS `--node-os-distro` names: the pod builder picks
//! images, node selector and `spec.os`, the OS profile gives the shell.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerStateTerminated, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, ResourceRequirements, Service,
    ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::wait::conditions as wc;
use crate::framework::workloads::{expect_env, print_env_script};
use crate::framework::{CaseResult, ContainerBuilder, Framework, PodBuilder, pod_node};
use crate::{ensure, fail};

mod env;
mod readiness_gates;

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    let mut cases = vec![
        case!(SUBMITTED_AND_REMOVED, Kind::Adapted, submitted_and_removed),
        case!(UPDATED, Kind::Adapted, updated),
        case!(HOST_IP, Kind::Adapted, host_ip),
        case!(ACTIVE_DEADLINE, Kind::Adapted, active_deadline),
        case!(EXEC_WEBSOCKETS, Kind::Adapted, exec_websockets),
        case!(LOGS_WEBSOCKETS, Kind::Adapted, logs_websockets),
        case!(DELETE_COLLECTION, Kind::Adapted, delete_collection),
        case!(QOS_GUARANTEED, Kind::Adapted, qos_guaranteed),
        case!(SERVICE_ENV, Kind::Adapted, service_env),
        case!(INIT_RESTART_NEVER, Kind::Adapted, init_restart_never),
        case!(INIT_RESTART_ALWAYS, Kind::Adapted, init_restart_always),
        case!(INIT_FAIL_RESTART_NEVER, Kind::Adapted, init_fail_restart_never),
        case!(EXPECTED_STATUS, Kind::Adapted, expected_status),
        case!(TERMINATION_FROM_LOGS, Kind::Adapted, termination_from_logs),
        case!(
            TERMINATION_EMPTY_ON_SUCCESS,
            Kind::Adapted,
            termination_empty_on_success
        ),
        case!(KUBELET_LOGS, Kind::Adapted, kubelet_logs),
        case!(KUBELET_TERMINATED_REASON, Kind::Adapted, kubelet_terminated_reason),
        case!(KUBELET_DELETE_FAILED, Kind::Adapted, kubelet_delete_failed),
    ];
    cases.extend(env::cases());
    cases.extend(readiness_gates::cases());
    cases
}

/// How long a deleted pod may take to disappear: its 30 s grace period plus API and kubelet
/// latency. Bounded well inside the case timeout so a kubelet that never finishes the
/// termination fails the wait with its own message.
const DELETION_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A long-running container: agnhost `pause`.
fn pause(name: &str) -> ContainerBuilder {
    ContainerBuilder::new(name, "agnhost").args(["pause"])
}

/// A container running `script` in the pod OS's shell.
fn shell(f: &Framework, name: &str, script: &str) -> ContainerBuilder {
    ContainerBuilder::new(name, "agnhost").command(f.target_os().shell(script))
}

/// A container that prints its environment and exits.
fn env_printer(f: &Framework, name: &str) -> ContainerBuilder {
    shell(f, name, print_env_script(f.target_os()))
}

fn env_from(name: &str, source: EnvVarSource) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(source),
        ..Default::default()
    }
}

fn field_env(name: &str, field_path: &str) -> EnvVar {
    env_from(
        name,
        EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: field_path.into(),
                api_version: Some("v1".into()),
            }),
            ..Default::default()
        },
    )
}

fn resources(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> ResourceRequirements {
    let map = |pairs: &[(&str, &str)]| {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect::<BTreeMap<_, _>>()
        })
    };
    ResourceRequirements {
        requests: map(requests),
        limits: map(limits),
        ..Default::default()
    }
}

/// The terminated state of `container` (regular or init) in `pod`, if it has one.
fn terminated<'a>(pod: &'a Pod, container: &str) -> Option<&'a ContainerStateTerminated> {
    let s = pod.status.as_ref()?;
    s.container_statuses
        .iter()
        .flatten()
        .chain(s.init_container_statuses.iter().flatten())
        .find(|c| c.name == container)
        .and_then(|c| c.state.as_ref())
        .and_then(|st| st.terminated.as_ref())
}

fn phase(pod: &Pod) -> String {
    pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
}

/// Checks that finished pod `done` (built as `pod`) ended in phase `want`: "pod P ended X,
/// expected `want`" otherwise. Several cases check the end phase first, all with this message.
fn expect_phase(pod: &PodBuilder, done: &Pod, want: &str) -> CaseResult {
    ensure!(
        phase(done) == want,
        "pod {} ended {}, expected {want}",
        pod.name(),
        phase(done)
    );
    Ok(())
}

/// Runs `pod` to completion and checks that `container` printed exactly `want` (trimmed); the
/// failure reads "`who` P: expected "want", got "logs"". The log cases (kubelet, websockets,
/// variable expansion) are all this check.
async fn expect_printed(f: &Framework, pod: &PodBuilder, container: &str, want: &str, who: &str) -> CaseResult {
    let logs = f.container_output(pod, container).await?;
    ensure!(
        logs.trim() == want,
        "{who} {}: expected {want:?}, got {logs:?}",
        pod.name()
    );
    Ok(())
}

fn condition_true(pod: &Pod, type_: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

// ---------------------------------------------------------------------------------------------

/// Upstream common/node/pods.go "should be submitted and removed".
pub(crate) const SUBMITTED_AND_REMOVED: &str =
    "[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]";

/// Upstream pods.go: a labelled pod is found by its label, runs, and after a graceful delete the
/// label query finds nothing.
async fn submitted_and_removed(f: &Framework) -> CaseResult {
    let selector = "name=pod-submit-remove";
    let pod = f
        .pod("pod-submit-remove")
        .label("name", "pod-submit-remove")
        .container(pause("pause"));
    f.create_pod(&pod).await?;
    let found = f.pods_matching(selector).await?;
    ensure!(
        found.len() == 1,
        "expected 1 pod matching {selector} after creation, found {}",
        found.len()
    );
    let running = f.wait_pod_ready(pod.name()).await?;

    f.step("deleting the pod gracefully");
    f.delete_pod_and_wait(&running, &DeleteParams::default().grace_period(30), DELETION_WAIT)
        .await?;
    let after = f.api::<Pod>().list(&ListParams::default().labels(selector)).await?;
    ensure!(
        after.items.is_empty(),
        "expected no pod matching {selector} after deletion, found {}",
        after.items.len()
    );
    Ok(())
}

/// Upstream common/node/pods.go "should be updated".
pub(crate) const UPDATED: &str = "[sig-node] Pods should be updated [NodeConformance] [Conformance]";

/// Upstream pods.go: a running pod's label is changed; the pod (same uid) is found by the new
/// value and no longer by the old one.
async fn updated(f: &Framework) -> CaseResult {
    let pod = f.pod("pod-update").label("time", "original").container(pause("pause"));
    let created = f.create_pod_ready(&pod).await?;
    let uid = created.metadata.uid.clone().unwrap_or_default();

    f.step("updating the pod's label");
    let patch = serde_json::json!({"metadata": {"labels": {"time": "updated"}}});
    f.api::<Pod>()
        .patch(pod.name(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;

    let new = f.pods_matching("time=updated").await?;
    ensure!(
        new.len() == 1 && new[0].metadata.uid.as_deref() == Some(uid.as_str()),
        "expected pod {} (uid {uid}) to match time=updated, found {:?}",
        pod.name(),
        new.iter().map(|p| p.metadata.uid.clone()).collect::<Vec<_>>()
    );
    let old = f.pods_matching("time=original").await?;
    ensure!(
        old.is_empty(),
        "expected no pod to match time=original after the update, found {}",
        old.len()
    );
    Ok(())
}

/// Upstream common/node/pods.go "should get a host IP".
pub(crate) const HOST_IP: &str = "[sig-node] Pods should get a host IP [NodeConformance] [Conformance]";

/// Upstream pods.go: a running pod reports a host IP, and it is the internal IP of its node.
async fn host_ip(f: &Framework) -> CaseResult {
    let pod = f
        .create_pod_ready(&f.pod("pod-hostip").container(pause("pause")))
        .await?;
    let node = pod_node(&pod);
    let host_ip = pod.status.as_ref().and_then(|s| s.host_ip.clone()).unwrap_or_default();
    ensure!(
        host_ip.parse::<std::net::IpAddr>().is_ok(),
        "pod {} on node {node} reports host IP {host_ip:?}, expected an IP address",
        pod.metadata.name.as_deref().unwrap_or("?")
    );
    let nodes = f.schedulable_nodes(f.target_os()).await?;
    if let Some(info) = nodes.iter().find(|n| n.name == node)
        && let Some(internal) = &info.internal_ip
    {
        ensure!(
            &host_ip == internal,
            "pod on node {node} reports host IP {host_ip}, the node's internal IP is {internal}"
        );
    }
    Ok(())
}

/// Upstream common/node/pods.go "should allow activeDeadlineSeconds to be updated".
pub(crate) const ACTIVE_DEADLINE: &str =
    "[sig-node] Pods should allow activeDeadlineSeconds to be updated [NodeConformance] [Conformance]";

/// Upstream pods.go: a running pod gets `activeDeadlineSeconds: 5`; it must then fail with
/// reason DeadlineExceeded.
async fn active_deadline(f: &Framework) -> CaseResult {
    let pod = f.pod("pod-deadline").container(pause("pause"));
    f.create_pod_ready(&pod).await?;
    f.step("setting activeDeadlineSeconds to 5");
    let patch = serde_json::json!({"spec": {"activeDeadlineSeconds": 5}});
    f.api::<Pod>()
        .patch(pod.name(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    // Upstream waits for the pod to terminate with DeadlineExceeded; 60 s bounds it well inside
    // the case timeout, so a kubelet that ignores the deadline fails with this wait's message.
    let failed = f
        .wait_for_within(
            &f.api::<Pod>(),
            pod.name(),
            wc::is_pod_phase("Failed"),
            "to fail after its 5s activeDeadlineSeconds",
            std::time::Duration::from_secs(60),
        )
        .await?
        .unwrap_or_default();
    let reason = failed
        .status
        .as_ref()
        .and_then(|s| s.reason.clone())
        .unwrap_or_default();
    ensure!(
        reason == "DeadlineExceeded",
        "pod {} on node {} failed with reason {reason:?}, expected DeadlineExceeded",
        pod.name(),
        pod_node(&failed)
    );
    Ok(())
}

/// Upstream common/node/pods.go "should support remote command execution over websockets".
pub(crate) const EXEC_WEBSOCKETS: &str =
    "[sig-node] Pods should support remote command execution over websockets [NodeConformance] [Conformance]";

/// Upstream pods.go: an exec over the websocket exec subresource returns the command's output.
async fn exec_websockets(f: &Framework) -> CaseResult {
    let pod = f
        .create_pod_ready(&f.pod("pod-exec-websocket").container(pause("main")))
        .await?;
    let out = f
        .exec_shell(
            "pod-exec-websocket",
            Some("main"),
            f.target_os(),
            "echo remote execution test",
        )
        .await?;
    ensure!(
        out.exit_code == 0 && out.out() == "remote execution test",
        "exec in pod pod-exec-websocket on node {}: expected \"remote execution test\" and exit 0, got {:?} exit {} (stderr {:?})",
        pod_node(&pod),
        out.out(),
        out.exit_code,
        out.stderr
    );
    Ok(())
}

/// Upstream common/node/pods.go "should support retrieving logs from the container over websockets".
pub(crate) const LOGS_WEBSOCKETS: &str =
    "[sig-node] Pods should support retrieving logs from the container over websockets [NodeConformance] [Conformance]";

/// Upstream pods.go: what the container printed comes back through the log subresource.
async fn logs_websockets(f: &Framework) -> CaseResult {
    let pod = f
        .pod("pod-logs-websocket")
        .container(shell(f, "main", "echo container is alive"));
    expect_printed(f, &pod, "main", "container is alive", "logs of pod").await
}

/// Upstream common/node/pods.go "should delete a collection of pods".
pub(crate) const DELETE_COLLECTION: &str = "[sig-node] Pods should delete a collection of pods [Conformance]";

/// Upstream pods.go: three labelled pods are found, deleted as a collection, and gone.
async fn delete_collection(f: &Framework) -> CaseResult {
    let selector = "type=Testing";
    for i in 1..=3 {
        f.create_pod(
            &f.pod(&format!("test-pod-{i}"))
                .label("type", "Testing")
                .container(pause("pause")),
        )
        .await?;
    }
    f.wait_pods_ready(selector, 3).await?;
    f.step("deleting the collection");
    f.api::<Pod>()
        .delete_collection(&DeleteParams::default(), &ListParams::default().labels(selector))
        .await?;
    f.wait_list_within(
        &f.api::<Pod>(),
        selector,
        |pods: &[Pod]| pods.is_empty(),
        "every pod of the collection to be gone",
        DELETION_WAIT,
    )
    .await?;
    Ok(())
}

/// Upstream node/pods.go "Pods Set QOS Class".
pub(crate) const QOS_GUARANTEED: &str = "[sig-node] Pods Extended Pods Set QOS Class should be set on Pods with \
     matching resource requests and limits for memory and cpu [Conformance]";

/// Upstream node/pods.go: requests equal to limits for CPU and memory make the pod Guaranteed.
async fn qos_guaranteed(f: &Framework) -> CaseResult {
    let limits = [("cpu", "100m"), ("memory", "100Mi")];
    let pod = f
        .pod("pod-qos-class")
        .container(pause("agnhost").with(move |c: &mut Container| {
            c.resources = Some(resources(&limits, &limits));
        }));
    let created = f.create_pod_ready(&pod).await?;
    let qos = created
        .status
        .as_ref()
        .and_then(|s| s.qos_class.clone())
        .unwrap_or_default();
    ensure!(
        qos == "Guaranteed",
        "pod {} reports qosClass {qos:?}, expected Guaranteed",
        pod.name()
    );
    Ok(())
}

/// Upstream common/node/pods.go "should contain environment variables for services".
pub(crate) const SERVICE_ENV: &str =
    "[sig-node] Pods should contain environment variables for services [NodeConformance] [Conformance]";

/// Upstream pods.go: after Service `fooservice` (8765 → 8080) exists, a new pod sees the
/// docker-links-style variables with the Service's cluster IP.
async fn service_env(f: &Framework) -> CaseResult {
    let since = std::time::Instant::now();
    let server =
        crate::framework::netexec::netexec_pod("server-envvars", f.target_os()).label("name", "server-envvars");
    f.create_pod_ready(&server).await?;
    let svc = Service {
        metadata: ObjectMeta {
            name: Some("fooservice".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::from([("name".into(), "server-envvars".into())])),
            ports: Some(vec![ServicePort {
                port: 8765,
                target_port: Some(IntOrString::Int(8080)),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    };
    let svc = f.create(&svc).await?;
    let ip = svc.spec.as_ref().and_then(|s| s.cluster_ip.clone()).unwrap_or_default();
    ensure!(
        !ip.is_empty() && ip != "None",
        "service fooservice got cluster IP {ip:?}, expected an address"
    );

    let client = f.pod("client-envvars").container(env_printer(f, "env3cont"));
    let mut env = f.container_env(&client, "env3cont").await?;
    // The kubelet takes the variables from the services it has watched: after an API server
    // outage its watch may still be reconnecting. One more pod, once it had time.
    if !env.contains_key("FOOSERVICE_SERVICE_HOST") && f.api_outage_since(since) {
        f.step("pod client-envvars has no FOOSERVICE_SERVICE_HOST and the API server was unreachable since the service was created; trying a second pod");
        f.settle_after_outage().await;
        let again = f.pod("client-envvars-2").container(env_printer(f, "env3cont"));
        env = f.container_env(&again, "env3cont").await?;
    }
    let url = format!("tcp://{ip}:8765");
    expect_env(
        &env,
        &[
            ("FOOSERVICE_SERVICE_HOST", ip.as_str()),
            ("FOOSERVICE_SERVICE_PORT", "8765"),
            ("FOOSERVICE_PORT", url.as_str()),
            ("FOOSERVICE_PORT_8765_TCP_PORT", "8765"),
            ("FOOSERVICE_PORT_8765_TCP_PROTO", "tcp"),
            ("FOOSERVICE_PORT_8765_TCP", url.as_str()),
            ("FOOSERVICE_PORT_8765_TCP_ADDR", ip.as_str()),
        ],
        "pod client-envvars",
    )
}

// --- InitContainer ---------------------------------------------------------------------------

/// Upstream common/node/init_container.go "should invoke init containers on a RestartNever pod".
pub(crate) const INIT_RESTART_NEVER: &str =
    "[sig-node] InitContainer [NodeConformance] should invoke init containers on a RestartNever pod [Conformance]";

/// Upstream init_container.go: two init containers and the app container all exit 0; the pod
/// succeeds and both init containers show as completed.
async fn init_restart_never(f: &Framework) -> CaseResult {
    let pod = f
        .pod("pod-init-never")
        .init_container(shell(f, "init1", "exit 0"))
        .init_container(shell(f, "init2", "exit 0"))
        .container(shell(f, "run1", "exit 0"));
    let done = f.run_pod_to_completion(&pod).await?;
    expect_phase(&pod, &done, "Succeeded")?;
    ensure!(
        condition_true(&done, "Initialized"),
        "pod {} has no Initialized=True condition",
        pod.name()
    );
    for init in ["init1", "init2"] {
        let t = terminated(&done, init);
        ensure!(
            t.is_some_and(|t| t.exit_code == 0),
            "init container {init} of pod {}: expected terminated with exit 0, got {t:?}",
            pod.name()
        );
    }
    Ok(())
}

/// Upstream common/node/init_container.go "should invoke init containers on a RestartAlways pod".
pub(crate) const INIT_RESTART_ALWAYS: &str =
    "[sig-node] InitContainer [NodeConformance] should invoke init containers on a RestartAlways pod [Conformance]";

/// Upstream init_container.go: init containers complete, then the long-running app container
/// makes the pod ready.
async fn init_restart_always(f: &Framework) -> CaseResult {
    let pod = f
        .pod("pod-init-always")
        .init_container(shell(f, "init1", "exit 0"))
        .init_container(shell(f, "init2", "exit 0"))
        .container(pause("run1"));
    let ready = f.create_pod_ready(&pod).await?;
    ensure!(
        condition_true(&ready, "Initialized"),
        "pod {} is ready but not Initialized",
        pod.name()
    );
    for init in ["init1", "init2"] {
        let t = terminated(&ready, init);
        ensure!(
            t.is_some_and(|t| t.exit_code == 0),
            "init container {init} of pod {} on node {}: expected terminated with exit 0, got {t:?}",
            pod.name(),
            pod_node(&ready)
        );
    }
    Ok(())
}

/// Upstream init_container.go "should not start app containers and fail the pod if init
/// containers fail on a RestartNever pod".
pub(crate) const INIT_FAIL_RESTART_NEVER: &str = "[sig-node] InitContainer [NodeConformance] should not start app \
     containers and fail the pod if init containers fail on a RestartNever pod [Conformance]";

/// Upstream init_container.go: the first init container exits 1; the pod fails, the second init
/// container and the app container never run.
async fn init_fail_restart_never(f: &Framework) -> CaseResult {
    let pod = f
        .pod("pod-init-fail")
        .init_container(shell(f, "init1", "exit 1"))
        .init_container(shell(f, "init2", "exit 0"))
        .container(shell(f, "run1", "exit 0"));
    let done = f.run_pod_to_completion(&pod).await?;
    expect_phase(&pod, &done, "Failed")?;
    let t1 = terminated(&done, "init1");
    ensure!(
        t1.is_some_and(|t| t.exit_code == 1),
        "init1 of pod {}: expected exit 1, got {t1:?}",
        pod.name()
    );
    for never in ["init2", "run1"] {
        ensure!(
            terminated(&done, never).is_none(),
            "container {never} of pod {} ran although init1 failed: {:?}",
            pod.name(),
            terminated(&done, never)
        );
    }
    ensure!(
        !condition_true(&done, "Initialized"),
        "pod {} claims Initialized although init1 failed",
        pod.name()
    );
    Ok(())
}

// --- Container Runtime -----------------------------------------------------------------------

/// Upstream common/node/runtime.go "when starting a container that exits should run with the
/// expected status".
pub(crate) const EXPECTED_STATUS: &str = "[sig-node] Container Runtime blackbox test when starting a container that \
     exits should run with the expected status [NodeConformance] [Conformance]";

/// Upstream runtime.go: restart policy decides what an exiting container becomes. `Always` with
/// exit 0 restarts (count grows, pod stays Running); `OnFailure` with exit 0 succeeds without a
/// restart; `Never` with exit 1 fails without a restart.
async fn expected_status(f: &Framework) -> CaseResult {
    let always = f
        .pod("terminate-cmd-rpa")
        .restart_policy("Always")
        .container(shell(f, "c", "exit 0"));
    f.create_pod(&always).await?;
    let restarted = f
        .wait_for(
            &f.api::<Pod>(),
            always.name(),
            wc::restarted_at_least(1),
            "to restart its exiting container",
        )
        .await?
        .unwrap_or_default();
    ensure!(
        phase(&restarted) == "Running",
        "pod terminate-cmd-rpa (Always) is {}, expected Running",
        phase(&restarted)
    );

    for (name, policy, code, want) in [
        ("terminate-cmd-rpof", "OnFailure", 0, "Succeeded"),
        ("terminate-cmd-rpn", "Never", 1, "Failed"),
    ] {
        let pod = f
            .pod(name)
            .restart_policy(policy)
            .container(shell(f, "c", &format!("exit {code}")));
        f.create_pod(&pod).await?;
        let done = f
            .wait_for(&f.api::<Pod>(), name, wc::is_pod_finished(), "to finish")
            .await?
            .unwrap_or_default();
        ensure!(
            phase(&done) == want,
            "pod {name} ({policy}, exit {code}) ended {}, expected {want}",
            phase(&done)
        );
        let restarts = crate::framework::workloads::restart_count(&done);
        ensure!(
            restarts == 0,
            "pod {name} ({policy}, exit {code}) restarted {restarts} time(s), expected none"
        );
        let t = terminated(&done, "c");
        ensure!(
            t.is_some_and(|t| t.exit_code == code),
            "pod {name}: expected terminated with exit {code}, got {t:?}"
        );
    }
    Ok(())
}

fn fallback_to_logs(c: &mut Container) {
    c.termination_message_policy = Some("FallbackToLogsOnError".into());
}

/// Upstream runtime.go "should report termination message from log output if
/// TerminationMessagePolicy FallbackToLogsOnError is set".
pub(crate) const TERMINATION_FROM_LOGS: &str = "[sig-node] Container Runtime blackbox test on terminated container \
     should report termination message from log output if TerminationMessagePolicy FallbackToLogsOnError is set \
     [NodeConformance] [Conformance]";

/// Upstream runtime.go: a failing container's last log line becomes its termination message.
async fn termination_from_logs(f: &Framework) -> CaseResult {
    let pod = f
        .pod("termination-message-logs")
        .container(shell(f, "c", "echo DONE && exit 1").with(fallback_to_logs));
    let done = f.run_pod_to_completion(&pod).await?;
    let t = terminated(&done, "c").cloned().unwrap_or_default();
    ensure!(
        phase(&done) == "Failed" && t.message.as_deref().map(str::trim) == Some("DONE"),
        "pod {} on node {}: expected Failed with termination message \"DONE\", got {} with message {:?}",
        pod.name(),
        pod_node(&done),
        phase(&done),
        t.message
    );
    Ok(())
}

/// Upstream runtime.go "should report termination message as empty when pod succeeds and
/// TerminationMessagePolicy FallbackToLogsOnError is set".
pub(crate) const TERMINATION_EMPTY_ON_SUCCESS: &str = "[sig-node] Container Runtime blackbox test on terminated \
     container should report termination message as empty when pod succeeds and TerminationMessagePolicy \
     FallbackToLogsOnError is set [NodeConformance] [Conformance]";

/// Upstream runtime.go: logs are not used as the message when the container succeeds.
async fn termination_empty_on_success(f: &Framework) -> CaseResult {
    let pod = f
        .pod("termination-message-success")
        .container(shell(f, "c", "echo OK").with(fallback_to_logs));
    let done = f.run_pod_to_completion(&pod).await?;
    let t = terminated(&done, "c").cloned().unwrap_or_default();
    expect_phase(&pod, &done, "Succeeded")?;
    ensure!(
        t.message.as_deref().unwrap_or("").is_empty(),
        "pod {}: expected an empty termination message, got {:?}",
        pod.name(),
        t.message
    );
    Ok(())
}

// --- Kubelet ---------------------------------------------------------------------------------

/// Upstream common/node/kubelet.go "should print the output to logs".
pub(crate) const KUBELET_LOGS: &str = "[sig-node] Kubelet when scheduling a busybox command in a pod should print \
     the output to logs [NodeConformance] [Conformance]";

/// Upstream kubelet.go: `echo 'Hello World'` in busybox reaches the pod's logs.
async fn kubelet_logs(f: &Framework) -> CaseResult {
    let pod = f
        .pod("busybox-scheduling")
        .container(ContainerBuilder::new("busybox", "busybox").command(f.target_os().shell("echo Hello World")));
    expect_printed(f, &pod, "busybox", "Hello World", "logs of pod").await
}

fn always_fails(f: &Framework, name: &str) -> PodBuilder {
    f.pod(name)
        .container(ContainerBuilder::new("bin-false", "busybox").command(f.target_os().shell("exit 1")))
}

/// Upstream kubelet.go "should have an terminated reason".
pub(crate) const KUBELET_TERMINATED_REASON: &str = "[sig-node] Kubelet when scheduling a busybox command that always \
     fails in a pod should have an terminated reason [NodeConformance] [Conformance]";

/// Upstream kubelet.go: a container that always fails is terminated with reason Error.
async fn kubelet_terminated_reason(f: &Framework) -> CaseResult {
    let pod = always_fails(f, "bin-false-reason");
    let done = f.run_pod_to_completion(&pod).await?;
    let t = terminated(&done, "bin-false").cloned();
    match t {
        Some(t) if t.exit_code == 1 && t.reason.as_deref() == Some("Error") => Ok(()),
        other => fail!(
            "container bin-false of pod {} on node {}: expected terminated with reason Error and exit 1, got {other:?}",
            pod.name(),
            pod_node(&done)
        ),
    }
}

/// Upstream kubelet.go "should be possible to delete".
pub(crate) const KUBELET_DELETE_FAILED: &str = "[sig-node] Kubelet when scheduling a busybox command that always \
     fails in a pod should be possible to delete [NodeConformance] [Conformance]";

/// Upstream kubelet.go: a failed pod can be deleted and disappears.
async fn kubelet_delete_failed(f: &Framework) -> CaseResult {
    let pod = always_fails(f, "bin-false-delete");
    let done = f.run_pod_to_completion(&pod).await?;
    expect_phase(&pod, &done, "Failed")?;
    f.delete_pod_and_wait(&done, &DeleteParams::default(), DELETION_WAIT)
        .await
}
