//! Runtime handlers and the Host Compute Service's view of a Windows node (`--hyperv`).
//!
//! A pod's RuntimeClass names a handler of the node's CRI runtime; the kubelet resolves the
//! class (`LookupRuntimeHandler`, a missing class is `runtimeclasses.node.k8s.io "X" not found`)
//! and containerd refuses a handler its configuration lacks (CRI `getSandboxRuntime`:
//! `failed to get sandbox runtime: no runtime for "X" is configured`), so the sandbox is never
//! created and the kubelet retries with `FailedCreatePodSandBox` events.
//!
//! On Windows, containerd's default handler `runhcs-wcow-process` runs each container,
//! the pause container included, as a process-isolated compute system (HCS type `Container`).
//! A node whose containerd also has `runhcs-wcow-hypervisor` (containerd 1.7 with hcsshim)
//! runs a pod of that handler in its own utility VM: one compute system of type
//! `VirtualMachine` with id `<sandbox id>@vm`, owned by the shim
//! (`containerd-shim-runhcs-v1.exe`, hcsshim's `filepath.Base(os.Args[0])`), whatever the
//! pod's container count; its containers live inside the VM and are no host compute systems.
//! The VM goes when the sandbox is torn down. HostProcess containers run in job objects, not
//! compute systems. `Get-ComputeProcess` (module HostComputeService) lists what [`list`]
//! returns.

use std::sync::{Arc, Weak};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::Api;

use super::Kubelet;
use crossconf_model::os::Os;

/// containerd's default Windows handler (process isolation).
pub const PROCESS_HANDLER: &str = "runhcs-wcow-process";
/// The Hyper-V isolation handler (upstream `WindowsHyperVContainerRuntimeClass`).
pub const HYPERVISOR_HANDLER: &str = "runhcs-wcow-hypervisor";
/// The owner hcsshim's shim gives the compute systems it creates.
pub const SHIM_OWNER: &str = "containerd-shim-runhcs-v1.exe";
/// The fault that makes a node run Hyper-V pods process-isolated.
pub const FAULT_ISOLATION_IGNORED: &str = "hyperv-isolation-ignored";

/// The runtime handlers a node's containerd is configured with besides the default one.
pub fn handlers(os: Os, hyperv: bool) -> Vec<String> {
    match os {
        Os::Windows if hyperv => vec![PROCESS_HANDLER.into(), HYPERVISOR_HANDLER.into()],
        Os::Windows => vec![PROCESS_HANDLER.into()],
        Os::Linux => vec!["runc".into()],
    }
}

/// How a pod's sandbox is isolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Process isolation (Windows containers) or namespaces (Linux).
    Process,
    /// A Hyper-V utility VM per pod.
    HyperV,
}

/// A pod's sandbox as the runtime created it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// The sandbox id (64 hex digits).
    pub id: String,
    /// The handler it was created with (`""`: the default).
    pub handler: String,
    /// Its isolation.
    pub isolation: Isolation,
}

/// The runtime handler of `pod` on a node whose runtime has `configured`, or the
/// `FailedCreatePodSandBox` message (after `Failed to create pod sandbox: `) when the sandbox
/// cannot be created with it. `class` looks a RuntimeClass up by name (`Ok(None)`: absent).
pub async fn resolve<F, Fut>(pod: &Pod, configured: &[String], class: F) -> Result<String, String>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Result<Option<RuntimeClass>, String>>,
{
    let Some(name) = pod
        .spec
        .as_ref()
        .and_then(|s| s.runtime_class_name.clone())
        .filter(|n| !n.is_empty())
    else {
        return Ok(String::new());
    };
    let handler = match class(name.clone()).await? {
        Some(rc) => rc.handler,
        None => return Err(format!("runtimeclasses.node.k8s.io {name:?} not found")),
    };
    if handler.is_empty() || configured.contains(&handler) {
        Ok(handler)
    } else {
        Err(format!(
            "rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for {handler:?} is configured"
        ))
    }
}

/// [`resolve`] through the kubelet's API client.
pub(super) async fn resolve_for(kl: &Kubelet, pod: &Pod) -> Result<String, String> {
    let api: Api<RuntimeClass> = Api::all(kl.client.clone());
    resolve(pod, &kl.cfg.runtime_handlers, |name| async move {
        api.get_opt(&name)
            .await
            .map_err(|e| format!("Failed to lookup RuntimeClass {name}: {e}"))
    })
    .await
}

/// The isolation `handler` gives on a node (`isolation_ignored`: the fault
/// [`FAULT_ISOLATION_IGNORED`], a shim that drops the VM request).
pub fn isolation(os: Os, handler: &str, isolation_ignored: bool) -> Isolation {
    if os == Os::Windows && handler == HYPERVISOR_HANDLER && !isolation_ignored {
        Isolation::HyperV
    } else {
        Isolation::Process
    }
}

/// One compute system of the Host Compute Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeSystem {
    /// Its id (a container id, or `<sandbox id>@vm` for a utility VM).
    pub id: String,
    /// Who created it.
    pub owner: String,
    /// `Container` or `VirtualMachine`.
    pub kind: &'static str,
}

