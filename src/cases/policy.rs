//! Adapted cases: cluster policy — ResourceQuota, LimitRange, scheduler preemption and the
//! horizontal pod autoscaler.
//!
//! Quota and limit cases create target-OS pods, so admission and scheduling are checked with the
//! pods a Windows (or Linux) job really runs; preemption fills one node of the target OS.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget,
    ResourceMetricSource,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, LimitRange, LimitRangeItem, LimitRangeSpec, Pod, ReplicationController, ResourceQuota,
    ResourceQuotaSpec, ResourceRequirements,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::services::ServiceBuilder;
use crate::framework::workloads::{config_map, replication_controller, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, RUN_ID_LABEL, pod_node};
use crate::{ensure, fail};

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        case!(QUOTA_PROMPT, Kind::Adapted, quota_prompt),
        case!(QUOTA_POD, Kind::Adapted, quota_pod),
        case!(QUOTA_CONFIGMAP, Kind::Adapted, quota_configmap),
        case!(QUOTA_BEST_EFFORT, Kind::Adapted, quota_best_effort),
        case!(RC_EXCEEDED_QUOTA, Kind::Adapted, rc_exceeded_quota),
        case!(LIMITRANGE_DEFAULTS, Kind::Adapted, limitrange_defaults),
        case!(PREEMPTION_BASIC, Kind::Adapted, preemption_basic),
        case!(HPA_LIGHT, Kind::Adapted, hpa_light).with_timeout(Duration::from_secs(20 * 60)),
    ]
}

pub(crate) fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

pub(crate) fn quota(name: &str, hard: &[(&str, &str)], scopes: &[&str]) -> ResourceQuota {
    ResourceQuota {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ResourceQuotaSpec {
            hard: Some(quantities(hard)),
            scopes: (!scopes.is_empty()).then(|| scopes.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }),
        status: None,
    }
}

/// `status.used[resource]` of a quota, as text (`"0"` when absent).
pub(crate) fn used(q: &ResourceQuota, resource: &str) -> String {
    q.status
        .as_ref()
        .and_then(|s| s.used.as_ref())
        .and_then(|u| u.get(resource))
        .map(|v| v.0.clone())
        .unwrap_or_else(|| "0".into())
}

/// Waits until quota `name` reports exactly `expected` usage for each listed resource (values
/// compared as the API prints them, e.g. `500m`, `1`). A resource missing from `status.used`
/// does not count as zero: as upstream's `waitForResourceQuota`, the quota controller must
/// have computed it (until then the quota admission refuses with "status unknown").
pub(crate) async fn wait_used(
    f: &Framework,
    name: &str,
    expected: &[(&str, &str)],
) -> Result<ResourceQuota, CaseError> {
    let want: Vec<(String, String)> = expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let why = format!("to report usage {want:?} in status.used");
    f.wait_for(
        &f.api::<ResourceQuota>(),
        name,
        move |q: Option<&ResourceQuota>| {
            q.is_some_and(|q| {
                let reported = q.status.as_ref().and_then(|s| s.used.as_ref());
                want.iter()
                    .all(|(k, v)| reported.is_some_and(|u| u.contains_key(k)) && &used(q, k) == v)
            })
        },
        &why,
    )
    .await?
    .ok_or_else(|| CaseError::failed(format!("ResourceQuota {name} vanished")))
}

pub(crate) fn with_resources(
    requests: &'static [(&'static str, &'static str)],
    limits: &'static [(&'static str, &'static str)],
) -> impl Fn(&mut Container) + Clone + Send + Sync + 'static {
    move |c: &mut Container| {
        c.resources = Some(ResourceRequirements {
            requests: (!requests.is_empty()).then(|| quantities(requests)),
            limits: (!limits.is_empty()).then(|| quantities(limits)),
            ..Default::default()
        })
    }
}

fn pause_pod(f: &Framework, name: &str) -> PodBuilder {
    f.pod(name).container(ContainerBuilder::new("pause", "pause"))
}

