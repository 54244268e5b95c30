//! `[sig-scheduling] SchedulerPreemption [Serial]` (upstream test/e2e/scheduling/preemption.go):
//! the PriorityClass API and the scheduler's DefaultPreemption seen from outside. The cases put
//! fake extended resources on node status (`scheduling.k8s.io/foo`, `example.com/fakecpu`) so
//! the kubelet, which owns cpu and memory, does not correct them, and fill them with pods of
//! cluster-wide priority classes, so they run alone.
//!
//! Departures from upstream, each for a reason:
//! - Only nodes of the target OS take part (every pod in this harness carries its OS's node
//!   selector); upstream uses every ready schedulable node.
//! - Priority class names carry the case namespace (upstream uses fixed names such as `p1`):
//!   classes are cluster-wide and the Windows and Linux trials of a case share one cluster.
//! - The critical-pod and disruption-condition cases also check the preemptor ends up on the
//!   node it preempted on only where upstream waits for it to run; the disruption condition's
//!   reason (`PreemptionByScheduler`) is checked besides its type.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Affinity, Container, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    ResourceRequirements,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::wait::Condition as _;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::case;
use crate::cases::policy::quantities;
use crate::cases::scheduling::wait_for_stable_cluster;
use crate::catalog::{Case, Kind};
use crate::framework::wait::conditions::is_pod_ready;
use crate::framework::watch_events::{EventType, Resume};
use crate::framework::workloads::{replica_set, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, PodBuilder, RUN_ID_LABEL, pod_node};
use crate::{ensure, fail};

/// Upstream "PriorityClass endpoints verify PriorityClass endpoints can be operated with
/// different HTTP methods".
pub(crate) const PRIORITY_CLASS_ENDPOINTS: &str = "[sig-scheduling] SchedulerPreemption [Serial] PriorityClass endpoints \
     verify PriorityClass endpoints can be operated with different HTTP methods [Conformance]";
/// Upstream "validates lower priority pod preemption by critical pod".
pub(crate) const CRITICAL_POD: &str = "[sig-scheduling] SchedulerPreemption [Serial] validates lower priority pod preemption by critical pod [Conformance]";
/// Upstream "validates pod disruption condition is added to the preempted pod".
pub(crate) const DISRUPTION_CONDITION: &str = "[sig-scheduling] SchedulerPreemption [Serial] validates pod disruption \
     condition is added to the preempted pod [Conformance]";
/// Upstream "PreemptionExecutionPath runs ReplicaSets to verify preemption running path".
pub(crate) const EXECUTION_PATH: &str = "[sig-scheduling] SchedulerPreemption [Serial] PreemptionExecutionPath runs \
     ReplicaSets to verify preemption running path [Conformance]";

/// Upstream `testExtendedResource`.
const FOO: &str = "scheduling.k8s.io/foo";
/// The PreemptionExecutionPath's fake CPU.
const FAKE_CPU: &str = "example.com/fakecpu";
/// Upstream `testFinalizer`.
const TEST_FINALIZER: &str = "example.com/test-finalizer";
/// Upstream `framework.PodDeleteTimeout`'s role: how long a victim gets to start terminating.
const PREEMPTION_WAIT: Duration = Duration::from_secs(60);

/// The SchedulerPreemption cases.
pub fn cases() -> Vec<Case> {
    vec![
        case!(PRIORITY_CLASS_ENDPOINTS, Kind::Adapted, priority_class_endpoints),
        case!(CRITICAL_POD, Kind::Adapted, critical_pod),
        case!(DISRUPTION_CONDITION, Kind::Adapted, disruption_condition),
        case!(EXECUTION_PATH, Kind::Adapted, execution_path),
    ]
}

/// Creates the priority classes `(name, value)` (labelled with the run id and `extra`); an
/// existing class is accepted, as upstream's BeforeEach does.
async fn create_classes(f: &Framework, classes: &[(String, i32)], extra: Option<(&str, &str)>) -> CaseResult {
    let api: Api<PriorityClass> = f.api_all();
    for (name, value) in classes {
        let mut labels = BTreeMap::from([(RUN_ID_LABEL.to_string(), f.run().run_id.clone())]);
        if let Some((k, v)) = extra {
            labels.insert(k.to_string(), v.to_string());
        }
        let pc = PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels),
                ..Default::default()
            },
            value: *value,
            ..Default::default()
        };
        f.step(format!("creating PriorityClass {name} (value {value})"));
        match api.create(&PostParams::default(), &pc).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(CaseError::from(e).context(format!("creating PriorityClass {name}"))),
        }
    }
    Ok(())
}

