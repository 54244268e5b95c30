//! `[sig-windows] [Feature:WindowsHostProcessContainers]` (upstream test/e2e/windows/
//! host_process.go): Windows pods whose containers run as processes on the node itself, the
//! way CNI plugins, kube-proxy and CSI node plugins run on Windows today. Each case needs a
//! Windows node whose runtime runs HostProcess containers (containerd 1.6 or later; the
//! in-cluster-config and local-group cases 1.7, as upstream checks), and skips naming what
//! is missing otherwise.
//!
//! Departures from upstream, for clearer failures: where upstream runs a script inside the
//! container that throws on the first mismatch, ours prints what the container sees and the
//! case compares it line by line, so a failure names the expected and the seen value.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    EnvVar, EnvVarSource, HostPathVolumeSource, ObjectFieldSelector, Pod, PodSecurityContext, SecurityContext, Volume,
    WindowsSecurityContextOptions,
};

use crate::catalog::{Case, Kind};
use crate::cluster::NodeInfo;
use crate::framework::workloads::{
    DownwardItem, config_map, config_map_volume, downward_volume, empty_dir_volume, secret, secret_volume,
};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder};
use crate::os::Os;
use crate::{ensure, fail};

const PREFIX: &str = "[sig-windows] [Feature:WindowsHostProcessContainers] HostProcess containers ";
/// Upstream host_process.go It("should run as a process on the host/node").
pub const ON_HOST: &str = "[sig-windows] [Feature:WindowsHostProcessContainers] HostProcess containers should run as a process on the host/node";
/// Upstream It("should support init containers").
pub const INIT: &str =
    "[sig-windows] [Feature:WindowsHostProcessContainers] HostProcess containers should support init containers";
/// Upstream It("should support various volume mount types").
pub const VOLUMES: &str = "[sig-windows] [Feature:WindowsHostProcessContainers] HostProcess containers should support various volume mount types";
/// Upstream It("metrics should report count of started and failed to start HostProcess containers").
pub const METRICS: &str = "[sig-windows] [Feature:WindowsHostProcessContainers] HostProcess containers metrics should report count of started and failed to start HostProcess containers";
/// Upstream It("container stats validation").
pub const STATS: &str =
    "[sig-windows] [Feature:WindowsHostProcessContainers] HostProcess containers container stats validation";
/// Upstream It("should support querying api-server using in-cluster config").
pub const IN_CLUSTER: &str = "[sig-windows] [Feature:WindowsHostProcessContainers] HostProcess containers should support querying api-server using in-cluster config";
/// Upstream It("should run as localgroup accounts").
pub const LOCAL_GROUP: &str =
    "[sig-windows] [Feature:WindowsHostProcessContainers] HostProcess containers should run as localgroup accounts";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    debug_assert!(
        [ON_HOST, INIT, VOLUMES, METRICS, STATS, IN_CLUSTER, LOCAL_GROUP]
            .iter()
            .all(|n| n.starts_with(PREFIX))
    );
    vec![
        crate::case!(ON_HOST, Kind::WindowsSpecific, on_host),
        crate::case!(INIT, Kind::WindowsSpecific, init_containers),
        crate::case!(VOLUMES, Kind::WindowsSpecific, volume_mounts),
        crate::case!(METRICS, Kind::WindowsSpecific, metrics),
        crate::case!(STATS, Kind::WindowsSpecific, stats),
        crate::case!(IN_CLUSTER, Kind::WindowsSpecific, in_cluster_config),
        crate::case!(LOCAL_GROUP, Kind::WindowsSpecific, local_group),
    ]
}

/// Upstream's `User_NTAuthoritySystem`.
pub(crate) const SYSTEM: &str = "NT AUTHORITY\\SYSTEM";
/// Upstream's `User_NTAuthorityLocalService`.
const LOCAL_SERVICE: &str = "NT AUTHORITY\\Local Service";

