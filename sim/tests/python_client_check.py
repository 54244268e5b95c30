#!/usr/bin/env python3
"""The official Python Kubernetes client against the simulated cluster.

Usage: python3 tests/python_client_check.py KUBECONFIG

Driven by tests/sim_python_client.rs. Uses only the kubeconfig the simulator writes, the way a
person would: namespace, ConfigMap CRUD and patch, a Deployment waited on with a pod watch,
pod logs, node labels, a typed create/read/list of every workload kind (a status the client
cannot deserialise raises and fails the run), a PodDisruptionBudget that refuses an eviction,
and a namespace delete that completes. Exits non-zero with a message naming the first mismatch.
"""

import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NS = "pyclient"
IMAGE = "registry.k8s.io/e2e-test-images/agnhost:2.53"


class Mismatch(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Mismatch(what)


def step(name):
    print(f"-- {name}", flush=True)


def expect_status(code, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except ApiException as e:
        check(e.status == code, f"{fn.__name__}: expected HTTP {code}, got {e.status}: {e.body}")
        return e
    raise Mismatch(f"{fn.__name__}: expected HTTP {code}, the call succeeded")


def main(kubeconfig):
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    apps = client.AppsV1Api()

    step("version")
    v = client.VersionApi().get_code()
    check(v.git_version.startswith("v1."), f"gitVersion {v.git_version!r}")
    print(f"server {v.git_version}")

    step("namespace")
    ns = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    check(ns.metadata.name == NS and ns.metadata.uid, f"created namespace {ns.metadata}")
    check(ns.status.phase == "Active", f"namespace phase {ns.status.phase!r}")
    expect_status(409, core.create_namespace, client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))

    step("configmap create/get/list/patch/replace/delete")
    cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg", labels={"app": "py"}), data={"a": "1"})
    created = core.create_namespaced_config_map(NS, cm)
    check(created.data == {"a": "1"}, f"created data {created.data}")
    got = core.read_namespaced_config_map("cfg", NS)
    check(got.metadata.resource_version == created.metadata.resource_version, "get returns the created version")
    listed = core.list_namespaced_config_map(NS, label_selector="app=py")
    check([c.metadata.name for c in listed.items] == ["cfg"], f"label-selected list {listed.items}")
    check(listed.metadata.resource_version, "list has a resourceVersion")
    # The client sends a JSON merge patch for a dict body... and strategic merge where it can.
    patched = core.patch_namespaced_config_map("cfg", NS, {"data": {"b": "2"}})
    check(patched.data == {"a": "1", "b": "2"}, f"patched data {patched.data}")
    # A replace with a stale resourceVersion is a conflict.
    stale = got
    stale.data = {"c": "3"}
    e = expect_status(409, core.replace_namespaced_config_map, "cfg", NS, stale)
    check("Conflict" in e.body, f"conflict body {e.body}")
    fresh = core.read_namespaced_config_map("cfg", NS)
    fresh.data = {"c": "3"}
    replaced = core.replace_namespaced_config_map("cfg", NS, fresh)
    check(replaced.data == {"c": "3"}, f"replaced data {replaced.data}")
    core.delete_namespaced_config_map("cfg", NS)
    e = expect_status(404, core.read_namespaced_config_map, "cfg", NS)
    check("NotFound" in e.body, f"not-found body {e.body}")

    step("invalid object is 422")
    e = expect_status(
        422,
        core.create_namespaced_config_map,
        NS,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="Bad_Name")),
    )
    check("Invalid" in e.body, f"invalid body {e.body}")

    step("deployment, watched until available")
    labels = {"app": "pyweb"}
    dep = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="pyweb", labels=labels),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[
                        client.V1Container(
                            name="web",
                            image=IMAGE,
                            args=["netexec", "--http-port=8080"],
                            ports=[client.V1ContainerPort(container_port=8080)],
                        )
                    ]
                ),
            ),
        ),
    )
    apps.create_namespaced_deployment(NS, dep)
    running = set()
    w = watch.Watch()
    deadline = time.time() + 60
    for ev in w.stream(core.list_namespaced_pod, NS, label_selector="app=pyweb", timeout_seconds=60):
        pod = ev["object"]
        check(ev["type"] in ("ADDED", "MODIFIED", "DELETED"), f"watch event type {ev['type']}")
        if pod.status.phase == "Running":
            running.add(pod.metadata.name)
        if len(running) >= 2 or time.time() > deadline:
            w.stop()
    check(len(running) >= 2, f"running pods seen on the watch: {running}")
    while True:
        d = apps.read_namespaced_deployment_status("pyweb", NS)
        conds = {c.type: c.status for c in (d.status.conditions or [])}
        if conds.get("Available") == "True" and d.status.available_replicas == 2:
            break
        check(time.time() < deadline, f"deployment never became available: {d.status}")
        time.sleep(0.2)
    print(f"deployment available: {d.status.available_replicas}/{d.spec.replicas}")

    step("scale subresource")
    apps.patch_namespaced_deployment_scale("pyweb", NS, {"spec": {"replicas": 3}})
    scale = apps.read_namespaced_deployment_scale("pyweb", NS)
    check(scale.spec.replicas == 3, f"scale spec {scale.spec}")

    step("typed create/read/list of every workload kind")
    workload_kinds()

    step("a disruption budget refuses an eviction")
    budget_refuses_eviction(core, sorted(running)[0])

    step("pod logs")
    name = sorted(running)[0]
    logs = core.read_namespaced_pod_log(name, NS, container="web")
    check(isinstance(logs, str), f"logs type {type(logs)}")
    print(f"logs of {name}: {logs.strip()[:200]!r}")

    step("nodes and their kubernetes.io/os labels")
    nodes = core.list_node().items
    oses = {n.metadata.name: (n.metadata.labels or {}).get("kubernetes.io/os") for n in nodes}
    check(nodes, "no nodes listed")
    check(all(os_ in ("linux", "windows") for os_ in oses.values()), f"node OS labels {oses}")
    check("windows" in oses.values(), f"no Windows node: {oses}")
    for n in nodes:
        if oses[n.metadata.name] == "windows":
            check(n.status.node_info.operating_system == "windows", f"{n.metadata.name} nodeInfo")
            check(
                "node.kubernetes.io/windows-build" in n.metadata.labels,
                f"{n.metadata.name} lacks node.kubernetes.io/windows-build",
            )
    print(f"nodes: {oses}")

    step("delete namespace and wait until it is gone")
    core.delete_namespace(NS)
    deadline = time.time() + 60
    while True:
        try:
            phase = core.read_namespace(NS).status.phase
        except ApiException as e:
            check(e.status == 404, f"reading the deleted namespace: {e.status}")
            break
        check(phase == "Terminating", f"deleted namespace phase {phase!r}")
        check(time.time() < deadline, "namespace still present after 60 s")
        time.sleep(0.2)
    print("ok")


