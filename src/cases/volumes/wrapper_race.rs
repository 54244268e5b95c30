//! Many ConfigMap volumes per pod, many such pods on one node at once (upstream
//! `storage/empty_dir_wrapper.go`, "should not cause race condition when used for configmaps",
//! the regression test for kubernetes#29641): 50 ConfigMaps, each mounted as its own volume in
//! every pod of a 5-replica ReplicationController pinned to one node by hostname affinity; all
//! pods must reach Running, three times over (the controllers stay until the end, as upstream's
//! deferred cleanup keeps them).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, Container, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    ReplicationController, VolumeMount,
};
use kube::ResourceExt;
use kube::api::DeleteParams;

use crate::case;
use crate::cases::config::mount_path;
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{config_map, config_map_volume, replication_controller, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, pod_node};
use crate::os::HOSTNAME_LABEL;

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(CONFIGMAP_RACE, Kind::Adapted, configmap_race)]
}

/// Upstream empty_dir_wrapper.go "should not cause race condition when used for configmaps".
pub(crate) const CONFIGMAP_RACE: &str = "[sig-storage] EmptyDir wrapper volumes should not cause race condition when used for configmaps [Serial] [Conformance]";

/// Upstream `wrappedVolumeRaceConfigMapVolumeCount`.
const VOLUMES: usize = 50;
/// Upstream `wrappedVolumeRaceConfigMapPodCount`.
const PODS: i32 = 5;
/// Upstream `wrappedVolumeRaceConfigMapIterationCount`.
const ITERATIONS: usize = 3;
/// How long the RC may take to create its pods (upstream `e2epod.PodsCreated` polls for a
/// minute).
const CREATED_WITHIN: Duration = Duration::from_secs(60);
/// How long an RC's pods may take to be gone after it is deleted.
const GONE_WITHIN: Duration = Duration::from_secs(60);

async fn configmap_race(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.step(format!("creating {VOLUMES} configmaps"));
    let names: Vec<String> = (0..VOLUMES).map(|i| format!("racey-configmap-{i}")).collect();
    for name in &names {
        f.create(&config_map(name, &[("data-1", "value-1")])).await?;
    }
    let mut mounts = Vec::new();
    let mut pod = f.pod("wrapped-volume-race");
    for (i, name) in names.iter().enumerate() {
        pod = pod.volume(config_map_volume(name, name, &[("data-1", "data-1")]));
        mounts.push(VolumeMount {
            name: name.clone(),
            mount_path: mount_path(f, &format!("config-{i}")),
            ..Default::default()
        });
    }
    let container = ContainerBuilder::new("test-container", "pause").with(move |c: &mut Container| {
        c.volume_mounts = Some(mounts.clone());
    });
    let nodes = f.require_nodes(os, 1).await?;
    let mut rcs = Vec::new();
    for i in 0..ITERATIONS {
        // Upstream picks a random ready schedulable node each time; this walks the pool.
        let node = f.api_all::<Node>().get(&nodes[i % nodes.len()].name).await?;
        let hostname = node
            .labels()
            .get(HOSTNAME_LABEL)
            .cloned()
            .ok_or_else(|| CaseError::failed(format!("node {}: no {HOSTNAME_LABEL} label", node.name_any())))?;
        let rc_name = format!("wrapped-volume-race-{i}");
        let affinity = hostname_affinity(&hostname);
        let template = template_of(
            pod.clone()
                .label("name", &rc_name)
                .container(container.clone())
                .edit_spec(move |spec| {
                    spec.affinity = Some(affinity.clone());
                    spec.dns_policy = Some("Default".into());
                })
                .build(f)?,
        );
        f.step(format!(
            "creating RC {rc_name}: {PODS} pods with {VOLUMES} configmap volumes each on node {hostname}"
        ));
        f.create(&replication_controller(&rc_name, PODS, template)).await?;
        rcs.push(rc_name.clone());
        let selector = format!("name={rc_name}");
        f.wait_list_within(
            &f.api::<Pod>(),
            &selector,
            |pods: &[Pod]| live(pods).len() == PODS as usize,
            &format!("RC {rc_name} to create {PODS} pods"),
            CREATED_WITHIN,
        )
        .await?;
        let running = f
            .wait_list(
                &f.api::<Pod>(),
                &selector,
                |pods: &[Pod]| {
                    let live = live(pods);
                    live.len() == PODS as usize && live.iter().all(|p| phase(p) == "Running")
                },
                &format!("{PODS} pods of RC {rc_name}, each with {VOLUMES} configmap volumes, Running"),
            )
            .await?;
        let summary: BTreeMap<String, String> = running
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| (p.name_any(), format!("{} on {}", phase(p), pod_node(p))))
            .collect();
        f.step(format!("RC {rc_name}: {summary:?}"));
    }
    for rc in &rcs {
        f.api::<ReplicationController>()
            .delete(rc, &DeleteParams::background())
            .await?;
        f.wait_list_within(
            &f.api::<Pod>(),
            &format!("name={rc}"),
            |pods: &[Pod]| pods.is_empty(),
            &format!("the pods of deleted RC {rc} to be gone"),
            GONE_WITHIN,
        )
        .await?;
    }
    f.step("deleting the configmaps");
    for name in &names {
        f.api::<ConfigMap>().delete(name, &DeleteParams::default()).await?;
    }
    Ok(())
}

/// Required node affinity to the node whose hostname label is `hostname` (upstream's
/// `kubernetes.io/hostname In [..]`).
fn hostname_affinity(hostname: &str) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: HOSTNAME_LABEL.into(),
                        operator: "In".into(),
                        values: Some(vec![hostname.into()]),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pods not being deleted.
fn live(pods: &[Pod]) -> Vec<&Pod> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// A pod's phase, "" when it has none.
fn phase(p: &Pod) -> &str {
    p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}
