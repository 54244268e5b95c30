//! What a Windows node does with a pod: kubelet stats, image pulls and pull policies, image
//! compatibility, CPU and memory limits, allocatable memory, start-up latency (density) and the
//! container lifecycle (exit codes, grace period, preStop).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Container, HTTPGetAction, Lifecycle, LifecycleHandler, Node, Pod, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::DeleteParams;
use kube::runtime::wait::Condition;
use serde::Deserialize;

use crate::catalog::{Case, Kind};
use crate::framework::netexec::{HTTP_PORT, netexec_pod};
use crate::framework::services::{POLL_INTERVAL, describe_event};
use crate::framework::wait::conditions;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, pod_ip, pod_node};
use crate::os::{self, Os};

/// Upstream kubelet_stats.go, 10 pods on one node, 5 reads.
pub const STATS_10_PODS: &str = "[sig-windows] [Feature:Windows] Kubelet-Stats [Serial] Kubelet stats collection for Windows nodes when running 10 pods should return within 10 seconds";
/// Upstream kubelet_stats.go, 3 pods on one node, 1 read.
pub const STATS_3_PODS: &str = "[sig-windows] [Feature:Windows] Kubelet-Stats Kubelet stats collection for Windows nodes when running 3 pods should return within 10 seconds";
/// Upstream kubelet_stats.go: the node reports a bootID.
pub const STATS_BOOT_ID: &str = "[sig-windows] [Feature:Windows] Kubelet-Stats Kubelet stats collection for Windows nodes when windows is booted should return bootid within 10 seconds";
/// Beyond upstream: node and pod figures present, and CPU time moving.
pub const STATS_FIGURES: &str = "[sig-windows] [Feature:Windows] Kubelet-Stats Kubelet stats collection for Windows nodes should report node CPU, memory, filesystem and network figures and pod network figures";

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

/// Upstream cpu_limits.go.
pub const CPU_LIMITS: &str = "[sig-windows] [Feature:Windows] Cpu Resources [Serial] Container limits should not be exceeded after waiting 2 minutes";
/// Upstream memory_limits.go: allocatable = capacity − reserved − eviction thresholds.
pub const MEMORY_ALLOCATABLE: &str = "[sig-windows] [Feature:Windows] Memory Limits [Serial] [Slow] Allocatable node memory should be equal to a calculated allocatable memory value";
/// Upstream memory_limits.go: a pod past allocatable is not scheduled.
pub const MEMORY_PAST_ALLOCATABLE: &str = "[sig-windows] [Feature:Windows] Memory Limits [Serial] [Slow] attempt to deploy past allocatable memory limits should fail deployments of pods once there isn't enough memory";
/// Upstream density.go.
pub const DENSITY: &str = "[sig-windows] [Feature:Windows] Density [Serial] [Slow] create a batch of pods latency/resource should be within limit when create 10 pods with 0s interval";

/// Exit codes reported.
pub const EXIT_CODES: &str =
    "[sig-windows] Pod lifecycle should report a container's exit code and the pod phase it implies";
/// Termination within the grace period.
pub const GRACE_PERIOD: &str =
    "[sig-windows] Pod lifecycle should stop a deleted pod within its terminationGracePeriodSeconds";
/// preStop hooks run before the container stops.
pub const PRE_STOP: &str = "[sig-windows] Pod lifecycle should run a preStop http hook before the container stops";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(STATS_10_PODS, Kind::WindowsSpecific, stats_10_pods),
        crate::case!(STATS_3_PODS, Kind::WindowsSpecific, stats_3_pods),
        crate::case!(STATS_BOOT_ID, Kind::WindowsSpecific, stats_boot_id),
        crate::case!(STATS_FIGURES, Kind::WindowsSpecific, stats_figures),
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
        crate::case!(CPU_LIMITS, Kind::WindowsSpecific, cpu_limits),
        crate::case!(MEMORY_ALLOCATABLE, Kind::WindowsSpecific, memory_allocatable),
        crate::case!(MEMORY_PAST_ALLOCATABLE, Kind::WindowsSpecific, memory_past_allocatable),
        crate::case!(DENSITY, Kind::WindowsSpecific, density),
        crate::case!(EXIT_CODES, Kind::Substitute, exit_codes),
        crate::case!(GRACE_PERIOD, Kind::Substitute, grace_period),
        crate::case!(PRE_STOP, Kind::Substitute, pre_stop),
    ]
}

