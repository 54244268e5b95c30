#!/usr/bin/env python3
"""The official Python Kubernetes client's streaming calls against the simulated cluster.

Usage: python3 tests/python_stream_check.py KUBECONFIG

Driven by tests/sim_python_client.rs: exec with stdin written while the process runs
(`stream(..., stdin=True)` and `write_stdin`, the v4 websocket protocol), and port-forward
(`kubernetes.stream.portforward`, the v4 channel protocol with `?ports=`) to a Linux and a
Windows pod, including a port nothing listens on. Exits non-zero naming the first mismatch.
"""

import sys
import time

from kubernetes import client, config
from kubernetes.stream import portforward, stream

NS = "pystream"
AGNHOST = "registry.k8s.io/e2e-test-images/agnhost:2.53"


class Mismatch(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Mismatch(what)


def step(name):
    print(f"-- {name}", flush=True)


def pod(name, os_name):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            node_selector={"kubernetes.io/os": os_name},
            containers=[client.V1Container(name="c", image=AGNHOST, args=["netexec", "--http-port=8080"])],
        ),
    )


def wait_running(core, name):
    deadline = time.time() + 30
    while time.time() < deadline:
        p = core.read_namespaced_pod(name, NS)
        if p.status.phase == "Running" and all(c.ready for c in p.status.container_statuses or []):
            return
        time.sleep(0.2)
    raise Mismatch(f"pod {name} not running after 30 s")


def read_until(resp, want, timeout=10):
    """stdout of an exec until it contains `want`."""
    got = ""
    deadline = time.time() + timeout
    while want not in got and time.time() < deadline and resp.is_open():
        resp.update(timeout=0.5)
        if resp.peek_stdout():
            got += resp.read_stdout()
    return got


def http_get(sock):
    sock.sendall(b"GET /hostname HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    deadline = time.time() + 10
    while time.time() < deadline:
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if length and len(body) >= length[0]:
                return head, body
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    raise Mismatch(f"no whole HTTP response through the forward: {data!r}")


def main(kubeconfig):
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    for name, os_name in [("lin", "linux"), ("win", "windows")]:
        core.create_namespaced_pod(NS, pod(name, os_name))
    for name in ["lin", "win"]:
        wait_running(core, name)

    step("exec with stdin written while cat runs")
    resp = stream(
        core.connect_get_namespaced_pod_exec, "lin", NS, command=["cat"],
        stdin=True, stdout=True, stderr=True, tty=False, _preload_content=False,
    )
    resp.write_stdin("first line\n")
    got = read_until(resp, "first line\n")
    check(got == "first line\n", f"cat echoed {got!r} before the second line was sent")
    resp.write_stdin("second line\n")
    got = read_until(resp, "second line\n")
    check(got == "second line\n", f"cat echoed {got!r}")
    resp.close()

    step("exec sh reading commands from stdin")
    resp = stream(
        core.connect_get_namespaced_pod_exec, "lin", NS, command=["sh"],
        stdin=True, stdout=True, stderr=True, tty=False, _preload_content=False,
    )
    resp.write_stdin("V=seven\n")
    resp.write_stdin("echo value=$V\n")
    got = read_until(resp, "value=seven\n")
    check(got == "value=seven\n", f"sh answered {got!r}")
    resp.write_stdin("exit 3\n")
    resp.run_forever(timeout=10)
    check(resp.returncode == 3, f"sh exit code {resp.returncode!r}")
    resp.close()

    for name in ["lin", "win"]:
        step(f"port-forward to {name}")
        pf = portforward(core.connect_get_namespaced_pod_portforward, name, NS, ports="8080")
        sock = pf.socket(8080)
        sock.setblocking(True)
        head, body = http_get(sock)
        check(head.startswith(b"HTTP/1.1 200"), f"{name}: {head!r}")
        check(body == name.encode(), f"{name}: /hostname answered {body!r}")
        sock.close()
        check(pf.error(8080) is None, f"{name}: error {pf.error(8080)!r}")
        pf.close()

    step("port-forward to a port nothing listens on")
    pf = portforward(core.connect_get_namespaced_pod_portforward, "lin", NS, ports="9")
    deadline = time.time() + 10
    while pf.error(9) is None and time.time() < deadline:
        time.sleep(0.1)
    err = pf.error(9) or ""
    check(
        err.startswith("error forwarding port 9 to pod ") and "connect: connection refused" in err,
        f"error stream said {err!r}",
    )
    pf.close()

    core.delete_namespace(NS)
    print("ok")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python_stream_check.py KUBECONFIG")
    try:
        main(sys.argv[1])
    except Mismatch as e:
        sys.exit(f"MISMATCH: {e}")
