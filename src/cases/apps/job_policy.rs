//! Upstream `[sig-apps] Job` conformance cases about which pods a Job owns and how their
//! failures count (test/e2e/apps/job.go): "should adopt matching orphans and release
//! non-matching pods", "should allow to use the pod failure policy on exit code to fail the
//! job early" and "should allow to use a pod failure policy to ignore failure matching on
//! DisruptionTarget condition".

use k8s_openapi::api::batch::v1::{
    Job, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyOnPodConditionsPattern,
    PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{Container, ExecAction, HostPathVolumeSource, Pod, Probe, Volume};
use kube::ResourceExt;
use kube::api::{EvictParams, ListParams, Patch, PatchParams};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{JobOpts, is_controlled_by, job, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};
use crate::{ensure, fail};

pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(JOB_ADOPT_RELEASE, Kind::Adapted, job_adopt_release),
        case!(JOB_FAIL_JOB_ON_EXIT_CODE, Kind::Adapted, job_fail_job_on_exit_code),
        case!(JOB_IGNORE_DISRUPTION, Kind::Adapted, job_ignore_disruption),
    ]
}

/// The true condition of `type_` on the Job: `(reason, message)`.
fn condition(job: &Job, type_: &str) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// Upstream apps/job.go "should adopt matching orphans and release non-matching pods".
pub(crate) const JOB_ADOPT_RELEASE: &str =
    "[sig-apps] Job should adopt matching orphans and release non-matching pods [Conformance]";

/// Upstream job.go: a Job of never-ending pods (parallelism 2, completions 4); one of its pods,
/// stripped of its owner references, is adopted back (controller reference to the Job, same
/// uid); stripped of its labels, it is released (no controller reference).
async fn job_adopt_release(f: &Framework) -> CaseResult {
    let name = "adopt-release";
    let pod = f
        .pod(name)
        .restart_policy("Never")
        .container(ContainerBuilder::new("c", "agnhost").args(["pause"]));
    let opts = JobOpts {
        completions: Some(4),
        parallelism: Some(2),
        backoff_limit: Some(6),
        ..Default::default()
    };
    let created = f.create(&job(name, template_of(pod.build(f)?), opts)).await?;
    let uid = created.uid().unwrap_or_default();
    let pods = f.wait_pods_ready(&format!("job-name={name}"), 2).await?;
    ensure!(
        pods.len() == 2,
        "job {name}: expected 2 running pods (parallelism), got {}",
        pods.len()
    );
    let pod_name = pods[0].name_any();
    let api = f.api::<Pod>();

    f.step(format!("orphaning pod {pod_name} (ownerReferences removed)"));
    api.patch(
        &pod_name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"ownerReferences": null}})),
    )
    .await?;
    let adopted = f
        .wait_for(
            &api,
            &pod_name,
            |p: Option<&Pod>| p.is_some_and(|p| p.owner_references().iter().any(|o| o.controller == Some(true))),
            "to be readopted by its Job (a controller reference again)",
        )
        .await?
        .ok_or_else(|| CaseError::failed(format!("pod {pod_name} disappeared")))?;
    let owner = adopted
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .cloned();
    ensure!(
        is_controlled_by(&adopted, &uid) && owner.as_ref().is_some_and(|o| o.kind == "Job" && o.name == name),
        "pod {pod_name} has the wrong controller reference: expected Job {name} uid {uid}, got {owner:?}"
    );

    f.step(format!("removing the labels of pod {pod_name}"));
    api.patch(
        &pod_name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"labels": null}})),
    )
    .await?;
    f.wait_for(
        &api,
        &pod_name,
        |p: Option<&Pod>| p.is_some_and(|p| !p.owner_references().iter().any(|o| o.controller == Some(true))),
        "to be released by its Job (no controller reference) once its labels no longer match",
    )
    .await?;
    Ok(())
}

/// Upstream apps/job.go "should allow to use the pod failure policy on exit code to fail the job early".
pub(crate) const JOB_FAIL_JOB_ON_EXIT_CODE: &str =
    "[sig-apps] Job should allow to use the pod failure policy on exit code to fail the job early [Conformance]";