// ---------------------------------------------------------------------------------------------
// Kubelet stats
// ---------------------------------------------------------------------------------------------

/// Upstream's bound on one `/stats/summary` call: the default scrape timeout of
/// metrics-server and kube-prometheus.
const STATS_CALL_LIMIT: Duration = Duration::from_secs(10);

/// Upstream `newKubeletStatsTestPods`: `n` pods pinned to `node`, each with an init container
/// and a long-running container.
async fn stats_pods(f: &Framework, os: Os, node: &str, n: usize) -> CaseResult {
    let builders: Vec<PodBuilder> = (0..n)
        .map(|i| {
            PodBuilder::new(&format!("statscollectiontest-{i}"), os)
                .label("testapp", "stats-collection")
                .on_node(node)
                .init_container(ContainerBuilder::new("init-container", "agnhost").command(os.shell("exit 0")))
                .container(ContainerBuilder::new("stat-container", "agnhost").args(["pause"]))
        })
        .collect();
    for b in &builders {
        f.create_pod(b).await?;
    }
    for b in &builders {
        f.wait_pod_ready(b.name()).await?;
    }
    Ok(())
}

async fn kubelet_stats(f: &Framework, n: usize, iterations: u32) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let node = nodes[0].name.clone();
    f.step(format!("scheduling {n} pods on node {node}"));
    stats_pods(f, os, &node, n).await?;
    let mut total = Duration::ZERO;
    for i in 0..iterations {
        let start = Instant::now();
        let summary = f.stats_summary(&node).await?;
        total += start.elapsed();
        let pods: Vec<_> = summary.pods_in(f.ns()).collect();
        crate::ensure!(
            pods.len() == n,
            "node {node} read {}: expected stats for {n} pods of namespace {}, found {}: {:?}",
            i + 1,
            f.ns(),
            pods.len(),
            pods.iter().map(|p| p.pod_ref.name.as_str()).collect::<Vec<_>>()
        );
        let problems: Vec<String> = pods.iter().flat_map(|p| p.problems()).collect();
        crate::ensure!(
            problems.is_empty(),
            "node {node} read {}: {}",
            i + 1,
            problems.join("; ")
        );
    }
    let mean = total / iterations.max(1);
    f.property("stats_summary_mean_ms", mean.as_millis());
    crate::ensure!(
        mean <= STATS_CALL_LIMIT,
        "collecting kubelet stats of node {node} took {mean:?} on average over {iterations} reads, more than {STATS_CALL_LIMIT:?}"
    );
    Ok(())
}

/// Upstream kubelet_stats.go "when running 10 pods should return within 10 seconds".
async fn stats_10_pods(f: &Framework) -> CaseResult {
    kubelet_stats(f, 10, 5).await
}

/// Upstream kubelet_stats.go "when running 3 pods should return within 10 seconds".
async fn stats_3_pods(f: &Framework) -> CaseResult {
    kubelet_stats(f, 3, 1).await
}

/// Upstream kubelet_stats.go "when windows is booted should return bootid within 10 seconds":
/// every node of the target OS reports `status.nodeInfo.bootID`.
async fn stats_boot_id(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    for n in &nodes {
        let node = f.api_all::<Node>().get(&n.name).await?;
        let boot_id = node
            .status
            .and_then(|s| s.node_info)
            .map(|i| i.boot_id)
            .unwrap_or_default();
        crate::ensure!(
            !boot_id.is_empty(),
            "node {}: expected status.nodeInfo.bootID, got none",
            n.name
        );
    }
    Ok(())
}

