//! Secret and ConfigMap volumes side by side in one pod (upstream
//! `storage/empty_dir_wrapper.go`, "should not conflict"): both are built by the kubelet on an
//! emptyDir-like wrapper, and two of them in one pod must not clash; the pod starts and each
//! volume shows its own object's data.

use std::time::Duration;

use kube::api::DeleteParams;

use crate::case;
use crate::cases::config::{file_path, mount_path};
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::workloads::{config_map, config_map_volume, secret, secret_volume};
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(WRAPPERS_NO_CONFLICT, Kind::Adapted, wrappers_no_conflict)]
}

/// Upstream empty_dir_wrapper.go "should not conflict".
pub(crate) const WRAPPERS_NO_CONFLICT: &str =
    "[sig-storage] EmptyDir wrapper volumes should not conflict [Conformance]";

/// How long the pod may take to go once deleted.
const DELETED_WITHIN: Duration = Duration::from_secs(60);

/// A Secret and a ConfigMap (each data-1=value-1) mounted in one agnhost container: the pod
/// must run, each mount must read value-1 (upstream stops at the pod running; reading the files
/// makes the check fail on a kubelet that mounts them empty), and the pod then deletes.
async fn wrappers_no_conflict(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let (sec, cm) = ("wrapped-volume-race-secret", "wrapped-volume-race-configmap");
    f.create(&secret(sec, &[("data-1", "value-1")])).await?;
    f.create(&config_map(cm, &[("data-1", "value-1")])).await?;
    let (sec_vol, cm_vol) = ("secret-volume", "configmap-volume");
    let (sec_at, cm_at) = (mount_path(f, sec_vol), mount_path(f, cm_vol));
    let container = "secret-test";
    let builder = f
        .pod("pod-secrets-wrapper")
        .volume(secret_volume(sec_vol, sec, &[]))
        .volume(config_map_volume(cm_vol, cm, &[]))
        .container(
            ContainerBuilder::new(container, "agnhost")
                .args(["pause"])
                .mount(sec_vol, &sec_at, true)
                .mount(cm_vol, &cm_at, false),
        );
    let pod = f.create_pod_ready(&builder).await?;
    for at in [&sec_at, &cm_at] {
        let file = file_path(f, at, "data-1");
        let read = f
            .exec_shell(builder.name(), Some(container), os, &os.cat(&file))
            .await?;
        ensure!(
            read.exit_code == 0 && read.out().trim() == "value-1",
            "pod {} on node {}: expected {file} to read \"value-1\" with a Secret and a ConfigMap volume side by side, got exit {} and {:?}",
            builder.name(),
            pod_node(&pod),
            read.exit_code,
            read.out().trim()
        );
    }
    f.delete_pod_and_wait(&pod, &DeleteParams::default(), DELETED_WITHIN)
        .await
}