/// Upstream job.go: the Job's pods fail once (exit 1) and succeed when run again, which a
/// marker file in a hostPath directory on the one node they are pinned to tells apart
/// (upstream's `failOnce`); with backoffLimit 6 the Job would complete, but a pod failure
/// policy `FailJob` on exit code 1 fails it at the first failure.
async fn job_fail_job_on_exit_code(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let nodes = f.require_nodes(os, 1).await?;
    let node = nodes[0].name.clone();
    let name = "pod-failure-failjob";
    let dir = os.join(os.volume_root(), "data");
    let marker = os.join(&dir, &format!("{name}-{}", f.ns()));
    // As in the local-restarts case: `cat && exit 0 || write && exit 1` reads the same in sh
    // and cmd.
    let script = format!(
        "{} && exit 0 || {} && exit 1",
        os.cat(&marker),
        os.write_file(&marker, "ran")
    );
    let pod = f
        .pod(name)
        .restart_policy("Never")
        .on_node(&node)
        .volume(Volume {
            name: "data".into(),
            host_path: Some(HostPathVolumeSource {
                path: "/tmp".into(),
                type_: None,
            }),
            ..Default::default()
        })
        .container(
            ContainerBuilder::new("c", "agnhost")
                .command(os.shell(&script))
                .mount("data", &dir, false),
        );
    let opts = JobOpts {
        completions: Some(4),
        parallelism: Some(2),
        backoff_limit: Some(6),
        ..Default::default()
    };
    let mut j = job(name, template_of(pod.build(f)?), opts);
    if let Some(spec) = j.spec.as_mut() {
        spec.pod_failure_policy = Some(PodFailurePolicy {
            rules: vec![PodFailurePolicyRule {
                action: "FailJob".into(),
                on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                    container_name: None,
                    operator: "In".into(),
                    values: vec![1],
                }),
                on_pod_conditions: None,
            }],
        });
    }
    f.create(&j).await?;
    let done = f
        .wait_for(
            &f.api::<Job>(),
            name,
            |j: Option<&Job>| j.is_some_and(|j| condition(j, "Complete").is_some() || condition(j, "Failed").is_some()),
            "to finish (Failed, by the pod failure policy)",
        )
        .await?
        .unwrap_or_default();
    if let Some((reason, message)) = condition(&done, "Complete") {
        let pods = f
            .api::<Pod>()
            .list(&ListParams::default().labels(&format!("job-name={name}")))
            .await?
            .items;
        let failed = pods
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
            .count();
        fail!(
            "job {name} completed ({reason}: {message}) although its pods failed with exit code 1 ({failed} failed \
             pods on node {node}) and its podFailurePolicy says FailJob on exit code 1; expected the Job to fail"
        );
    }
    let failed = condition(&done, "Failed");
    ensure!(
        failed.as_ref().is_some_and(|(reason, _)| reason == "PodFailurePolicy"),
        "job {name}: expected condition Failed with reason PodFailurePolicy, got {failed:?}"
    );
    Ok(())
}

/// Upstream apps/job.go "should allow to use a pod failure policy to ignore failure matching on
/// DisruptionTarget condition".
pub(crate) const JOB_IGNORE_DISRUPTION: &str = "[sig-apps] Job should allow to use a pod failure policy to ignore \
     failure matching on DisruptionTarget condition [Conformance]";