/// Deletes the priority classes (upstream's AfterEach ignores the outcome).
async fn delete_classes(f: &Framework, classes: &[(String, i32)]) {
    let api: Api<PriorityClass> = f.api_all();
    for (name, _) in classes {
        let _ = api.delete(name, &DeleteParams::default().grace_period(0)).await;
    }
}

/// Sets (`Some`) or removes (`None`) extended resource `resource` in the capacity and
/// allocatable of `node`'s status (upstream `patchNode` on the status subresource).
async fn set_extended(f: &Framework, node: &str, resource: &str, amount: Option<&str>) -> CaseResult {
    let patch = json!({"status": {"capacity": {resource: amount}, "allocatable": {resource: amount}}});
    f.api_all::<Node>()
        .patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| CaseError::from(e).context(format!("patching {resource} on node {node}'s status")))?;
    Ok(())
}

/// Runs `body` with `amount` of `resource` advertised on each of `nodes`, then takes it off
/// again whatever `body` returned, and deletes `classes`.
async fn with_extended<F, Fut>(
    f: &Framework,
    nodes: &[String],
    resource: &str,
    amount: &str,
    classes: &[(String, i32)],
    body: F,
) -> CaseResult
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = CaseResult>,
{
    let mut result = create_classes(f, classes, None).await;
    let mut patched = Vec::new();
    if result.is_ok() {
        for node in nodes {
            f.step(format!("advertise {amount} {resource} on node {node}"));
            patched.push(node.clone());
            result = set_extended(f, node, resource, Some(amount)).await;
            if result.is_err() {
                break;
            }
        }
    }
    if result.is_ok() {
        result = body().await;
    }
    for node in patched {
        let removed = set_extended(f, &node, resource, None).await;
        if result.is_ok() {
            result = removed;
        }
    }
    delete_classes(f, classes).await;
    result
}

/// Requests and limits of `amount` of `resource`.
fn extended(resource: &str, amount: &str) -> impl Fn(&mut Container) + Clone + Send + Sync + 'static {
    let (resource, amount) = (resource.to_string(), amount.to_string());
    move |c: &mut Container| {
        let list = quantities(&[(resource.as_str(), amount.as_str())]);
        c.resources = Some(ResourceRequirements {
            requests: Some(list.clone()),
            limits: Some(list),
            ..Default::default()
        });
    }
}

/// Required node affinity on `metadata.name` (upstream's `MatchFields` term).
fn pinned_to(node: &str) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![node.to_string()]),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A pause pod of the target OS with priority class `class` asking for `amount` of `resource`.
fn pause_pod(f: &Framework, name: &str, class: &str, resource: &str, amount: &str) -> PodBuilder {
    let class = class.to_string();
    PodBuilder::new(name, f.target_os())
        .label("name", name)
        .container(ContainerBuilder::new("pause", "pause").with(extended(resource, amount)))
        .edit_spec(move |spec| spec.priority_class_name = Some(class.clone()))
}

/// Upstream's low, medium and high classes of the SchedulerPreemption context.
fn three_classes(f: &Framework) -> [(String, i32); 3] {
    let base = f.ns();
    [
        (format!("{base}-low-priority"), 1),
        (format!("{base}-medium-priority"), 100),
        (format!("{base}-high-priority"), 1000),
    ]
}

/// The target-OS nodes the scheduler may use.
async fn target_nodes(f: &Framework) -> Result<Vec<String>, CaseError> {
    Ok(f.require_nodes(f.target_os(), 1)
        .await?
        .into_iter()
        .map(|n| n.name)
        .collect())
}

/// Whether the pod object `uid` named is gone or terminating (upstream `podPreempted`).
async fn preempted(api: &Api<Pod>, name: &str, uid: &str) -> Result<bool, CaseError> {
    Ok(match api.get_opt(name).await? {
        None => true,
        Some(p) => p.uid().as_deref() != Some(uid) || p.metadata.deletion_timestamp.is_some(),
    })
}

// --- PriorityClass endpoints ------------------------------------------------------------------