// --- ResourceQuota ---------------------------------------------------------------------------

/// Upstream apimachinery/resource_quota.go "should create a ResourceQuota and ensure its status
/// is promptly calculated".
pub(crate) const QUOTA_PROMPT: &str = "[sig-api-machinery] ResourceQuota should create a ResourceQuota and ensure its status is promptly calculated. [Conformance]";

/// Upstream resource_quota.go: a new quota's status soon carries its hard limits and a usage
/// figure for every constrained resource.
async fn quota_prompt(f: &Framework) -> CaseResult {
    let hard = [
        ("pods", "5"),
        ("services", "10"),
        ("configmaps", "10"),
        ("secrets", "10"),
        ("replicationcontrollers", "10"),
    ];
    f.create(&quota("test-quota", &hard, &[])).await?;
    let computed = |q: Option<&ResourceQuota>| {
        q.and_then(|q| q.status.as_ref()).is_some_and(|s| {
            let h = s.hard.clone().unwrap_or_default();
            let u = s.used.clone().unwrap_or_default();
            hard.iter()
                .all(|(k, v)| h.get(*k).map(|q| q.0.as_str()) == Some(*v) && u.contains_key(*k))
        })
    };
    let q = f
        .wait_for(
            &f.api::<ResourceQuota>(),
            "test-quota",
            computed,
            "to have its status calculated",
        )
        .await?
        .unwrap_or_default();
    ensure!(
        used(&q, "pods") == "0",
        "a fresh namespace's quota reports {} pods in use, expected 0",
        used(&q, "pods")
    );
    Ok(())
}

/// Upstream apimachinery/resource_quota.go "should create a ResourceQuota and capture the life
/// of a pod".
pub(crate) const QUOTA_POD: &str =
    "[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a pod. [Conformance]";

/// Upstream resource_quota.go: a pod's requests are charged to the quota, a pod past the quota
/// is refused with 403, and deleting the pod releases the usage.
async fn quota_pod(f: &Framework) -> CaseResult {
    f.create(&quota(
        "test-quota",
        &[("pods", "2"), ("requests.cpu", "1"), ("requests.memory", "500Mi")],
        &[],
    ))
    .await?;
    wait_used(f, "test-quota", &[("pods", "0")]).await?;
    let pod = PodBuilder::new("test-pod", f.target_os()).container(
        ContainerBuilder::new("pause", "pause").with(with_resources(&[("cpu", "500m"), ("memory", "252Mi")], &[])),
    );
    f.create_pod(&pod).await?;
    wait_used(
        f,
        "test-quota",
        &[("pods", "1"), ("requests.cpu", "500m"), ("requests.memory", "252Mi")],
    )
    .await?;

    let over = PodBuilder::new("fail-pod", f.target_os()).container(
        ContainerBuilder::new("pause", "pause").with(with_resources(&[("cpu", "600m"), ("memory", "100Mi")], &[])),
    );
    match f.create_pod(&over).await {
        Err(CaseError::Failed(msg)) if msg.contains("exceeded quota") || msg.contains("403") => {}
        Err(other) => fail!("a pod past the quota was refused for another reason: {other}"),
        Ok(_) => fail!("pod fail-pod (600m CPU, 500m left in quota) was admitted; expected 403 exceeded quota"),
    }
    f.api::<Pod>()
        .delete("test-pod", &DeleteParams::default().grace_period(0))
        .await?;
    wait_used(
        f,
        "test-quota",
        &[("pods", "0"), ("requests.cpu", "0"), ("requests.memory", "0")],
    )
    .await
    .map(|_| ())
}

/// Upstream apimachinery/resource_quota.go "should create a ResourceQuota and capture the life
/// of a configMap".
pub(crate) const QUOTA_CONFIGMAP: &str = "[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a configMap. [Conformance]";

