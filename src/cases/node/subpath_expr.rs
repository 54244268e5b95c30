//! `subPathExpr` in volume mounts (upstream `test/e2e/common/node/expansion.go`, the
//! "VolumeSubpathEnvExpansion" cases): the kubelet expands `$(VAR)` from the container's
//! environment into the subPath; an expansion that is absolute or steps out with `..` fails the
//! container's configuration (`CreateContainerConfigError`) before it is created.
//!
//! The refusals happen before any mount, so those cases run on both OSes (upstream picks
//! `C:\Users` as the absolute path on Windows); the cases that mount through the expanded
//! subPath run on both too (the kubelet's `subpath_windows.go`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, Volume, VolumeMount,
};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::wait::Condition;
use serde_json::json;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::wait::conditions as wc;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, pod_node};
use crate::os::Os;
use crate::{ensure, fail};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(SUBSTITUTE_SUBPATH, Kind::Adapted, substitute_subpath),
        case!(ABSOLUTE_SUBPATH, Kind::Adapted, absolute_subpath),
        case!(BACKTICKS_SUBPATH, Kind::Adapted, backticks_subpath),
        case!(WRITE_SUBPATHS, Kind::Adapted, write_subpaths),
        case!(FAILING_SUBPATH_FIXED, Kind::Adapted, failing_subpath_fixed),
    ]
}

/// Upstream `framework.PodStartShortTimeout`: how long the refusal may take to show.
const REFUSED_WITHIN: Duration = Duration::from_secs(120);

/// Upstream's container name.
const CONTAINER: &str = "dapi-container";

/// Upstream's emptyDir volume.
const VOLUME: &str = "workdir1";

/// An absolute path of `os` (upstream: `/tmp`, and `C:\Users` as Windows has no `C:\tmp`).
fn absolute_path(os: Os) -> &'static str {
    match os {
        Os::Linux => "/tmp",
        Os::Windows => "C:\\Users",
    }
}

/// A mount of [`VOLUME`] at `at` (under the OS's volume root), through `expr` when given.
fn mount(f: &Framework, at: &str, expr: Option<&str>) -> VolumeMount {
    let os = f.target_os();
    VolumeMount {
        name: VOLUME.into(),
        mount_path: os.join(os.volume_root(), at),
        sub_path_expr: expr.map(str::to_string),
        ..Default::default()
    }
}

/// Upstream `newPod`: one busybox container with `env` and `mounts` over an emptyDir, run once.
fn expansion_pod(f: &Framework, name: &str, script: &str, env: Vec<EnvVar>, mounts: Vec<VolumeMount>) -> PodBuilder {
    let container = ContainerBuilder::new(CONTAINER, "busybox")
        .command(f.target_os().shell(script))
        .with(move |c: &mut Container| {
            c.env = Some(env.clone());
            c.volume_mounts = Some(mounts.clone());
        });
    f.pod(name)
        .restart_policy("Never")
        .volume(Volume {
            name: VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        })
        .container(container)
}

/// A plain `name=value` variable.
fn var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

/// Upstream `testPodFailSubpath`: a pod mounting through `$(POD_NAME)` with POD_NAME=`value`
/// must wait with reason CreateContainerConfigError instead of starting its container.
async fn expect_config_error(f: &Framework, name: &str, value: &str) -> CaseResult {
    let env = vec![var("POD_NAME", value)];
    let mounts = vec![mount(f, "logscontainer", Some("$(POD_NAME)"))];
    let builder = expansion_pod(f, name, f.target_os().idle_script(), env, mounts);
    f.create_pod(&builder).await?;
    await_config_error(
        f,
        name,
        &format!("mounting subPathExpr $(POD_NAME) with POD_NAME={value:?}"),
    )
    .await
}