/// The compute systems of one pod: none for a HostProcess pod (job objects), the utility VM
/// of a Hyper-V pod, else the sandbox's and each created container's (`container_ids`).
pub fn pod_systems(sandbox: &Sandbox, host_process: bool, container_ids: &[String]) -> Vec<ComputeSystem> {
    if host_process {
        return Vec::new();
    }
    let system = |id: String, kind| ComputeSystem {
        id,
        owner: SHIM_OWNER.into(),
        kind,
    };
    match sandbox.isolation {
        Isolation::HyperV => vec![system(format!("{}@vm", sandbox.id), "VirtualMachine")],
        Isolation::Process => std::iter::once(sandbox.id.clone())
            .chain(container_ids.iter().cloned())
            .map(|id| system(id, "Container"))
            .collect(),
    }
}

/// What a process on the host (a HostProcess container) sees of the node's compute systems.
#[derive(Clone)]
pub struct ComputeView(Weak<Kubelet>);

impl std::fmt::Debug for ComputeView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ComputeView")
    }
}

impl ComputeView {
    pub(super) fn of(kl: &Arc<Kubelet>) -> ComputeView {
        ComputeView(Arc::downgrade(kl))
    }

    /// The node's compute systems now (none once the kubelet is gone).
    pub fn list(&self) -> Vec<ComputeSystem> {
        self.0.upgrade().map(|kl| list(&kl)).unwrap_or_default()
    }
}

/// The compute systems of every pod whose sandbox stands on the node, sorted by id.
fn list(kl: &Kubelet) -> Vec<ComputeSystem> {
    if kl.cfg.os != Os::Windows {
        return Vec::new();
    }
    let pods: Vec<_> = kl.pods.lock().expect("pods lock").values().cloned().collect();
    let mut out: Vec<ComputeSystem> = pods
        .iter()
        .flat_map(|rt| {
            let host_process = super::host_process::pod_requested(&rt.pod());
            let st = rt.state.lock().expect("state lock");
            let Some(sandbox) = st.sandbox.as_ref().filter(|_| st.sandbox_ready) else {
                return Vec::new();
            };
            let ids: Vec<String> = st
                .init
                .iter()
                .chain(&st.main)
                .chain(&st.ephemeral)
                .filter(|c| c.state.is_running())
                .filter_map(|c| c.container_id.clone())
                .map(|id| id.rsplit("://").next().unwrap_or_default().to_string())
                .collect();
            pod_systems(sandbox, host_process, &ids)
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(class: Option<&str>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                runtime_class_name: class.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn class(handler: &str) -> Result<Option<RuntimeClass>, String> {
        Ok(Some(RuntimeClass {
            metadata: ObjectMeta {
                name: Some("c".into()),
                ..Default::default()
            },
            handler: handler.into(),
            ..Default::default()
        }))
    }

    #[tokio::test]
    async fn handlers_resolve_as_kubelet_and_containerd_do() {
        let plain = handlers(Os::Windows, false);
        let hyperv = handlers(Os::Windows, true);
        assert_eq!(
            resolve(&pod(None), &plain, |_| async { class("x") }).await,
            Ok(String::new())
        );
        assert_eq!(
            resolve(&pod(Some("c")), &hyperv, |_| async { class(HYPERVISOR_HANDLER) }).await,
            Ok(HYPERVISOR_HANDLER.to_string())
        );
        assert_eq!(
            resolve(&pod(Some("c")), &plain, |_| async { class(HYPERVISOR_HANDLER) }).await,
            Err(
                "rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for \
                 \"runhcs-wcow-hypervisor\" is configured"
                    .to_string()
            )
        );
        assert_eq!(
            resolve(&pod(Some("gone")), &plain, |_| async { Ok(None) }).await,
            Err("runtimeclasses.node.k8s.io \"gone\" not found".to_string())
        );
    }

    #[test]
    fn a_hyperv_pod_is_one_utility_vm_whatever_its_containers() {
        let sandbox = Sandbox {
            id: "abc".into(),
            handler: HYPERVISOR_HANDLER.into(),
            isolation: isolation(Os::Windows, HYPERVISOR_HANDLER, false),
        };
        let systems = pod_systems(&sandbox, false, &["c1".into(), "c2".into()]);
        assert_eq!(
            systems,
            vec![ComputeSystem {
                id: "abc@vm".into(),
                owner: SHIM_OWNER.into(),
                kind: "VirtualMachine"
            }]
        );
        // The fault runs it process-isolated: the sandbox and each container are containers.
        let ignored = Sandbox {
            isolation: isolation(Os::Windows, HYPERVISOR_HANDLER, true),
            ..sandbox.clone()
        };
        let kinds: Vec<_> = pod_systems(&ignored, false, &["c1".into(), "c2".into()])
            .into_iter()
            .map(|s| (s.id, s.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("abc".to_string(), "Container"),
                ("c1".to_string(), "Container"),
                ("c2".to_string(), "Container")
            ]
        );
        assert!(pod_systems(&sandbox, true, &[]).is_empty());
    }
}