/// Upstream resource_quota.go: a ConfigMap is counted while it exists and released after.
async fn quota_configmap(f: &Framework) -> CaseResult {
    // kube-controller-manager's root-ca-cert-publisher adds kube-root-ca.crt to every new
    // namespace, maybe after the quota's first count: counting before it lands makes every
    // expected figure one short (upstream waits up to a minute for the count to hold still for
    // 15 s). Waiting for that ConfigMap is the same settling, without the fixed 15 s.
    if let Err(e) = f
        .wait_for_within(
            &f.api::<ConfigMap>(),
            "kube-root-ca.crt",
            |c: Option<&ConfigMap>| c.is_some(),
            "to be published by the root CA publisher",
            Duration::from_secs(15),
        )
        .await
    {
        f.step(format!("counting ConfigMaps without kube-root-ca.crt: {e}"));
    }
    let found = f.api::<ConfigMap>().list(&ListParams::default()).await?.items.len();
    let before = i64::try_from(found).unwrap_or(i64::MAX);
    f.create(&quota("test-quota", &[("configmaps", &(before + 1).to_string())], &[]))
        .await?;
    wait_used(f, "test-quota", &[("configmaps", &before.to_string())]).await?;
    f.create(&config_map("test-configmap", &[("a", "b")])).await?;
    wait_used(f, "test-quota", &[("configmaps", &(before + 1).to_string())]).await?;
    f.api::<ConfigMap>()
        .delete("test-configmap", &DeleteParams::default())
        .await?;
    wait_used(f, "test-quota", &[("configmaps", &before.to_string())])
        .await
        .map(|_| ())
}

/// Upstream apimachinery/resource_quota.go "should verify ResourceQuota with best effort scope".
pub(crate) const QUOTA_BEST_EFFORT: &str =
    "[sig-api-machinery] ResourceQuota should verify ResourceQuota with best effort scope. [Conformance]";

/// Upstream resource_quota.go: a BestEffort pod is charged only to the BestEffort-scoped quota,
/// a pod with requests and limits only to the NotBestEffort one.
async fn quota_best_effort(f: &Framework) -> CaseResult {
    f.create(&quota("quota-besteffort", &[("pods", "5")], &["BestEffort"]))
        .await?;
    f.create(&quota("quota-not-besteffort", &[("pods", "5")], &["NotBestEffort"]))
        .await?;
    wait_used(f, "quota-besteffort", &[("pods", "0")]).await?;
    wait_used(f, "quota-not-besteffort", &[("pods", "0")]).await?;

    f.create_pod(&pause_pod(f, "best-effort")).await?;
    wait_used(f, "quota-besteffort", &[("pods", "1")]).await?;
    wait_used(f, "quota-not-besteffort", &[("pods", "0")]).await?;
    f.api::<Pod>()
        .delete("best-effort", &DeleteParams::default().grace_period(0))
        .await?;
    wait_used(f, "quota-besteffort", &[("pods", "0")]).await?;

    let sized = PodBuilder::new("not-best-effort", f.target_os()).container(
        ContainerBuilder::new("pause", "pause").with(with_resources(
            &[("cpu", "100m"), ("memory", "100Mi")],
            &[("cpu", "200m"), ("memory", "200Mi")],
        )),
    );
    f.create_pod(&sized).await?;
    wait_used(f, "quota-not-besteffort", &[("pods", "1")]).await?;
    wait_used(f, "quota-besteffort", &[("pods", "0")]).await.map(|_| ())
}

/// Upstream apps/rc.go "should surface a failure condition on a common issue like exceeded quota".
pub(crate) const RC_EXCEEDED_QUOTA: &str = "[sig-apps] ReplicationController should surface a failure condition on a common issue like exceeded quota [Conformance]";

