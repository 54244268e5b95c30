//! Security contexts on Windows: `runAsUserName` at pod and container level (upstream
//! `test/e2e/windows/security_context.go`), Linux-only fields, and what the API refuses for a
//! pod that declares `spec.os.name: windows`.

use k8s_openapi::api::core::v1::{
    Container, Pod, PodSecurityContext, SELinuxOptions, SecurityContext, WindowsSecurityContextOptions,
};
use kube::api::PostParams;

use crate::catalog::{Case, Kind};
use crate::framework::services::describe_event;
use crate::framework::wait::conditions;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, pod_node};
use crate::os::Os;

/// Upstream: the default user is ContainerUser; a given username is used.
pub const GIVEN_USERNAME: &str = "[sig-windows] [Feature:Windows] SecurityContext should be able create pods and run containers with a given username";
/// Upstream: an unknown username at pod level fails the sandbox or the container.
pub const UNKNOWN_POD_LEVEL: &str = "[sig-windows] [Feature:Windows] SecurityContext should not be able to create pods with unknown usernames at Pod level";
/// Upstream: an unknown username at container level fails the container.
pub const UNKNOWN_CONTAINER_LEVEL: &str = "[sig-windows] [Feature:Windows] SecurityContext should not be able to create pods with unknown usernames at Container level";
/// Upstream: the container's username overrides the pod's.
pub const OVERRIDE_USERNAME: &str =
    "[sig-windows] [Feature:Windows] SecurityContext should override SecurityContext username if set";
/// Upstream: SELinux options are ignored on Windows (without `spec.os.name`).
pub const IGNORE_LINUX: &str =
    "[sig-windows] [Feature:Windows] SecurityContext should ignore Linux Specific SecurityContext if set";
/// Upstream: runAsNonRoot refuses ContainerAdministrator.
pub const NON_ROOT_ADMIN: &str = "[sig-windows] [Feature:Windows] SecurityContext should not be able to create pods with containers running as ContainerAdministrator when runAsNonRoot is true";
/// Upstream: runAsNonRoot refuses CONTAINERADMINISTRATOR (case-insensitive).
pub const NON_ROOT_ADMIN_UPPER: &str = "[sig-windows] [Feature:Windows] SecurityContext should not be able to create pods with containers running as CONTAINERADMINISTRATOR when runAsNonRoot is true";
/// Upstream: runAsUser/runAsGroup are ignored without `spec.os.name`.
pub const UNSUPPORTED_FIELDS: &str =
    "[sig-windows] [Feature:Windows] SecurityContext should be able to create pod and run containers";
/// Beyond upstream: with `spec.os.name: windows` the API rejects privileged and Linux-only fields.
pub const API_REJECTS: &str =
    "[sig-windows] SecurityContext should reject privileged and Linux-only fields when spec.os.name is windows";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(GIVEN_USERNAME, Kind::WindowsSpecific, given_username),
        crate::case!(UNKNOWN_POD_LEVEL, Kind::WindowsSpecific, unknown_pod_level),
        crate::case!(UNKNOWN_CONTAINER_LEVEL, Kind::WindowsSpecific, unknown_container_level),
        crate::case!(OVERRIDE_USERNAME, Kind::WindowsSpecific, override_username),
        crate::case!(IGNORE_LINUX, Kind::WindowsSpecific, ignore_linux),
        crate::case!(NON_ROOT_ADMIN, Kind::WindowsSpecific, non_root_admin),
        crate::case!(NON_ROOT_ADMIN_UPPER, Kind::WindowsSpecific, non_root_admin_upper),
        crate::case!(UNSUPPORTED_FIELDS, Kind::WindowsSpecific, unsupported_fields),
        crate::case!(API_REJECTS, Kind::WindowsSpecific, api_rejects),
    ]
}

const CONTAINER: &str = "run-as-username-container";

