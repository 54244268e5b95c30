//! `[sig-node] Node Lifecycle should run through the lifecycle of a node` (upstream
//! test/e2e/node/node_lifecycle.go): a fake Node object created, read, patched, listed by its
//! patched label, updated and deleted. Only the API server is involved: the node is
//! unschedulable and no kubelet stands behind it.

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};

use super::create_cluster_scoped;
use super::relabel::{confirm_deleted, patch_label, update_label};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseResult, Framework};

/// Upstream node_lifecycle.go "should run through the lifecycle of a node".
pub(crate) const NODE_LIFECYCLE: &str =
    "[sig-node] Node Lifecycle should run through the lifecycle of a node [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(NODE_LIFECYCLE, Kind::Adapted, node_lifecycle)]
}

/// Upstream's fake node: unschedulable (so no scheduler picks it), with a Ready condition set
/// by the test. Its name carries the case namespace, since both OS trials share one cluster.
fn fake_node(f: &Framework) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(format!("e2e-fake-node-{}", f.ns())),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            unschedulable: Some(true),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("E2E".into()),
                message: Some("Set from e2e test".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

/// Creates the fake node and reads it back, patches label `<name>=patched` onto it and lists
/// nodes by that label (exactly the fake node), updates the label to `updated`, deletes the
/// node and confirms it is gone.
async fn node_lifecycle(f: &Framework) -> CaseResult {
    let nodes: Api<Node> = f.api_all();
    let created = create_cluster_scoped(f, &fake_node(f)).await?;
    let name = created.name_any();
    let read = nodes.get(&name).await?;
    ensure!(
        read.name_any() == name,
        "node {name} as read back: expected that name, got {:?}",
        read.name_any()
    );
    patch_label(f, &nodes, &read).await?;
    let selector = format!("{name}=patched");
    f.step(format!("listing nodes with labels {selector}"));
    let listed = nodes.list(&ListParams::default().labels(&selector)).await?;
    let listed_names: Vec<String> = listed.items.iter().map(ResourceExt::name_any).collect();
    ensure!(
        listed_names == [name.clone()],
        "listing nodes with labels {selector}: expected exactly node {name}, got {listed_names:?}"
    );
    update_label(f, &nodes, &name, &name).await?;
    f.step(format!("deleting node {name}"));
    match nodes.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {}
        // A replayed delete whose first answer was lost finds the node gone already.
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    confirm_deleted(f, &nodes, &format!("{name}=updated")).await
}