/// The containerd version of a node (`containerd://1.7.27` → (1, 7)), if it runs containerd.
pub(crate) fn containerd_version(runtime: &str) -> Option<(u32, u32)> {
    let v = runtime.strip_prefix("containerd://")?;
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.trim_start_matches('v').parse().ok()?;
    Some((major, minor))
}

/// A Windows node that runs HostProcess containers with containerd `min` or later (upstream's
/// `SkipUnlessNodeOSDistroIs("windows")`, the feature gate, GA since 1.26, and
/// `skipUnlessContainerdOneSevenOrGreater`); the case skips naming what is missing.
pub(crate) async fn host_process_node(f: &Framework, min: (u32, u32)) -> Result<NodeInfo, CaseError> {
    f.skip_unless(
        f.target_os() == Os::Windows,
        "HostProcess containers run on Windows nodes only",
    )?;
    let nodes = f.require_nodes(Os::Windows, 1).await?;
    let seen: Vec<String> = nodes
        .iter()
        .map(|n| format!("{} ({})", n.name, n.container_runtime))
        .collect();
    nodes
        .into_iter()
        .find(|n| containerd_version(&n.container_runtime).is_some_and(|v| v >= min))
        .ok_or_else(|| {
            f.skip(format!(
                "needs a Windows node running containerd {}.{} or later for HostProcess containers; found {}",
                min.0,
                min.1,
                seen.join(", ")
            ))
        })
}

/// A HostProcess pod (pod-level `hostProcess: true`, `hostNetwork`) running as `user` on
/// `node`.
pub(crate) fn host_process_pod(name: &str, node: &str, user: &str) -> PodBuilder {
    let user = user.to_string();
    PodBuilder::new(name, Os::Windows)
        .host_network()
        .on_node(node)
        .restart_policy("Never")
        .edit_spec(move |spec| {
            spec.security_context
                .get_or_insert_with(PodSecurityContext::default)
                .windows_options = Some(WindowsSecurityContextOptions {
                host_process: Some(true),
                run_as_user_name: Some(user.clone()),
                ..Default::default()
            });
        })
}

/// A busybox container running `command`.
pub(crate) fn busybox(name: &str, command: &[&str]) -> ContainerBuilder {
    ContainerBuilder::new(name, "busybox").command(command.iter().copied())
}

/// How long a HostProcess pod whose sandbox failed gets to recover before the case says so
/// (the kubelet retries sandboxes; a runtime without HostProcess support never succeeds).
const SANDBOX_GRACE: Duration = Duration::from_secs(30);

/// Runs `pod` (restartPolicy Never) to its end and returns it; a sandbox the runtime keeps
/// refusing fails the case with the kubelet's reason instead of a bare timeout.
async fn run_to_end(f: &Framework, pod: &PodBuilder) -> Result<Pod, CaseError> {
    wait_or_sandbox_failure(f, pod.name(), f.run_pod_to_completion(pod)).await
}

/// Awaits `until` (a pod reaching a state), unless pod `name`'s sandbox keeps failing.
pub(crate) async fn wait_or_sandbox_failure<T>(
    f: &Framework,
    name: &str,
    until: impl std::future::Future<Output = Result<T, CaseError>>,
) -> Result<T, CaseError> {
    tokio::pin!(until);
    let sandbox = f.wait_pod_event(name, "a sandbox failure", Duration::from_secs(600), |e| {
        e.reason.as_deref() == Some("FailedCreatePodSandBox")
    });
    tokio::select! {
        r = &mut until => r,
        event = sandbox => {
            // No sandbox failure within the case's time: the pod's own wait decides.
            let Ok(event) = event else { return until.await };
            match tokio::time::timeout(SANDBOX_GRACE, &mut until).await {
                Ok(r) => r,
                Err(_) => fail!(
                    "HostProcess pod {name} has no sandbox {} s after the kubelet reported: {}",
                    SANDBOX_GRACE.as_secs(),
                    crate::framework::services::describe_event(&event)
                ),
            }
        }
    }
}