/// Upstream job.go (`notTerminateOncePerIndex`): an Indexed Job of 3 pods (parallelism and
/// completions 3, backoffLimit 2) pinned to one node; each pod writes a marker file for its
/// index into a hostPath directory and then runs until killed, and turns Ready once its marker
/// exists (an exec readiness probe reading it, every second); a pod that finds its marker
/// already there exits 0. Once the Job reports 3 ready pods, every running pod is evicted
/// through the Eviction API (which adds `DisruptionTarget` to the pod) and must disappear; the
/// replacements succeed at once. A podFailurePolicy `Ignore` on `DisruptionTarget=True` keeps
/// the 3 evictions from counting against backoffLimit 2: the Job completes (reason
/// CompletionsReached) with 3 succeeded pods instead of failing.
async fn job_ignore_disruption(f: &Framework) -> CaseResult {
    let num_pods = 3;
    let name = "evicted-pod-ignore-on-disruption-condition";
    let os = f.target_os();
    f.step("looking for a node to schedule job pods");
    let node = f.require_nodes(os, 1).await?[0].name.clone();
    let dir = os.join(os.volume_root(), "data");
    // Upstream keeps the markers in a fresh random directory under /tmp/job-e2e; the
    // namespace in the file name keeps them apart from other runs on the same node here.
    let marker = match os {
        crossconf_model::os::Os::Linux => os.join(&dir, &format!("foo-{}-$JOB_COMPLETION_INDEX", f.ns())),
        crossconf_model::os::Os::Windows => os.join(&dir, &format!("foo-{}-%JOB_COMPLETION_INDEX%", f.ns())),
    };
    // `cat && exit 0 || write && idle` reads the same in sh and cmd (see the local-restarts case).
    let script = format!(
        "{} && exit 0 || {} && {}",
        os.cat(&marker),
        os.write_file(&marker, "ran"),
        os.idle_script()
    );
    let probe = Probe {
        period_seconds: Some(1),
        exec: Some(ExecAction {
            command: Some(os.shell(&os.cat(&marker))),
        }),
        ..Default::default()
    };
    let pod = f
        .pod(name)
        .restart_policy("Never")
        .on_node(&node)
        .grace_period(1)
        .volume(Volume {
            name: "data".into(),
            host_path: Some(HostPathVolumeSource {
                path: "/tmp".into(),
                type_: None,
            }),
            ..Default::default()
        })
        .container(
            ContainerBuilder::new("c", "agnhost")
                .command(os.shell(&script))
                .mount("data", &dir, false)
                .with(move |c: &mut Container| c.readiness_probe = Some(probe.clone())),
        );
    let opts = JobOpts {
        completions: Some(num_pods),
        parallelism: Some(num_pods),
        backoff_limit: Some(num_pods - 1),
        ..Default::default()
    };
    let mut j = job(name, template_of(pod.build(f)?), opts);
    if let Some(spec) = j.spec.as_mut() {
        spec.completion_mode = Some("Indexed".into());
        spec.pod_failure_policy = Some(PodFailurePolicy {
            rules: vec![PodFailurePolicyRule {
                action: "Ignore".into(),
                on_exit_codes: None,
                on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                    type_: "DisruptionTarget".into(),
                    status: "True".into(),
                }]),
            }],
        });
    }
    f.step(format!("creating job {name}"));
    f.create(&j).await?;

    f.step("waiting for all the pods to be ready");
    let jobs = f.api::<Job>();
    f.wait_for(
        &jobs,
        name,
        |j: Option<&Job>| j.and_then(|j| j.status.as_ref()).and_then(|s| s.ready) == Some(num_pods),
        &format!("to report status.ready = {num_pods}"),
    )
    .await?;

    f.step("fetching all running pods");
    let pods = f
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("job-name={name}")))
        .await?
        .items;
    let running: Vec<Pod> = pods
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect();
    ensure!(
        running.len() == num_pods as usize,
        "job {name}: expected {num_pods} running pods (parallelism), got {}: [{}]",
        running.len(),
        running.iter().map(ResourceExt::name_any).collect::<Vec<_>>().join(", ")
    );

    f.step("evicting all the pods");
    let api = f.api::<Pod>();
    let evictions = running.iter().map(|pod| {
        let api = api.clone();
        let pod_name = pod.name_any();
        let uid = pod.uid().unwrap_or_default();
        async move {
            f.step(format!("evicting the running pod {pod_name}"));
            api.evict(&pod_name, &EvictParams::default())
                .await
                .map_err(|e| CaseError::from(e).context(format!("evicting pod {pod_name}")))?;
            f.step(format!("awaiting for pod {pod_name} to be deleted"));
            f.wait_for_within(
                &api,
                &pod_name,
                kube::runtime::wait::conditions::is_deleted(&uid),
                "to be deleted after its eviction",
                POD_DELETE_TIMEOUT,
            )
            .await
            .map(|_| ())
        }
    });
    for r in futures::future::join_all(evictions).await {
        r?;
    }

    f.step("ensuring job reaches completions");
    let done = f
        .wait_for(
            &jobs,
            name,
            |j: Option<&Job>| {
                j.is_some_and(|j| {
                    condition(j, "Failed").is_some() || j.status.as_ref().and_then(|s| s.succeeded) == Some(num_pods)
                })
            },
            &format!("to have {num_pods} successful pods"),
        )
        .await?
        .unwrap_or_default();
    if let Some((reason, message)) = condition(&done, "Failed") {
        let status = done.status.unwrap_or_default();
        fail!(
            "job {name} failed ({reason}: {message}) while waiting for its completion: failed {} succeeded {}; \
             expected the {num_pods} evictions (DisruptionTarget) to be ignored by the podFailurePolicy",
            status.failed.unwrap_or(0),
            status.succeeded.unwrap_or(0)
        );
    }
    let complete = f
        .wait_for(
            &jobs,
            name,
            |j: Option<&Job>| {
                j.is_some_and(|j| condition(j, "Complete").is_some_and(|(r, _)| r == "CompletionsReached"))
            },
            "to reach condition Complete with reason CompletionsReached",
        )
        .await?
        .unwrap_or_default();
    f.property("failed", complete.status.as_ref().and_then(|s| s.failed).unwrap_or(0));
    Ok(())
}

/// Upstream's pod deletion budget (`f.Timeouts.PodDelete`).
const POD_DELETE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5 * 60);