def pod_template(labels, restart="Always"):
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=labels),
        spec=client.V1PodSpec(
            restart_policy=restart,
            containers=[client.V1Container(name="c", image="registry.k8s.io/pause:3.10")],
        ),
    )


def workload_kinds():
    """Creates, reads and lists one object of each workload kind through the typed APIs; the
    client deserialises every response into its model, so a missing required status field
    raises here."""
    core = client.CoreV1Api()
    apps = client.AppsV1Api()
    batch = client.BatchV1Api()
    hpa = client.AutoscalingV2Api()
    policy = client.PolicyV1Api()
    labels = {"app": "pykinds"}
    sel = client.V1LabelSelector(match_labels=labels)

    def meta(name):
        return client.V1ObjectMeta(name=name)

    kinds = [
        (
            "ReplicationController",
            lambda: core.create_namespaced_replication_controller(
                NS,
                client.V1ReplicationController(
                    metadata=meta("rc"),
                    spec=client.V1ReplicationControllerSpec(replicas=0, selector=labels, template=pod_template(labels)),
                ),
            ),
            lambda: core.read_namespaced_replication_controller("rc", NS),
            lambda: core.list_namespaced_replication_controller(NS),
        ),
        (
            "ReplicaSet",
            lambda: apps.create_namespaced_replica_set(
                NS,
                client.V1ReplicaSet(
                    metadata=meta("rs"),
                    spec=client.V1ReplicaSetSpec(replicas=0, selector=sel, template=pod_template(labels)),
                ),
            ),
            lambda: apps.read_namespaced_replica_set("rs", NS),
            lambda: apps.list_namespaced_replica_set(NS),
        ),
        (
            "Deployment",
            lambda: apps.create_namespaced_deployment(
                NS,
                client.V1Deployment(
                    metadata=meta("dep"),
                    spec=client.V1DeploymentSpec(replicas=0, selector=sel, template=pod_template(labels)),
                ),
            ),
            lambda: apps.read_namespaced_deployment("dep", NS),
            lambda: apps.list_namespaced_deployment(NS),
        ),
        (
            "DaemonSet",
            lambda: apps.create_namespaced_daemon_set(
                NS,
                client.V1DaemonSet(
                    metadata=meta("ds"),
                    spec=client.V1DaemonSetSpec(
                        selector=sel,
                        template=client.V1PodTemplateSpec(
                            metadata=client.V1ObjectMeta(labels=labels),
                            spec=client.V1PodSpec(
                                node_selector={"no-such-node": "true"},
                                containers=[client.V1Container(name="c", image="registry.k8s.io/pause:3.10")],
                            ),
                        ),
                    ),
                ),
            ),
            lambda: apps.read_namespaced_daemon_set("ds", NS),
            lambda: apps.list_namespaced_daemon_set(NS),
        ),
        (
            "StatefulSet",
            lambda: apps.create_namespaced_stateful_set(
                NS,
                client.V1StatefulSet(
                    metadata=meta("sts"),
                    spec=client.V1StatefulSetSpec(
                        replicas=0, service_name="sts", selector=sel, template=pod_template(labels)
                    ),
                ),
            ),
            lambda: apps.read_namespaced_stateful_set("sts", NS),
            lambda: apps.list_namespaced_stateful_set(NS),
        ),
        (
            "Job",
            lambda: batch.create_namespaced_job(
                NS,
                client.V1Job(metadata=meta("job"), spec=client.V1JobSpec(suspend=True, template=pod_template({}, "Never"))),
            ),
            lambda: batch.read_namespaced_job("job", NS),
            lambda: batch.list_namespaced_job(NS),
        ),
        (
            "CronJob",
            lambda: batch.create_namespaced_cron_job(
                NS,
                client.V1CronJob(
                    metadata=meta("cj"),
                    spec=client.V1CronJobSpec(
                        schedule="*/5 * * * *",
                        suspend=True,
                        job_template=client.V1JobTemplateSpec(spec=client.V1JobSpec(template=pod_template({}, "Never"))),
                    ),
                ),
            ),
            lambda: batch.read_namespaced_cron_job("cj", NS),
            lambda: batch.list_namespaced_cron_job(NS),
        ),
        (
            "HorizontalPodAutoscaler",
            lambda: hpa.create_namespaced_horizontal_pod_autoscaler(
                NS,
                client.V2HorizontalPodAutoscaler(
                    metadata=meta("hpa"),
                    spec=client.V2HorizontalPodAutoscalerSpec(
                        max_replicas=3,
                        scale_target_ref=client.V2CrossVersionObjectReference(
                            api_version="apps/v1", kind="Deployment", name="dep"
                        ),
                    ),
                ),
            ),
            lambda: hpa.read_namespaced_horizontal_pod_autoscaler("hpa", NS),
            lambda: hpa.list_namespaced_horizontal_pod_autoscaler(NS),
        ),
        (
            "PodDisruptionBudget",
            lambda: policy.create_namespaced_pod_disruption_budget(
                NS,
                client.V1PodDisruptionBudget(
                    metadata=meta("pdb"), spec=client.V1PodDisruptionBudgetSpec(min_available=1, selector=sel)
                ),
            ),
            lambda: policy.read_namespaced_pod_disruption_budget("pdb", NS),
            lambda: policy.list_namespaced_pod_disruption_budget(NS),
        ),
    ]
    for kind, create, read, list_ in kinds:
        created = create()
        check(created.kind == kind, f"created kind {created.kind!r}, expected {kind}")
        got = read()
        check(got.metadata.uid == created.metadata.uid, f"{kind}: read returns another object")
        check(got.status is not None, f"{kind}: read back without a status")
        listed = list_()
        check(created.metadata.name in [i.metadata.name for i in listed.items], f"{kind}: list lacks the object")
    print(f"typed kinds: {len(kinds)} created, read and listed")


