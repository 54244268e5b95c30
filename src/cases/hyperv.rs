//! `[Feature:WindowsHyperVContainers]` (upstream test/e2e/windows/hyperv.go): a pod run with
//! RuntimeClass `runhcs-wcow-hypervisor` gets Hyper-V isolation, which a HostProcess pod on the
//! same node sees as a utility VM owned by `containerd-shim-runhcs-v1.exe`
//! (`Get-ComputeProcess`). Each pod has its own utility VM, whatever its container count.
//!
//! Needs containerd 1.7 or later and the RuntimeClass (the cluster operator creates it, e.g.
//! kubernetes-sigs/windows-testing helpers/hyper-v-mutating-webhook/hyperv-runtimeclass.yaml);
//! the case skips naming what is missing, as upstream's does. The simulator provides both with
//! `--hyperv` (a utility VM per pod of that handler, listed by `Get-ComputeProcess` in its
//! HostProcess containers); without the flag the case skips there too.

use k8s_openapi::api::node::v1::RuntimeClass;

use super::hostprocess::{SYSTEM, busybox, expect_succeeded, host_process_node, host_process_pod};
use crate::catalog::{Case, Kind};
use crate::framework::{CaseResult, Framework, PodBuilder};
use crate::os::Os;

/// Upstream It("should start a hyperv isolated container").
pub const ISOLATED: &str =
    "[sig-windows] [Feature:WindowsHyperVContainers] HyperV containers should start a hyperv isolated container";

/// Upstream's `WindowsHyperVContainerRuntimeClass`.
const RUNTIME_CLASS: &str = "runhcs-wcow-hypervisor";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![crate::case!(ISOLATED, Kind::WindowsSpecific, isolated)]
}

/// Upstream: a two-container pod with the Hyper-V RuntimeClass becomes Running and Ready, and a
/// HostProcess pod on its node then finds at least one utility VM of the runhcs shim.
async fn isolated(f: &Framework) -> CaseResult {
    let node = host_process_node(f, (1, 7)).await?;
    if f.api_all::<RuntimeClass>().get_opt(RUNTIME_CLASS).await?.is_none() {
        return Err(f.skip(format!(
            "Feature:WindowsHyperVContainers: RuntimeClass {RUNTIME_CLASS} is not present (create it for nodes \
             whose containerd has the runhcs-wcow-hypervisor handler)"
        )));
    }
    let sleeper = ["powershell.exe", "-Command", "Write-Host 'Hello'; sleep -Seconds 600"];
    let isolated = PodBuilder::new("hyperv-test-pod", Os::Windows)
        .on_node(&node.name)
        .restart_policy("Never")
        .container(busybox("busybox-1", &sleeper))
        .container(busybox("busybox-2", &sleeper))
        .edit_spec(|spec| spec.runtime_class_name = Some(RUNTIME_CLASS.into()));
    f.create_pod_ready(&isolated).await?;
    let script = "$vms = Get-ComputeProcess | Where-Object { ($_.Type -EQ 'VirtualMachine') -and ($_.Owner -EQ \
                  'containerd-shim-runhcs-v1.exe') } ; if ($vms.Length -le 0) { throw 'error' }";
    let validation = host_process_pod("validation-pod", &node.name, SYSTEM)
        .container(busybox("container", &["powershell.exe", "-Command", script]));
    expect_succeeded(
        f,
        &validation,
        &format!(
            "looking for the utility VM of Hyper-V pod hyperv-test-pod on node {}",
            node.name
        ),
    )
    .await?;
    Ok(())
}
