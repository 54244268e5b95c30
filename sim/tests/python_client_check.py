#!/usr/bin/env python3
"""The official Python Kubernetes client against the simulated cluster.

Usage: python3 tests/python_client_check.py KUBECONFIG

Driven by tests/sim_python_client.rs. Uses only the kubeconfig the simulator writes, the way a
person would: namespace, ConfigMap CRUD and patch, a Deployment waited on with a pod watch,
pod logs, node labels, and a namespace delete that completes. Exits non-zero with a message
naming the first mismatch.
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


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python_client_check.py KUBECONFIG")
    try:
        main(sys.argv[1])
    except Mismatch as e:
        sys.exit(f"MISMATCH: {e}")
    except ApiException as e:
        sys.exit(f"UNEXPECTED API ERROR: {e.status} {e.reason}: {e.body}")