/// Upstream rc.go: with a quota of 2 pods, an RC asking for 3 shows `ReplicaFailure`; scaled to
/// 2 the condition goes away.
async fn rc_exceeded_quota(f: &Framework) -> CaseResult {
    let name = "condition-test";
    f.create(&quota(name, &[("pods", "2")], &[])).await?;
    wait_used(f, name, &[("pods", "0")]).await?;
    let pod = f
        .pod(name)
        .label("name", name)
        .container(ContainerBuilder::new("pause", "pause"));
    f.create(&replication_controller(name, 3, template_of(pod.build(f)?)))
        .await?;
    let failure = |rc: Option<&ReplicationController>| {
        rc.and_then(|r| r.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "ReplicaFailure" && c.status == "True"))
    };
    let api = f.api::<ReplicationController>();
    f.wait_for(&api, name, failure, "to report a ReplicaFailure condition")
        .await?;
    f.step("scaling the RC down to 2");
    api.patch_scale(
        name,
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"replicas": 2}})),
    )
    .await?;
    f.wait_for(
        &api,
        name,
        move |rc: Option<&ReplicationController>| rc.is_some() && !failure(rc),
        "to clear its ReplicaFailure condition",
    )
    .await?;
    Ok(())
}

// --- LimitRange ------------------------------------------------------------------------------

/// Upstream scheduling/limit_range.go "should create a LimitRange with defaults and ensure pod
/// has those defaults applied".
pub(crate) const LIMITRANGE_DEFAULTS: &str = "[sig-scheduling] LimitRange should create a LimitRange with defaults and \
     ensure pod has those defaults applied. [Conformance]";

/// Upstream limit_range.go: a pod without resources gets the LimitRange's default requests and
/// limits; a pod with partial resources keeps its own and gets the rest defaulted; a pod past
/// the max is refused.
async fn limitrange_defaults(f: &Framework) -> CaseResult {
    let item = LimitRangeItem {
        type_: "Container".into(),
        min: Some(quantities(&[("cpu", "100m"), ("memory", "100Mi")])),
        max: Some(quantities(&[("cpu", "500m"), ("memory", "500Mi")])),
        default_request: Some(quantities(&[("cpu", "200m"), ("memory", "200Mi")])),
        default: Some(quantities(&[("cpu", "300m"), ("memory", "300Mi")])),
        ..Default::default()
    };
    f.create(&LimitRange {
        metadata: ObjectMeta {
            name: Some("limit-range".into()),
            ..Default::default()
        },
        spec: Some(LimitRangeSpec { limits: vec![item] }),
    })
    .await?;
    let resources_of = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.resources.clone())
            .unwrap_or_default()
    };
    let text = |m: Option<BTreeMap<String, Quantity>>| {
        m.unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect::<BTreeMap<_, _>>()
    };
    let expect = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
    };

    let defaulted = f.create_pod(&pause_pod(f, "pod-no-resources")).await?;
    let r = resources_of(&defaulted);
    ensure!(
        text(r.requests.clone()) == expect(&[("cpu", "200m"), ("memory", "200Mi")])
            && text(r.limits.clone()) == expect(&[("cpu", "300m"), ("memory", "300Mi")]),
        "pod-no-resources got resources {r:?}, expected the LimitRange defaults (requests 200m/200Mi, limits 300m/300Mi)"
    );
    let partial = PodBuilder::new("pod-partial-resources", f.target_os()).container(
        ContainerBuilder::new("pause", "pause").with(with_resources(&[("cpu", "300m")], &[("cpu", "500m")])),
    );
    let partial = f.create_pod(&partial).await?;
    let r = resources_of(&partial);
    ensure!(
        text(r.requests.clone()) == expect(&[("cpu", "300m"), ("memory", "200Mi")])
            && text(r.limits.clone()) == expect(&[("cpu", "500m"), ("memory", "300Mi")]),
        "pod-partial-resources got resources {r:?}, expected its own CPU and the default memory"
    );
    let too_big = PodBuilder::new("pod-too-big", f.target_os()).container(
        ContainerBuilder::new("pause", "pause").with(with_resources(&[("cpu", "600m")], &[("cpu", "600m")])),
    );
    match f.create_pod(&too_big).await {
        Err(CaseError::Failed(_)) => Ok(()),
        Err(skip) => Err(skip),
        Ok(_) => fail!("pod-too-big (600m CPU, LimitRange max 500m) was admitted"),
    }
}

