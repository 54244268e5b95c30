//! Image pulls (upstream `common/node/runtime.go` blackbox pulls and crossconf's pull-policy
//! cases) and image compatibility (a Linux image or another Windows build on a Windows node
//! fails with a reason naming the mismatch): what the node's runtime does with an image
//! reference.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::runtime::wait::Condition;

use super::wait_pod;
use crate::catalog::{Case, Kind};
use crate::framework::services::describe_event;
use crate::framework::wait::conditions;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, pod_node};
use crate::os::{self, Os};

/// Upstream runtime.go (common node): invalid registry.
pub const PULL_INVALID_REGISTRY: &str = "[sig-node] Container Runtime blackbox test when running a container with a new image should not be able to pull image from invalid registry [NodeConformance]";
/// Upstream runtime.go (common node): a public image.
pub const PULL_IMAGE: &str = "[sig-node] Container Runtime blackbox test when running a container with a new image should be able to pull image [NodeConformance]";
/// Upstream runtime.go (common node): a private image without a pull secret.
pub const PULL_PRIVATE_NO_SECRET: &str = "[sig-node] Container Runtime blackbox test when running a container with a new image should not be able to pull from private registry without secret [NodeConformance]";

/// Upstream runtime.go (common node): a private image with a pull secret.
pub const PULL_PRIVATE_WITH_SECRET: &str = "[sig-node] Container Runtime blackbox test when running a container with a new image should be able to pull from private registry with secret [NodeConformance]";

/// imagePullPolicy Always pulls at every container start.
pub const POLICY_ALWAYS: &str =
    "[sig-windows] Image pulls with imagePullPolicy Always should pull the image at every container start";
/// imagePullPolicy IfNotPresent pulls at most once per node.
pub const POLICY_IF_NOT_PRESENT: &str =
    "[sig-windows] Image pulls with imagePullPolicy IfNotPresent should not pull an image already present on the node";
/// imagePullPolicy Never with a cached image starts.
pub const POLICY_NEVER_CACHED: &str =
    "[sig-windows] Image pulls with imagePullPolicy Never should start a container from an image present on the node";
/// imagePullPolicy Never with an uncached image fails with ErrImageNeverPull.
pub const POLICY_NEVER_UNCACHED: &str = "[sig-windows] Image pulls with imagePullPolicy Never should fail with ErrImageNeverPull for an image absent from the node";

/// A Linux image on a Windows node fails, naming the mismatch.
pub const COMPAT_LINUX_IMAGE: &str =
    "[sig-windows] Image compatibility should fail a Linux image on a Windows node with a reason naming the mismatch";
/// A Windows image of another build fails under process isolation, naming the mismatch.
pub const COMPAT_OTHER_BUILD: &str = "[sig-windows] Image compatibility should fail a Windows image built for another Windows build with a reason naming the mismatch";

/// The cases of this group, in catalogue order.
pub(super) fn cases() -> Vec<Case> {
    vec![
        crate::case!(PULL_INVALID_REGISTRY, Kind::Adapted, pull_invalid_registry),
        crate::case!(PULL_IMAGE, Kind::Adapted, pull_image),
        crate::case!(PULL_PRIVATE_NO_SECRET, Kind::Adapted, pull_private_no_secret),
        crate::case!(PULL_PRIVATE_WITH_SECRET, Kind::Adapted, pull_private_with_secret),
        crate::case!(POLICY_ALWAYS, Kind::WindowsSpecific, policy_always),
        crate::case!(POLICY_IF_NOT_PRESENT, Kind::WindowsSpecific, policy_if_not_present),
        crate::case!(POLICY_NEVER_CACHED, Kind::WindowsSpecific, policy_never_cached),
        crate::case!(POLICY_NEVER_UNCACHED, Kind::WindowsSpecific, policy_never_uncached),
        crate::case!(COMPAT_LINUX_IMAGE, Kind::WindowsSpecific, compat_linux_image),
        crate::case!(COMPAT_OTHER_BUILD, Kind::WindowsSpecific, compat_other_build),
    ]
}

fn pull_policy(c: ContainerBuilder, policy: &'static str) -> ContainerBuilder {
    c.with(move |c: &mut Container| c.image_pull_policy = Some(policy.to_string()))
}

