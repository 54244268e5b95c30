//! Adapted cases: `[sig-cli] Kubectl client`, upstream test/e2e/kubectl/kubectl.go. Each runs the
//! real kubectl against the cluster under test, as upstream's do, and checks what kubectl prints
//! and what it changed through the API.
//!
//! Upstream's manifests carry no node placement; here every pod kubectl creates gets the target
//! OS's nodeSelector, tolerations and `spec.os` (through the framework's pod builder, or
//! `kubectl run --overrides`), so one body serves both OSes. Without a kubectl the cases skip
//! with a reason that says how to provide one (see [`crate::framework::kubectl`]).

mod diff;
mod info;
mod logs;
mod pods;
mod proxy;
mod rc;
mod update_demo;

use k8s_openapi::api::core::v1::{Pod, ReplicationController, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::ObjectMeta;
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;

use crate::catalog::Case;
use crate::framework::workloads::{replication_controller, template_of};
use crate::framework::{CaseError, ContainerBuilder, Framework, RUN_ID_LABEL};

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    let mut cases = info::cases();
    cases.extend(pods::cases());
    cases.extend(rc::cases());
    cases.extend(diff::cases());
    cases.extend(logs::cases());
    cases.extend(proxy::cases());
    cases.extend(update_demo::cases());
    cases
}

/// A manifest for `kubectl create -f -`.
fn manifest<T: Serialize>(obj: &T) -> Result<String, CaseError> {
    serde_json::to_string_pretty(obj).map_err(|e| CaseError::failed(format!("encoding a manifest: {e}")))
}

/// `kubectl run --overrides` placing the pod as the framework places its own: the target OS's
/// nodeSelector, the pool's tolerations and `spec.os`.
fn run_overrides(f: &Framework) -> Result<String, CaseError> {
    let placed = f.pod("placement").build(f)?;
    let spec = placed.spec.unwrap_or_default();
    Ok(json!({
        "apiVersion": "v1",
        "spec": {
            "nodeSelector": spec.node_selector,
            "tolerations": spec.tolerations,
            "os": spec.os,
        }
    })
    .to_string())
}

/// `--labels` for `kubectl run`: `extra` plus the run-id label every object of a run carries.
fn run_labels(f: &Framework, extra: &str) -> String {
    format!("--labels={extra},{RUN_ID_LABEL}={}", f.run().run_id)
}

/// Upstream's agnhost primary port (agnhost-primary-controller.json.in).
const AGNHOST_PORT: i32 = 6379;

/// The labels of upstream's agnhost primary controller, service and pods.
fn agnhost_labels() -> BTreeMap<String, String> {
    BTreeMap::from([("app".into(), "agnhost".into()), ("role".into(), "primary".into())])
}

/// Upstream's `agnhost-primary` ReplicationController: one agnhost pod labelled
/// `app=agnhost,role=primary` listening on 6379 (upstream runs agnhost's guestbook server
/// there; netexec serves the same port here), placed on the target OS.
fn agnhost_primary_rc(f: &Framework) -> Result<ReplicationController, CaseError> {
    let mut pod = f.pod("agnhost-primary");
    for (k, v) in agnhost_labels() {
        pod = pod.label(&k, &v);
    }
    let pod = pod.container(
        ContainerBuilder::new("agnhost-primary", "agnhost")
            .args(["netexec".to_string(), format!("--http-port={AGNHOST_PORT}")])
            .port(AGNHOST_PORT, "TCP"),
    );
    let built: Pod = pod.build(f)?;
    let mut rc = replication_controller("agnhost-primary", 1, template_of(built));
    let mut labels = agnhost_labels();
    labels.insert(RUN_ID_LABEL.into(), f.run().run_id.clone());
    rc.metadata.labels = Some(labels);
    Ok(rc)
}

/// Upstream's `agnhost-primary` Service (agnhost-primary-service.json): port 6379 to the
/// agnhost primary pods.
fn agnhost_primary_service(f: &Framework) -> Service {
    let mut labels = agnhost_labels();
    labels.insert(RUN_ID_LABEL.into(), f.run().run_id.clone());
    Service {
        metadata: ObjectMeta {
            name: Some("agnhost-primary".into()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(agnhost_labels()),
            ports: Some(vec![ServicePort {
                port: AGNHOST_PORT,
                target_port: Some(IntOrString::Int(AGNHOST_PORT)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// Waits until at least one `app=agnhost,role=primary` pod is Running (upstream
/// `waitForOrFailWithDebug(1)` over `PodStartTimeout`); returns the running ones.
async fn running_agnhost_pods(f: &Framework) -> Result<Vec<Pod>, CaseError> {
    let api = f.api::<Pod>();
    let running = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let pods = f
        .wait_list_within(
            &api,
            "app=agnhost,role=primary",
            |pods: &[Pod]| pods.iter().any(running),
            "at least 1 agnhost primary pod to be Running",
            crate::framework::POD_START_TIMEOUT,
        )
        .await?;
    Ok(pods.into_iter().filter(running).collect())
}
