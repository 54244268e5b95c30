//! The workload controllers: Deployments rolling out through ReplicaSets, Jobs completing,
//! StatefulSets in order with stable names, CronJobs on an accelerated clock.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_scales_and_rolls_out_through_replicasets() {
    let c = Cluster::start(ControlConfig::default(), true).await;
    add_node(&c.client, "linux-0", "linux", "8", "16Gi").await;
    add_node(&c.client, "linux-1", "linux", "8", "16Gi").await;
    create_ns(&c.client, "apps").await;
    let deps: Api<Deployment> = c.api("apps");
    let rss: Api<ReplicaSet> = c.api("apps");
    let pods: Api<Pod> = c.api("apps");
    deps.create(&PostParams::default(), &deployment("web", 3, "nginx:1.0"))
        .await
        .unwrap();
    let complete = |want: i32| {
        move |ds: &[Deployment]| {
            ds.first().is_some_and(|d| {
                let s = d.status.clone().unwrap_or_default();
                s.observed_generation == d.metadata.generation
                    && s.updated_replicas == Some(want)
                    && s.replicas == Some(want)
                    && s.available_replicas == Some(want)
                    && s.conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Progressing" && c.reason.as_deref() == Some("NewReplicaSetAvailable"))
                    && s.conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Available" && c.status == "True")
            })
        }
    };
    until(&deps, ListParams::default(), "rollout of 3 complete", complete(3)).await;
    let first = rss.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(first.len(), 1);
    let rs1 = first[0].clone();
    assert_eq!(rs1.annotations()["deployment.kubernetes.io/revision"], "1");
    let hash = rs1.labels()["pod-template-hash"].clone();
    assert_eq!(rs1.name_any(), format!("web-{hash}"));
    let ps = pods.list(&ListParams::default().labels("app=web")).await.unwrap().items;
    assert_eq!(ps.len(), 3);
    assert!(ps.iter().all(|p| p.labels()["pod-template-hash"] == hash));
    // Spread over both nodes (least allocated).
    assert_eq!(ps.iter().map(node_of).collect::<BTreeSet<_>>().len(), 2);

    merge_patch(&deps, "web", json!({"spec": {"replicas": 5}})).await;
    until(&deps, ListParams::default(), "scaled to 5", complete(5)).await;
    assert_eq!(rss.list(&ListParams::default()).await.unwrap().items.len(), 1);

    merge_patch(
        &deps,
        "web",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2.0"}]}}}}),
    )
    .await;
    let done = until(&deps, ListParams::default(), "rolling update complete", |ds| {
        complete(5)(ds)
            && ds[0]
                .annotations()
                .get("deployment.kubernetes.io/revision")
                .map(String::as_str)
                == Some("2")
    })
    .await;
    assert_eq!(done[0].status.as_ref().unwrap().updated_replicas, Some(5));
    let sets = rss.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(sets.len(), 2);
    let new = sets.iter().find(|r| r.name_any() != rs1.name_any()).unwrap();
    let old = sets.iter().find(|r| r.name_any() == rs1.name_any()).unwrap();
    assert_eq!(new.spec.as_ref().unwrap().replicas, Some(5));
    assert_eq!(old.spec.as_ref().unwrap().replicas, Some(0));
    assert_eq!(new.annotations()["deployment.kubernetes.io/revision"], "2");
    let events: Api<Event> = c.api("apps");
    let evs = events
        .list(&ListParams::default().fields("involvedObject.name=web"))
        .await
        .unwrap()
        .items;
    assert!(
        evs.iter().any(|e| e.reason.as_deref() == Some("ScalingReplicaSet")
            && e.message.as_deref() == Some(&format!("Scaled up replica set {} from 0 to 1", new.name_any()))),
        "{evs:#?}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_completes_when_its_pods_succeed() {
    let c = Cluster::start(ControlConfig::default(), false).await;
    add_node(&c.client, "linux-0", "linux", "8", "16Gi").await;
    create_ns(&c.client, "batch").await;
    let jobs: Api<Job> = c.api("batch");
    let pods: Api<Pod> = c.api("batch");
    let job: Job = obj(
        json!({"metadata": {"name": "work"}, "spec": {"completions": 2, "parallelism": 1,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}),
    );
    jobs.create(&PostParams::default(), &job).await.unwrap();
    for round in 0..2 {
        let ps = until(
            &pods,
            ListParams::default().labels("job-name=work"),
            "a job pod to run",
            |ps| ps.iter().filter(|p| phase(p) != Some("Succeeded")).count() == 1,
        )
        .await;
        assert_eq!(ps.len(), round + 1, "parallelism 1 runs one pod at a time");
        let p = ps.iter().find(|p| phase(p) != Some("Succeeded")).unwrap();
        set_phase(&pods, &p.name_any(), "Succeeded").await;
    }
    let done = until(&jobs, ListParams::default(), "Complete condition", |js| {
        true_job_condition(js, "Complete").is_some()
    })
    .await;
    let st = done[0].status.as_ref().unwrap();
    assert_eq!(st.succeeded, Some(2));
    assert!(st.start_time.is_some() && st.completion_time.is_some());
    assert_eq!(
        pods.list(&ListParams::default().labels("job-name=work"))
            .await
            .unwrap()
            .items
            .len(),
        2
    );

    // A job whose pods fail runs out of its backoff limit.
    let failing: Job = obj(json!({"metadata": {"name": "fails"}, "spec": {"backoffLimit": 0,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}));
    jobs.create(&PostParams::default(), &failing).await.unwrap();
    let ps = until(
        &pods,
        ListParams::default().labels("job-name=fails"),
        "failing job pod",
        |ps| ps.len() == 1,
    )
    .await;
    set_phase(&pods, &ps[0].name_any(), "Failed").await;
    let failed = until(
        &jobs,
        ListParams::default().fields("metadata.name=fails"),
        "Failed condition",
        |js| true_job_condition(js, "Failed").is_some(),
    )
    .await;
    let cond = true_job_condition(&failed, "Failed").unwrap();
    assert_eq!(cond.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(failed[0].status.as_ref().unwrap().failed, Some(1));
    c.stop().await;
}

/// Job tracking with finalizers: the controller's pods carry `batch.kubernetes.io/job-tracking`,
/// so an evicted pod (DisruptionTarget) stays until the controller has judged it; under a
/// podFailurePolicy `Ignore` on that condition the failure is not counted (backoffLimit 0 would
/// fail the Job otherwise), the finalizer goes, the pod with it, and a replacement runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_tracks_pods_with_a_finalizer_and_ignores_evictions() {
    const FINALIZER: &str = "batch.kubernetes.io/job-tracking";
    let c = Cluster::start(ControlConfig::default(), true).await;
    add_node(&c.client, "linux-0", "linux", "8", "16Gi").await;
    create_ns(&c.client, "track").await;
    let jobs: Api<Job> = c.api("track");
    let pods: Api<Pod> = c.api("track");
    let job: Job = obj(json!({"metadata": {"name": "evicted"}, "spec": {"backoffLimit": 0,
        "podFailurePolicy": {"rules": [{"action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}));
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let running = |ps: &[Pod]| {
        ps.iter()
            .any(|p| phase(p) == Some("Running") && p.metadata.deletion_timestamp.is_none())
    };
    let ps = until(
        &pods,
        ListParams::default().labels("job-name=evicted"),
        "a running job pod",
        running,
    )
    .await;
    let first = ps[0].clone();
    assert!(
        first.finalizers().iter().any(|f| f == FINALIZER),
        "{:?}",
        first.metadata.finalizers
    );

    pods.evict(&first.name_any(), &kube::api::EvictParams::default())
        .await
        .unwrap();
    // The eviction's DisruptionTarget and deletion, and the fake kubelet's final delete: the
    // finalizer keeps the pod.
    let held = pods.get(&first.name_any()).await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(
        pod_condition(&held, "DisruptionTarget").is_some_and(|c| c.status == "True"
            && c.reason.as_deref() == Some("EvictionByEvictionAPI")
            && c.message.as_deref() == Some("Eviction API: evicting"))
    );
    set_phase(&pods, &first.name_any(), "Failed").await;
    let uid = first.uid().unwrap();
    let ps = until(
        &pods,
        ListParams::default().labels("job-name=evicted"),
        "the evicted pod gone and a replacement running",
        |ps| !ps.iter().any(|p| p.uid().as_deref() == Some(uid.as_str())) && running(ps),
    )
    .await;
    let js = jobs.list(&ListParams::default()).await.unwrap().items;
    assert!(true_job_condition(&js, "Failed").is_none(), "{:?}", js[0].status);
    assert_eq!(
        js[0].status.as_ref().unwrap().failed.unwrap_or(0),
        0,
        "the eviction is ignored"
    );

    let second = ps.iter().find(|p| p.metadata.deletion_timestamp.is_none()).unwrap();
    set_phase(&pods, &second.name_any(), "Succeeded").await;
    let done = until(&jobs, ListParams::default(), "Complete condition", |js| {
        true_job_condition(js, "Complete").is_some()
    })
    .await;
    let st = done[0].status.as_ref().unwrap();
    assert_eq!((st.succeeded, st.failed.unwrap_or(0)), (Some(1), 0));
    let unc = st.uncounted_terminated_pods.clone().unwrap_or_default();
    assert!(unc.succeeded.unwrap_or_default().is_empty() && unc.failed.unwrap_or_default().is_empty());
    // The counted pod stays, without the finalizer.
    let kept = until(
        &pods,
        ListParams::default().labels("job-name=evicted"),
        "the succeeded pod without its finalizer",
        |ps| ps.len() == 1 && ps[0].finalizers().is_empty(),
    )
    .await;
    assert_eq!(phase(&kept[0]), Some("Succeeded"));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_creates_pods_in_order_with_stable_names() {
    let c = Cluster::start(ControlConfig::default(), true).await;
    add_node(&c.client, "linux-0", "linux", "8", "16Gi").await;
    create_ns(&c.client, "sts").await;
    let sets: Api<StatefulSet> = c.api("sts");
    let set: StatefulSet = obj(
        json!({"metadata": {"name": "db"}, "spec": {"replicas": 3, "serviceName": "db",
        "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    );
    sets.create(&PostParams::default(), &set).await.unwrap();
    let pods: Api<Pod> = c.api("sts");
    let ps = until(
        &pods,
        ListParams::default().labels("app=db"),
        "three stateful pods",
        |ps| ps.len() == 3,
    )
    .await;
    let mut names: Vec<String> = ps.iter().map(|p| p.name_any()).collect();
    names.sort();
    assert_eq!(names, ["db-0", "db-1", "db-2"]);
    // Ordered: each later pod was created after the previous one was Ready.
    let created = |n: &str| {
        ps.iter()
            .find(|p| p.name_any() == n)
            .unwrap()
            .metadata
            .creation_timestamp
            .clone()
            .unwrap()
            .0
    };
    assert!(created("db-0") <= created("db-1") && created("db-1") <= created("db-2"));
    let p1 = ps.iter().find(|p| p.name_any() == "db-1").unwrap();
    assert_eq!(p1.spec.as_ref().unwrap().hostname.as_deref(), Some("db-1"));
    assert_eq!(p1.spec.as_ref().unwrap().subdomain.as_deref(), Some("db"));
    until(&sets, ListParams::default(), "statefulset ready", |s| {
        s.first()
            .and_then(|s| s.status.as_ref())
            .is_some_and(|st| st.ready_replicas == Some(3))
    })
    .await;
    merge_patch(&sets, "db", json!({"spec": {"replicas": 1}})).await;
    let ps = until(
        &pods,
        ListParams::default().labels("app=db"),
        "scaled down to db-0",
        |ps| ps.len() == 1,
    )
    .await;
    assert_eq!(ps[0].name_any(), "db-0");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_runs_on_schedule_with_an_accelerated_clock() {
    // One simulated minute per real second.
    let cfg = ControlConfig::default().clock(Arc::new(ScaledClock::new(60.0)));
    let c = Cluster::start(cfg, false).await;
    create_ns(&c.client, "cron").await;
    let cjs: Api<CronJob> = c.api("cron");
    let cj: CronJob = obj(json!({"metadata": {"name": "tick"}, "spec": {"schedule": "* * * * *",
        "concurrencyPolicy": "Allow",
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}}}}));
    cjs.create(&PostParams::default(), &cj).await.unwrap();
    let jobs: Api<Job> = c.api("cron");
    let js = until(&jobs, ListParams::default(), "two scheduled jobs", |js| js.len() >= 2).await;
    for j in &js {
        let suffix = j.name_any().strip_prefix("tick-").unwrap().to_owned();
        assert!(
            suffix.parse::<i64>().is_ok(),
            "job name {} ends in minutes",
            j.name_any()
        );
        assert_eq!(j.owner_references()[0].name, "tick");
    }
    let cj = until(&cjs, ListParams::default(), "cronjob status", |c| {
        c.first()
            .and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.last_schedule_time.is_some() && s.active.is_some())
    })
    .await;
    assert!(!cj[0].status.as_ref().unwrap().active.as_ref().unwrap().is_empty());
    c.stop().await;
}

/// A CronJob every simulated minute whose Jobs never finish (no kubelet runs their pods).
fn endless_cronjob(name: &str, policy: &str) -> CronJob {
    obj(json!({"metadata": {"name": name}, "spec": {"schedule": "* * * * *",
        "concurrencyPolicy": policy,
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}}}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_forbid_holds_runs_back_and_replace_swaps_jobs() {
    // One simulated minute per real second.
    let cfg = ControlConfig::default()
        .clock(Arc::new(ScaledClock::new(60.0)))
        .only(&[Component::CronJob, Component::Job]);
    let c = Cluster::start(cfg, false).await;
    create_ns(&c.client, "conc").await;
    let cjs: Api<CronJob> = c.api("conc");
    for (name, policy) in [("forbid", "Forbid"), ("replace", "Replace")] {
        cjs.create(&PostParams::default(), &endless_cronjob(name, policy))
            .await
            .unwrap();
    }
    // Forbid: the next run is held back with upstream's JobAlreadyActive event, and
    // lastScheduleTime stays at the run that started.
    let events: Api<Event> = c.api("conc");
    until(&events, ListParams::default(), "a JobAlreadyActive event", |es| {
        es.iter().any(|e| {
            e.reason.as_deref() == Some("JobAlreadyActive") && e.involved_object.name.as_deref() == Some("forbid")
        })
    })
    .await;
    let jobs: Api<Job> = c.api("conc");
    let owned_by = |js: &[Job], cj: &str| -> Vec<String> {
        js.iter()
            .filter(|j| j.owner_references().iter().any(|o| o.name == cj))
            .map(ResourceExt::name_any)
            .collect()
    };
    let all = jobs.list(&ListParams::default()).await.unwrap().items;
    let forbid_jobs = owned_by(&all, "forbid");
    assert_eq!(forbid_jobs.len(), 1, "Forbid started {forbid_jobs:?}");
    let forbid = cjs.get("forbid").await.unwrap();
    let last = forbid.status.and_then(|s| s.last_schedule_time).unwrap().0;
    assert_eq!(
        format!("forbid-{}", last.as_second() / 60),
        forbid_jobs[0],
        "lastScheduleTime stays at the run that started"
    );
    // Replace: a later run deletes the earlier Job; the CronJob lists one active Job.
    let first = until(&jobs, ListParams::default(), "a replace job", |js| {
        !owned_by(js, "replace").is_empty()
    })
    .await;
    let first = owned_by(&first, "replace")[0].clone();
    until(&cjs, ListParams::default(), "replace running a newer job alone", |cs| {
        cs.iter().filter(|c| c.name_any() == "replace").any(|c| {
            let active: Vec<String> = c
                .status
                .iter()
                .flat_map(|s| s.active.iter().flatten())
                .filter_map(|r| r.name.clone())
                .collect();
            active.len() == 1 && active[0] != first
        })
    })
    .await;
    until(&jobs, ListParams::default(), "the replaced job gone", |js| {
        js.iter()
            .all(|j| j.name_any() != first || j.metadata.deletion_timestamp.is_some())
    })
    .await;
    c.stop().await;
}