/// A pod of one container `image-pull-test` running `image` (logical) with `policy`.
fn pull_pod(name: &str, os: Os, image: ContainerBuilder) -> PodBuilder {
    PodBuilder::new(name, os).container(image)
}

fn pull_failed() -> impl Condition<Pod> {
    conditions::has_waiting_reason("ErrImagePull").or(conditions::has_waiting_reason("ImagePullBackOff"))
}

/// Starts pod `image-pull-test` with container `image` under imagePullPolicy Always, waits for
/// the pull to fail and checks the pod stays Pending.
///
/// The invalid-registry and private-without-secret cases differ only in the image.
async fn expect_pull_failure(f: &Framework, image: ContainerBuilder) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    f.create_pod(&pull_pod("image-pull-test", os, pull_policy(image, "Always")))
        .await?;
    let p = wait_pod(
        f,
        "image-pull-test",
        pull_failed(),
        "to fail pulling its image (ErrImagePull or ImagePullBackOff)",
        crate::framework::POD_START_TIMEOUT,
    )
    .await?;
    let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
    crate::ensure!(
        phase == "Pending",
        "pod image-pull-test: expected phase Pending after a failed pull, got {phase}"
    );
    Ok(())
}

/// Waits until pod `image-pull-test` runs or fails to pull; when its container did not start,
/// fails with "pod image-pull-test on node N: `what`: reason: message".
///
/// The two cases that expect a pull to work wait and judge the same way.
async fn expect_pulled(f: &Framework, what: &str) -> CaseResult {
    let failures = StartFailures::default();
    let p = wait_pod(
        f,
        "image-pull-test",
        |p: Option<&Pod>| {
            p.is_some_and(|p| {
                p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") || failures.lasting(p)
            })
        },
        "to be Running (or to fail pulling twice)",
        crate::framework::POD_START_TIMEOUT,
    )
    .await?;
    if let Some((reason, message)) = start_failure(&p) {
        crate::fail!(
            "pod image-pull-test on node {}: {what}: {reason}: {message}",
            pod_node(&p)
        );
    }
    Ok(())
}

/// Upstream runtime.go "should not be able to pull image from invalid registry".
async fn pull_invalid_registry(f: &Framework) -> CaseResult {
    expect_pull_failure(
        f,
        ContainerBuilder::new("image-pull-test", "invalid-registry-image").args(["pause"]),
    )
    .await
}

/// Upstream runtime.go "should be able to pull image" (agnhost, imagePullPolicy Always).
async fn pull_image(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let c = pull_policy(
        ContainerBuilder::new("image-pull-test", "agnhost").args(["pause"]),
        "Always",
    );
    f.create_pod(&pull_pod("image-pull-test", os, c)).await?;
    expect_pulled(f, &format!("image {} was not pulled", f.image("agnhost", os)?)).await
}

/// Upstream runtime.go "should not be able to pull from private registry without secret".
async fn pull_private_no_secret(f: &Framework) -> CaseResult {
    expect_pull_failure(
        f,
        ContainerBuilder::new("image-pull-test", "authenticated").args(["pause"]),
    )
    .await
}

/// Where the registry credentials for [`PULL_PRIVATE_WITH_SECRET`] come from on a real cluster:
/// a base64 `user:password` for the private registry (upstream hard-codes a read-only key for
/// its `authenticated-image-pulling` repositories). The simulated registry accepts any
/// credentials for the right host and refuses the image without them.
const PRIVATE_REGISTRY_AUTH_ENV: &str = "CROSSCONF_PRIVATE_REGISTRY_AUTH";

/// The registry host of an image reference (`gcr.io/x/y:1` → `gcr.io`; Docker Hub by default).
fn registry_host(reference: &str) -> String {
    match reference.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => first.to_string(),
        _ => "docker.io".to_string(),
    }
}