/// Upstream: changing `value` of a PriorityClass by patch or update is refused; changing its
/// description either way succeeds; a list works; a get shows the old value and the new
/// description.
async fn priority_class_endpoints(f: &Framework) -> CaseResult {
    let run = f.ns().to_string();
    let classes = [(format!("{run}-p1"), 1), (format!("{run}-p2"), 2)];
    create_classes(f, &classes, Some(("e2e", run.as_str()))).await?;
    let result = endpoints_body(f, &classes).await;
    f.step(format!("deleting the PriorityClasses labelled e2e={run}"));
    let cleaned = f
        .api_all::<PriorityClass>()
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&format!("e2e={run}")),
        )
        .await;
    result?;
    cleaned.map_err(|e| CaseError::from(e).context("deleting the PriorityClasses by collection"))?;
    Ok(())
}

async fn endpoints_body(f: &Framework, classes: &[(String, i32)]) -> CaseResult {
    let api: Api<PriorityClass> = f.api_all();
    let (p1, p2) = (&classes[0].0, &classes[1].0);

    f.step(format!("patching the value of PriorityClass {p1}, which is immutable"));
    let patch = json!({"value": classes[0].1 * 10});
    match api.patch(p1, &PatchParams::default(), &Patch::Strategic(&patch)).await {
        Err(kube::Error::Api(s)) => f.step(format!("refused as expected: {}", s.message)),
        Err(e) => return Err(CaseError::from(e).context(format!("patching PriorityClass {p1}"))),
        Ok(pc) => fail!(
            "patching the immutable value of PriorityClass {p1} to {} succeeded (value now {}); expected an error",
            classes[0].1 * 10,
            pc.value
        ),
    }

    f.step(format!("updating the value of PriorityClass {p2}, which is immutable"));
    let mut pc = api.get(p2).await?;
    pc.value *= 10;
    match api.replace(p2, &PostParams::default(), &pc).await {
        Err(kube::Error::Api(s)) => f.step(format!("refused as expected: {}", s.message)),
        Err(e) => return Err(CaseError::from(e).context(format!("updating PriorityClass {p2}"))),
        Ok(pc) => fail!(
            "updating the immutable value of PriorityClass {p2} to {} succeeded (value now {}); expected an error",
            classes[1].1 * 10,
            pc.value
        ),
    }

    let new_desc = "updated description";
    f.step(format!("patching the description of PriorityClass {p1}"));
    api.patch(
        p1,
        &PatchParams::default(),
        &Patch::Strategic(&json!({"description": new_desc})),
    )
    .await
    .map_err(|e| CaseError::from(e).context(format!("patching the description of PriorityClass {p1}")))?;
    f.step(format!("updating the description of PriorityClass {p2}"));
    crate::framework::update::replace_retrying(&api, p2, |pc: &mut PriorityClass| {
        pc.description = Some(new_desc.to_string());
    })
    .await?;

    f.step("listing PriorityClasses");
    let listed = api.list(&ListParams::default()).await?;
    for (name, _) in classes {
        ensure!(
            listed.items.iter().any(|pc| pc.metadata.name.as_deref() == Some(name)),
            "PriorityClass {name} is missing from the list of PriorityClasses"
        );
    }

    for (name, value) in classes {
        let live = api.get(name).await?;
        ensure!(
            live.value == *value,
            "PriorityClass {name} has value {}, expected the original {value}",
            live.value
        );
        ensure!(
            live.description.as_deref() == Some(new_desc),
            "PriorityClass {name} has description {:?}, expected {new_desc:?}",
            live.description
        );
    }
    Ok(())
}

// --- Preemption by a critical pod ---------------------------------------------------------------

/// Upstream: every node advertises 5 foo and runs two pods asking for 2 each (the very first low
/// priority, the rest medium); a system-cluster-critical pod in kube-system asking for 2 must
/// run, and the only pod preempted for it is the low-priority one.
async fn critical_pod(f: &Framework) -> CaseResult {
    wait_for_stable_cluster(f).await?;
    let nodes = target_nodes(f).await?;
    let classes = three_classes(f);
    with_extended(f, &nodes, FOO, "5", &classes, || critical_body(f, &nodes, &classes)).await
}

