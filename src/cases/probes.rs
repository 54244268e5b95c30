//! Adapted cases: probes (`[sig-node] Probing container`) and lifecycle hooks
//! (`[sig-node] Container Lifecycle Hook`).
//!
//! Liveness failures must be counted as restarts, readiness failures must keep a pod unready
//! without restarting it, and hooks must run at the right moment. Exec probes and hooks run the
//! OS's shell; HTTP and TCP probes target agnhost `liveness`, `test-webserver` and `netexec`;
//! gRPC probes target agnhost `grpc-health-checking` (`grpc.health.v1` on port 5000).

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ExecAction, GRPCAction, HTTPGetAction, LifecycleHandler, Pod, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::DeleteParams;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::netexec::netexec_pod;
use crate::framework::wait::conditions as wc;
use crate::framework::workloads::{empty_dir_volume, is_ready, restart_count};
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_ip, pod_node};
use crate::os::Os;
use crate::{ensure, fail};

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        case!(EXEC_NOT_RESTARTED, Kind::Adapted, exec_not_restarted),
        case!(EXEC_RESTARTED, Kind::Adapted, exec_restarted),
        case!(HTTP_RESTARTED, Kind::Adapted, http_restarted),
        case!(HTTP_NOT_RESTARTED, Kind::Adapted, http_not_restarted),
        case!(TCP_NOT_RESTARTED, Kind::Adapted, tcp_not_restarted),
        case!(MONOTONIC_RESTARTS, Kind::Adapted, monotonic_restarts).with_timeout(Duration::from_secs(10 * 60)),
        case!(READINESS_FAILS, Kind::Adapted, readiness_fails),
        case!(READINESS_INITIAL_DELAY, Kind::Adapted, readiness_initial_delay),
        case!(EXEC_TIMEOUT_RESTARTED, Kind::Adapted, exec_timeout_restarted),
        case!(EXEC_TIMEOUT_NOT_READY, Kind::Adapted, exec_timeout_not_ready),
        case!(GRPC_NOT_RESTARTED, Kind::Adapted, grpc_not_restarted),
        case!(GRPC_RESTARTED, Kind::Adapted, grpc_restarted),
        case!(POSTSTART_EXEC, Kind::Adapted, poststart_exec),
        case!(PRESTOP_EXEC, Kind::Adapted, prestop_exec),
        case!(POSTSTART_HTTP, Kind::Adapted, poststart_http),
        case!(PRESTOP_HTTP, Kind::Adapted, prestop_http),
    ]
}

/// Upstream `probeTestInitialDelaySeconds` (container_probe.go).
const INITIAL_DELAY: i32 = 15;

/// How long a "should not restart / never ready" case watches: the initial delay plus enough
/// probe periods (10 s each) for three failures past a failure threshold of one, so a probe that
/// were going to fail has failed repeatedly. Upstream watches 4 minutes
/// (`defaultObservationTimeout`); a shorter window keeps the Windows job inside its budget and
/// still covers several probe periods.
const OBSERVE: Duration = Duration::from_secs(INITIAL_DELAY as u64 + 4 * 10);

/// How long a failing liveness probe may take to restart its container: the initial delay,
/// a probe period and the restart, with room for a slow Windows start.
const RESTART_WAIT: Duration = Duration::from_secs(90);

/// `action` (a probe with only its handler set) with the timing every probe case starts from:
/// upstream's initial delay and a failure threshold of one.
fn timed(action: Probe) -> Probe {
    Probe {
        initial_delay_seconds: Some(INITIAL_DELAY),
        failure_threshold: Some(1),
        ..action
    }
}

fn exec_probe(argv: Vec<String>) -> Probe {
    timed(Probe {
        exec: Some(ExecAction { command: Some(argv) }),
        ..Default::default()
    })
}

pub(super) fn http_probe(path: &str, port: i32) -> Probe {
    timed(Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(port),
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn tcp_probe(port: i32) -> Probe {
    timed(Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(port),
            host: None,
        }),
        ..Default::default()
    })
}