fn windows_options(user: Option<&str>) -> Option<WindowsSecurityContextOptions> {
    Some(WindowsSecurityContextOptions {
        run_as_user_name: user.map(str::to_string),
        ..Default::default()
    })
}

/// A container echoing its user name, with `runAsUserName` = `user` (upstream `runAsUserNamePod`).
fn whoami(name: &str, os: Os, user: Option<&str>) -> ContainerBuilder {
    let opts = windows_options(user);
    ContainerBuilder::new(name, "nonroot")
        .command(os.shell("echo %username%"))
        .with(move |c: &mut Container| {
            c.security_context = Some(SecurityContext {
                windows_options: opts.clone(),
                ..Default::default()
            });
        })
}

/// Upstream `runAsUserNamePod`: pod- and container-level `runAsUserName` = `user`,
/// `restartPolicy: Never`, plus pod-level `runAsNonRoot` when asked.
fn user_pod(name: &str, os: Os, pod_user: Option<&str>, container_user: Option<&str>, non_root: bool) -> PodBuilder {
    let opts = windows_options(pod_user);
    PodBuilder::new(name, os)
        .restart_policy("Never")
        .container(whoami(CONTAINER, os, container_user))
        .edit_spec(move |spec| {
            spec.security_context = Some(PodSecurityContext {
                windows_options: opts.clone(),
                run_as_non_root: non_root.then_some(true),
                ..Default::default()
            });
        })
}

/// Runs `b` to completion and checks it Succeeded and each `(container, output)` printed
/// its output (upstream `TestContainerOutput`).
async fn expect_output(f: &Framework, b: &PodBuilder, wants: &[(&str, &str)]) -> CaseResult {
    let pod = f.run_pod_to_completion(b).await?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    for (container, want) in wants {
        let logs = f.logs(b.name(), Some(container)).await?;
        crate::ensure!(
            phase == "Succeeded" && logs.contains(want),
            "pod {} container {container} on node {}: expected Succeeded with output {want:?}, got {phase} with {:?}",
            b.name(),
            pod_node(&pod),
            logs.trim()
        );
    }
    Ok(())
}

/// Upstream "should be able create pods and run containers with a given username".
async fn given_username(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    expect_output(
        f,
        &user_pod("run-as-default", os, None, None, false),
        &[(CONTAINER, "ContainerUser")],
    )
    .await?;
    let admin = Some("ContainerAdministrator");
    expect_output(
        f,
        &user_pod("run-as-admin", os, admin, admin, false),
        &[(CONTAINER, "ContainerAdministrator")],
    )
    .await
}

/// The container's terminated reason, if it terminated.
fn terminated_reason(pod: &Pod, container: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == container)?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.reason.clone().unwrap_or_default())
}

fn failed_to_start(pod: Option<&Pod>) -> bool {
    pod.is_some_and(|p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
            && terminated_reason(p, CONTAINER).is_some_and(|r| r == "ContainerCannotRun" || r == "StartError")
    })
}

/// Upstream "should not be able to create pods with unknown usernames at Pod level": either the
/// sandbox fails ("The user name or password is incorrect.") or the container cannot start.
async fn unknown_pod_level(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let user = Some("FooLish");
    f.create_pod(&user_pod("run-as-unknown", os, user, user, false)).await?;
    let api = f.api::<Pod>();
    let sandbox = f.wait_pod_event(
        "run-as-unknown",
        "FailedCreatePodSandBox naming the user",
        crate::framework::POD_START_TIMEOUT,
        |e| {
            e.reason.as_deref() == Some("FailedCreatePodSandBox")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("The user name or password is incorrect."))
        },
    );
    // Stop watching as soon as the pod is finished either way: a pod that ran to Succeeded
    // as the unknown user is the failure this case guards against.
    let container = f.wait_for_within(
        &api,
        "run-as-unknown",
        |p: Option<&Pod>| failed_to_start(p) || p.is_some_and(succeeded),
        "to fail with ContainerCannotRun or StartError",
        crate::framework::POD_START_TIMEOUT,
    );
    tokio::select! {
        r = sandbox => r.map(|_| ()),
        r = container => {
            let pod = r?;
            crate::ensure!(
                !pod.as_ref().is_some_and(succeeded),
                "pod run-as-unknown ran to Succeeded as unknown user FooLish; expected its sandbox or container to fail (\"The user name or password is incorrect.\")"
            );
            Ok(())
        }
    }
}

