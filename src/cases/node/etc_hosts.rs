//! The kubelet-managed hosts file (upstream `test/e2e/common/node/kubelet_etc_hosts.go`): a
//! pod on the pod network gets a hosts file the kubelet built, unless a container mounts its own
//! `/etc/hosts`; a hostNetwork pod gets the node's file, not a managed one.

use k8s_openapi::api::core::v1::{HostPathVolumeSource, Volume};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::fail;
use crate::framework::{CaseResult, ContainerBuilder, Framework, PodBuilder, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(MANAGED_ETC_HOSTS, Kind::Adapted, managed_etc_hosts)]
}

/// Upstream kubelet_etc_hosts.go "should test kubelet managed /etc/hosts file".
pub(crate) const MANAGED_ETC_HOSTS: &str =
    "[sig-node] KubeletManagedEtcHosts should test kubelet managed /etc/hosts file [NodeConformance] [Conformance]";

/// The start of a hosts file the kubelet built for a pod (`etcHostsPartialContent`).
const MANAGED_HEADER: &str = "# Kubernetes-managed hosts file.";
/// The containers' hosts file, and where every container mounts the node's own.
const ETC_HOSTS: &str = "/etc/hosts";
const ETC_HOSTS_ORIGINAL: &str = "/etc/hosts-original";
const VOLUME: &str = "host-etc-hosts";

/// A pod of agnhost `pause` containers named `containers`, each mounting the node's
/// `/etc/hosts` (hostPath, FileOrCreate) at [`ETC_HOSTS_ORIGINAL`]; the containers in `own_hosts`
/// also mount it over [`ETC_HOSTS`].
fn hosts_pod(f: &Framework, name: &str, containers: &[&str], own_hosts: &[&str]) -> PodBuilder {
    let mut pod = f.pod(name).volume(Volume {
        name: VOLUME.into(),
        host_path: Some(HostPathVolumeSource {
            path: ETC_HOSTS.into(),
            type_: Some("FileOrCreate".into()),
        }),
        ..Default::default()
    });
    for c in containers {
        let mut b = ContainerBuilder::new(c, "agnhost")
            .args(["pause"])
            .mount(VOLUME, ETC_HOSTS_ORIGINAL, false);
        if own_hosts.contains(c) {
            b = b.mount(VOLUME, ETC_HOSTS, false);
        }
        pod = pod.container(b);
    }
    pod
}

/// Upstream `assertManagedStatus`: container `c` of `pod` has a managed hosts file when it starts
/// with the kubelet's header and differs from the node's. Upstream re-reads for up to 30 s (a
/// workaround for kubernetes#34256, a hosts file mounted late); both files are in place once the
/// container runs, so one read decides.
async fn assert_managed(f: &Framework, pod: &str, node: &str, c: &str, want_managed: bool) -> CaseResult {
    let cat = |path: &str| vec!["cat".to_string(), path.to_string()];
    let hosts = f.exec(pod, Some(c), cat(ETC_HOSTS)).await?;
    let original = f.exec(pod, Some(c), cat(ETC_HOSTS_ORIGINAL)).await?;
    let (hosts, original) = (hosts.stdout, original.stdout);
    if hosts.is_empty() || original.is_empty() {
        fail!(
            "pod {pod} container {c} on node {node}: expected non-empty {ETC_HOSTS} and {ETC_HOSTS_ORIGINAL}, \
             got {hosts:?} and {original:?}"
        );
    }
    let managed = hosts.starts_with(MANAGED_HEADER) && hosts != original;
    if managed != want_managed {
        fail!(
            "pod {pod} container {c} on node {node}: /etc/hosts file should {}be kubelet managed; \
             /etc/hosts contains {hosts:?}, the node's file {original:?}",
            if want_managed { "" } else { "not " }
        );
    }
    Ok(())
}

/// Upstream kubelet_etc_hosts.go: in a pod on the pod network, busybox-1 and busybox-2 have
/// managed hosts files and busybox-3, which mounts the node's file over `/etc/hosts`, has not;
/// in a hostNetwork pod neither container has one. Windows nodes do not manage the hosts file
/// (the OS profile's [`crate::os::Os::manages_etc_hosts`]), which the case gives as its skip
/// reason.
async fn managed_etc_hosts(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.skip_unless(
        os.manages_etc_hosts(),
        format!("the kubelet does not manage /etc/hosts on {} nodes", os.title()),
    )?;
    let all = ["busybox-1", "busybox-2", "busybox-3"];
    let pod = f
        .create_pod_ready(&hosts_pod(f, "test-pod", &all, &["busybox-3"]))
        .await?;
    let host_pod = f
        .create_pod_ready(&hosts_pod(f, "test-host-network-pod", &all[..2], &[]).host_network())
        .await?;
    f.step("verifying /etc/hosts of containers is kubelet-managed for the pod with hostNetwork=false");
    for c in &all[..2] {
        assert_managed(f, "test-pod", &pod_node(&pod), c, true).await?;
    }
    f.step("verifying /etc/hosts is not kubelet-managed where the container mounts its own");
    assert_managed(f, "test-pod", &pod_node(&pod), "busybox-3", false).await?;
    f.step("verifying /etc/hosts is not kubelet-managed for the pod with hostNetwork=true");
    for c in &all[..2] {
        assert_managed(f, "test-host-network-pod", &pod_node(&host_pod), c, false).await?;
    }
    Ok(())
}
