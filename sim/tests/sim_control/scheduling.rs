//! The scheduler's rules against heterogeneous nodes: DaemonSets per OS, taints and
//! tolerations, selectors, affinity, resources, nodeName and preemption.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_daemonset_lands_on_windows_nodes_only() {
    let c = Cluster::start(ControlConfig::default(), true).await;
    heterogeneous_nodes(&c.client).await;
    create_ns(&c.client, "ds").await;
    let dss: Api<DaemonSet> = c.api("ds");
    for (name, extra) in [
        (
            "win",
            json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "tolerations": windows_toleration()}),
        ),
        ("any", json!({})),
    ] {
        let ds: DaemonSet = obj(json!({"metadata": {"name": name}, "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(extra)}}}));
        dss.create(&PostParams::default(), &ds).await.unwrap();
    }
    let pods: Api<Pod> = c.api("ds");
    let win = until(
        &pods,
        ListParams::default().labels("app=win"),
        "windows daemon pods bound",
        |ps| ps.len() == 2 && ps.iter().all(|p| !node_of(p).is_empty()),
    )
    .await;
    let nodes: BTreeSet<String> = win.iter().map(node_of).collect();
    assert_eq!(nodes, BTreeSet::from(["windows-0".to_owned(), "windows-1".to_owned()]));
    // Without the toleration the taint keeps the daemon off Windows nodes.
    let any = until(
        &pods,
        ListParams::default().labels("app=any"),
        "untolerating daemon pod bound",
        |ps| ps.len() == 1 && ps.iter().all(|p| !node_of(p).is_empty()),
    )
    .await;
    assert_eq!(node_of(&any[0]), "linux-0");
    let ds = until(
        &dss,
        ListParams::default().fields("metadata.name=win"),
        "daemonset status",
        |d| {
            d.first().and_then(|d| d.status.as_ref()).is_some_and(|s| {
                s.desired_number_scheduled == 2 && s.number_ready == 2 && s.updated_number_scheduled == Some(2)
            })
        },
    )
    .await;
    assert_eq!(ds[0].status.as_ref().unwrap().number_misscheduled, 0);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_without_toleration_stays_off_windows_nodes() {
    let c = Cluster::start(ControlConfig::default(), false).await;
    heterogeneous_nodes(&c.client).await;
    create_ns(&c.client, "sched").await;
    let pods: Api<Pod> = c.api("sched");
    let pod: Pod = obj(json!({"metadata": {"name": "wants-windows"},
        "spec": pod_spec(json!({"nodeSelector": {"kubernetes.io/os": "windows"}}))}));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let expected = "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
        2 node(s) had untolerated taint {os: windows}. preemption: 0/3 nodes are available: \
        3 Preemption is not helpful for scheduling.";
    let seen = until(
        &pods,
        ListParams::default().fields("metadata.name=wants-windows"),
        "Unschedulable condition",
        |ps| {
            ps.first()
                .and_then(|p| pod_condition(p, "PodScheduled"))
                .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
        },
    )
    .await;
    let cond = pod_condition(&seen[0], "PodScheduled").unwrap().clone();
    assert_eq!(cond.message.as_deref(), Some(expected));
    assert!(node_of(&seen[0]).is_empty());
    let events: Api<Event> = c.api("sched");
    let evs = until(
        &events,
        ListParams::default().fields("involvedObject.name=wants-windows"),
        "FailedScheduling event",
        |es| {
            es.iter()
                .any(|e| e.reason.as_deref() == Some("FailedScheduling") && e.message.as_deref() == Some(expected))
        },
    )
    .await;
    let ev = evs.iter().find(|e| e.message.as_deref() == Some(expected)).unwrap();
    assert_eq!(ev.type_.as_deref(), Some("Warning"));

    // Adding the toleration (a new pod) lets it onto a Windows node.
    let pod: Pod = obj(json!({"metadata": {"name": "tolerates"},
        "spec": pod_spec(json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "tolerations": windows_toleration()}))}));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let node = bound_node(&pods, "tolerates", "tolerating pod bound").await;
    assert!(node.starts_with("windows-"));
    let msg = event_message(&events, "tolerates", "Scheduled").await;
    assert_eq!(msg, format!("Successfully assigned sched/tolerates to {node}"));

    // A node joining fixes the first pod: retried when nodes change.
    add_node(&c.client, "windows-2", "windows", "4", "8Gi").await;
    let nodes: Api<Node> = Api::all(c.client.clone());
    merge_patch(&nodes, "windows-2", json!({"spec": {"taints": null}})).await;
    let node = bound_node(&pods, "wants-windows", "retried pod bound").await;
    assert_eq!(node, "windows-2");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_affinity_resources_and_node_name() {
    let c = Cluster::start(ControlConfig::default(), false).await;
    add_node(&c.client, "small", "linux", "1", "1Gi").await;
    add_node(&c.client, "big", "linux", "8", "16Gi").await;
    let nodes: Api<Node> = Api::all(c.client.clone());
    merge_patch(
        &nodes,
        "big",
        json!({"metadata": {"labels": {"size": "big", "cores": "8"}}}),
    )
    .await;
    create_ns(&c.client, "rules").await;
    let pods: Api<Pod> = c.api("rules");
    let affinity = |op: &str, values: Value| {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "size", "operator": op, "values": values}]}]}}})
    };
    let cases = [
        ("selector", json!({"nodeSelector": {"size": "big"}}), Some("big")),
        (
            "affinity-in",
            json!({"affinity": affinity("In", json!(["big"]))}),
            Some("big"),
        ),
        (
            "affinity-notin",
            json!({"affinity": affinity("NotIn", json!(["big"]))}),
            Some("small"),
        ),
        (
            "affinity-gt",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]}]}}}}),
            Some("big"),
        ),
        (
            "fields",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["small"]}]}]}}}}),
            Some("small"),
        ),
        (
            "needs-cpu",
            json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "6", "memory": "1Gi"}}}]}),
            Some("big"),
        ),
        (
            "too-big",
            json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "64"}}}]}),
            None,
        ),
        ("no-match", json!({"nodeSelector": {"size": "huge"}}), None),
    ];
    for (name, extra, _) in &cases {
        let pod: Pod = obj(json!({"metadata": {"name": name}, "spec": pod_spec(extra.clone())}));
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    // nodeName set by the user: the scheduler leaves it alone.
    let pinned: Pod = obj(json!({"metadata": {"name": "pinned"}, "spec": pod_spec(json!({"nodeName": "small"}))}));
    pods.create(&PostParams::default(), &pinned).await.unwrap();
    let all = until(
        &pods,
        ListParams::default(),
        "every schedulable pod bound and the rest reported",
        |ps| {
            cases.iter().all(|(name, _, want)| {
                ps.iter().find(|p| p.name_any() == *name).is_some_and(|p| match want {
                    Some(_) => !node_of(p).is_empty(),
                    None => {
                        pod_condition(p, "PodScheduled").is_some_and(|c| c.reason.as_deref() == Some("Unschedulable"))
                    }
                })
            })
        },
    )
    .await;
    for (name, _, want) in &cases {
        let p = all.iter().find(|p| p.name_any() == *name).unwrap();
        match want {
            Some(n) => assert_eq!(node_of(p), *n, "{name}"),
            None => assert!(node_of(p).is_empty(), "{name} should stay pending"),
        }
    }
    let msg = |name: &str| {
        all.iter()
            .find(|p| p.name_any() == name)
            .and_then(|p| pod_condition(p, "PodScheduled")?.message.clone())
            .unwrap_or_default()
    };
    assert!(
        msg("too-big").starts_with("0/2 nodes are available: 2 Insufficient cpu."),
        "{}",
        msg("too-big")
    );
    assert!(
        msg("too-big")
            .ends_with("preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."),
        "{}",
        msg("too-big")
    );
    assert!(
        msg("no-match").starts_with("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.")
    );
    assert_eq!(node_of(all.iter().find(|p| p.name_any() == "pinned").unwrap()), "small");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higher_priority_pod_preempts_a_lower_one() {
    let c = Cluster::start(ControlConfig::default(), true).await;
    add_node(&c.client, "only", "linux", "2", "4Gi").await;
    let classes: Api<PriorityClass> = Api::all(c.client.clone());
    let pc: PriorityClass = obj(json!({"metadata": {"name": "high"}, "value": 1000}));
    classes.create(&PostParams::default(), &pc).await.unwrap();
    create_ns(&c.client, "prio").await;
    let pods: Api<Pod> = c.api("prio");
    let with_cpu = |cpu: &str| json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}]});
    let low: Pod = obj(json!({"metadata": {"name": "low"}, "spec": with_cpu("1500m")}));
    pods.create(&PostParams::default(), &low).await.unwrap();
    bound_node(&pods, "low", "low pod bound").await;
    let mut spec = with_cpu("1");
    spec["priorityClassName"] = json!("high");
    let high: Pod = obj(json!({"metadata": {"name": "high"}, "spec": spec}));
    pods.create(&PostParams::default(), &high).await.unwrap();
    let after = until(&pods, ListParams::default(), "high pod bound after preemption", |ps| {
        ps.iter().any(|p| p.name_any() == "high" && node_of(p) == "only") && !ps.iter().any(|p| p.name_any() == "low")
    })
    .await;
    assert_eq!(after.len(), 1);
    let events: Api<Event> = c.api("prio");
    let msg = event_message(&events, "low", "Preempted").await;
    assert!(
        msg.starts_with("Preempted by pod ") && msg.ends_with(" on node only"),
        "{msg}"
    );
    c.stop().await;
}
