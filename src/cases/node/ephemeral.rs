//! `[sig-node] Ephemeral Containers` (upstream `test/e2e/common/node/ephemeral_containers.go`):
//! a container added to a running pod through the `pods/ephemeralcontainers` subresource runs,
//! can be exec'd into and logs, bumps the pod's generation, and further ones can be added with
//! an update of the subresource.
//!
//! Adapted for Windows: upstream's script runs under `cmd /c` there (`GenerateScriptCmd`),
//! where a `while` loop does not parse; both OSes run it with the busybox image's `sh`, which
//! the Windows busybox image has too.

use std::time::Duration;

use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};
use kube::api::{Patch, PatchParams, PostParams};

use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, pod_node};
use crate::os::Os;
use crate::{case, ensure};

/// Upstream "will start an ephemeral container in an existing pod".
pub(crate) const START: &str = "[sig-node] Ephemeral Containers [NodeConformance] will start an ephemeral container in an existing pod [Conformance]";
/// Upstream "should update the ephemeral containers in an existing pod".
pub(crate) const UPDATE: &str = "[sig-node] Ephemeral Containers [NodeConformance] should update the ephemeral containers in an existing pod [Conformance]";

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(START, Kind::Adapted, start), case!(UPDATE, Kind::Adapted, update)]
}

const TARGET: &str = "ephemeral-containers-target-pod";
const DEBUGGER: &str = "debugger";
/// Upstream `AddEphemeralContainerSync`'s bound on the container reaching Running.
const RUNNING_WITHIN: Duration = Duration::from_secs(60);

/// Creates the target pod, adds the `debugger` ephemeral container and checks what upstream
/// checks: generation 1 then 2, `echo marco` through exec, "polo" in its log.
async fn add_debugger(f: &Framework) -> Result<Pod, CaseError> {
    let os = f.target_os();
    let pod = f
        .create_pod_ready(
            &f.pod(TARGET)
                .container(ContainerBuilder::new("test-container-1", "busybox").command(["sleep", "10000"])),
        )
        .await?;
    let node = pod_node(&pod);
    ensure!(
        pod.metadata.generation == Some(1),
        "pod {TARGET} on node {node}: expected metadata.generation 1 after create, got {:?}",
        pod.metadata.generation
    );
    let image = f.image("busybox", os)?;
    let ec: EphemeralContainer = serde_json::from_value(serde_json::json!({
        "name": DEBUGGER,
        "image": image,
        "command": ["sh", "-c", "while true; do echo polo; sleep 2; done"],
        "stdin": true,
        "tty": true,
    }))
    .map_err(|e| CaseError::failed(format!("building the ephemeral container: {e}")))?;
    f.step(format!("adding ephemeral container {DEBUGGER} to pod {TARGET}"));
    let api = f.api::<Pod>();
    let patch = serde_json::json!({"spec": {"ephemeralContainers": [ec]}});
    api.patch_ephemeral_containers(TARGET, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .map_err(|e| CaseError::from(e).context(format!("patching the ephemeral containers of pod {TARGET}")))?;
    f.wait_for_within(
        &api,
        TARGET,
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.ephemeral_container_statuses.as_ref())
                .and_then(|l| l.iter().find(|c| c.name == DEBUGGER))
                .and_then(|c| c.state.as_ref())
                .is_some_and(|s| s.running.is_some())
        },
        "to report ephemeral container debugger running",
        RUNNING_WITHIN,
    )
    .await?;
    let pod = api
        .get(TARGET)
        .await
        .map_err(|e| CaseError::from(e).context(format!("reading pod {TARGET}")))?;
    ensure!(
        pod.metadata.generation == Some(2),
        "pod {TARGET} on node {node}: expected metadata.generation 2 after adding an ephemeral container, got {:?}",
        pod.metadata.generation
    );
    let echo = match os {
        Os::Linux => vec!["/bin/echo".to_string(), "marco".into()],
        Os::Windows => os.shell("echo marco"),
    };
    let out = f.exec(TARGET, Some(DEBUGGER), echo).await?;
    ensure!(
        out.stdout.contains("marco"),
        "exec of echo marco in ephemeral container {DEBUGGER} of pod {TARGET} on node {node}: expected \"marco\" in stdout, got {:?} (stderr {:?}, exit {})",
        out.stdout,
        out.stderr,
        out.exit_code
    );
    f.eventually_logs_contain(TARGET, Some(DEBUGGER), "polo", Duration::from_secs(10))
        .await?;
    Ok(pod)
}

async fn start(f: &Framework) -> CaseResult {
    add_debugger(f).await.map(|_| ())
}

/// The `spec.ephemeralContainers` of the target pod as the subresource's GET answers it.
async fn ephemeral_names(f: &Framework) -> Result<Vec<String>, CaseError> {
    let pod = f
        .api::<Pod>()
        .get_ephemeral_containers(TARGET)
        .await
        .map_err(|e| CaseError::from(e).context(format!("reading the ephemeral containers of pod {TARGET}")))?;
    Ok(pod
        .spec
        .and_then(|s| s.ephemeral_containers)
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.name)
        .collect())
}

async fn update(f: &Framework) -> CaseResult {
    let pod = add_debugger(f).await?;
    let node = pod_node(&pod);
    let names = ephemeral_names(f).await?;
    ensure!(
        names == [DEBUGGER],
        "pod {TARGET} on node {node}: expected one ephemeral container [\"debugger\"] through pods/ephemeralcontainers, got {names:?}"
    );
    f.step(format!("adding another ephemeral container to pod {TARGET}"));
    let api = f.api::<Pod>();
    let agnhost = f.image("agnhost", f.target_os())?;
    let second: EphemeralContainer = serde_json::from_value(serde_json::json!({
        "name": "debugger2",
        "image": agnhost,
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePolicy": "File",
    }))
    .map_err(|e| CaseError::failed(format!("building the second ephemeral container: {e}")))?;
    // Read-modify-write retried on conflict (upstream retry.RetryOnConflict); a replayed write
    // that already landed finds debugger2 there.
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut current = api
            .get(TARGET)
            .await
            .map_err(|e| CaseError::from(e).context(format!("reading pod {TARGET}")))?;
        let spec = current.spec.get_or_insert_with(Default::default);
        let list = spec.ephemeral_containers.get_or_insert_with(Vec::new);
        if list.iter().any(|c| c.name == "debugger2") {
            break;
        }
        list.push(second.clone());
        match api
            .replace_ephemeral_containers(TARGET, &PostParams::default(), &current)
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 5 => continue,
            other => {
                other.map_err(|e| {
                    CaseError::from(e).context(format!("updating the ephemeral containers of pod {TARGET}"))
                })?;
                break;
            }
        }
    }
    let names = ephemeral_names(f).await?;
    ensure!(
        names.len() == 2 && names.iter().any(|n| n == "debugger2"),
        "pod {TARGET} on node {node}: expected two ephemeral containers (debugger, debugger2) through pods/ephemeralcontainers, got {names:?}"
    );
    Ok(())
}