async fn critical_body(f: &Framework, nodes: &[String], classes: &[(String, i32)]) -> CaseResult {
    let (low, medium) = (&classes[0].0, &classes[1].0);
    let mut names = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        for j in 0..2 {
            let class = if names.is_empty() { low } else { medium };
            let name = format!("pod{i}-{j}-{}", if names.is_empty() { "low" } else { "medium" });
            let pin = pinned_to(node);
            f.create_pod(&pause_pod(f, &name, class, FOO, "2").edit_spec(move |s| s.affinity = Some(pin.clone())))
                .await?;
            names.push(name);
        }
    }
    ensure!(
        names.len() >= 2,
        "created {} pods; at least two are needed to run preemption",
        names.len()
    );
    f.step("wait for the pods to be scheduled and run");
    let mut uids = Vec::new();
    for name in &names {
        let pod = f.wait_pod_ready(name).await?;
        uids.push(pod.uid().unwrap_or_default());
    }

    let system: Api<Pod> = Api::namespaced(f.client(), "kube-system");
    let mut critical = PodBuilder::new("critical-pod", f.target_os())
        .container(ContainerBuilder::new("pause", "pause").with(extended(FOO, "2")))
        .edit_spec(|s| s.priority_class_name = Some("system-cluster-critical".into()))
        .build(f)?;
    critical.metadata.namespace = Some("kube-system".into());
    f.step("run a critical pod in kube-system asking for what the low-priority pod holds");
    let result = async {
        system.create(&PostParams::default(), &critical).await?;
        let placed = f
            .wait_for_within(&system, "critical-pod", is_pod_ready(), "to run", PREEMPTION_WAIT)
            .await?
            .ok_or_else(|| CaseError::failed("pod kube-system/critical-pod disappeared while waiting for it to run"))?;
        f.property("critical_pod_node", pod_node(&placed));
        let api = f.api::<Pod>();
        ensure!(
            preempted(&api, &names[0], &uids[0]).await?,
            "pod {} (low priority) is still running without a deletion timestamp; expected it to be preempted \
             for kube-system/critical-pod",
            names[0]
        );
        for (name, uid) in names.iter().zip(&uids).skip(1) {
            ensure!(
                !preempted(&api, name, uid).await?,
                "pod {name} (medium priority) was deleted or is terminating; only the low-priority pod should be preempted"
            );
        }
        Ok::<(), CaseError>(())
    }
    .await;
    let deleted = match system
        .delete("critical-pod", &DeleteParams::default().grace_period(0))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(CaseError::from(e).context("deleting kube-system/critical-pod")),
    };
    result?;
    deleted?;
    f.wait_for_within(
        &system,
        "critical-pod",
        |p: Option<&Pod>| p.is_none(),
        "to be deleted",
        PREEMPTION_WAIT,
    )
    .await?;
    Ok(())
}

// --- DisruptionTarget condition on the victim ---------------------------------------------------

/// Upstream: a node advertises 1 foo; a low-priority pod with a finalizer takes it; a
/// high-priority pod asks for it; the victim starts terminating (the finalizer keeps it visible)
/// and carries the DisruptionTarget condition.
async fn disruption_condition(f: &Framework) -> CaseResult {
    wait_for_stable_cluster(f).await?;
    let node = target_nodes(f).await?.remove(0);
    let classes = three_classes(f);
    let nodes = [node.clone()];
    with_extended(f, &nodes, FOO, "1", &classes, || disruption_body(f, &node, &classes)).await
}