/// Waits for the container of the created pod `name` to wait with reason
/// CreateContainerConfigError; fails at once if the pod leaves Pending instead. `what` says
/// what the pod mounts, for the failure message.
async fn await_config_error(f: &Framework, name: &str, what: &str) -> CaseResult {
    let refused = wc::has_waiting_reason("CreateContainerConfigError");
    let seen = f
        .wait_for_within(
            &f.api::<Pod>(),
            name,
            |p: Option<&Pod>| {
                refused.matches_object(p)
                    || p.and_then(|p| p.status.as_ref())
                        .and_then(|s| s.phase.as_deref())
                        .is_some_and(|phase| phase != "Pending")
            },
            "to fail its container's configuration (CreateContainerConfigError) or start",
            REFUSED_WITHIN,
        )
        .await?
        .ok_or_else(|| CaseError::failed(format!("pod {name} vanished")))?;
    let state = seen
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .and_then(|c| c.state.clone());
    ensure!(
        refused.matches_object(Some(&seen)),
        "pod {name} on node {} {what}: expected its container to wait with reason CreateContainerConfigError, got phase {} and state {state:?}",
        pod_node(&seen),
        seen.status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or_default()
    );
    Ok(())
}

/// Upstream expansion.go "should allow substituting values in a volume subpath".
pub(crate) const SUBSTITUTE_SUBPATH: &str =
    "[sig-node] Variable Expansion should allow substituting values in a volume subpath [Conformance]";

/// POD_NAME holds the pod's name; the volume mounted through `$(POD_NAME)` makes that
/// directory, which the whole-volume mount shows (its listing names it).
async fn substitute_subpath(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let name = "var-expansion-subpath";
    let whole = mount(f, "testcontainer", None);
    let script = os.list_dir(&whole.mount_path);
    let env = vec![var("POD_NAME", name)];
    let mounts = vec![mount(f, "logscontainer", Some("$(POD_NAME)")), whole];
    let builder = expansion_pod(f, name, &script, env, mounts);
    let out = f.container_output(&builder, CONTAINER).await?;
    ensure!(
        out.lines().any(|l| l.trim() == name),
        "pod {name}: expected subPathExpr $(POD_NAME) to create directory {name} in the volume (`{script}` listing it), got {:?}",
        out.trim()
    );
    Ok(())
}

/// Upstream expansion.go "should fail substituting values in a volume subpath with absolute path".
pub(crate) const ABSOLUTE_SUBPATH: &str = "[sig-node] Variable Expansion should fail substituting values in a volume \
     subpath with absolute path [Conformance]";

/// `$(POD_NAME)` expanding to an absolute path is refused.
async fn absolute_subpath(f: &Framework) -> CaseResult {
    expect_config_error(f, "var-expansion-absolute", absolute_path(f.target_os())).await
}

/// Upstream expansion.go "should fail substituting values in a volume subpath with backticks".
pub(crate) const BACKTICKS_SUBPATH: &str = "[sig-node] Variable Expansion should fail substituting values in a volume \
     subpath with backticks [Conformance]";

/// `$(POD_NAME)` expanding to `..` (a step out of the volume) is refused.
async fn backticks_subpath(f: &Framework) -> CaseResult {
    expect_config_error(f, "var-expansion-backsteps", "..").await
}

/// Upstream expansion.go "should succeed in writing subpaths in container".
pub(crate) const WRITE_SUBPATHS: &str =
    "[sig-node] Variable Expansion should succeed in writing subpaths in container [Conformance]";