fn liveness(probe: Probe) -> impl Fn(&mut Container) + Clone + Send + Sync + 'static {
    move |c: &mut Container| c.liveness_probe = Some(probe.clone())
}

fn readiness(probe: Probe) -> impl Fn(&mut Container) + Clone + Send + Sync + 'static {
    move |c: &mut Container| c.readiness_probe = Some(probe.clone())
}

/// agnhost `liveness`: `/healthz` on 8080 answers 200 for ten seconds, then 500.
fn agnhost_liveness() -> ContainerBuilder {
    ContainerBuilder::new("agnhost-container", "agnhost")
        .args(["liveness"])
        .port(8080, "TCP")
}

/// agnhost `test-webserver`: serves `/` on port 80.
fn test_webserver() -> ContainerBuilder {
    ContainerBuilder::new("test-webserver", "agnhost")
        .args(["test-webserver"])
        .port(80, "TCP")
}

/// The exec liveness cases' health file, in emptyDir `health`: (its mount point, the file).
fn health_file(os: Os) -> (String, String) {
    let dir = os.join(os.volume_root(), "health");
    let file = os.join(&dir, "health");
    (dir, file)
}

/// The exec liveness cases' container: agnhost `pause` with emptyDir `health` mounted and a
/// liveness probe that `cat`s the [`health_file`].
fn health_checked(os: Os) -> ContainerBuilder {
    let (dir, file) = health_file(os);
    ContainerBuilder::new("agnhost-container", "agnhost")
        .args(["pause"])
        .mount("health", &dir, false)
        .with(liveness(exec_probe(os.shell(&os.cat(&file)))))
}

/// Creates `pod` and, once it runs, checks that `holds` stays true for [`OBSERVE`] (`why` says
/// what in the failure). The "should not restart" and "never ready" cases all watch this way.
async fn expect_steady(
    f: &Framework,
    pod: &crate::framework::PodBuilder,
    holds: impl Fn(&Pod) -> bool,
    why: &str,
) -> CaseResult {
    f.create_pod(pod).await?;
    let api = f.api::<Pod>();
    f.wait_for(&api, pod.name(), wc::is_pod_phase("Running"), "to run")
        .await?;
    f.consistently(&api, pod.name(), holds, why, OBSERVE).await?;
    Ok(())
}

/// Creates `pod` and checks that its restart count stays 0 for [`OBSERVE`] once it runs.
async fn expect_no_restarts(f: &Framework, pod: &crate::framework::PodBuilder) -> CaseResult {
    expect_steady(f, pod, |p: &Pod| restart_count(p) == 0, "with zero restarts").await
}

/// Creates `pod` and waits for its first restart.
async fn expect_restart(f: &Framework, pod: &crate::framework::PodBuilder) -> CaseResult {
    f.create_pod(pod).await?;
    let restarted = f
        .wait_for_within(
            &f.api::<Pod>(),
            pod.name(),
            wc::restarted_at_least(1),
            "to be restarted by its liveness probe",
            RESTART_WAIT,
        )
        .await?
        .unwrap_or_default();
    f.property("restarts", restart_count(&restarted));
    Ok(())
}

// ---------------------------------------------------------------------------------------------

/// Upstream common/node/container_probe.go, exec liveness that keeps passing.
pub(crate) const EXEC_NOT_RESTARTED: &str = "[sig-node] Probing container should *not* be restarted with a exec \
     \"cat /tmp/health\" liveness probe [NodeConformance] [Conformance]";

/// Upstream container_probe.go: the health file exists for the pod's whole life, so an exec
/// liveness probe reading it never fails and the container is never restarted. The file lives
/// in an emptyDir written by an init container (there is no `/tmp` on Windows).
async fn exec_not_restarted(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let (dir, file) = health_file(os);
    let pod = f
        .pod("liveness-exec-ok")
        .volume(empty_dir_volume("health"))
        .init_container(
            ContainerBuilder::new("write-health", "agnhost")
                .command(os.shell(&os.write_file(&file, "ok")))
                .mount("health", &dir, false),
        )
        .container(health_checked(os));
    expect_no_restarts(f, &pod).await
}