// --- Preemption ------------------------------------------------------------------------------

/// Upstream scheduling/preemption.go "validates basic preemption works".
pub(crate) const PREEMPTION_BASIC: &str =
    "[sig-scheduling] SchedulerPreemption [Serial] validates basic preemption works [Conformance]";

/// Millicores of CPU a quantity string stands for (`"2"`, `"1500m"`, `"0.5"`).
fn millicores(q: &str) -> i64 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or(0),
        None => q.parse::<f64>().map(|c| (c * 1000.0).round() as i64).unwrap_or(0),
    }
}

/// Upstream preemption.go: a low-priority pod takes most of a target-OS node's free CPU; a
/// high-priority pod asking for the same cannot fit, so the scheduler evicts the low-priority
/// pod and places the high-priority one on that node.
async fn preemption_basic(f: &Framework) -> CaseResult {
    let node = f.require_nodes(f.target_os(), 1).await?.remove(0).name;
    let node_obj = f.api_all::<k8s_openapi::api::core::v1::Node>().get(&node).await?;
    let allocatable = node_obj
        .status
        .and_then(|s| s.allocatable)
        .and_then(|a| a.get("cpu").map(|q| millicores(&q.0)))
        .unwrap_or(0);
    let on_node = f
        .api_all::<Pod>()
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?;
    let requested: i64 = on_node
        .items
        .iter()
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .flat_map(|p| p.spec.iter().flat_map(|s| s.containers.iter()))
        .filter_map(|c| {
            c.resources
                .as_ref()?
                .requests
                .as_ref()?
                .get("cpu")
                .map(|q| millicores(&q.0))
        })
        .sum();
    let free = allocatable - requested;
    ensure!(
        free >= 10,
        "node {node} has {free}m CPU free (allocatable {allocatable}m, requested {requested}m); nothing to preempt with"
    );
    let ask = format!("{}m", free * 2 / 3);
    f.property("request_millicores", free * 2 / 3);

    let classes: Api<PriorityClass> = f.api_all();
    let (low, high) = (format!("{}-low", f.ns()), format!("{}-high", f.ns()));
    for (name, value) in [(&low, 1), (&high, 1000)] {
        let pc = PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([(RUN_ID_LABEL.to_string(), f.run().run_id.clone())])),
                ..Default::default()
            },
            value,
            ..Default::default()
        };
        classes.create(&PostParams::default(), &pc).await?;
    }
    let result = preempt_on(f, &node, &ask, &low, &high).await;
    for name in [&low, &high] {
        let _ = classes.delete(name, &DeleteParams::default()).await;
    }
    result
}

async fn preempt_on(f: &Framework, node: &str, ask: &str, low: &str, high: &str) -> CaseResult {
    let pinned = |name: &str, class: &str| {
        let (node, class, ask) = (node.to_string(), class.to_string(), ask.to_string());
        PodBuilder::new(name, f.target_os())
            .container(ContainerBuilder::new("pause", "pause").with(move |c: &mut Container| {
                c.resources = Some(ResourceRequirements {
                    requests: Some(quantities(&[("cpu", ask.as_str())])),
                    ..Default::default()
                })
            }))
            .edit_spec(move |spec| {
                spec.priority_class_name = Some(class.clone());
                spec.node_selector
                    .get_or_insert_with(BTreeMap::new)
                    .insert(crate::os::HOSTNAME_LABEL.into(), node.clone());
            })
    };
    let victim = f.create_pod_ready(&pinned("pod-low-priority", low)).await?;
    f.create_pod(&pinned("pod-high-priority", high)).await?;
    let victim_uid = victim.uid().unwrap_or_default();
    let preempted = move |p: Option<&Pod>| {
        p.is_none_or(|p| p.uid().as_deref() != Some(victim_uid.as_str()) || p.metadata.deletion_timestamp.is_some())
    };
    f.wait_for(&f.api::<Pod>(), "pod-low-priority", preempted, "to be preempted")
        .await?;
    let placed = f.wait_pod_ready("pod-high-priority").await?;
    ensure!(
        pod_node(&placed) == node,
        "pod-high-priority runs on {}, expected the preempting node {node}",
        pod_node(&placed)
    );
    Ok(())
}