/// `ANNOTATION`: the pod's annotation `mysubpath` through the downward API (empty while the
/// pod has no such annotation).
fn annotation_var() -> EnvVar {
    EnvVar {
        name: "ANNOTATION".into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: Some("v1".into()),
                field_path: "metadata.annotations['mysubpath']".into(),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The subPath `$(ANNOTATION)/$(POD_NAME)` (an annotation through the downward API, and `foo`)
/// is `mypath/foo`: a file written there through the whole-volume mount shows in the subPath
/// mount; changing the annotation later does not disturb the running pod, which then deletes.
async fn write_subpaths(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let name = "var-expansion-write";
    let annotation = annotation_var();
    let sub = mount(f, "subpath_mount", Some("$(ANNOTATION)/$(POD_NAME)"));
    let whole = mount(f, "volume_mount", None);
    let written = os.join(&os.join(&os.join(&whole.mount_path, "mypath"), "foo"), "test.log");
    let seen_at = os.join(&sub.mount_path, "test.log");
    let env = vec![var("POD_NAME", "foo"), annotation];
    let builder = expansion_pod(f, name, os.idle_script(), env, vec![sub, whole]).annotation("mysubpath", "mypath");
    let pod = f.create_pod_ready(&builder).await?;
    let touched = f
        .exec_shell(name, Some(CONTAINER), os, &os.write_file(&written, "test"))
        .await?;
    ensure!(
        touched.exit_code == 0,
        "pod {name} on node {}: expected to write {written} through the whole-volume mount, got exit {}: {}",
        pod_node(&pod),
        touched.exit_code,
        touched.out()
    );
    let found = f.exec_shell(name, Some(CONTAINER), os, &os.cat(&seen_at)).await?;
    if found.exit_code != 0 {
        fail!(
            "pod {name} on node {}: {written} does not show as {seen_at} through subPathExpr $(ANNOTATION)/$(POD_NAME) (mypath/foo); reading it exited {}",
            pod_node(&pod),
            found.exit_code
        );
    }
    f.step("changing annotation mysubpath to mynewpath");
    f.api::<Pod>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {"mysubpath": "mynewpath"}}})),
        )
        .await?;
    let running = f.wait_pod_ready(name).await?;
    f.delete_pod_and_wait(&running, &DeleteParams::default(), REFUSED_WITHIN)
        .await
}

/// Upstream expansion.go "should verify that a failing subpath expansion can be modified during
/// the lifecycle of a container".
pub(crate) const FAILING_SUBPATH_FIXED: &str = "[sig-node] Variable Expansion should verify that a failing subpath \
     expansion can be modified during the lifecycle of a container [Slow] [Conformance]";

/// How long the refused container must stay refused before the annotation is set (upstream
/// waits the whole `PodStartShortTimeout` for the pod not to run; here the
/// CreateContainerConfigError is the positive evidence and this short window follows it).
const STAYS_REFUSED_FOR: Duration = Duration::from_secs(3);

/// The pod has annotation `notmysubpath` but not `mysubpath`, so `$(ANNOTATION)` is empty and
/// the kubelet refuses `$(ANNOTATION)/$(POD_NAME)` ("missing value for ANNOTATION"); once the
/// pod is updated with `mysubpath=mypath` the kubelet's retry expands `mypath/foo` and the pod
/// runs; it then deletes gracefully.
async fn failing_subpath_fixed(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let name = "var-expansion-fixed";
    let sub = mount(f, "subpath_mount", Some("$(ANNOTATION)/$(POD_NAME)"));
    let whole = mount(f, "volume_mount", None);
    let env = vec![var("POD_NAME", "foo"), annotation_var()];
    let builder = expansion_pod(f, name, os.idle_script(), env, vec![sub, whole]).annotation("notmysubpath", "mypath");
    f.create_pod(&builder).await?;
    let what = "mounting subPathExpr $(ANNOTATION)/$(POD_NAME) without annotation mysubpath";
    await_config_error(f, name, what).await?;
    f.consistently(
        &f.api::<Pod>(),
        name,
        |p: &Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending") == "Pending",
        "Pending while annotation mysubpath is missing",
        STAYS_REFUSED_FOR,
    )
    .await?;
    f.step("setting annotation mysubpath=mypath");
    f.api::<Pod>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {"mysubpath": "mypath"}}})),
        )
        .await?;
    let running = f
        .wait_for_within(
            &f.api::<Pod>(),
            name,
            wc::is_pod_phase("Running"),
            "to run once annotation mysubpath=mypath makes the subPath mypath/foo",
            REFUSED_WITHIN,
        )
        .await?
        .ok_or_else(|| CaseError::failed(format!("pod {name} vanished")))?;
    f.delete_pod_and_wait(&running, &DeleteParams::default(), REFUSED_WITHIN)
        .await
}