fn wc_finished() -> impl kube::runtime::wait::Condition<Pod> {
    conditions::is_pod_finished()
}

fn succeeded(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
}

/// Upstream "should not be able to create pods with unknown usernames at Container level".
async fn unknown_container_level(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    f.create_pod(&user_pod(
        "run-as-unknown",
        os,
        Some("ContainerUser"),
        Some("FooLish"),
        false,
    ))
    .await?;
    let pod = f
        .wait_for(&f.api::<Pod>(), "run-as-unknown", wc_finished(), "to fail")
        .await?
        .ok_or_else(|| CaseError::failed("pod run-as-unknown vanished"))?;
    crate::ensure!(
        !succeeded(&pod),
        "pod run-as-unknown on node {}: container run-as-username-container ran to Succeeded as unknown user FooLish; expected it to fail to start",
        pod_node(&pod)
    );
    let reason = terminated_reason(&pod, CONTAINER).unwrap_or_default();
    crate::ensure!(
        reason == "ContainerCannotRun" || reason == "StartError",
        "pod run-as-unknown on node {}: container terminated reason should be ContainerCannotRun or StartError, not {reason:?}",
        pod_node(&pod)
    );
    Ok(())
}

/// Upstream "should override SecurityContext username if set": container 0 sets ContainerUser
/// over the pod's ContainerAdministrator; container 1 inherits the pod's.
async fn override_username(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let b = user_pod(
        "run-as-override",
        os,
        Some("ContainerAdministrator"),
        Some("ContainerUser"),
        false,
    )
    .container(ContainerBuilder::new("run-as-username-new-container", "nonroot").command(os.shell("echo %username%")));
    expect_output(
        f,
        &b,
        &[
            (CONTAINER, "ContainerUser"),
            ("run-as-username-new-container", "ContainerAdministrator"),
        ],
    )
    .await
}

/// Upstream "should ignore Linux Specific SecurityContext if set": SELinux options at pod and
/// container level on a pod without `spec.os.name` do not stop it from running.
async fn ignore_linux(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let selinux = SELinuxOptions {
        level: Some("s0:c24,c9".into()),
        ..Default::default()
    };
    let container_selinux = selinux.clone();
    let b = PodBuilder::new("windows-pod-with-selinux", os)
        .without_os_field()
        .container(
            ContainerBuilder::new("c", "agnhost")
                .args(["test-webserver"])
                .with(move |c: &mut Container| {
                    c.security_context = Some(SecurityContext {
                        se_linux_options: Some(container_selinux.clone()),
                        windows_options: windows_options(Some("ContainerAdministrator")),
                        ..Default::default()
                    });
                }),
        )
        .edit_spec(move |spec| {
            spec.security_context = Some(PodSecurityContext {
                se_linux_options: Some(selinux.clone()),
                ..Default::default()
            });
        });
    expect_running(f, &b).await
}

/// Creates `pod` and waits until it is Running (ready or not). The cases whose Linux-only
/// fields must be ignored on Windows need only that the pod starts; this is their check.
async fn expect_running(f: &Framework, pod: &PodBuilder) -> CaseResult {
    f.create_pod(pod).await?;
    f.wait_for(
        &f.api::<Pod>(),
        pod.name(),
        conditions::is_pod_phase("Running"),
        "to be Running",
    )
    .await?;
    Ok(())
}

