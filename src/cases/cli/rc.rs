//! kubectl on upstream's agnhost primary ReplicationController: `kubectl patch` on its pods,
//! `kubectl describe` of its pods, itself, its Service, a node and the namespace, and `kubectl
//! expose` of it and of a Service (upstream kubectl.go "Kubectl patch", "Kubectl describe",
//! "Kubectl expose").

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use kube::api::ListParams;

use super::{AGNHOST_PORT, agnhost_primary_rc, agnhost_primary_service, manifest, running_agnhost_pods};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::kubectl::check_output;
use crate::framework::{CaseError, CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream kubectl.go "Kubectl patch".
pub(crate) const PATCH: &str = "[sig-cli] Kubectl client Kubectl patch should add annotations for pods in rc \
     [Conformance]";
/// Upstream kubectl.go "Kubectl describe".
pub(crate) const DESCRIBE: &str = "[sig-cli] Kubectl client Kubectl describe should check if kubectl describe \
     prints relevant information for rc and pods [Conformance]";
/// Upstream kubectl.go "Kubectl expose".
pub(crate) const EXPOSE: &str = "[sig-cli] Kubectl client Kubectl expose should create services for rc \
     [Conformance]";

pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(PATCH, Kind::Adapted, patch),
        case!(DESCRIBE, Kind::Adapted, describe),
        case!(EXPOSE, Kind::Adapted, expose),
    ]
}

/// Upstream `checkKubectlOutputWithRetry`: how long a describe may take to show what is
/// required (status written by the controller a moment later).
const DESCRIBE_RETRY: Duration = Duration::from_secs(60);

/// Creates the agnhost primary RC with `kubectl create -f -` and waits for its pod to run.
async fn create_agnhost_rc(f: &Framework) -> Result<Vec<Pod>, CaseError> {
    f.step("creating Agnhost RC");
    f.kubectl_input(&manifest(&agnhost_primary_rc(f)?)?, &["create", "-f", "-"])
        .await?;
    f.step("Waiting for Agnhost primary to start.");
    running_agnhost_pods(f).await
}

/// `kubectl patch pod -p` adds an annotation to every pod of the RC.
async fn patch(f: &Framework) -> CaseResult {
    let pods = create_agnhost_rc(f).await?;
    f.step("patching all pods");
    for pod in &pods {
        f.kubectl(&[
            "patch",
            "pod",
            &pod.name_any(),
            "-p",
            r#"{"metadata":{"annotations":{"x":"y"}}}"#,
        ])
        .await?;
    }
    f.step("checking annotations");
    let api = f.api::<Pod>();
    for pod in &pods {
        let now = api.get(&pod.name_any()).await?;
        let value = now.annotations().get("x").cloned();
        ensure!(
            value.as_deref() == Some("y"),
            "after `kubectl patch pod {} -p {{\"metadata\":{{\"annotations\":{{\"x\":\"y\"}}}}}}`: expected \
             annotation x=y on the pod, found {value:?} (on node {})",
            pod.name_any(),
            crate::framework::pod_node(pod)
        );
    }
    Ok(())
}

/// `kubectl describe` of the RC's pod, the RC, its Service, a node and the namespace prints
/// what upstream requires, line by line in order.
async fn describe(f: &Framework) -> CaseResult {
    let ns = f.ns().to_string();
    let agnhost = f.image("agnhost", f.target_os())?;
    f.kubectl_input(&manifest(&agnhost_primary_rc(f)?)?, &["create", "-f", "-"])
        .await?;
    f.kubectl_input(&manifest(&agnhost_primary_service(f))?, &["create", "-f", "-"])
        .await?;
    f.step("Waiting for Agnhost primary to start.");
    let pods = running_agnhost_pods(f).await?;

    for pod in &pods {
        let name = pod.name_any();
        let out = f.kubectl(&["describe", "pod", &name]).await?;
        let required: &[&[&str]] = &[
            &["Name:", "agnhost-primary-"],
            &["Namespace:", &ns],
            &["Node:"],
            &["Labels:", "app=agnhost"],
            &["role=primary"],
            &["Annotations:"],
            &["Status:", "Running"],
            &["IP:"],
            &["Controlled By:", "ReplicationController/agnhost-primary"],
            &["Image:", &agnhost],
            &["State:", "Running"],
            &["QoS Class:", "BestEffort"],
        ];
        check_output(&out, required)
            .map_err(|e| CaseError::failed(format!("`kubectl describe pod {name}`: {e}; it printed:\n{out}")))?;
    }

    let required: &[&[&str]] = &[
        &["Name:", "agnhost-primary"],
        &["Namespace:", &ns],
        &["Selector:", "app=agnhost,role=primary"],
        &["Labels:", "app=agnhost"],
        &["role=primary"],
        &["Annotations:"],
        &["Replicas:", "1 current", "1 desired"],
        &["Pods Status:", "1 Running", "0 Waiting", "0 Succeeded", "0 Failed"],
        &["Pod Template:"],
        &["Image:", &agnhost],
        &["Events:"],
    ];
    describe_with_retry(f, &["describe", "rc", "agnhost-primary"], required).await?;

    let out = f.kubectl(&["describe", "service", "agnhost-primary"]).await?;
    let required: &[&[&str]] = &[
        &["Name:", "agnhost-primary"],
        &["Namespace:", &ns],
        &["Labels:", "app=agnhost"],
        &["role=primary"],
        &["Annotations:"],
        &["Selector:", "app=agnhost", "role=primary"],
        &["Type:", "ClusterIP"],
        &["IP:"],
        &["Port:", "<unset>", "6379/TCP"],
        &["Endpoints:"],
        &["Session Affinity:", "None"],
    ];
    check_output(&out, required).map_err(|e| {
        CaseError::failed(format!(
            "`kubectl describe service agnhost-primary`: {e}; it printed:\n{out}"
        ))
    })?;

    let nodes = f.api_all::<Node>().list(&ListParams::default()).await?;
    let Some(node) = nodes.items.first() else {
        fail!("expected at least one node to describe, the cluster lists none");
    };
    let node = node.name_any();
    let out = f.kubectl(&["describe", "node", &node]).await?;
    let required: &[&[&str]] = &[
        &["Name:", &node],
        &["Labels:"],
        &["Annotations:"],
        &["CreationTimestamp:"],
        &["Conditions:"],
        &[
            "Type",
            "Status",
            "LastHeartbeatTime",
            "LastTransitionTime",
            "Reason",
            "Message",
        ],
        &["Addresses:"],
        &["Capacity:"],
        &["Version:"],
        &["Kernel Version:"],
        &["OS Image:"],
        &["Container Runtime Version:"],
        &["Kubelet Version:"],
        // Upstream (v1.32) also requires "Kube-Proxy Version:"; newer kubectl no longer prints
        // it, the field being deprecated and left empty by kubelets since 1.31 (KEP-4004).
        &["Pods:"],
    ];
    check_output(&out, required)
        .map_err(|e| CaseError::failed(format!("`kubectl describe node {node}`: {e}; it printed:\n{out}")))?;

    let out = f.kubectl(&["describe", "namespace", &ns]).await?;
    let required: &[&[&str]] = &[&["Name:", &ns], &["Labels:"], &["Annotations:"], &["Status:", "Active"]];
    check_output(&out, required)
        .map_err(|e| CaseError::failed(format!("`kubectl describe namespace {ns}`: {e}; it printed:\n{out}")))?;
    Ok(())
}