/// Upstream runtime.go "should be able to pull from private registry with secret": a
/// `kubernetes.io/dockerconfigjson` secret for the private registry, named in the pod's
/// `imagePullSecrets`, lets the kubelet pull the authenticated image, and the container runs.
async fn pull_private_with_secret(f: &Framework) -> CaseResult {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{LocalObjectReference, Secret};
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let image = f.image("authenticated", os)?;
    let host = registry_host(&image);
    let auth = std::env::var(PRIVATE_REGISTRY_AUTH_ENV).unwrap_or_else(|_| "ZTJlOnRlc3Q=".into());
    let config = serde_json::json!({"auths": {format!("https://{host}"): {"auth": auth}}});
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("image-pull-secret".into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_string(),
            ByteString(config.to_string().into_bytes()),
        )])),
        ..Default::default()
    };
    f.step(format!("creating pull secret image-pull-secret for registry {host}"));
    f.api::<Secret>()
        .create(&kube::api::PostParams::default(), &secret)
        .await?;
    let c = pull_policy(
        ContainerBuilder::new("image-pull-test", "authenticated").command(os.shell(os.idle_script())),
        "Always",
    );
    let pod = pull_pod("image-pull-test", os, c).edit_spec(|spec| {
        spec.image_pull_secrets = Some(vec![LocalObjectReference {
            name: "image-pull-secret".into(),
        }]);
    });
    f.create_pod(&pod).await?;
    expect_pulled(
        f,
        &format!("private image {image} was not pulled with pull secret image-pull-secret"),
    )
    .await
}

/// Sums the `count` of the pod's events with `reason` (the kubelet aggregates repeats).
fn count_reason(seen: &Mutex<BTreeMap<String, i32>>, e: &k8s_openapi::api::core::v1::Event, reason: &str) -> i32 {
    let mut seen = seen.lock().expect("event counts");
    if e.reason.as_deref() == Some(reason) {
        seen.insert(e.metadata.name.clone().unwrap_or_default(), e.count.unwrap_or(1).max(1));
    }
    seen.values().sum()
}

/// imagePullPolicy Always: a container that exits and restarts is pulled at each start, so the
/// pod collects at least two `Pulling` events.
async fn policy_always(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let c = pull_policy(
        ContainerBuilder::new("c", "agnhost").command(os.shell("exit 0")),
        "Always",
    );
    f.create_pod(&PodBuilder::new("always", os).container(c)).await?;
    f.wait_for(
        &f.api::<Pod>(),
        "always",
        conditions::restarted_at_least(1),
        "to restart once",
    )
    .await?;
    let seen = Mutex::new(BTreeMap::new());
    f.wait_pod_event("always", "Pulling counted twice", Duration::from_secs(120), |e| {
        count_reason(&seen, e, "Pulling") >= 2
    })
    .await?;
    Ok(())
}

/// Starts `pod` on `node` with `policy` for logical image agnhost and waits until Ready.
async fn start_with_policy(
    f: &Framework,
    pod: &str,
    os: Os,
    node: &str,
    image: ContainerBuilder,
    policy: &'static str,
) -> Result<Pod, CaseError> {
    let c = pull_policy(image, policy);
    f.create_pod_ready(&PodBuilder::new(pod, os).on_node(node).container(c))
        .await
}

/// imagePullPolicy IfNotPresent: after one pod ran the image on a node, a second pod on that
/// node starts without a `Pulling` event and with "already present on machine".
async fn policy_if_not_present(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let node = &nodes[0].name;
    let image = || ContainerBuilder::new("c", "agnhost").args(["pause"]);
    start_with_policy(f, "first", os, node, image(), "IfNotPresent").await?;
    start_with_policy(f, "second", os, node, image(), "IfNotPresent").await?;
    f.wait_pod_event(
        "second",
        "Pulled \"already present on machine\"",
        Duration::from_secs(60),
        |e| {
            e.reason.as_deref() == Some("Pulled")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("already present on machine"))
        },
    )
    .await?;
    let pulling: Vec<String> = f
        .pod_events("second")
        .await?
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Pulling"))
        .map(describe_event)
        .collect();
    crate::ensure!(
        pulling.is_empty(),
        "pod second on node {node}: image already present, yet IfNotPresent pulled it: {pulling:?}"
    );
    Ok(())
}

