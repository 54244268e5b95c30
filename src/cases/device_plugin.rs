//! `[Feature:GPUDevicePlugin]` (upstream test/e2e/windows/device_plugin.go): a Windows pod
//! that asks for one `microsoft.com/directx` device sees a DirectX 12 adapter.
//!
//! Upstream deploys the DirectX device plugin DaemonSet itself; it only advertises devices on
//! Windows nodes with a GPU, which is why upstream's Windows jobs skip
//! `[Feature:GPUDevicePlugin]`. Ours expects the plugin to be deployed by the job on GPU nodes and
//! skips, naming what is missing, when no Windows node advertises the resource (the simulated
//! nodes have no GPU).

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::catalog::{Case, Kind};
use crate::framework::{CaseResult, ContainerBuilder, Framework, PodBuilder};
use crate::os::Os;
use crate::{ensure, fail};

/// Upstream It("should be able to create a functioning device plugin for Windows").
pub const DIRECTX: &str = "[sig-windows] [Feature:GPUDevicePlugin] Device Plugin should be able to create a functioning device plugin for Windows";

/// The extended resource the DirectX device plugin advertises.
const RESOURCE: &str = "microsoft.com/directx";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![crate::case!(DIRECTX, Kind::WindowsSpecific, directx)]
}

/// The number of devices a node's capacity quantity names (`"1"`, `"2"`); 0 when unparsable.
fn devices(q: &Quantity) -> u64 {
    q.0.trim().parse().unwrap_or(0)
}

/// Upstream: a pod limited to one DirectX device runs, and `dxdiag` inside it reports
/// "DirectX Version: DirectX 12".
async fn directx(f: &Framework) -> CaseResult {
    f.skip_unless(
        f.target_os() == Os::Windows,
        "the DirectX device plugin runs on Windows nodes only",
    )?;
    let windows: Vec<String> = f
        .require_nodes(Os::Windows, 1)
        .await?
        .into_iter()
        .map(|n| n.name)
        .collect();
    let nodes = f.api_all::<Node>().list(&Default::default()).await?;
    let gpu = nodes.items.iter().find_map(|n| {
        let name = n.metadata.name.clone().unwrap_or_default();
        let count = n
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get(RESOURCE))
            .map_or(0, devices);
        (windows.contains(&name) && count > 0).then_some(name)
    });
    let Some(node) = gpu else {
        return Err(f.skip(format!(
            "Feature:GPUDevicePlugin: no Windows node advertises {RESOURCE} (needs Windows nodes with a GPU and the \
             DirectX device plugin DaemonSet; upstream's Windows jobs skip this case for want of GPU nodes); \
             Windows nodes: {}",
            windows.join(", ")
        )));
    };
    let limits = std::collections::BTreeMap::from([(RESOURCE.to_string(), Quantity("1".into()))]);
    let pod = PodBuilder::new("windowsdevice", Os::Windows).on_node(&node).container(
        ContainerBuilder::new("hostdev", "busybox")
            .command(["cmd.exe", "/c", "ping -t localhost"])
            .with(move |c| {
                c.resources = Some(k8s_openapi::api::core::v1::ResourceRequirements {
                    limits: Some(limits.clone()),
                    ..Default::default()
                });
            }),
    );
    f.create_pod_ready(&pod).await?;
    let out = f
        .exec(
            "windowsdevice",
            Some("hostdev"),
            [
                "cmd.exe",
                "/c",
                "dxdiag",
                "/t",
                "dxdiag_output.txt",
                "&",
                "type",
                "dxdiag_output.txt",
            ]
            .map(String::from)
            .to_vec(),
        )
        .await?;
    let want = "DirectX Version: DirectX 12";
    if out.exit_code != 0 {
        fail!(
            "dxdiag in pod windowsdevice on node {node} exited {}: {}",
            out.exit_code,
            out.stderr.trim()
        );
    }
    ensure!(
        out.stdout.contains(want),
        "dxdiag in pod windowsdevice (one {RESOURCE} device) on node {node} does not report {want:?}; its output starts {:?}",
        out.stdout.chars().take(400).collect::<String>()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_counts_parse() {
        assert_eq!(devices(&Quantity("2".into())), 2);
        assert_eq!(devices(&Quantity("0".into())), 0);
        assert_eq!(devices(&Quantity("x".into())), 0);
    }
}
