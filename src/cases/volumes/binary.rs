//! ConfigMap `binaryData` in a volume (upstream `common/storage/configmap_volume.go`, "binary
//! data should be reflected in volume"): a ConfigMap with text `data` and `binaryData` shows
//! both as files, the binary one byte for byte (read back with busybox `hexdump -C`).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;

use crate::case;
use crate::cases::config::{file_path, mount_path};
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::workloads::{config_map, config_map_volume};
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(CM_BINARY_DATA, Kind::Adapted, cm_binary_data)]
}

/// Upstream configmap_volume.go "binary data should be reflected in volume".
pub(crate) const CM_BINARY_DATA: &str =
    "[sig-storage] ConfigMap binary data should be reflected in volume [NodeConformance] [Conformance]";

/// Upstream's binary payload (not valid UTF-8, so it can only travel as `binaryData`).
const BINARY: [u8; 7] = [0xde, 0xca, 0xfe, 0xba, 0xd0, 0xfe, 0xff];

/// A pod with two containers over the volume: one prints data-1 (`value-1`), the other dumps
/// dump.bin in hex, which must show `de ca fe ba d0 fe ff`.
async fn cm_binary_data(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let cm = "configmap-test-upd-binary";
    let mut obj = config_map(cm, &[("data-1", "value-1")]);
    obj.binary_data = Some(BTreeMap::from([("dump.bin".to_string(), ByteString(BINARY.to_vec()))]));
    f.create(&obj).await?;
    let volume = "configmap-volume";
    let mount = mount_path(f, volume);
    let text = "configmap-volume-data-test";
    let binary = "configmap-volume-binary-test";
    let builder = f
        .pod("pod-configmaps-binary")
        .restart_policy("Never")
        .volume(config_map_volume(volume, cm, &[]))
        .container(
            ContainerBuilder::new(text, "agnhost")
                .command(os.shell(&os.cat(&file_path(f, &mount, "data-1"))))
                .mount(volume, &mount, true),
        )
        .container(
            ContainerBuilder::new(binary, "busybox")
                .command(["hexdump".to_string(), "-C".into(), file_path(f, &mount, "dump.bin")])
                .mount(volume, &mount, true),
        );
    let done = f.run_pod_to_completion(&builder).await?;
    let node = pod_node(&done);
    let text_out = f.logs(builder.name(), Some(text)).await?;
    ensure!(
        text_out.contains("value-1"),
        "pod {} on node {node}: container {text} expected data-1 to read \"value-1\", printed {:?}",
        builder.name(),
        text_out.trim()
    );
    let dump = f.logs(builder.name(), Some(binary)).await?;
    let want = "de ca fe ba d0 fe ff";
    ensure!(
        dump.contains(want),
        "pod {} on node {node}: container {binary} expected dump.bin (binaryData) to hold {want}, `hexdump -C` printed {:?}",
        builder.name(),
        dump.trim()
    );
    Ok(())
}