/// Upstream common/node/container_probe.go, exec liveness that fails.
pub(crate) const EXEC_RESTARTED: &str = "[sig-node] Probing container should be restarted with a exec \
     \"cat /tmp/health\" liveness probe [NodeConformance] [Conformance]";

/// Upstream container_probe.go: once the health file is gone the exec probe fails and the
/// kubelet restarts the container. Upstream removes the file after ten seconds; here it is never
/// written (the emulated shells have no `rm`/`del`), which exercises the same failure path.
async fn exec_restarted(f: &Framework) -> CaseResult {
    let pod = f
        .pod("liveness-exec-fail")
        .volume(empty_dir_volume("health"))
        .container(health_checked(f.target_os()));
    expect_restart(f, &pod).await
}

/// Upstream common/node/container_probe.go, /healthz liveness that starts failing.
pub(crate) const HTTP_RESTARTED: &str = "[sig-node] Probing container should be restarted with a /healthz http liveness probe [NodeConformance] [Conformance]";

/// Upstream container_probe.go: agnhost `liveness` answers /healthz with 500 after ten seconds,
/// so the HTTP liveness probe fails and the container is restarted.
async fn http_restarted(f: &Framework) -> CaseResult {
    let pod = f
        .pod("liveness-http")
        .container(agnhost_liveness().with(liveness(http_probe("/healthz", 8080))));
    expect_restart(f, &pod).await
}

/// Upstream common/node/container_probe.go, HTTP liveness on a healthy server.
pub(crate) const HTTP_NOT_RESTARTED: &str = "[sig-node] Probing container should *not* be restarted with a /healthz http liveness probe [NodeConformance] [Conformance]";

/// Upstream container_probe.go: test-webserver keeps answering `/` on port 80, so an HTTP
/// liveness probe on it never fails.
async fn http_not_restarted(f: &Framework) -> CaseResult {
    let pod = f
        .pod("test-webserver-liveness")
        .container(test_webserver().with(liveness(http_probe("/", 80))));
    expect_no_restarts(f, &pod).await
}

/// Upstream common/node/container_probe.go, TCP liveness.
pub(crate) const TCP_NOT_RESTARTED: &str = "[sig-node] Probing container should *not* be restarted with a tcp:8080 liveness probe [NodeConformance] [Conformance]";

/// Upstream container_probe.go: agnhost `liveness` starts failing HTTP after ten seconds but
/// keeps its socket open, so a TCP probe on 8080 never fails.
async fn tcp_not_restarted(f: &Framework) -> CaseResult {
    let pod = f
        .pod("liveness-tcp")
        .container(agnhost_liveness().with(liveness(tcp_probe(8080))));
    expect_no_restarts(f, &pod).await
}

/// Upstream common/node/container_probe.go, repeated liveness failures.
pub(crate) const MONOTONIC_RESTARTS: &str =
    "[sig-node] Probing container should have monotonically increasing restart count [NodeConformance] [Conformance]";

/// Upstream container_probe.go: with agnhost `liveness` failing after ten seconds each run, the
/// restart count climbs to 5 and never goes down on the way.
async fn monotonic_restarts(f: &Framework) -> CaseResult {
    let mut probe = http_probe("/healthz", 8080);
    probe.initial_delay_seconds = Some(5);
    let pod = f
        .pod("liveness-monotonic")
        .container(agnhost_liveness().with(liveness(probe)));
    f.create_pod(&pod).await?;
    let seen = Mutex::new(Vec::<i32>::new());
    let record = |p: Option<&Pod>| {
        let n = p.map(restart_count).unwrap_or(0);
        let mut s = seen.lock().expect("restart log");
        if s.last() != Some(&n) {
            s.push(n);
        }
        n >= 5
    };
    f.wait_for(&f.api::<Pod>(), pod.name(), record, "to reach 5 restarts")
        .await?;
    let seen = seen.into_inner().expect("restart log");
    f.property("restart_sequence", format!("{seen:?}"));
    ensure!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "restart count of pod {} went down: observed sequence {seen:?}",
        pod.name()
    );
    Ok(())
}

