//! Lifecycle hooks reached through upstream's redirecting sidecar (test/e2e/common/node/
//! lifecycle_hook.go): the HTTPS variants of `[sig-node] Container Lifecycle Hook`, and every
//! case of `[sig-node] [NodeConformance] Restartable Init Container Lifecycle Hook`, whose
//! hooked container is itself a restartable init container.
//!
//! Upstream's flow: a netexec handler pod logs each request; the hooked pod carries a sidecar
//! (`container-redirect`, a restartable init container running netexec, over TLS for the HTTPS
//! variants, gated by a startup probe of the same scheme). An httpGet hook targets the hooked
//! pod's own address, where the sidecar's `/dial` forwards it to the handler; an exec hook
//! curls the handler itself. The handler's log must show `GET /echo?msg=poststart` after the
//! pod starts, or `GET /echo?msg=prestop` once it is deleted.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ExecAction, HTTPGetAction, Lifecycle, LifecycleHandler, Pod, Probe,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::DeleteParams;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::netexec::{AGNHOST, HTTP_PORT};
use crate::framework::{CaseResult, ContainerBuilder, Framework, PodBuilder, pod_ip, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(POSTSTART_HTTPS, Kind::Adapted, poststart_https),
        case!(PRESTOP_HTTPS, Kind::Adapted, prestop_https),
        case!(SIDECAR_POSTSTART_EXEC, Kind::Adapted, sidecar_poststart_exec),
        case!(SIDECAR_PRESTOP_EXEC, Kind::Adapted, sidecar_prestop_exec),
        case!(SIDECAR_POSTSTART_HTTP, Kind::Adapted, sidecar_poststart_http),
        case!(SIDECAR_POSTSTART_HTTPS, Kind::Adapted, sidecar_poststart_https),
        case!(SIDECAR_PRESTOP_HTTP, Kind::Adapted, sidecar_prestop_http),
        case!(SIDECAR_PRESTOP_HTTPS, Kind::Adapted, sidecar_prestop_https),
    ]
}

/// How long the handler's log is watched for the hook's request. Upstream waits up to 2
/// minutes for postStart and 30 s for preStop; postStart has run before the kubelet reports the
/// container started, so a hook that has not reached the handler 30 s later never will.
const HOOK_WAIT: Duration = Duration::from_secs(30);

/// Upstream's handler pod and container.
const HANDLER: &str = "pod-handle-http-request";
const HANDLER_CONTAINER: &str = "container-handle-http-request";

/// Which hook, and what it does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hook {
    PostStart,
    PreStop,
}

/// The hook's action: exec (curl the handler) or httpGet with a scheme.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Action {
    Exec,
    Http,
    Https,
}

/// Where the hooked container sits: an app container, or a restartable init container.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placement {
    App,
    Sidecar,
}

impl Hook {
    fn msg(self) -> &'static str {
        match self {
            Hook::PostStart => "poststart",
            Hook::PreStop => "prestop",
        }
    }
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Exec => "exec",
            Action::Http => "http",
            Action::Https => "https",
        }
    }

    fn scheme(self) -> &'static str {
        if self == Action::Https { "HTTPS" } else { "HTTP" }
    }
}

/// The redirecting sidecar: netexec without UDP (over TLS with the image's localhost pair for
/// an HTTPS hook), started once its `/echo?msg=startup` answers in the hook's scheme.
fn redirect_sidecar(action: Action) -> ContainerBuilder {
    let mut args = vec!["netexec", "--udp-port", "-1"];
    if action == Action::Https {
        args.extend([
            "--tls-cert-file",
            "/localhost.crt",
            "--tls-private-key-file",
            "/localhost.key",
        ]);
    }
    let scheme = action.scheme();
    ContainerBuilder::new("container-redirect", AGNHOST)
        .args(args)
        .with(move |c: &mut Container| {
            c.restart_policy = Some("Always".into());
            c.startup_probe = Some(Probe {
                http_get: Some(HTTPGetAction {
                    scheme: Some(scheme.into()),
                    path: Some("/echo?msg=startup".into()),
                    port: IntOrString::Int(i32::from(HTTP_PORT)),
                    ..Default::default()
                }),
                ..Default::default()
            });
        })
}

