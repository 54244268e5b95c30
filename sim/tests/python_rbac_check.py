#!/usr/bin/env python3
"""RBAC round trip with the official Python Kubernetes client against the simulated cluster.

Usage: python3 tests/python_rbac_check.py KUBECONFIG

Driven by tests/sim_python_client.rs. As the admin kubeconfig user: a namespace, a
ServiceAccount, a Role and a RoleBinding, and a TokenRequest. Then, as a second client that
only has that token: listing pods is allowed, creating one is refused with upstream's 403, and
SelfSubjectAccessReview / SelfSubjectReview answer about the ServiceAccount. Exits non-zero
with a message naming the first mismatch.
"""

import json
import sys

from kubernetes import client, config
from kubernetes.client.rest import ApiException

NS = "pyrbac"
SA = "robot"
USER = f"system:serviceaccount:{NS}:{SA}"


class Mismatch(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Mismatch(what)


def step(name):
    print(f"-- {name}", flush=True)


def main(kubeconfig):
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    rbac = client.RbacAuthorizationV1Api()

    step("namespace, service account, role, binding")
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    core.create_namespaced_service_account(NS, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=SA)))
    rbac.create_namespaced_role(NS, client.V1Role(
        metadata=client.V1ObjectMeta(name="pod-lister"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get", "list"])]))
    rbac.create_namespaced_role_binding(NS, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="robot-lists-pods"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="pod-lister"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name=SA, namespace=NS)]))
    roles = rbac.list_namespaced_role(NS).items
    check([r.metadata.name for r in roles] == ["pod-lister"], f"roles: {roles}")

    step("roleRef is immutable")
    try:
        rbac.patch_namespaced_role_binding("robot-lists-pods", NS, {"roleRef": {"name": "other"}})
        raise Mismatch("changing roleRef succeeded")
    except ApiException as e:
        check(e.status == 422, f"roleRef change: HTTP {e.status}: {e.body}")
        check("cannot change roleRef" in e.body, e.body)

    step("token request")
    tr = core.create_namespaced_service_account_token(SA, NS, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)))
    token = tr.status.token
    check(token.count(".") == 2, f"token is not JWT-shaped: {token}")

    step("a client with only the token")
    cfg = client.Configuration.get_default_copy()
    cfg.api_key = {"authorization": f"Bearer {token}"}
    cfg.api_key_prefix = {}
    # The kubeconfig loader installs a hook that puts the kubeconfig's token back.
    cfg.refresh_api_key_hook = None
    robot = client.ApiClient(cfg)
    robot_core = client.CoreV1Api(robot)
    pods = robot_core.list_namespaced_pod(NS)
    check(pods.items == [], f"pods: {pods.items}")
    try:
        robot_core.create_namespaced_pod(NS, client.V1Pod(
            metadata=client.V1ObjectMeta(name="nope"),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="registry.k8s.io/pause:3.10")])))
        raise Mismatch("creating a pod with a list-only token succeeded")
    except ApiException as e:
        check(e.status == 403, f"create pod: HTTP {e.status}: {e.body}")
        body = json.loads(e.body)
        want = (f'pods is forbidden: User "{USER}" cannot create resource "pods" '
                f'in API group "" in the namespace "{NS}"')
        check(body["message"] == want, f"message: {body['message']!r}")
        check(body["reason"] == "Forbidden" and body["details"] == {"kind": "pods"}, f"status: {body}")
    try:
        robot_core.list_namespaced_pod("default")
        raise Mismatch("listing pods in another namespace succeeded")
    except ApiException as e:
        check(e.status == 403, f"list default pods: HTTP {e.status}")

    step("reviews as the service account")
    authz = client.AuthorizationV1Api(robot)
    ssar = authz.create_self_subject_access_review(client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=client.V1ResourceAttributes(
            namespace=NS, verb="list", resource="pods"))))
    check(ssar.status.allowed, f"ssar: {ssar.status}")
    check(ssar.status.reason == f'RBAC: allowed by RoleBinding "robot-lists-pods/{NS}" of Role "pod-lister" '
          f'to ServiceAccount "{SA}/{NS}"', f"reason: {ssar.status.reason!r}")
    ssar = authz.create_self_subject_access_review(client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=client.V1ResourceAttributes(
            namespace=NS, verb="delete", resource="pods"))))
    check(not ssar.status.allowed, f"ssar delete: {ssar.status}")
    who = client.AuthenticationV1Api(robot).create_self_subject_review(client.V1SelfSubjectReview())
    check(who.status.user_info.username == USER, f"whoami: {who.status.user_info}")

    step("subject access review as the admin")
    sar = client.AuthorizationV1Api().create_subject_access_review(client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(user=USER, groups=["system:serviceaccounts"],
                                              resource_attributes=client.V1ResourceAttributes(
                                                  namespace=NS, verb="get", resource="pods"))))
    check(sar.status.allowed, f"sar: {sar.status}")

    step("cleanup")
    core.delete_namespace(NS)
    print("ok")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except Mismatch as e:
        print(f"MISMATCH: {e}", file=sys.stderr)
        sys.exit(1)