/// Upstream common/node/container_probe.go, failing readiness.
pub(crate) const READINESS_FAILS: &str = "[sig-node] Probing container with readiness probe that fails should never \
     be ready and never restart [NodeConformance] [Conformance]";

/// Upstream container_probe.go: a readiness probe that always fails keeps the pod unready and
/// does not restart it.
async fn readiness_fails(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let mut probe = exec_probe(os.shell("exit 1"));
    probe.initial_delay_seconds = None;
    let pod = f.pod("readiness-fails").container(
        ContainerBuilder::new("agnhost-container", "agnhost")
            .args(["pause"])
            .with(readiness(probe)),
    );
    expect_steady(
        f,
        &pod,
        |p: &Pod| !is_ready(p) && restart_count(p) == 0,
        "unready with zero restarts",
    )
    .await
}

/// Upstream common/node/container_probe.go, readiness with an initial delay.
pub(crate) const READINESS_INITIAL_DELAY: &str = "[sig-node] Probing container with readiness probe should not be \
     ready before initial delay and never restart [NodeConformance] [Conformance]";

/// Upstream container_probe.go: with `initialDelaySeconds: 20` the pod becomes Ready no earlier
/// than 20 s after its container started, and it is not restarted.
async fn readiness_initial_delay(f: &Framework) -> CaseResult {
    let mut probe = http_probe("/", 80);
    probe.initial_delay_seconds = Some(20);
    let pod = f
        .pod("readiness-delay")
        .container(test_webserver().with(readiness(probe)));
    let ready = f.create_pod_ready(&pod).await?;
    let status = ready.status.clone().unwrap_or_default();
    let started = status
        .container_statuses
        .iter()
        .flatten()
        .find_map(|c| c.state.as_ref()?.running.as_ref()?.started_at.clone());
    let ready_at = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .and_then(|c| c.last_transition_time.clone());
    let (Some(started), Some(ready_at)) = (started, ready_at) else {
        fail!(
            "pod {} is ready but reports no container start time or Ready transition time: {status:?}",
            pod.name()
        );
    };
    let waited = ready_at.0.duration_since(started.0);
    f.property("ready_after_seconds", waited.as_secs_f64());
    ensure!(
        waited.as_millis() >= 20_000,
        "pod {} on node {} became ready {:.1}s after its container started, expected at least the 20s initial delay",
        pod.name(),
        pod_node(&ready),
        waited.as_secs_f64()
    );
    ensure!(
        restart_count(&ready) == 0,
        "pod {} restarted {} time(s)",
        pod.name(),
        restart_count(&ready)
    );
    Ok(())
}

// --- lifecycle hooks -------------------------------------------------------------------------

/// How long the handler's log is polled for the hook's request. Upstream lifecycle_hook.go waits
/// up to 2 minutes (`postStartWaitTimeout`), but by then the request has either been sent or not:
/// postStart runs before the kubelet reports the container ready, preStop before the pod is
/// gone. A shorter bound keeps the wait inside the case timeout, so a hook that never ran fails
/// with a message naming the handler and its log rather than a bare case timeout.
const HOOK_WAIT: Duration = Duration::from_secs(30);

/// Which hook a case installs, and how.
#[derive(Clone, Copy)]
enum Hook {
    PostStart,
    PreStop,
}

impl Hook {
    fn msg(self) -> &'static str {
        match self {
            Hook::PostStart => "poststart",
            Hook::PreStop => "prestop",
        }
    }
}