/// The hook's handler: exec curls the handler pod; httpGet asks the pod's own sidecar to
/// `/dial` the handler (upstream's `netexecConnect`, the request query-escaped).
fn handler_action(f: &Framework, hook: Hook, action: Action, handler_ip: &str) -> LifecycleHandler {
    let msg = hook.msg();
    match action {
        Action::Exec => LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(
                    f.target_os()
                        .shell(&format!("curl http://{handler_ip}:{HTTP_PORT}/echo?msg={msg}")),
                ),
            }),
            ..Default::default()
        },
        Action::Http | Action::Https => LifecycleHandler {
            http_get: Some(HTTPGetAction {
                scheme: Some(action.scheme().into()),
                path: Some(format!(
                    "/dial?host={handler_ip}&port={HTTP_PORT}&request=echo%3Fmsg%3D{msg}"
                )),
                port: IntOrString::Int(i32::from(HTTP_PORT)),
                ..Default::default()
            }),
            ..Default::default()
        },
    }
}

/// Upstream `getPodWithHook` / `getSidecarPodWithHook` plus the redirecting sidecar: the hooked
/// container (agnhost for exec, pause for httpGet, as upstream) is named after the pod.
fn hooked_pod(f: &Framework, name: &str, placement: Placement, action: Action, lifecycle: Lifecycle) -> PodBuilder {
    let image = if action == Action::Exec { AGNHOST } else { "pause" };
    let mut hooked = ContainerBuilder::new(name, image);
    if action == Action::Exec {
        hooked = hooked.args(["pause"]);
    }
    let sidecar = placement == Placement::Sidecar;
    let hooked = hooked.with(move |c: &mut Container| {
        c.lifecycle = Some(lifecycle.clone());
        if sidecar {
            c.restart_policy = Some("Always".into());
        }
    });
    let pod = f.pod(name).init_container(redirect_sidecar(action));
    match placement {
        Placement::App => pod.container(hooked),
        Placement::Sidecar => pod
            .init_container(hooked)
            .container(ContainerBuilder::new("main", "pause")),
    }
}

/// Upstream `testPodWithHook`: the handler pod, then the hooked pod on its node; the handler's
/// log must show the postStart request once the hooked pod runs, or the preStop request once it
/// is deleted (with a 15 s grace period).
async fn run(f: &Framework, placement: Placement, hook: Hook, action: Action) -> CaseResult {
    let handler = f
        .create_pod_ready(
            &f.pod(HANDLER).container(
                ContainerBuilder::new(HANDLER_CONTAINER, AGNHOST)
                    .args(["netexec"])
                    .port(i32::from(HTTP_PORT), "TCP"),
            ),
        )
        .await?;
    let (node, handler_ip) = (pod_node(&handler), pod_ip(&handler)?);
    let mut lifecycle = Lifecycle::default();
    let handler_action = handler_action(f, hook, action, &handler_ip);
    match hook {
        Hook::PostStart => lifecycle.post_start = Some(handler_action),
        Hook::PreStop => lifecycle.pre_stop = Some(handler_action),
    }
    let name = format!("pod-with-{}-{}-hook", hook.msg(), action.name());
    let pod = hooked_pod(f, &name, placement, action, lifecycle).on_node(&node);
    let needle = format!("GET /echo?msg={}", hook.msg());
    f.create_pod(&pod).await?;
    // The kubelet reports the hooked container running (or, when its postStart hook failed,
    // killed) only once the hook has returned, so from then on the request is looked for: a hook
    // that never arrives fails here, named, rather than as a pod that never became ready.
    if hook == Hook::PostStart {
        let container = name.clone();
        f.wait_for(
            &f.api::<Pod>(),
            &name,
            move |p: Option<&Pod>| p.is_some_and(|p| has_run(p, &container)),
            "to run its hooked container",
        )
        .await?;
        f.eventually_logs_contain(HANDLER, Some(HANDLER_CONTAINER), &needle, HOOK_WAIT)
            .await?;
    }
    let created = f.wait_pod_ready(&name).await?;
    f.step(format!("deleting pod {name}"));
    f.delete_pod_and_wait(
        &created,
        &DeleteParams::default().grace_period(15),
        Duration::from_secs(60),
    )
    .await?;
    if hook == Hook::PreStop {
        f.eventually_logs_contain(HANDLER, Some(HANDLER_CONTAINER), &needle, HOOK_WAIT)
            .await?;
    }
    Ok(())
}