/// Runs `pod` to its end and requires it Succeeded; returns it.
pub(crate) async fn expect_succeeded(f: &Framework, pod: &PodBuilder, what: &str) -> Result<Pod, CaseError> {
    let done = run_to_end(f, pod).await?;
    let phase = done.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    if phase != "Succeeded" {
        let reasons = container_states(&done);
        fail!(
            "HostProcess pod {} ({what}) ended {phase}, expected Succeeded; containers: {reasons}",
            pod.name()
        );
    }
    Ok(done)
}

/// Every container's state, for a failure message (`name: terminated 128 StartError: ...`).
pub(crate) fn container_states(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    let all = status
        .init_container_statuses
        .unwrap_or_default()
        .into_iter()
        .chain(status.container_statuses.unwrap_or_default());
    all.map(|c| {
        let state = c.state.unwrap_or_default();
        let what = match (state.terminated, state.waiting) {
            (Some(t), _) => format!(
                "terminated {} {}: {}",
                t.exit_code,
                t.reason.unwrap_or_default(),
                t.message.unwrap_or_default()
            ),
            (None, Some(w)) => format!(
                "waiting {}: {}",
                w.reason.unwrap_or_default(),
                w.message.unwrap_or_default()
            ),
            (None, None) => "running".to_string(),
        };
        format!("{}: {what}", c.name)
    })
    .collect::<Vec<_>>()
    .join("; ")
}