/// Upstream lifecycle_hook.go flow: a netexec handler pod; a pod on the same node whose hook
/// calls the handler's `/echo?msg=<hook>`; the handler's log must show the request (after start
/// for postStart, after the pod is deleted for preStop).
async fn run_hook_case(f: &Framework, hook: Hook, http: bool) -> CaseResult {
    let handler = f
        .create_pod_ready(&netexec_pod("pod-handle-http-request", f.target_os()))
        .await?;
    let (node, ip) = (pod_node(&handler), pod_ip(&handler)?);
    let path = format!("/echo?msg={}", hook.msg());
    let handler_action = if http {
        LifecycleHandler {
            http_get: Some(HTTPGetAction {
                host: Some(ip.clone()),
                path: Some(path.clone()),
                port: IntOrString::Int(8080),
                ..Default::default()
            }),
            ..Default::default()
        }
    } else {
        let script = format!("curl http://{ip}:8080{path}");
        LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(f.target_os().shell(&script)),
            }),
            ..Default::default()
        }
    };
    let name = format!("pod-with-{}-{}-hook", hook.msg(), if http { "http" } else { "exec" });
    let pod = f
        .pod(&name)
        .on_node(&node)
        .container(
            ContainerBuilder::new("hooked", "agnhost")
                .args(["pause"])
                .with(move |c: &mut Container| {
                    let lifecycle = c.lifecycle.get_or_insert_with(Default::default);
                    match hook {
                        Hook::PostStart => lifecycle.post_start = Some(handler_action.clone()),
                        Hook::PreStop => lifecycle.pre_stop = Some(handler_action.clone()),
                    }
                }),
        );
    let created = f.create_pod_ready(&pod).await?;
    let needle = format!("GET {path}");
    if let Hook::PostStart = hook {
        f.eventually_logs_contain("pod-handle-http-request", None, &needle, HOOK_WAIT)
            .await?;
    }
    f.step(format!("deleting pod {name}"));
    f.delete_pod_and_wait(
        &created,
        &DeleteParams::default().grace_period(15),
        Duration::from_secs(60),
    )
    .await?;
    if let Hook::PreStop = hook {
        f.eventually_logs_contain("pod-handle-http-request", None, &needle, HOOK_WAIT)
            .await?;
    }
    Ok(())
}

/// Upstream common/node/lifecycle_hook.go "should execute poststart exec hook properly".
pub(crate) const POSTSTART_EXEC: &str = "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook \
     should execute poststart exec hook properly [NodeConformance] [Conformance]";

/// Upstream lifecycle_hook.go: an exec postStart hook curls the handler pod after start.
async fn poststart_exec(f: &Framework) -> CaseResult {
    run_hook_case(f, Hook::PostStart, false).await
}

/// Upstream common/node/lifecycle_hook.go "should execute prestop exec hook properly".
pub(crate) const PRESTOP_EXEC: &str = "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook \
     should execute prestop exec hook properly [NodeConformance] [Conformance]";

/// Upstream lifecycle_hook.go: an exec preStop hook curls the handler pod when the pod is deleted.
async fn prestop_exec(f: &Framework) -> CaseResult {
    run_hook_case(f, Hook::PreStop, false).await
}

/// Upstream common/node/lifecycle_hook.go "should execute poststart http hook properly".
pub(crate) const POSTSTART_HTTP: &str = "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook \
     should execute poststart http hook properly [NodeConformance] [Conformance]";

/// Upstream lifecycle_hook.go: an httpGet postStart hook, sent by the kubelet of the same node,
/// reaches the handler pod.
async fn poststart_http(f: &Framework) -> CaseResult {
    run_hook_case(f, Hook::PostStart, true).await
}

/// Upstream common/node/lifecycle_hook.go "should execute prestop http hook properly".
pub(crate) const PRESTOP_HTTP: &str = "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook \
     should execute prestop http hook properly [NodeConformance] [Conformance]";

/// Upstream lifecycle_hook.go: an httpGet preStop hook reaches the handler pod on deletion.
async fn prestop_http(f: &Framework) -> CaseResult {
    run_hook_case(f, Hook::PreStop, true).await
}

// --- exec probe timeouts ---------------------------------------------------------------------

/// Upstream container_probe.go's exec-timeout pods: busybox running `sleep 600` with a probe
/// that runs `sleep 10` under `timeoutSeconds: 1`, so every probe times out.
fn sleeping_busybox(edit: impl Fn(&mut Container) + Clone + Send + Sync + 'static) -> ContainerBuilder {
    ContainerBuilder::new("busybox", "busybox")
        .command(["/bin/sh", "-c", "sleep 600"])
        .with(edit)
}