/// Whether container `name` of `pod` (an app or an init container) runs or has run.
fn has_run(pod: &Pod, name: &str) -> bool {
    let Some(status) = &pod.status else { return false };
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .filter(|c| c.name == name)
        .any(|c| {
            let ran = |s: Option<&ContainerState>| s.is_some_and(|s| s.running.is_some() || s.terminated.is_some());
            ran(c.state.as_ref()) || ran(c.last_state.as_ref())
        })
}

/// Upstream lifecycle_hook.go "should execute poststart https hook properly".
pub(crate) const POSTSTART_HTTPS: &str = "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook \
     should execute poststart https hook properly [NodeConformance]";

/// An HTTPS postStart hook on an app container reaches the TLS sidecar, which dials the handler.
async fn poststart_https(f: &Framework) -> CaseResult {
    run(f, Placement::App, Hook::PostStart, Action::Https).await
}

/// Upstream lifecycle_hook.go "should execute prestop https hook properly".
pub(crate) const PRESTOP_HTTPS: &str = "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook \
     should execute prestop https hook properly [NodeConformance]";

/// An HTTPS preStop hook on an app container reaches the handler when the pod is deleted.
async fn prestop_https(f: &Framework) -> CaseResult {
    run(f, Placement::App, Hook::PreStop, Action::Https).await
}

/// The common prefix of the restartable init container hook cases.
macro_rules! sidecar_name {
    ($rest:literal) => {
        concat!(
            "[sig-node] [NodeConformance] Restartable Init Container Lifecycle Hook when create a pod with lifecycle \
             hook ",
            $rest
        )
    };
}

/// Upstream lifecycle_hook.go, restartable init container, "should execute poststart exec hook properly".
pub(crate) const SIDECAR_POSTSTART_EXEC: &str = sidecar_name!("should execute poststart exec hook properly");
/// Upstream lifecycle_hook.go, restartable init container, "should execute prestop exec hook properly".
pub(crate) const SIDECAR_PRESTOP_EXEC: &str = sidecar_name!("should execute prestop exec hook properly");
/// Upstream lifecycle_hook.go, restartable init container, "should execute poststart http hook properly".
pub(crate) const SIDECAR_POSTSTART_HTTP: &str = sidecar_name!("should execute poststart http hook properly");
/// Upstream lifecycle_hook.go, restartable init container, "should execute poststart https hook properly".
pub(crate) const SIDECAR_POSTSTART_HTTPS: &str = sidecar_name!("should execute poststart https hook properly");
/// Upstream lifecycle_hook.go, restartable init container, "should execute prestop http hook properly".
pub(crate) const SIDECAR_PRESTOP_HTTP: &str = sidecar_name!("should execute prestop http hook properly");
/// Upstream lifecycle_hook.go, restartable init container, "should execute prestop https hook properly".
pub(crate) const SIDECAR_PRESTOP_HTTPS: &str = sidecar_name!("should execute prestop https hook properly");

/// An exec postStart hook on a restartable init container curls the handler.
async fn sidecar_poststart_exec(f: &Framework) -> CaseResult {
    run(f, Placement::Sidecar, Hook::PostStart, Action::Exec).await
}

/// An exec preStop hook on a restartable init container curls the handler on deletion.
async fn sidecar_prestop_exec(f: &Framework) -> CaseResult {
    run(f, Placement::Sidecar, Hook::PreStop, Action::Exec).await
}

/// An httpGet postStart hook on a restartable init container reaches the handler.
async fn sidecar_poststart_http(f: &Framework) -> CaseResult {
    run(f, Placement::Sidecar, Hook::PostStart, Action::Http).await
}

/// An HTTPS postStart hook on a restartable init container reaches the handler.
async fn sidecar_poststart_https(f: &Framework) -> CaseResult {
    run(f, Placement::Sidecar, Hook::PostStart, Action::Https).await
}

/// An httpGet preStop hook on a restartable init container reaches the handler on deletion:
/// the kubelet stops sidecars after the app containers, in reverse order, so the redirecting
/// sidecar (declared first) still serves.
async fn sidecar_prestop_http(f: &Framework) -> CaseResult {
    run(f, Placement::Sidecar, Hook::PreStop, Action::Http).await
}

/// An HTTPS preStop hook on a restartable init container reaches the handler on deletion.
async fn sidecar_prestop_https(f: &Framework) -> CaseResult {
    run(f, Placement::Sidecar, Hook::PreStop, Action::Https).await
}