async fn disruption_body(f: &Framework, node: &str, classes: &[(String, i32)]) -> CaseResult {
    let (low, high) = (&classes[0].0, &classes[2].0);
    let pin = pinned_to(node);
    let pin2 = pin.clone();
    let victim = pause_pod(f, "victim-pod", low, FOO, "1").edit_spec(move |s| s.affinity = Some(pin.clone()));
    let mut obj = victim.build(f)?;
    obj.metadata.finalizers = Some(vec![TEST_FINALIZER.into()]);
    let api = f.api::<Pod>();
    f.step("create a low priority pod that consumes 1/1 of the node's foo");
    api.create(&PostParams::default(), &obj).await?;
    let result = async {
        f.wait_pod_ready("victim-pod").await?;
        f.create_pod(&pause_pod(f, "preemptor-pod", high, FOO, "1").edit_spec(move |s| s.affinity = Some(pin2.clone())))
            .await?;
        f.step("wait for the victim pod to be terminating");
        let seen = f
            .wait_for_within(
                &api,
                "victim-pod",
                |p: Option<&Pod>| p.is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
                "to be terminating (preempted by preemptor-pod)",
                PREEMPTION_WAIT,
            )
            .await?
            .ok_or_else(|| CaseError::failed("pod victim-pod vanished although its finalizer should keep it"))?;
        let conditions = seen.status.and_then(|s| s.conditions).unwrap_or_default();
        let Some(c) = conditions.iter().find(|c| c.type_ == "DisruptionTarget") else {
            fail!(
                "pod victim-pod is terminating without a DisruptionTarget condition; conditions seen: {:?}",
                conditions.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>()
            );
        };
        ensure!(
            c.status == "True" && c.reason.as_deref() == Some("PreemptionByScheduler"),
            "pod victim-pod's DisruptionTarget condition is status {} reason {:?}; expected True, PreemptionByScheduler",
            c.status,
            c.reason
        );
        Ok::<(), CaseError>(())
    }
    .await;
    f.step("remove the finalizer so the victim pod can go");
    let removed = api
        .patch(
            "victim-pod",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
    result?;
    match removed {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(CaseError::from(e).context("removing the finalizer of victim-pod")),
    }
}

// --- PreemptionExecutionPath ------------------------------------------------------------------

/// Upstream: a node advertises 1000 fakecpu; ReplicaSets of priority 1, 2 and 3 take 200, 300 and
/// 450; a priority-4 pod asking for 500 preempts exactly the pods of the first two, whose
/// replacements then cannot run: each of rs-pod1 and rs-pod2 is seen created twice, rs-pod3 once,
/// and that stays so for 5 seconds.
async fn execution_path(f: &Framework) -> CaseResult {
    wait_for_stable_cluster(f).await?;
    let node = target_nodes(f).await?.remove(0);
    let classes: Vec<(String, i32)> = (1..=4).map(|i| (format!("{}-p{i}", f.ns()), i)).collect();
    let nodes = [node.clone()];
    with_extended(f, &nodes, FAKE_CPU, "1000", &classes, || {
        execution_body(f, &node, &classes)
    })
    .await
}

async fn execution_body(f: &Framework, node: &str, classes: &[(String, i32)]) -> CaseResult {
    let pods = f.api::<Pod>();
    let mut watch = f.watch_events(&pods, "", None, Resume::Relist).await?;
    let mut seen = [0usize; 3];
    let count = |seen: &mut [usize; 3], name: &str| {
        for (i, s) in seen.iter_mut().enumerate() {
            if name.starts_with(&format!("rs-pod{}", i + 1)) {
                *s += 1;
            }
        }
    };
    let on_node = |b: PodBuilder| {
        let node = node.to_string();
        b.edit_spec(move |s| {
            s.node_selector
                .get_or_insert_with(BTreeMap::new)
                .insert(crate::os::HOSTNAME_LABEL.into(), node.clone());
        })
    };
    for (i, ask) in [(1usize, "200"), (2, "300"), (3, "450")] {
        let name = format!("pod{i}");
        let template = template_of(on_node(pause_pod(f, &name, &classes[i - 1].0, FAKE_CPU, ask)).build(f)?);
        let rs_name = format!("rs-{name}");
        f.create(&replica_set(&rs_name, 1, template)).await?;
        f.wait_list_within(
            &pods,
            &format!("name={name}"),
            |ps: &[Pod]| ps.iter().any(|p| is_pod_ready().matches_object(Some(p))),
            &format!("ReplicaSet {rs_name} to have 1 available replica"),
            PREEMPTION_WAIT,
        )
        .await?;
    }
    f.step("create preemptor pod4 (priority 4, 500 fakecpu)");
    f.create_pod(&on_node(pause_pod(f, "pod4", &classes[3].0, FAKE_CPU, "500")))
        .await?;
    f.wait_for_within(
        &pods,
        "pod4",
        |p: Option<&Pod>| p.is_some_and(|p| !pod_node(p).is_empty()),
        "to be bound after preempting",
        PREEMPTION_WAIT,
    )
    .await?;

    let expected = [2usize, 2, 1];
    let until = Instant::now() + PREEMPTION_WAIT;
    let mut settled_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let stop = match settled_at {
            Some(t) => t + Duration::from_secs(5),
            None => until,
        };
        if now >= stop {
            break;
        }
        if let Some(n) = watch.next(stop - now).await?
            && n.kind == EventType::Added
        {
            count(&mut seen, &n.object.name_any());
        }
        for (i, (got, want)) in seen.iter().zip(&expected).enumerate() {
            ensure!(
                got <= want,
                "pods of ReplicaSet rs-pod{} have been over-preempted: {got} pod names seen, expected {want} (all: {seen:?})",
                i + 1
            );
        }
        if settled_at.is_none() && seen == expected {
            settled_at = Some(Instant::now());
        }
    }
    ensure!(
        seen == expected,
        "pods of the ReplicaSets have been under-preempted: pod names seen per ReplicaSet {seen:?}, expected {expected:?}"
    );
    Ok(())
}