// --- HPA -------------------------------------------------------------------------------------

/// Upstream autoscaling/horizontal_pod_autoscaling.go, ReplicationController light.
pub(crate) const HPA_LIGHT: &str = "[sig-autoscaling] [Feature:HPA] Horizontal pod autoscaling (scale resource: CPU) \
     ReplicationController light Should scale from 1 pod to 2 pods";

/// Upstream horizontal_pod_autoscaling.go: a one-replica resource-consumer RC (200m CPU request)
/// is told to burn 150m; an HPA targeting 50% utilisation (max 2) scales it to 2. Skips with a
/// reason when the cluster serves no metrics API.
async fn hpa_light(f: &Framework) -> CaseResult {
    let served = kube::discovery::group(&f.client(), "metrics.k8s.io").await.is_ok();
    f.skip_unless(
        served,
        "the cluster serves no metrics API (metrics.k8s.io), so the HPA has no CPU figures to act on",
    )?;
    let name = "rc-light";
    let pod = f.pod(name).label("name", name).container(
        ContainerBuilder::new("consumer", "resource-consumer")
            .port(8080, "TCP")
            .with(with_resources(&[("cpu", "200m")], &[("cpu", "500m")])),
    );
    f.create(&replication_controller(name, 1, template_of(pod.build(f)?)))
        .await?;
    f.create(
        &ServiceBuilder::cluster_ip(name)
            .selector("name", name)
            .port("http", 8080, 8080, "TCP")
            .build(f.ns(), &f.run().run_id),
    )
    .await?;
    f.wait_pods_ready(&format!("name={name}"), 1).await?;
    f.step("asking the consumer to burn 150 millicores");
    let path = format!(
        "/api/v1/namespaces/{}/services/{name}:8080/proxy/ConsumeCPU?millicores=150&durationSec=900",
        f.ns()
    );
    let request = http::Request::post(&path)
        .body(Vec::new())
        .map_err(|e| CaseError::failed(format!("building {path}: {e}")))?;
    f.client().request_text(request).await?;
    let hpa = HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("v1".into()),
                kind: "ReplicationController".into(),
                name: name.into(),
            },
            min_replicas: Some(1),
            max_replicas: 2,
            metrics: Some(vec![MetricSpec {
                type_: "Resource".into(),
                resource: Some(ResourceMetricSource {
                    name: "cpu".into(),
                    target: MetricTarget {
                        type_: "Utilization".into(),
                        average_utilization: Some(50),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    };
    f.create(&hpa).await?;
    f.wait_for(
        &f.api::<ReplicationController>(),
        name,
        crate::framework::workloads::conditions::replication_controller_ready(2),
        "to be scaled to 2 by the HPA",
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millicores_parse_every_cpu_notation() {
        assert_eq!(millicores("2"), 2000);
        assert_eq!(millicores("1500m"), 1500);
        assert_eq!(millicores("0.5"), 500);
        assert_eq!(millicores("junk"), 0);
    }

    #[test]
    fn usage_defaults_to_zero() {
        let q = quota("q", &[("pods", "1")], &["BestEffort"]);
        assert_eq!(used(&q, "pods"), "0");
        assert_eq!(q.spec.unwrap().scopes.unwrap(), ["BestEffort"]);
    }
}