fn timing_out_probe() -> Probe {
    let mut probe = exec_probe(vec!["/bin/sh".into(), "-c".into(), "sleep 10".into()]);
    probe.timeout_seconds = Some(1);
    probe
}

/// Upstream container_probe.go "should be restarted with an exec liveness probe with timeout".
pub(crate) const EXEC_TIMEOUT_RESTARTED: &str = "[sig-node] Probing container should be restarted with an exec \
     liveness probe with timeout [MinimumKubeletVersion:1.20] [NodeConformance]";

/// A liveness probe that outlasts its 1 s timeout counts as failed: the container restarts.
async fn exec_timeout_restarted(f: &Framework) -> CaseResult {
    let pod = f
        .pod("busybox-liveness-timeout")
        .container(sleeping_busybox(liveness(timing_out_probe())));
    expect_restart(f, &pod).await
}

/// Upstream container_probe.go "should not be ready with an exec readiness probe timeout".
pub(crate) const EXEC_TIMEOUT_NOT_READY: &str = "[sig-node] Probing container should not be ready with an exec \
     readiness probe timeout [MinimumKubeletVersion:1.20] [NodeConformance]";

/// A readiness probe that outlasts its 1 s timeout counts as failed: the pod never becomes ready.
async fn exec_timeout_not_ready(f: &Framework) -> CaseResult {
    let pod = f
        .pod("busybox-readiness-timeout")
        .container(sleeping_busybox(readiness(timing_out_probe())));
    expect_steady(f, &pod, |p: &Pod| !is_ready(p), "never ready (its probe times out)").await
}

// --- gRPC liveness ---------------------------------------------------------------------------

/// Upstream container_probe.go `gRPCServerPodSpec`: agnhost `grpc-health-checking`, serving
/// `grpc.health.v1` on 5000 (SERVING for the empty service name) and its control endpoints on
/// 8080, with `probe` as its liveness probe.
fn grpc_server(f: &Framework, probe: Probe) -> crate::framework::PodBuilder {
    f.pod("test-grpc").container(
        ContainerBuilder::new("agnhost", "agnhost")
            .args(["grpc-health-checking"])
            .port(5000, "TCP")
            .port(8080, "TCP")
            .with(liveness(probe)),
    )
}

/// A gRPC probe on `port` with upstream's 5 s timeout ("default 1s can be pretty aggressive in
/// CI environments with low resources").
fn grpc_probe(port: i32) -> Probe {
    timed(Probe {
        grpc: Some(GRPCAction { port, service: None }),
        timeout_seconds: Some(5),
        ..Default::default()
    })
}

/// Upstream common/node/container_probe.go, gRPC liveness on a serving health endpoint.
pub(crate) const GRPC_NOT_RESTARTED: &str =
    "[sig-node] Probing container should *not* be restarted with a GRPC liveness probe [NodeConformance] [Conformance]";

/// Upstream container_probe.go: the kubelet's gRPC health check on port 5000 gets SERVING on
/// every period, so the container is never restarted.
async fn grpc_not_restarted(f: &Framework) -> CaseResult {
    expect_no_restarts(f, &grpc_server(f, grpc_probe(5000))).await
}

/// Upstream common/node/container_probe.go, gRPC liveness on a port nothing serves.
pub(crate) const GRPC_RESTARTED: &str =
    "[sig-node] Probing container should be restarted with a GRPC liveness probe [NodeConformance] [Conformance]";

/// Upstream container_probe.go: a gRPC liveness probe on port 2333, where nothing listens,
/// fails to connect, so the container is restarted. Upstream delays the first probe by 60 s
/// (four times the usual 15 s) for slow CI nodes; the usual delay keeps the case inside the
/// restart wait every other liveness case uses, and the failure path is the same.
async fn grpc_restarted(f: &Framework) -> CaseResult {
    expect_restart(f, &grpc_server(f, grpc_probe(2333))).await
}