async fn non_root_refused(f: &Framework, user: &str) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    f.create_pod(&user_pod("run-as-admin-non-root", os, Some(user), Some(user), true))
        .await?;
    let want = format!(
        "container's runAsUserName ({user}) which will be regarded as root identity and will break non-root policy"
    );
    let what = format!("containing {want:?}");
    let api = f.api::<Pod>();
    let refused = f.wait_pod_event(
        "run-as-admin-non-root",
        &what,
        crate::framework::POD_START_TIMEOUT,
        |e| e.message.as_deref().is_some_and(|m| m.contains(&want)),
    );
    // A pod that runs to completion as the administrator is the failure this case guards
    // against: stop waiting for the refusal then.
    let ran = f.wait_for_within(
        &api,
        "run-as-admin-non-root",
        |p: Option<&Pod>| p.is_some_and(succeeded),
        "to run to completion",
        crate::framework::POD_START_TIMEOUT,
    );
    tokio::select! {
        e = refused => {
            f.step(format!("kubelet: {}", describe_event(&e?)));
            Ok(())
        }
        r = ran => {
            r?;
            crate::fail!(
                "pod run-as-admin-non-root ran to Succeeded as {user} although runAsNonRoot is true; expected the kubelet to refuse it: {want}"
            )
        }
    }
}

/// Upstream "... running as ContainerAdministrator when runAsNonRoot is true".
async fn non_root_admin(f: &Framework) -> CaseResult {
    non_root_refused(f, "ContainerAdministrator").await
}

/// Upstream "... running as CONTAINERADMINISTRATOR when runAsNonRoot is true".
async fn non_root_admin_upper(f: &Framework) -> CaseResult {
    non_root_refused(f, "CONTAINERADMINISTRATOR").await
}

/// Upstream "should be able to create pod and run containers": runAsUser, runAsGroup and
/// runAsNonRoot on a pod without `spec.os.name` are ignored and the pod runs.
async fn unsupported_fields(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let b = PodBuilder::new("run-ignore-unsupported-fields", os)
        .without_os_field()
        .restart_policy("Never")
        .container(ContainerBuilder::new("test-container", "pause"))
        .edit_spec(|spec| {
            spec.security_context = Some(PodSecurityContext {
                run_as_user: Some(999),
                run_as_group: Some(999),
                run_as_non_root: Some(true),
                ..Default::default()
            });
        });
    expect_running(f, &b).await
}

/// With `spec.os.name: windows` the API rejects (422 Invalid) a privileged container and a
/// pod-level `runAsUser`, the fields the Windows node support documents list as Linux-only.
async fn api_rejects(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let privileged =
        PodBuilder::new("privileged", os).container(ContainerBuilder::new("c", "agnhost").args(["pause"]).with(
            |c: &mut Container| {
                c.security_context = Some(SecurityContext {
                    privileged: Some(true),
                    ..Default::default()
                });
            },
        ));
    let run_as_user = PodBuilder::new("run-as-user", os)
        .container(ContainerBuilder::new("c", "agnhost").args(["pause"]))
        .edit_spec(|spec| {
            spec.security_context = Some(PodSecurityContext {
                run_as_user: Some(1000),
                ..Default::default()
            });
        });
    for (b, field) in [
        (privileged, "securityContext.privileged"),
        (run_as_user, "securityContext.runAsUser"),
    ] {
        let obj = b.build(f)?;
        match f.api::<Pod>().create(&PostParams::default(), &obj).await {
            Err(kube::Error::Api(s)) if s.code == 422 => {
                f.step(format!("{field} refused: {}", s.message));
            }
            Err(e) => return Err(CaseError::from(e).context(format!("creating pod {} with {field}", b.name()))),
            Ok(_) => crate::fail!(
                "pod {} with {field} and spec.os.name {} was accepted; the API should reject it (422)",
                b.name(),
                os.as_str()
            ),
        }
    }
    Ok(())
}