/// imagePullPolicy Never with an image the node has (a first pod made sure of it): starts.
async fn policy_never_cached(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let node = &nodes[0].name;
    let image = || ContainerBuilder::new("c", "agnhost").args(["pause"]);
    start_with_policy(f, "cache", os, node, image(), "IfNotPresent").await?;
    start_with_policy(f, "never", os, node, image(), "Never")
        .await
        .map_err(|e| {
            e.context(format!(
                "imagePullPolicy Never on node {node}, image cached by pod cache"
            ))
        })?;
    Ok(())
}

/// `reference` with its tag replaced by `tag`.
pub(crate) fn with_tag(reference: &str, tag: &str) -> String {
    let slash = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[slash..].rfind(':') {
        Some(i) => format!("{}:{tag}", &reference[..slash + i]),
        None => format!("{reference}:{tag}"),
    }
}

/// imagePullPolicy Never with an image no node has: `ErrImageNeverPull`.
async fn policy_never_uncached(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let reference = with_tag(&f.image("agnhost", os)?, "0.0.0-crossconf-never-pulled");
    let c = pull_policy(ContainerBuilder::literal("c", &reference).args(["pause"]), "Never");
    f.create_pod(&PodBuilder::new("never", os).container(c)).await?;
    f.wait_for_within(
        &f.api::<Pod>(),
        "never",
        conditions::has_waiting_reason("ErrImageNeverPull"),
        "to wait with ErrImageNeverPull",
        crate::framework::POD_START_TIMEOUT,
    )
    .await?;
    Ok(())
}

/// The reason and message of the first container that failed to start (waiting with an error
/// reason, or terminated), if any.
fn start_failure(pod: &Pod) -> Option<(String, String)> {
    let status = pod.status.as_ref()?;
    for cs in status.container_statuses.iter().flatten() {
        let state = cs.state.as_ref()?;
        if let Some(w) = &state.waiting {
            let reason = w.reason.clone().unwrap_or_default();
            if !matches!(reason.as_str(), "" | "ContainerCreating" | "PodInitializing") {
                return Some((reason, w.message.clone().unwrap_or_default()));
            }
        }
        if let Some(t) = &state.terminated
            && t.exit_code != 0
        {
            return Some((
                t.reason.clone().unwrap_or_default(),
                t.message.clone().unwrap_or_default(),
            ));
        }
    }
    None
}

/// Counts a pod's start failures across the kubelet's retries, so that a transient one (a
/// registry answering 503 once) is waited out while a lasting one still ends the wait early: on
/// its second occurrence after a back-off, or at once when it is not a pull failure.
#[derive(Default)]
struct StartFailures {
    /// The last failure reason seen and how many failures began.
    seen: Mutex<(Option<String>, u32)>,
}

impl StartFailures {
    /// Notes `pod`'s state; whether its start failure has proved lasting.
    fn lasting(&self, pod: &Pod) -> bool {
        let now = start_failure(pod).map(|(reason, _)| reason);
        let terminated = pod
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
            .any(|c| c.state.as_ref().is_some_and(|st| st.terminated.is_some()));
        let failing = now.as_deref().is_some_and(|r| !r.ends_with("BackOff"));
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if failing && seen.0 != now {
            seen.1 += 1;
        }
        // Only a failed pull may be the registry's passing trouble; any other start failure
        // (CreateContainerError, ErrImageNeverPull, a terminated container) is lasting at once.
        let lasting = (failing && (terminated || now.as_deref() != Some("ErrImagePull"))) || seen.1 >= 2;
        seen.0 = now;
        lasting
    }
}

