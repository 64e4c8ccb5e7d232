"""Shared-cluster admission in the dev cluster, driven by the real kubectl as a team on a
shared cluster meets it: ResourceQuota (admission with kube's messages, the controller's
status, `get`/`describe`), LimitRange (defaults and refusals) and Pod Security Admission
(enforce and warn at each level).

Admission only: one dev cluster serves the whole module, each test in a namespace of its own."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from devkube import DevCluster
from tests.harness import control_planes
from tests.harness import kubectl as kubectl_bin
from tests.harness.cluster import running_cluster
from tests.harness.kubectl import ok, refused
from tests.harness.waiting import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dev_cluster(control_plane: str) -> AsyncIterator[DevCluster]:
    """One dev cluster (the default nodes) for the module: its tests only admit pods."""
    control_planes.require(control_plane)
    async with running_cluster(kubelet_delay=0.2, control_plane=control_plane) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kubectl(dev_cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = dev_cluster.write_kubeconfig(tmp_path_factory.mktemp("tenancy") / "kubeconfig")
    return kubectl_bin.runner(path)


def pod(name: str, ns: str, *, container: str = "c", resources: Any = None, **spec: Any) -> str:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "containers": [
                {
                    "name": container,
                    "image": "busybox",
                    "command": ["sleep", "infinity"],
                    **({"resources": resources} if resources is not None else {}),
                }
            ],
            **spec,
        },
    }
    return json.dumps(body)


async def namespace_with_quota(
    kubectl: Any, ns: str, name: str, hard: dict[str, str], **spec: Any
) -> dict[str, Any]:
    """A new namespace with one ResourceQuota, once its controller has written its status."""
    await ok(kubectl, "create", "namespace", ns)
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"hard": hard, **spec},
    }
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(quota))
    return await quota_synced(kubectl, ns, name)


async def quota_synced(kubectl: Any, ns: str, name: str) -> dict[str, Any]:
    """The quota once its controller has written status.hard and status.used."""

    async def check() -> dict[str, Any]:
        quota = json.loads(await ok(kubectl, "get", "quota", name, "-n", ns, "-o", "json"))
        status = quota.get("status") or {}
        assert status.get("hard") and set(status.get("used") or {}) == set(status["hard"])
        return quota

    result: dict[str, Any] = await eventually(check)
    return result


async def test_quota_refuses_with_kubes_message_and_keeps_status(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "team-a"
    await namespace_with_quota(
        kubectl, ns, "q", {"requests.google.com/tpu": "16", "count/pods": "5", "cpu": "4"}
    )
    tpu = {"requests": {"google.com/tpu": "8", "cpu": "1"}, "limits": {"google.com/tpu": "8"}}
    for name in ("a", "b"):
        await ok(kubectl, "apply", "-f", "-", input=pod(name, ns, resources=tpu))
    small = {"requests": {"google.com/tpu": "4", "cpu": "1"}, "limits": {"google.com/tpu": "4"}}
    message = await refused(kubectl, "apply", "-f", "-", input=pod("x", ns, resources=small))
    assert message.endswith(
        'pods "x" is forbidden: exceeded quota: q, requested: requests.google.com/tpu=4, '
        "used: requests.google.com/tpu=16, limited: requests.google.com/tpu=16"
    ), message
    # cpu is named by the quota: a container without a cpu request is refused outright.
    none = {"requests": {"google.com/tpu": "1"}, "limits": {"google.com/tpu": "1"}}
    message = await refused(kubectl, "apply", "-f", "-", input=pod("y", ns, resources=none))
    assert message.endswith('pods "y" is forbidden: failed quota: q: must specify cpu for: c')

    table = await ok(kubectl, "get", "quota", "-n", ns)
    assert "count/pods: 2/5, cpu: 2/4, requests.google.com/tpu: 16/16" in table, table
    described = await ok(kubectl, "describe", "quota", "q", "-n", ns)
    assert "requests.google.com/tpu" in described and "16    16" in described, described

    # A pod leaving frees its charge: the controller recomputes status.used.
    await ok(kubectl, "delete", "pod", "a", "-n", ns, "--grace-period=0", "--force")

    async def freed() -> None:
        quota = json.loads(await ok(kubectl, "get", "quota", "q", "-n", ns, "-o", "json"))
        assert quota["status"]["used"]["requests.google.com/tpu"] == "8"

    await eventually(freed)
    await ok(kubectl, "apply", "-f", "-", input=pod("x", ns, resources=small))


async def test_quota_limits_memory_must_be_specified_and_object_counts(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "team-b"
    await ok(kubectl, "create", "namespace", ns)

    async def published() -> None:  # kube-controller-manager's root CA publisher, at once
        await ok(kubectl, "get", "configmap", "kube-root-ca.crt", "-n", ns)

    await eventually(published)
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "mem", "namespace": ns},
        "spec": {"hard": {"limits.memory": "1Gi", "pods": "1", "count/configmaps": "2"}},
    }
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(quota))
    synced = await quota_synced(kubectl, ns, "mem")
    # The published kube-root-ca.crt is charged like any ConfigMap.
    assert synced["status"]["used"]["count/configmaps"] == "1", synced["status"]
    message = await refused(kubectl, "apply", "-f", "-", input=pod("p", ns))
    assert message.endswith(
        'pods "p" is forbidden: failed quota: mem: must specify limits.memory for: c'
    )
    limited = {"limits": {"memory": "512Mi"}}
    await ok(kubectl, "apply", "-f", "-", input=pod("p", ns, resources=limited))
    message = await refused(kubectl, "apply", "-f", "-", input=pod("p2", ns, resources=limited))
    assert message.endswith(
        'pods "p2" is forbidden: exceeded quota: mem, requested: pods=1, used: pods=1, '
        "limited: pods=1"
    ), message
    await ok(kubectl, "create", "configmap", "one", "-n", ns)
    message = await refused(kubectl, "create", "configmap", "two", "-n", ns)
    assert message.endswith(
        'configmaps "two" is forbidden: exceeded quota: mem, requested: count/configmaps=1, '
        "used: count/configmaps=2, limited: count/configmaps=2"
    ), message
    synced = await quota_synced(kubectl, ns, "mem")
    assert synced["status"]["used"]["limits.memory"] == "512Mi"


async def test_quota_scopes_terminating_and_best_effort(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "team-c"
    await namespace_with_quota(
        kubectl, ns, "be", {"pods": "1"}, scopes=["BestEffort", "NotTerminating"]
    )
    await ok(kubectl, "apply", "-f", "-", input=pod("one", ns))
    message = await refused(kubectl, "apply", "-f", "-", input=pod("two", ns))
    assert "exceeded quota: be, requested: pods=1" in message
    # Out of scope: a pod with requests (NotBestEffort), one with a deadline (Terminating).
    burst = {"requests": {"cpu": "100m"}}
    await ok(kubectl, "apply", "-f", "-", input=pod("burst", ns, resources=burst))
    await ok(kubectl, "apply", "-f", "-", input=pod("dl", ns, activeDeadlineSeconds=600))


async def test_limitrange_defaults_and_refusals(dev_cluster: DevCluster, kubectl: Any) -> None:
    ns = "team-d"
    await ok(kubectl, "create", "namespace", ns)
    ranges = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "lr", "namespace": ns},
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "default": {"cpu": "500m", "memory": "256Mi"},
                    "defaultRequest": {"cpu": "250m"},
                    "max": {"cpu": "2"},
                    "min": {"cpu": "100m"},
                    "maxLimitRequestRatio": {"cpu": "4"},
                }
            ]
        },
    }
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(ranges))
    assert "lr" in await ok(kubectl, "get", "limitrange", "-n", ns)
    await ok(kubectl, "apply", "-f", "-", input=pod("d", ns))
    got = json.loads(await ok(kubectl, "get", "pod", "d", "-n", ns, "-o", "json"))
    resources = got["spec"]["containers"][0]["resources"]
    # defaultRequest.memory is defaulted from default.memory when the LimitRange is written.
    assert resources == {
        "limits": {"cpu": "500m", "memory": "256Mi"},
        "requests": {"cpu": "250m", "memory": "256Mi"},
    }
    assert got["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, memory request for container c; "
        "cpu, memory limit for container c"
    )
    big = {"limits": {"cpu": "4"}, "requests": {"cpu": "1"}}
    message = await refused(kubectl, "apply", "-f", "-", input=pod("big", ns, resources=big))
    assert message.endswith(
        'pods "big" is forbidden: maximum cpu usage per Container is 2, but limit is 4'
    ), message
    skew = {"limits": {"cpu": "2"}, "requests": {"cpu": "100m"}}
    message = await refused(kubectl, "apply", "-f", "-", input=pod("skew", ns, resources=skew))
    assert message.endswith(
        'pods "skew" is forbidden: cpu max limit to request ratio per Container is 4, '
        "but provided ratio is 20.000000"
    ), message
    tiny = {"limits": {"cpu": "50m"}, "requests": {"cpu": "50m"}}
    message = await refused(kubectl, "apply", "-f", "-", input=pod("tiny", ns, resources=tiny))
    assert message.endswith(
        'pods "tiny" is forbidden: minimum cpu usage per Container is 100m, but request is 50m'
    ), message


PRIVILEGED = {"privileged": True}
RESTRICTED_OK = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def secured(name: str, ns: str, sc: dict[str, Any], **spec: Any) -> str:
    body = json.loads(pod(name, ns, **spec))
    body["spec"]["containers"][0]["securityContext"] = sc
    return json.dumps(body)


@pytest.mark.parametrize("level", ["privileged", "baseline", "restricted"])
async def test_pod_security_enforce_each_level(
    dev_cluster: DevCluster, kubectl: Any, level: str
) -> None:
    ns = f"psa-{level}"
    await ok(kubectl, "create", "namespace", ns)
    await ok(kubectl, "label", "namespace", ns, f"pod-security.kubernetes.io/enforce={level}")
    priv = secured("priv", ns, PRIVILEGED, hostNetwork=True)
    plain = pod("plain", ns)
    good = secured("good", ns, RESTRICTED_OK)
    if level == "privileged":
        for body in (priv, plain, good):
            await ok(kubectl, "apply", "-f", "-", input=body)
        return
    message = await refused(kubectl, "apply", "-f", "-", input=priv)
    if level == "baseline":
        assert message.endswith(
            'pods "priv" is forbidden: violates PodSecurity "baseline:latest": host namespaces '
            '(hostNetwork=true), privileged (container "c" must not set '
            "securityContext.privileged=true)"
        ), message
        await ok(kubectl, "apply", "-f", "-", input=plain)
    else:
        message = await refused(kubectl, "apply", "-f", "-", input=plain)
        assert message.endswith(
            'pods "plain" is forbidden: violates PodSecurity "restricted:latest": '
            'allowPrivilegeEscalation != false (container "c" must set '
            "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities "
            '(container "c" must set securityContext.capabilities.drop=["ALL"]), '
            'runAsNonRoot != true (pod or container "c" must set '
            'securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must '
            'set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
        ), message
    await ok(kubectl, "apply", "-f", "-", input=good)


@pytest.mark.parametrize("level", ["baseline", "restricted"])
async def test_pod_security_warn_each_level(
    dev_cluster: DevCluster, kubectl: Any, level: str
) -> None:
    ns = f"warn-{level}"
    await ok(kubectl, "create", "namespace", ns)
    await ok(kubectl, "label", "namespace", ns, f"pod-security.kubernetes.io/warn={level}")
    await ok(kubectl, "label", "namespace", ns, "pod-security.kubernetes.io/warn-version=v1.30")
    volume = [{"name": "host", "hostPath": {"path": "/tmp"}}]
    done = await kubectl(
        "apply",
        "-f",
        "-",
        input=secured("w", ns, {"capabilities": {"add": ["SYS_ADMIN"]}}, volumes=volume),
    )
    assert done.returncode == 0, done.stderr
    if level == "baseline":
        expected = (
            'Warning: would violate PodSecurity "baseline:v1.30": non-default capabilities '
            '(container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add), '
            'hostPath volumes (volume "host")'
        )
    else:
        expected = (
            'Warning: would violate PodSecurity "restricted:v1.30": allowPrivilegeEscalation '
            '!= false (container "c" must set securityContext.allowPrivilegeEscalation=false), '
            'unrestricted capabilities (container "c" must set '
            'securityContext.capabilities.drop=["ALL"]; container "c" must not include '
            '"SYS_ADMIN" in securityContext.capabilities.add), restricted volume types '
            '(volume "host" uses restricted volume type "hostPath"), runAsNonRoot != true (pod '
            "or container "
            '"c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container '
            '"c" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
            '"Localhost")'
        )
    assert expected in done.stderr, done.stderr


async def test_pod_security_checks_replicaset_pods(dev_cluster: DevCluster, kubectl: Any) -> None:
    """A Deployment's template is only warned about (at the warn level: enforce is for pods);
    its pods are refused at create, so the ReplicaSet never gets a pod (what kube does)."""
    ns = "psa-deploy"
    await ok(kubectl, "create", "namespace", ns)
    await ok(kubectl, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=baseline")
    await ok(kubectl, "label", "namespace", ns, "pod-security.kubernetes.io/warn=baseline")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": json.loads(secured("x", ns, PRIVILEGED))["spec"],
            },
        },
    }
    done = await kubectl("apply", "-f", "-", input=json.dumps(deployment))
    assert done.returncode == 0, done.stderr
    assert 'Warning: would violate PodSecurity "baseline:latest": privileged' in done.stderr

    async def replicaset_made() -> None:
        sets = json.loads(await ok(kubectl, "get", "rs", "-n", ns, "-o", "json"))["items"]
        assert sets

    await eventually(replicaset_made)
    assert json.loads(await ok(kubectl, "get", "pods", "-n", ns, "-o", "json"))["items"] == []


async def test_kubectl_create_quota_and_describe(dev_cluster: DevCluster, kubectl: Any) -> None:
    """`kubectl create quota` (a protobuf body) as the issue's user typed it."""
    ns = "team-e"
    await ok(kubectl, "create", "namespace", ns)
    await ok(kubectl, "create", "quota", "q", "--hard=pods=2,requests.nvidia.com/gpu=8", "-n", ns)
    await quota_synced(kubectl, ns, "q")
    gpu = {"requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}
    await ok(kubectl, "apply", "-f", "-", input=pod("a", ns, resources=gpu))
    await ok(kubectl, "apply", "-f", "-", input=pod("b", ns, resources=gpu))
    message = await refused(kubectl, "apply", "-f", "-", input=pod("c", ns, resources=gpu))
    assert message.endswith(
        'pods "c" is forbidden: exceeded quota: q, requested: pods=1,requests.nvidia.com/gpu=4, '
        "used: pods=2,requests.nvidia.com/gpu=8, limited: pods=2,requests.nvidia.com/gpu=8"
    ), message
    described = await ok(kubectl, "describe", "quota", "q", "-n", ns)
    assert "requests.nvidia.com/gpu  8     8" in described, described


async def test_every_namespace_holds_the_root_ca_and_gets_it_back(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "team-ca"
    await ok(kubectl, "create", "namespace", ns)

    async def published() -> dict[str, Any]:
        found: dict[str, Any] = json.loads(
            await ok(kubectl, "get", "configmap", "kube-root-ca.crt", "-n", ns, "-o", "json")
        )
        return found

    first = await eventually(published)
    assert first["data"]["ca.crt"] == dev_cluster.ca_pem.decode()
    await ok(kubectl, "delete", "configmap", "kube-root-ca.crt", "-n", ns)
    again = await eventually(published)
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    assert again["data"]["ca.crt"] == dev_cluster.ca_pem.decode()