def budget_refuses_eviction(core, pod_name):
    """A budget with maxUnavailable 0 over the netexec Deployment: the disruption controller
    brings its status up to date, and an eviction gets upstream's 429."""
    policy = client.PolicyV1Api()
    policy.create_namespaced_pod_disruption_budget(
        NS,
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="pyweb"),
            spec=client.V1PodDisruptionBudgetSpec(
                max_unavailable=0, selector=client.V1LabelSelector(match_labels={"app": "pyweb"})
            ),
        ),
    )
    deadline = time.time() + 30
    while True:
        b = policy.read_namespaced_pod_disruption_budget("pyweb", NS)
        if b.status.observed_generation == b.metadata.generation and b.status.expected_pods == 3:
            break
        check(time.time() < deadline, f"disruption budget status never synced: {b.status}")
        time.sleep(0.2)
    check(b.status.disruptions_allowed == 0, f"disruptionsAllowed {b.status.disruptions_allowed}")
    conds = {c.type: (c.status, c.reason) for c in (b.status.conditions or [])}
    check(conds.get("DisruptionAllowed") == ("False", "InsufficientPods"), f"conditions {conds}")
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod_name, namespace=NS))
    e = expect_status(429, core.create_namespaced_pod_eviction, pod_name, NS, eviction)
    check(
        "Cannot evict pod as it would violate the pod's disruption budget." in e.body,
        f"eviction refusal body {e.body}",
    )
    policy.delete_namespaced_pod_disruption_budget("pyweb", NS)
    print(f"eviction of {pod_name} refused: {b.status.current_healthy}/{b.status.desired_healthy} healthy")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python_client_check.py KUBECONFIG")
    try:
        main(sys.argv[1])
    except Mismatch as e:
        sys.exit(f"MISMATCH: {e}")
    except ApiException as e:
        sys.exit(f"UNEXPECTED API ERROR: {e.status} {e.reason}: {e.body}")
