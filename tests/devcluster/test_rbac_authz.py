"""Authorization by RBAC, seen through the real kubectl: 403s worded as kube-apiserver words
them, and what Roles, ClusterRoles and their bindings grant (verbs, resources, subresources,
resourceNames, namespaces, non-resource URLs, `*`), effective on the next request."""

from __future__ import annotations

from pathlib import Path

import yaml

from devkube import DevCluster
from tests.harness.kubectl import Run, as_service_account, ok, refused, user_of

BOB = user_of("default", "bob")


def forbidden(what: str, verb: str, resource: str, group: str, scope: str) -> str:
    return (
        f'Error from server (Forbidden): {what} is forbidden: User "{BOB}" cannot {verb} '
        f'resource "{resource}" in API group "{group}" {scope}'
    )


async def bob(kubectl: Run, cluster: DevCluster, tmp: Path) -> Run:
    return await as_service_account(kubectl, cluster, tmp, "bob")


async def test_a_token_without_grants_is_refused_with_kubes_message(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    run = await bob(kubectl, dev_cluster, tmp_path)
    await ok(kubectl, "run", "p", "--image=busybox", "--restart=Never")
    in_default = 'in the namespace "default"'
    assert await refused(run, "get", "pods") == forbidden("pods", "list", "pods", "", in_default)
    assert await refused(run, "get", "pod", "p") == forbidden(
        'pods "p"', "get", "pods", "", in_default
    )
    assert await refused(run, "get", "nodes") == forbidden(
        "nodes", "list", "nodes", "", "at the cluster scope"
    )
    assert await refused(run, "get", "leases") == forbidden(
        "leases.coordination.k8s.io", "list", "leases", "coordination.k8s.io", in_default
    )
    status = await refused(
        run, "patch", "pod", "p", "--subresource=status", "-p", '{"status":{"phase":"Failed"}}'
    )
    # kubectl patch reads the object first: refused at the GET of the subresource
    assert status == forbidden('pods "p"', "get", "pods/status", "", in_default)
    assert await refused(run, "delete", "--raw", "/api/v1/namespaces/default/pods") == forbidden(
        "pods", "deletecollection", "pods", "", in_default
    )
    raw = await refused(run, "get", "--raw", "/metrics")
    assert (
        raw == f'Error from server (Forbidden): forbidden: User "{BOB}" cannot get path "/metrics"'
    )


async def test_roles_grant_verbs_resources_names_and_namespaces(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    run = await bob(kubectl, dev_cluster, tmp_path)
    await ok(kubectl, "create", "namespace", "other")
    for ns in ("default", "other"):
        for name in ("a", "b"):
            await ok(kubectl, "run", name, "-n", ns, "--image=busybox", "--restart=Never")

    # list but not watch
    await ok(kubectl, "create", "role", "lister", "--verb=list", "--resource=pods")
    await ok(
        kubectl, "create", "rolebinding", "lister", "--role=lister", "--serviceaccount=default:bob"
    )
    assert (await ok(run, "get", "pods", "-o", "name")).split() == ["pod/a", "pod/b"]
    watch = await refused(run, "get", "pods", "--watch-only", "--request-timeout=5s")
    assert watch == forbidden("pods", "watch", "pods", "", 'in the namespace "default"')
    # only in its namespace
    assert await refused(run, "get", "pods", "-n", "other") == forbidden(
        "pods", "list", "pods", "", 'in the namespace "other"'
    )

    # resourceNames: one pod by name, not the other
    await ok(
        kubectl,
        "create",
        "role",
        "one",
        "--verb=get,delete",
        "--resource=pods",
        "--resource-name=a",
    )
    await ok(kubectl, "create", "rolebinding", "one", "--role=one", "--serviceaccount=default:bob")
    assert (await ok(run, "get", "pod", "a", "-o", "name")).strip() == "pod/a"
    assert await refused(run, "get", "pod", "b") == forbidden(
        'pods "b"', "get", "pods", "", 'in the namespace "default"'
    )

    # a ClusterRole bound by a RoleBinding grants in that namespace only; `*` verbs
    await ok(kubectl, "create", "clusterrole", "cm-all", "--verb=*", "--resource=configmaps")
    await ok(
        kubectl,
        "create",
        "rolebinding",
        "cm-all",
        "-n",
        "other",
        "--clusterrole=cm-all",
        "--serviceaccount=default:bob",
    )
    await ok(run, "create", "configmap", "c", "-n", "other", "--from-literal=k=v")
    await ok(run, "delete", "configmap", "c", "-n", "other")
    refusal = await refused(run, "create", "configmap", "c", "--from-literal=k=v")
    assert refusal == "error: failed to create configmap: " + forbidden(
        "configmaps", "create", "configmaps", "", 'in the namespace "default"'
    ).removeprefix("Error from server (Forbidden): ")

    # a ClusterRoleBinding grants everywhere, cluster-scoped kinds included
    await ok(kubectl, "create", "clusterrole", "node-reader", "--verb=get,list", "--resource=nodes")
    await ok(
        kubectl,
        "create",
        "clusterrolebinding",
        "bob-nodes",
        "--clusterrole=node-reader",
        "--serviceaccount=default:bob",
    )
    assert await ok(run, "get", "nodes", "-o", "name")
    # ...and taking it away is effective at once
    await ok(kubectl, "delete", "clusterrolebinding", "bob-nodes")
    assert await refused(run, "get", "nodes") == forbidden(
        "nodes", "list", "nodes", "", "at the cluster scope"
    )


async def test_subresources_wildcards_and_non_resource_urls(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    run = await bob(kubectl, dev_cluster, tmp_path)
    await ok(kubectl, "run", "p", "--image=busybox", "--restart=Never")
    manifest = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: sub}
rules:
- apiGroups: [""]
  resources: ["pods/status"]
  verbs: ["get", "patch"]
- apiGroups: ["*"]
  resources: ["*/scale"]
  verbs: ["get"]
- nonResourceURLs: ["/metrics", "/logs/*"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: sub}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: sub}
subjects:
- {kind: ServiceAccount, name: bob, namespace: default}
"""
    await ok(kubectl, "apply", "-f", "-", input=manifest)
    can = [
        ("get", "pods", "--subresource=status", "yes"),
        ("get", "pods", "", "no"),
        ("patch", "pods", "--subresource=status", "yes"),
        ("update", "pods", "--subresource=status", "no"),
        ("get", "deployments.apps", "--subresource=scale", "yes"),
        ("get", "deployments.apps", "", "no"),
    ]
    for verb, resource, sub, want in can:
        args = ["auth", "can-i", verb, resource, *([sub] if sub else [])]
        answer = (await run(*args)).stdout.strip()
        assert answer == want, (verb, resource, sub, answer)
    for path, want in [("/metrics", "yes"), ("/logs/kubelet", "yes"), ("/debug", "no")]:
        assert (await run("auth", "can-i", "get", path)).stdout.strip() == want, path


async def test_a_binding_to_a_missing_role_says_so(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    run = await bob(kubectl, dev_cluster, tmp_path)
    await ok(
        kubectl, "create", "rolebinding", "ghost", "--role=ghost", "--serviceaccount=default:bob"
    )
    assert await refused(run, "get", "pods") == (
        forbidden("pods", "list", "pods", "", 'in the namespace "default"')
        + ': RBAC: role.rbac.authorization.k8s.io "ghost" not found'
    )


async def test_can_i_and_its_list_answer_for_the_caller(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    run = await bob(kubectl, dev_cluster, tmp_path)
    await ok(kubectl, "create", "role", "r", "--verb=get,list", "--resource=services")
    await ok(kubectl, "create", "rolebinding", "r", "--role=r", "--serviceaccount=default:bob")
    assert (await run("auth", "can-i", "list", "services")).stdout.strip() == "yes"
    assert (await run("auth", "can-i", "delete", "services")).stdout.strip() == "no"
    assert (await run("auth", "can-i", "list", "services", "-n", "kube-system")).stdout.strip() == (
        "no"
    )
    listed = await ok(run, "auth", "can-i", "--list")
    rows = {tuple(line.split()) for line in listed.splitlines()[1:]}
    assert ("services", "[]", "[]", "[get", "list]") in rows
    assert ("selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]") in rows
    assert ("[/api]", "[]", "[get]") in rows


async def test_subject_access_review_answers_for_anyone_named(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    await bob(kubectl, dev_cluster, tmp_path)
    await ok(kubectl, "create", "role", "r", "--verb=get", "--resource=pods")
    await ok(kubectl, "create", "rolebinding", "r", "--role=r", "--serviceaccount=default:bob")
    review = """
apiVersion: authorization.k8s.io/v1
kind: SubjectAccessReview
spec:
  user: system:serviceaccount:default:bob
  groups: [system:serviceaccounts, system:authenticated]
  resourceAttributes: {namespace: default, verb: VERB, resource: pods}
"""
    allowed = yaml.safe_load(
        await ok(kubectl, "create", "-f", "-", "-o", "yaml", input=review.replace("VERB", "get"))
    )["status"]
    assert allowed == {
        "allowed": True,
        "reason": 'RBAC: allowed by RoleBinding "r/default" of Role "r" to ServiceAccount '
        '"bob/default"',
    }
    denied = yaml.safe_load(
        await ok(kubectl, "create", "-f", "-", "-o", "yaml", input=review.replace("VERB", "list"))
    )["status"]
    assert denied == {"allowed": False}


async def test_server_side_apply_that_creates_needs_create(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    run = await bob(kubectl, dev_cluster, tmp_path)
    await ok(kubectl, "create", "role", "patcher", "--verb=get,patch", "--resource=configmaps")
    await ok(
        kubectl,
        "create",
        "rolebinding",
        "patcher",
        "--role=patcher",
        "--serviceaccount=default:bob",
    )
    config = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: v}\n"
    refusal = await refused(run, "apply", "--server-side", "-f", "-", input=config)
    assert refusal.startswith('Error from server (Forbidden): configmaps "c" is forbidden'), refusal
    await ok(kubectl, "create", "role", "creator", "--verb=create", "--resource=configmaps")
    await ok(
        kubectl,
        "create",
        "rolebinding",
        "creator",
        "--role=creator",
        "--serviceaccount=default:bob",
    )
    await ok(run, "apply", "--server-side", "-f", "-", input=config)
    await ok(kubectl, "delete", "rolebinding", "creator")
    await ok(run, "apply", "--server-side", "-f", "-", input=config.replace("k: v", "k: w"))