/// Runs `args` until its output meets `required` or [`DESCRIBE_RETRY`] passes (upstream
/// `checkKubectlOutputWithRetry`, once a second).
async fn describe_with_retry(f: &Framework, args: &[&str], required: &[&[&str]]) -> CaseResult {
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let out = f.kubectl(args).await?;
        match check_output(&out, required) {
            Ok(()) => return Ok(()),
            Err(e) if start.elapsed() >= DESCRIBE_RETRY.min(f.remaining()) => {
                fail!(
                    "`kubectl {}` for {:?}: {e}; it printed:\n{out}",
                    args.join(" "),
                    start.elapsed()
                )
            }
            Err(_) => {}
        }
    }
}

/// `kubectl expose` of the RC, then of the Service it made, gives Services with the asked port
/// and target port whose EndpointSlices hold the one agnhost pod on 6379.
async fn expose(f: &Framework) -> CaseResult {
    create_agnhost_rc(f).await?;
    let target = format!("--target-port={AGNHOST_PORT}");
    f.step("exposing RC");
    f.kubectl(&["expose", "rc", "agnhost-primary", "--name=rm2", "--port=1234", &target])
        .await?;
    validate_service(f, "rm2", 1234).await?;
    f.step("exposing service");
    f.kubectl(&["expose", "service", "rm2", "--name=rm3", "--port=2345", &target])
        .await?;
    validate_service(f, "rm3", 2345).await
}

/// Upstream `framework.ServiceStartTimeout`.
const SERVICE_START_TIMEOUT: Duration = Duration::from_secs(3 * 60);

/// Upstream's `validateService`: the Service's EndpointSlices hold exactly one pod, on the
/// agnhost port, and the Service has one port `port` targeting it.
async fn validate_service(f: &Framework, name: &str, port: i32) -> CaseResult {
    let slices = f
        .wait_list_within(
            &f.api::<EndpointSlice>(),
            &format!("kubernetes.io/service-name={name}"),
            |slices: &[EndpointSlice]| !pods_by_port(slices).is_empty(),
            &format!("service {name}'s EndpointSlices to list a pod"),
            SERVICE_START_TIMEOUT,
        )
        .await?;
    let pods = pods_by_port(&slices);
    ensure!(
        pods.len() == 1,
        "expected service {name}'s EndpointSlices to list 1 pod, they list {}: {pods:?}",
        pods.len()
    );
    for (pod, ports) in &pods {
        ensure!(
            ports.first() == Some(&AGNHOST_PORT),
            "expected service {name}'s endpoint {pod} on port {AGNHOST_PORT}, it is on {ports:?}"
        );
    }
    let svc = f.api::<Service>().get(name).await?;
    let ports = svc.spec.and_then(|s| s.ports).unwrap_or_default();
    let [only] = ports.as_slice() else {
        fail!(
            "expected service {name} to have 1 port, it has {}: {ports:?}",
            ports.len()
        );
    };
    ensure!(
        only.port == port,
        "expected service {name} on port {port}, it has port {}",
        only.port
    );
    ensure!(
        only.target_port == Some(IntOrString::Int(AGNHOST_PORT)),
        "expected service {name}'s target port {AGNHOST_PORT}, it has {:?}",
        only.target_port
    );
    Ok(())
}

/// Pod name to the ports its endpoints carry (upstream `GetContainerPortsByPodUID`, keyed by
/// the pod's name for messages).
fn pods_by_port(slices: &[EndpointSlice]) -> std::collections::BTreeMap<String, Vec<i32>> {
    let mut out: std::collections::BTreeMap<String, Vec<i32>> = std::collections::BTreeMap::new();
    for slice in slices {
        let ports: Vec<i32> = slice.ports.iter().flatten().filter_map(|p| p.port).collect();
        for ep in &slice.endpoints {
            if let Some(pod) = ep.target_ref.as_ref().and_then(|r| r.name.clone()) {
                out.entry(pod).or_default().extend(ports.iter().copied());
            }
        }
    }
    out
}