/// Creates `pod` with `container` on `node`, waits for its container to fail to start, and
/// checks the message names the mismatch (contains one of `hints`, case-insensitively).
async fn expect_mismatch(
    f: &Framework,
    pod: &str,
    node: &str,
    container: ContainerBuilder,
    hints: &[String],
) -> CaseResult {
    let os = f.target_os();
    f.create_pod(
        &PodBuilder::new(pod, os)
            .on_node(node)
            .restart_policy("Never")
            .container(container),
    )
    .await?;
    let names_mismatch = |message: &str| {
        let lower = message.to_ascii_lowercase();
        hints.iter().any(|h| lower.contains(&h.to_ascii_lowercase()))
    };
    let failures = StartFailures::default();
    let p = wait_pod(
        f,
        pod,
        |p: Option<&Pod>| {
            p.is_some_and(|p| start_failure(p).is_some_and(|(_, m)| names_mismatch(&m)) || failures.lasting(p))
        },
        "to fail to start its container, naming the mismatch",
        crate::framework::POD_START_TIMEOUT,
    )
    .await?;
    let (reason, message) = start_failure(&p).unwrap_or_default();
    crate::ensure!(
        names_mismatch(&message),
        "pod {pod} on node {node} failed with {reason}, but the message does not name the mismatch (expected one of {hints:?}): {message:?}"
    );
    Ok(())
}

/// A Linux-only image on a Windows node fails with a reason naming the OS mismatch, while the
/// Windows variant of agnhost runs on the same node.
async fn compat_linux_image(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let node = &nodes[0].name;
    let linux_ref = f.image("linux-only", os.other())?;
    expect_mismatch(
        f,
        "linux-image",
        node,
        ContainerBuilder::literal("c", &linux_ref),
        &[
            os.other().as_str().into(),
            "no matching manifest".into(),
            "platform".into(),
        ],
    )
    .await?;
    f.create_pod_ready(
        &PodBuilder::new("matching", os)
            .on_node(node)
            .container(ContainerBuilder::new("c", "agnhost").args(["pause"])),
    )
    .await
    .map_err(|e| e.context(format!("control: the matching agnhost image on node {node}")))?;
    Ok(())
}

/// A nanoserver image of another Windows build fails under process isolation with a reason
/// naming the build mismatch, while the node's own build runs.
async fn compat_other_build(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let node = &nodes[0];
    let build = node
        .windows_build
        .clone()
        .ok_or_else(|| CaseError::failed(format!("node {} has no {} label", node.name, os::WINDOWS_BUILD_LABEL)))?;
    // An older image on a newer host (and a newer one on the oldest) never runs with process
    // isolation; 2025 hosts run ltsc2022 images, so they get ltsc2019.
    let (other_build, other_tag) = if build == "10.0.17763" {
        ("10.0.20348", "ltsc2022")
    } else {
        ("10.0.17763", "ltsc2019")
    };
    let own = f.image("nanoserver", os)?;
    let other = with_tag(&own, other_tag);
    expect_mismatch(
        f,
        "other-build",
        &node.name,
        ContainerBuilder::literal("c", &other).command(os.shell("echo hi")),
        &[other_build.into(), other_tag.into(), "does not match the host".into()],
    )
    .await?;
    let done = f
        .run_pod_to_completion(
            &PodBuilder::new("own-build", os)
                .on_node(&node.name)
                .container(ContainerBuilder::literal("c", &own).command(os.shell("echo hi"))),
        )
        .await?;
    let phase = done.status.and_then(|s| s.phase).unwrap_or_default();
    crate::ensure!(
        phase == "Succeeded",
        "control: {own} on node {} (build {build}) ended {phase}",
        node.name
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_tags_not_registry_ports() {
        assert_eq!(
            with_tag("registry.k8s.io/e2e-test-images/agnhost:2.52", "x"),
            "registry.k8s.io/e2e-test-images/agnhost:x"
        );
        assert_eq!(with_tag("localhost:5000/agnhost", "x"), "localhost:5000/agnhost:x");
        assert_eq!(
            with_tag("mcr.microsoft.com/windows/nanoserver:ltsc2022", "ltsc2019"),
            "mcr.microsoft.com/windows/nanoserver:ltsc2019"
        );
    }

    #[test]
    fn start_failure_ignores_creating() {
        let p: Pod = serde_json::from_value(serde_json::json!({"status": {"containerStatuses": [
            {"name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ContainerCreating"}}}]}}))
        .unwrap();
        assert_eq!(start_failure(&p), None);
        let q: Pod = serde_json::from_value(serde_json::json!({"status": {"containerStatuses": [
            {"name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ErrImagePull", "message": "no matching manifest for windows/amd64"}}}]}}))
        .unwrap();
        assert_eq!(start_failure(&q).unwrap().0, "ErrImagePull");
    }
}