/// Beyond upstream: node CPU, memory, filesystem and network figures are present and node CPU
/// time moves between reads; a running pod has network figures.
async fn stats_figures(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let node = nodes[0].name.clone();
    stats_pods(f, os, &node, 1).await?;
    let first = f.stats_summary(&node).await?;
    let n = &first.node;
    let cpu0 = n.cpu.as_ref().and_then(|c| c.usage_core_nano_seconds).unwrap_or(0);
    let mut missing = Vec::new();
    if cpu0 == 0 {
        missing.push("cpu.usageCoreNanoSeconds".to_string());
    }
    if n.memory.as_ref().and_then(|m| m.working_set_bytes).unwrap_or(0) == 0 {
        missing.push("memory.workingSetBytes".into());
    }
    if n.fs.as_ref().and_then(|m| m.capacity_bytes).unwrap_or(0) == 0 {
        missing.push("fs.capacityBytes".into());
    }
    if n.fs.as_ref().and_then(|m| m.available_bytes).unwrap_or(0) == 0 {
        missing.push("fs.availableBytes".into());
    }
    if n.network.as_ref().and_then(|m| m.rx_bytes).is_none() || n.network.as_ref().and_then(|m| m.tx_bytes).is_none() {
        missing.push("network.rxBytes/txBytes".into());
    }
    let pods: Vec<_> = first.pods_in(f.ns()).collect();
    crate::ensure!(
        pods.len() == 1,
        "node {node}: expected stats for 1 pod of namespace {}, found {}",
        f.ns(),
        pods.len()
    );
    if pods[0].network.as_ref().and_then(|m| m.rx_bytes).is_none() {
        missing.push(format!("pod {} network.rxBytes", pods[0].pod_ref.name));
    }
    crate::ensure!(
        missing.is_empty(),
        "node {node} /stats/summary lacks or zeroes: {}",
        missing.join(", ")
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    loop {
        tick.tick().await;
        let now = f.stats_summary(&node).await?;
        let cpu = now
            .node
            .cpu
            .as_ref()
            .and_then(|c| c.usage_core_nano_seconds)
            .unwrap_or(0);
        if cpu > cpu0 {
            return Ok(());
        }
        crate::ensure!(
            Instant::now() < deadline,
            "node {node}: cpu.usageCoreNanoSeconds stayed at {cpu0} (now {cpu}) for 60s; the figures do not move"
        );
    }
}

/// Waits, at most `within`, until `cond` holds for pod `name`; returns the pod.
///
/// The waits of this module all want the pod itself afterwards and fail the same way when it
/// is gone; this is that wait.
async fn wait_pod(
    f: &Framework,
    name: &str,
    cond: impl Condition<Pod>,
    why: &str,
    within: Duration,
) -> Result<Pod, CaseError> {
    f.wait_for_within(&f.api::<Pod>(), name, cond, why, within)
        .await?
        .ok_or_else(|| CaseError::failed(format!("pod {name} vanished")))
}

// ---------------------------------------------------------------------------------------------
// Image pulls
// ---------------------------------------------------------------------------------------------

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
    let p = wait_pod(
        f,
        "image-pull-test",
        conditions::is_pod_phase("Running").or(pull_failed()),
        "to be Running (or to fail pulling)",
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

// ---------------------------------------------------------------------------------------------
// Image compatibility
// ---------------------------------------------------------------------------------------------

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
    let p = wait_pod(
        f,
        pod,
        |p: Option<&Pod>| p.is_some_and(|p| start_failure(p).is_some()),
        "to fail to start its container",
        crate::framework::POD_START_TIMEOUT,
    )
    .await?;
    let (reason, message) = start_failure(&p).unwrap_or_default();
    let lower = message.to_ascii_lowercase();
    crate::ensure!(
        hints.iter().any(|h| lower.contains(&h.to_ascii_lowercase())),
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

// ---------------------------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------------------------

/// The bytes of a memory quantity (`1Gi`, `500M`, `1024`, `1e3`), rounded up.
pub(crate) fn quantity_bytes(q: &str) -> Option<i128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let value: f64 = num.parse().ok()?;
    let factor: f64 = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse().ok()?),
        _ => return None,
    };
    Some((value * factor).ceil() as i128)
}