/// The non-empty lines of a container's log, trimmed.
async fn log_lines(f: &Framework, pod: &str, container: &str) -> Result<Vec<String>, CaseError> {
    Ok(f.logs(pod, Some(container))
        .await?
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// Upstream: a HostProcess container on a chosen node sees that node's name as its
/// `%COMPUTERNAME%`. Ours prints it (and `hostname`) and compares, case-insensitively as
/// Windows names are.
async fn on_host(f: &Framework) -> CaseResult {
    let node = host_process_node(f, (1, 6)).await?;
    let pod = host_process_pod("host-process-test-pod", &node.name, SYSTEM).container(busybox(
        "computer-name-test",
        &["cmd.exe", "/c", "echo %COMPUTERNAME%& hostname"],
    ));
    expect_succeeded(f, &pod, "printing its computer name").await?;
    let lines = log_lines(f, pod.name(), "computer-name-test").await?;
    ensure!(
        lines.len() == 2,
        "container computer-name-test printed {lines:?}; expected %COMPUTERNAME% and hostname"
    );
    for (what, seen) in ["%COMPUTERNAME%", "hostname"].iter().zip(&lines) {
        ensure!(
            seen.eq_ignore_ascii_case(&node.name),
            "HostProcess container on node {}: {what} is {seen:?}, expected the node's name",
            node.name
        );
    }
    Ok(())
}

/// Upstream: an init container writes a file on the host (`C:\testfile<uid>.txt`) and the
/// next container, also on the host, finds it; ours also checks what it reads back.
async fn init_containers(f: &Framework) -> CaseResult {
    let node = host_process_node(f, (1, 6)).await?;
    let file = format!("C:\\testfile{}.txt", uuid::Uuid::new_v4());
    let pod = host_process_pod("host-process-init-pods", &node.name, SYSTEM)
        .init_container(busybox(
            "configure-node",
            &["powershell", "-c", &format!("Set-Content -Path {file} -Value test")],
        ))
        .container(busybox(
            "read-configuration",
            &["powershell", "-c", &format!("Get-Content {file}")],
        ));
    expect_succeeded(f, &pod, "reading what its init container wrote on the host").await?;
    let lines = log_lines(f, pod.name(), "read-configuration").await?;
    ensure!(
        lines == ["test"],
        "container read-configuration read {lines:?} from {file}; expected [\"test\"], written there by init container configure-node on the host"
    );
    Ok(())
}

/// The volume mounts of upstream's `makeTestPodWithVolumeMounts`, by volume name.
const MOUNTS: [(&str, &str); 5] = [
    ("emptydir-volume", "/etc/emptydir"),
    ("configmap-volume", "/etc/configmap"),
    ("hostpath-volume", "/etc/hostpath"),
    ("downwardapi-volume", "/etc/downwardapi"),
    ("secret-volume", "/etc/secret"),
];

/// Upstream: emptyDir, ConfigMap, hostPath, downward API and Secret volumes appear under
/// `$env:CONTAINER_SANDBOX_MOUNT_POINT` with their contents, and `NODE_NAME_TEST` (from
/// `spec.nodeName`) equals `COMPUTERNAME`.
async fn volume_mounts(f: &Framework) -> CaseResult {
    let node = host_process_node(f, (1, 6)).await?;
    let name = "host-process-volume-mounts";
    f.create(&config_map(
        "sample-config-map",
        &[("text", "Lorem ipsum dolor sit amet")],
    ))
    .await?;
    f.create(&secret("sample-secret", &[("foo", "bar")])).await?;
    let root = "$env:CONTAINER_SANDBOX_MOUNT_POINT";
    let script = [
        format!("Test-Path {root}\\etc\\emptydir"),
        format!("Get-Content {root}\\etc\\configmap\\text.txt"),
        format!("Test-Path {root}\\etc\\hostpath"),
        format!("Get-Content {root}\\etc\\downwardapi\\podname"),
        format!("Get-Content {root}\\etc\\secret\\foo.txt"),
        "Write-Output $env:NODE_NAME_TEST".to_string(),
        "Write-Output $env:COMPUTERNAME".to_string(),
    ]
    .join("; ");
    let mut container = busybox(name, &["powershell.exe", "-Command", &script]).with(|c| {
        c.env.get_or_insert_with(Vec::new).push(EnvVar {
            name: "NODE_NAME_TEST".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "spec.nodeName".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
    });
    for (volume, path) in MOUNTS {
        container = container.mount(volume, path, false);
    }
    let host_path = Volume {
        name: "hostpath-volume".into(),
        host_path: Some(HostPathVolumeSource {
            path: "/var/hostpath".into(),
            type_: Some("DirectoryOrCreate".into()),
        }),
        ..Default::default()
    };
    let pod = host_process_pod(name, &node.name, SYSTEM)
        .container(container)
        .volume(empty_dir_volume("emptydir-volume"))
        .volume(config_map_volume(
            "configmap-volume",
            "sample-config-map",
            &[("text", "text.txt")],
        ))
        .volume(host_path)
        .volume(downward_volume(
            "downwardapi-volume",
            &[DownwardItem::field("podname", "metadata.name")],
        ))
        .volume(secret_volume("secret-volume", "sample-secret", &[("foo", "foo.txt")]));
    expect_succeeded(f, &pod, "reading its volumes").await?;
    let lines = log_lines(f, name, name).await?;
    let expected = [
        ("the emptyDir volume exists", "True".to_string()),
        ("configmap-volume text.txt", "Lorem ipsum dolor sit amet".to_string()),
        ("the hostPath volume exists", "True".to_string()),
        ("downwardapi-volume podname", name.to_string()),
        ("secret-volume foo.txt", "bar".to_string()),
        ("NODE_NAME_TEST", node.name.clone()),
        ("COMPUTERNAME", node.name.to_ascii_uppercase()),
    ];
    ensure!(
        lines.len() == expected.len(),
        "container {name} printed {} lines {lines:?}; expected {} ({})",
        lines.len(),
        expected.len(),
        expected.iter().map(|(w, _)| *w).collect::<Vec<_>>().join(", ")
    );
    for ((what, want), seen) in expected.iter().zip(&lines) {
        ensure!(
            seen.eq_ignore_ascii_case(want),
            "HostProcess container {name} under $env:CONTAINER_SANDBOX_MOUNT_POINT: {what} is {seen:?}, expected {want:?}"
        );
    }
    Ok(())
}

/// The kubelet's HostProcess start counters on a node, by `container_type`:
/// (started, errors) summed over error codes, as upstream's `getCurrentHostProcessMetrics`.
async fn host_process_counts(f: &Framework, node: &str) -> Result<BTreeMap<String, (u64, u64)>, CaseError> {
    let text = f.node_proxy_get(node, "metrics").await?;
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        // Counters are whole numbers printed as floats.
        let Ok(value) = value.parse::<f64>() else { continue };
        let value = value.round() as u64;
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let started = match name {
            "kubelet_started_host_process_containers_total" => true,
            "kubelet_started_host_process_containers_errors_total" => false,
            _ => continue,
        };
        let Some(kind) = labels
            .split(',')
            .find_map(|kv| kv.trim_end_matches('}').strip_prefix("container_type="))
        else {
            continue;
        };
        let entry = out.entry(kind.trim_matches('"').to_string()).or_default();
        if started {
            entry.0 += value;
        } else {
            entry.1 += value;
        }
    }
    Ok(out)
}

/// A HostProcess container that cannot start: an account that does not exist and a program
/// the image lacks (upstream's `badUserName` and `foobar.exe`).
fn failing(name: &str) -> ContainerBuilder {
    busybox(name, &["foobar.exe"]).with(|c| {
        c.security_context = Some(SecurityContext {
            windows_options: Some(WindowsSecurityContextOptions {
                run_as_user_name: Some("bad-user-name".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
    })
}

/// Upstream: after a pod whose HostProcess init container fails to start and one whose
/// HostProcess container fails to start, the node's kubelet counts more started and more
/// failed HostProcess containers of both types.
async fn metrics(f: &Framework) -> CaseResult {
    let node = host_process_node(f, (1, 6)).await?;
    let before = host_process_counts(f, &node.name).await?;
    let init_fails = host_process_pod("host-process-metrics-pod-failing-init-container", &node.name, SYSTEM)
        .init_container(failing("failing-init-container"))
        .container(busybox("container", &["cmd.exe", "/c", "exit", "/b", "0"]));
    let container_fails = host_process_pod("host-process-metrics-pod-failing-container", &node.name, SYSTEM)
        .container(failing("failing-container"));
    for pod in [&init_fails, &container_fails] {
        let done = run_to_end(f, pod).await?;
        let phase = done.status.and_then(|s| s.phase).unwrap_or_default();
        ensure!(
            phase == "Failed",
            "pod {} with a container that cannot start ended {phase:?}, expected Failed",
            pod.name()
        );
    }
    let after = host_process_counts(f, &node.name).await?;
    let get = |m: &BTreeMap<String, (u64, u64)>, kind: &str| m.get(kind).copied().unwrap_or_default();
    for kind in ["container", "init_container"] {
        let (b, a) = (get(&before, kind), get(&after, kind));
        ensure!(
            a.0 > b.0,
            "node {}: kubelet_started_host_process_containers_total{{container_type=\"{kind}\"}} went from {} to {}, expected it to rise",
            node.name,
            b.0,
            a.0
        );
        ensure!(
            a.1 > b.1,
            "node {}: kubelet_started_host_process_containers_errors_total{{container_type=\"{kind}\"}} went from {} to {}, expected it to rise",
            node.name,
            b.1,
            a.1
        );
    }
    Ok(())
}

/// Upstream: the node's `/stats/summary` holds a running HostProcess pod with CPU and memory
/// use above zero and container log usage above zero.
async fn stats(f: &Framework) -> CaseResult {
    let node = host_process_node(f, (1, 6)).await?;
    let name = "host-process-stats-pod";
    let pod = host_process_pod(name, &node.name, LOCAL_SERVICE).container(busybox(
        "host-process-stats",
        &[
            "powershell.exe",
            "-Command",
            "Write-Output 'Hello'; Start-Sleep -Seconds 600",
        ],
    ));
    wait_or_sandbox_failure(f, name, f.create_pod_ready(&pod)).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut pace = tokio::time::interval(Duration::from_secs(2));
    let mut last = String::from("no summary read");
    while tokio::time::Instant::now() < deadline {
        pace.tick().await;
        let summary = f.stats_summary(&node.name).await?;
        let Some(p) = summary.pods_in(f.ns()).find(|p| p.pod_ref.name == name) else {
            last = format!("node {}'s /stats/summary has no pod {}/{name}", node.name, f.ns());
            continue;
        };
        let mut problems = p.problems();
        for c in &p.containers {
            match c.logs.as_ref().and_then(|l| l.used_bytes) {
                Some(v) if v > 0 => {}
                other => problems.push(format!(
                    "container {}: logs.usedBytes is {other:?}, expected > 0",
                    c.name
                )),
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        last = problems.join("; ");
    }
    fail!(
        "HostProcess pod {name} on node {}: stats not sane within 60 s: {last}",
        node.name
    )
}

/// Upstream: agnhost `inclusterclient` in a HostProcess container reaches the API server with
/// the pod's in-cluster configuration: its log shows `calling /healthz` and no failure.
async fn in_cluster_config(f: &Framework) -> CaseResult {
    let node = host_process_node(f, (1, 7)).await?;
    let name = "host-process-agnhost-icc";
    let pod = host_process_pod(name, &node.name, SYSTEM)
        .container(ContainerBuilder::new("hpc-agnhost", "agnhost").args(["inclusterclient", "--poll-interval", "5"]));
    wait_or_sandbox_failure(f, name, f.create_pod_ready(&pod)).await?;
    // Two polls at 5 s (upstream waits 60 s for its 30 s default interval).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(45);
    let mut pace = tokio::time::interval(Duration::from_secs(3));
    let mut logs = String::new();
    while tokio::time::Instant::now() < deadline {
        pace.tick().await;
        logs = f.logs(name, Some("hpc-agnhost")).await?;
        ensure!(
            !logs.contains("status=failed"),
            "agnhost inclusterclient in HostProcess pod {name} failed to query the API server: {}",
            logs.lines().rev().take(4).collect::<Vec<_>>().join(" | ")
        );
        if logs.matches("calling /healthz").count() >= 2 {
            return Ok(());
        }
    }
    fail!(
        "agnhost inclusterclient in HostProcess pod {name}: expected two \"calling /healthz\" within 45 s, log: {logs:?}"
    )
}

/// Upstream: an init container creates a local group (`net localgroup NAME /add`) and a
/// container running as that group is not one of the NT AUTHORITY accounts (its `whoami`).
async fn local_group(f: &Framework) -> CaseResult {
    let node = host_process_node(f, (1, 7)).await?;
    let group = format!("e2e-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let name = "host-process-localgroup-pod";
    let as_group = group.clone();
    let pod = host_process_pod(name, &node.name, SYSTEM)
        .init_container(busybox("setup", &["cmd", "/C", "net", "localgroup", &group, "/add"]))
        .container(
            busybox("localgroup-container", &["cmd", "/C", "whoami"]).with(move |c| {
                c.security_context = Some(SecurityContext {
                    windows_options: Some(WindowsSecurityContextOptions {
                        run_as_user_name: Some(as_group.clone()),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }),
        );
    expect_succeeded(f, &pod, &format!("running as local group {group}")).await?;
    let lines = log_lines(f, name, "localgroup-container").await?;
    let [who] = lines.as_slice() else {
        fail!("container localgroup-container printed {lines:?}; expected one line from whoami");
    };
    ensure!(
        !who.to_ascii_lowercase().contains("nt authority"),
        "container localgroup-container of HostProcess pod {name} runs as {who:?}, a built-in account; expected a member of local group {group}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_containerd_versions() {
        assert_eq!(containerd_version("containerd://1.7.27"), Some((1, 7)));
        assert_eq!(containerd_version("containerd://2.0.1"), Some((2, 0)));
        assert_eq!(containerd_version("docker://20.10.7"), None);
    }
}