/// The part of `/configz` the memory cases read.
#[derive(Debug, Default, Deserialize)]
struct Configz {
    #[serde(default)]
    kubeletconfig: KubeletConfig,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KubeletConfig {
    #[serde(default)]
    system_reserved: BTreeMap<String, String>,
    #[serde(default)]
    kube_reserved: BTreeMap<String, String>,
    #[serde(default)]
    eviction_hard: BTreeMap<String, String>,
    #[serde(default)]
    eviction_soft: BTreeMap<String, String>,
}

/// Upstream memory_limits.go `checkNodeAllocatableTest`: allocatable memory =
/// capacity − systemReserved − kubeReserved − evictionSoft − evictionHard (`memory.available`).
fn calculated_allocatable(capacity: i128, cfg: &KubeletConfig) -> Result<i128, String> {
    let q = |m: &BTreeMap<String, String>, key: &str| -> Result<i128, String> {
        match m.get(key) {
            None => Ok(0),
            Some(v) => quantity_bytes(v).ok_or_else(|| format!("unparseable quantity {v:?} for {key}")),
        }
    };
    Ok(capacity
        - q(&cfg.system_reserved, "memory")?
        - q(&cfg.kube_reserved, "memory")?
        - q(&cfg.eviction_soft, "memory.available")?
        - q(&cfg.eviction_hard, "memory.available")?)
}

fn node_memory(node: &Node, field: &str) -> Option<i128> {
    let status = node.status.as_ref()?;
    let list = if field == "capacity" {
        status.capacity.as_ref()?
    } else {
        status.allocatable.as_ref()?
    };
    quantity_bytes(&list.get("memory")?.0)
}

/// Upstream memory_limits.go "Allocatable node memory should be equal to a calculated
/// allocatable memory value", for every node of the target OS.
async fn memory_allocatable(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    for n in &nodes {
        let node = f.api_all::<Node>().get(&n.name).await?;
        let capacity = node_memory(&node, "capacity")
            .ok_or_else(|| CaseError::failed(format!("node {}: no memory capacity", n.name)))?;
        let allocatable = node_memory(&node, "allocatable")
            .ok_or_else(|| CaseError::failed(format!("node {}: no allocatable memory", n.name)))?;
        let text = f.node_proxy_get(&n.name, "configz").await?;
        let cfg: Configz = serde_json::from_str(&text).map_err(|e| {
            CaseError::failed(format!(
                "node {}: /configz is not a kubelet configuration ({e})",
                n.name
            ))
        })?;
        let calculated = calculated_allocatable(capacity, &cfg.kubeletconfig)
            .map_err(|e| CaseError::failed(format!("node {}: {e}", n.name)))?;
        crate::ensure!(
            allocatable == calculated,
            "node {}: allocatable memory {allocatable} != capacity {capacity} - reserved - eviction thresholds = {calculated} ({:?})",
            n.name,
            cfg.kubeletconfig
        );
    }
    Ok(())
}

/// Upstream memory_limits.go "should fail deployments of pods once there isn't enough
/// memory": a pod requesting more than a node's allocatable memory, pinned to it by hostname,
/// is unschedulable with a `FailedScheduling` event naming memory.
async fn memory_past_allocatable(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let n = &nodes[0];
    let node = f.api_all::<Node>().get(&n.name).await?;
    let allocatable = node_memory(&node, "allocatable")
        .ok_or_else(|| CaseError::failed(format!("node {}: no allocatable memory", n.name)))?;
    let request = Quantity(format!("{}", allocatable + 1024 * 1024));
    let hostname = n.name.clone();
    let b = PodBuilder::new("mem-hog", os)
        .container(
            ContainerBuilder::new("c", "agnhost")
                .args(["pause"])
                .with(move |c: &mut Container| {
                    c.resources = Some(ResourceRequirements {
                        requests: Some(BTreeMap::from([("memory".to_string(), request.clone())])),
                        ..Default::default()
                    });
                }),
        )
        .edit_spec(move |spec| {
            spec.node_selector
                .get_or_insert_with(BTreeMap::new)
                .insert(os::HOSTNAME_LABEL.into(), hostname.clone());
        });
    f.create_pod(&b).await?;
    f.wait_for_within(
        &f.api::<Pod>(),
        "mem-hog",
        conditions::is_unschedulable(),
        "to be unschedulable",
        Duration::from_secs(120),
    )
    .await?;
    let e = f
        .wait_pod_event(
            "mem-hog",
            "FailedScheduling naming memory",
            Duration::from_secs(60),
            |e| {
                e.reason.as_deref() == Some("FailedScheduling")
                    && e.message
                        .as_deref()
                        .is_some_and(|m| m.to_ascii_lowercase().contains("memory"))
            },
        )
        .await?;
    f.step(format!("scheduler: {}", describe_event(&e)));
    Ok(())
}

/// Upstream cpu_limits.go "Container limits should not be exceeded after waiting 2 minutes":
/// two CPU-burning pods limited to `0.5` and `500m` cores; for two minutes, every stats read
/// shows their usage below 0.525 cores, and at least one read shows it above 0.
async fn cpu_limits(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let script = "foreach ($loopnumber in 1..8) { Start-Job -ScriptBlock { $result = 1; foreach($mm in 1..2147483647){$res1=1;foreach($num in 1..2147483647){$res1=$mm*$num*1340371};$res1} } } ; get-job | wait-job";
    let mut pods = Vec::new();
    for (name, limit) in [("cpulimittest-decimal", "0.5"), ("cpulimittest-milli", "500m")] {
        let limits = BTreeMap::from([
            ("cpu".to_string(), Quantity(limit.into())),
            ("memory".to_string(), Quantity("1Gi".into())),
        ]);
        let b = PodBuilder::new(name, os).label("testapp", "cpuburn").container(
            ContainerBuilder::new(name, "cpu-burner")
                .command(["powershell.exe", "-Command", script])
                .with(move |c: &mut Container| {
                    c.resources = Some(ResourceRequirements {
                        limits: Some(limits.clone()),
                        ..Default::default()
                    });
                }),
        );
        f.create_pod(&b).await?;
        pods.push(name);
    }
    let mut placed = Vec::new();
    for name in &pods {
        let pod = wait_pod(
            f,
            name,
            conditions::is_pod_phase("Running"),
            "to be Running",
            crate::framework::POD_START_TIMEOUT,
        )
        .await?;
        placed.push((name.to_string(), pod_node(&pod)));
    }
    let limit = 0.5 * 1.05;
    let mut max_seen: BTreeMap<String, f64> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(120).min(f.remaining().saturating_sub(Duration::from_secs(30)));
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    while Instant::now() < deadline {
        tick.tick().await;
        for (name, node) in &placed {
            let summary = f.stats_summary(node).await?;
            let stats = summary
                .pods_in(f.ns())
                .find(|p| &p.pod_ref.name == name)
                .ok_or_else(|| {
                    CaseError::failed(format!("pod {name} not found in the stats summary of node {node}"))
                })?;
            let cores = stats.cpu.as_ref().and_then(|c| c.usage_nano_cores).unwrap_or(0) as f64 * 1e-9;
            let within_limit = cores < limit;
            crate::ensure!(
                within_limit,
                "pod {name} on node {node} uses {cores:.3} cores, exceeding its 0.5-core limit by more than 5%"
            );
            let m = max_seen.entry(name.clone()).or_insert(0.0);
            *m = m.max(cores);
        }
        let running = f.api::<Pod>().list(&Default::default()).await?;
        for p in running.items {
            let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
            crate::ensure!(
                phase == "Running",
                "pod {} is {phase}, expected Running",
                p.metadata.name.unwrap_or_default()
            );
        }
    }
    for (name, node) in &placed {
        let max = max_seen.get(name).copied().unwrap_or(0.0);
        f.property(format!("{name}_max_cores"), format!("{max:.3}"));
        let used = max > 0.0;
        crate::ensure!(
            used,
            "pod {name} on node {node} reported usage 0 cores for 2 minutes, expected > 0"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Density
// ---------------------------------------------------------------------------------------------

/// Upstream density.go limits for Windows pod start-up latency (p50, p90, p99).
pub const DENSITY_LIMITS: [(u32, Duration); 3] = [
    (50, Duration::from_secs(30)),
    (90, Duration::from_secs(54)),
    (99, Duration::from_secs(59)),
];

/// The nearest-rank percentile `p` of sorted `values`.
pub(crate) fn percentile(sorted: &[f64], p: u32) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (f64::from(p) / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Aborts a spawned task when dropped, so a case that returns early leaves no watch behind.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Upstream density.go "should be within limit when create 10 pods with 0s interval": N pause
/// pods (`--density-pods`, default 10) created at once; creation→running latency p50/p90/p99
/// recorded as properties and in `density-<namespace>.json`, and held to 30/54/59 s.
///
/// The latency is upstream's "e2e lag": from just before the runner's create call to the moment
/// its watch, opened before the first create, sees the pod Running. Both ends are the runner's
/// own clock, so sub-second starts are measured (the pods' timestamps have one-second
/// resolution and would report them all as 0).
async fn density(f: &Framework) -> CaseResult {
    use futures::StreamExt;
    use kube::runtime::watcher;

    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let n = f.settings().density_pods.unwrap_or(10).max(1);
    let builders: Vec<PodBuilder> = (0..n)
        .map(|i| {
            PodBuilder::new(&format!("density-{i}"), os)
                .label("type", "density")
                .container(ContainerBuilder::new("pause", "pause"))
        })
        .collect();
    let running: std::sync::Arc<Mutex<BTreeMap<String, Instant>>> = Default::default();
    let (listed_tx, listed_rx) = tokio::sync::oneshot::channel::<()>();
    let watch = {
        let running = running.clone();
        let config = watcher::Config::default().labels("type=density");
        let mut stream = watcher::watcher(f.api::<Pod>(), config).boxed();
        tokio::spawn(async move {
            let mut listed_tx = Some(listed_tx);
            while let Some(event) = stream.next().await {
                let pod = match event {
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = listed_tx.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::debug!(error = %e, "density watch error");
                        continue;
                    }
                };
                if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
                    let mut seen = running.lock().expect("density lock");
                    seen.entry(pod.metadata.name.clone().unwrap_or_default())
                        .or_insert_with(Instant::now);
                    if seen.len() >= n {
                        return;
                    }
                }
            }
        })
    };
    let _stop_watch = AbortOnDrop(watch.abort_handle());
    tokio::time::timeout(f.remaining(), listed_rx)
        .await
        .map_err(|_| CaseError::failed("the watch on the density pods never listed them"))?
        .map_err(|_| CaseError::failed("the watch on the density pods ended before it listed them"))?;
    let mut created = BTreeMap::new();
    for b in &builders {
        created.insert(b.name().to_string(), Instant::now());
        f.create_pod(b).await?;
    }
    let waited = Instant::now();
    if tokio::time::timeout(f.remaining(), watch).await.is_err() {
        let seen = running.lock().expect("density lock").clone();
        let pods = f.api::<Pod>().list(&Default::default()).await?;
        let pending: Vec<String> = pods
            .items
            .iter()
            .filter(|p| !seen.contains_key(p.metadata.name.as_deref().unwrap_or_default()))
            .map(|p| {
                format!(
                    "{} ({})",
                    p.metadata.name.clone().unwrap_or_default(),
                    p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
                )
            })
            .collect();
        crate::fail!(
            "{} of {n} density pods Running after {:.1?}; not Running: {}",
            seen.len(),
            waited.elapsed(),
            pending.join(", ")
        );
    }
    let seen = running.lock().expect("density lock").clone();
    let mut latencies = Vec::new();
    for (name, at) in &created {
        let Some(ran) = seen.get(name) else {
            crate::fail!("density pod {name} was never seen Running");
        };
        latencies.push(ran.saturating_duration_since(*at).as_secs_f64());
    }
    latencies.sort_by(f64::total_cmp);
    let mut report = serde_json::Map::new();
    let mut over = Vec::new();
    for (p, limit) in DENSITY_LIMITS {
        let v = percentile(&latencies, p).unwrap_or_default();
        f.property(format!("pod_startup_latency_p{p}_seconds"), format!("{v:.3}"));
        report.insert(format!("p{p}_seconds"), serde_json::json!(v));
        if v > limit.as_secs_f64() {
            over.push(format!("p{p} {v:.1}s > {}s", limit.as_secs()));
        }
    }
    report.insert("pods".into(), serde_json::json!(n));
    report.insert("latencies_seconds".into(), serde_json::json!(latencies));
    let dir = &f.run().artifacts_dir;
    let path = dir.join(format!("density-{}.json", f.ns()));
    let written = tokio::fs::create_dir_all(dir).await.and(
        tokio::fs::write(
            &path,
            serde_json::to_vec_pretty(&serde_json::Value::Object(report)).unwrap_or_default(),
        )
        .await,
    );
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), error = %e, "could not write the density report");
    }
    crate::ensure!(
        over.is_empty(),
        "pod start-up latency over the upstream limits for {n} pods: {}",
        over.join(", ")
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------------------------

fn terminated_exit_code(pod: &Pod) -> Option<i32> {
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find_map(|c| c.state.as_ref()?.terminated.as_ref().map(|t| t.exit_code))
}

/// Exit codes: `exit 0` gives Succeeded with exit code 0, `exit 3` gives Failed with 3.
async fn exit_codes(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    for (name, code, phase) in [("exit-zero", 0, "Succeeded"), ("exit-three", 3, "Failed")] {
        let b = PodBuilder::new(name, os)
            .container(ContainerBuilder::new("c", "agnhost").command(os.shell(&format!("exit {code}"))));
        let pod = f.run_pod_to_completion(&b).await?;
        let got_phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        let got_code = terminated_exit_code(&pod);
        crate::ensure!(
            got_phase == phase && got_code == Some(code),
            "pod {name} on node {}: expected phase {phase} with exit code {code}, got {got_phase} with {got_code:?}",
            pod_node(&pod)
        );
    }
    Ok(())
}

/// Deletes `pod` and waits until it is gone; returns how long that took.
async fn delete_and_wait(f: &Framework, pod: &Pod, within: Duration) -> Result<Duration, CaseError> {
    let start = Instant::now();
    f.delete_pod_and_wait(pod, &DeleteParams::default(), within).await?;
    Ok(start.elapsed())
}

/// Graceful termination: a pod with `terminationGracePeriodSeconds: 5` is gone within the
/// grace period plus 20 s of API and kubelet latency.
async fn grace_period(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let grace = 5;
    let b = PodBuilder::new("graceful", os)
        .grace_period(grace)
        .container(ContainerBuilder::new("c", "agnhost").args(["pause"]));
    let pod = f.create_pod_ready(&b).await?;
    let bound = Duration::from_secs(u64::try_from(grace).unwrap_or(5) + 20);
    let took = delete_and_wait(f, &pod, Duration::from_secs(60)).await?;
    f.property("termination_seconds", format!("{:.1}", took.as_secs_f64()));
    crate::ensure!(
        took <= bound,
        "pod graceful on node {} took {took:?} to terminate, expected at most {bound:?} (grace period {grace}s)",
        pod_node(&pod)
    );
    Ok(())
}

/// preStop: a pod whose preStop hook GETs `/echo?msg=prestop` on a netexec handler pod; after
/// deleting it, the handler has logged the request (upstream container_lifecycle_hook.go).
async fn pre_stop(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.require_nodes(os, 1).await?;
    let handler = f.create_pod_ready(&netexec_pod("pod-handle-http-request", os)).await?;
    let handler_ip = pod_ip(&handler)?;
    let hooked = PodBuilder::new("pod-with-prestop-http-hook", os)
        .grace_period(30)
        .container(
            ContainerBuilder::new("c", "agnhost")
                .args(["pause"])
                .with(move |c: &mut Container| {
                    c.lifecycle = Some(Lifecycle {
                        pre_stop: Some(LifecycleHandler {
                            http_get: Some(HTTPGetAction {
                                host: Some(handler_ip.clone()),
                                path: Some("/echo?msg=prestop".into()),
                                port: IntOrString::Int(i32::from(HTTP_PORT)),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    });
                }),
        );
    let pod = f.create_pod_ready(&hooked).await?;
    delete_and_wait(f, &pod, Duration::from_secs(60)).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    loop {
        tick.tick().await;
        let logs = f.logs("pod-handle-http-request", None).await?;
        if logs.contains("GET /echo?msg=prestop") {
            return Ok(());
        }
        crate::ensure!(
            Instant::now() < deadline,
            "preStop hook of pod pod-with-prestop-http-hook (node {}) never reached handler pod-handle-http-request; handler log ends: {:?}",
            pod_node(&pod),
            logs.lines().rev().take(5).collect::<Vec<_>>()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_to_bytes() {
        assert_eq!(quantity_bytes("1Gi"), Some(1 << 30));
        assert_eq!(quantity_bytes("100Mi"), Some(100 << 20));
        assert_eq!(quantity_bytes("500M"), Some(500_000_000));
        assert_eq!(quantity_bytes("2048"), Some(2048));
        assert_eq!(quantity_bytes("1e3"), Some(1000));
        assert_eq!(quantity_bytes("16303624Ki"), Some(16_303_624 * 1024));
        assert_eq!(quantity_bytes("x"), None);
    }

    #[test]
    fn allocatable_subtracts_reserves_and_thresholds() {
        let cfg = KubeletConfig {
            system_reserved: BTreeMap::from([("memory".into(), "2Gi".into())]),
            kube_reserved: BTreeMap::new(),
            eviction_hard: BTreeMap::from([("memory.available".into(), "500Mi".into())]),
            eviction_soft: BTreeMap::new(),
        };
        assert_eq!(
            calculated_allocatable(8 << 30, &cfg),
            Ok((8 << 30) - (2 << 30) - (500 << 20))
        );
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 50), Some(5.0));
        assert_eq!(percentile(&v, 90), Some(9.0));
        assert_eq!(percentile(&v, 99), Some(10.0));
        assert_eq!(percentile(&[], 50), None);
    }

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
