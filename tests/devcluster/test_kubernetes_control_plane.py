"""Kubernetes' own control plane under the dev cluster (docs/design.md §8.2), driven with the
real kubectl: the server is v1.37, our kubelets join it as nodes with node credentials (the
Node authorizer and NodeRestriction judge them), the real scheduler and controller manager
run workloads on them, and a quota refusal reads as Kubernetes words it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from devkube import DevCluster
from devkube.controlplane import build
from devkube.machinery.client import ApiClient, ApiError, resource_path
from tests.harness import control_planes
from tests.harness.cluster import running_cluster
from tests.harness.kubectl import Run, ok, refused, runner
from tests.harness.waiting import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.kubernetes]

NODES = ["tpu:v5p:2x2x2:1", "cpu:2"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster() -> AsyncIterator[DevCluster]:
    control_planes.require(control_planes.KUBERNETES)
    async with running_cluster(NODES, control_plane="kubernetes") as started:
        yield started


@pytest.fixture
def kubectl(cluster: DevCluster, tmp_path: Path) -> Run:
    return runner(cluster.write_kubeconfig(tmp_path / "kubeconfig"))


async def test_the_server_is_the_pinned_kubernetes_release(kubectl: Run) -> None:
    version = json.loads(await ok(kubectl, "version", "-o", "json"))
    pinned = build.version_of("kubernetes", "k8s.io/kubernetes")
    assert version["serverVersion"]["gitVersion"] == pinned


async def test_our_kubelets_are_ready_nodes_with_their_pools(kubectl: Run) -> None:
    async def ready() -> None:
        nodes = json.loads(await ok(kubectl, "get", "nodes", "-o", "json"))["items"]
        assert len(nodes) == 4
        for node in nodes:
            conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
            assert conditions["Ready"] == "True"
            taints = {t["key"] for t in node["spec"].get("taints") or []}
            assert not {t for t in taints if t.startswith("node.kubernetes.io/")}
        tpu = [n for n in nodes if "cloud.google.com/gke-tpu-topology" in n["metadata"]["labels"]]
        assert len(tpu) == 2
        assert all(n["status"]["allocatable"]["google.com/tpu"] == "4" for n in tpu)

    await eventually(ready, 60)


async def test_a_node_writes_only_as_itself(cluster: DevCluster) -> None:
    """NodeRestriction: node A's credentials may not touch node B, nor set a label under
    node-restriction.kubernetes.io/ on itself; its own status it may post."""
    first, second = sorted(cluster.node_names)[:2]
    client = ApiClient(cluster.url, cluster.kube.node_token(first), cluster.ca_pem)
    try:
        with pytest.raises(ApiError) as other:
            await client.patch(
                resource_path("v1", "nodes", name=second), {"metadata": {"labels": {"x": "y"}}}
            )
        assert other.value.status == 403
        assert f'node "{first}" is not allowed to modify node "{second}"' in str(other.value)
        with pytest.raises(ApiError) as label:
            await client.patch(
                resource_path("v1", "nodes", name=first),
                {"metadata": {"labels": {"node-restriction.kubernetes.io/pool": "x"}}},
            )
        assert label.value.status == 403
        await client.get(resource_path("v1", "nodes", name=first))
    finally:
        await client.close()


async def test_the_real_scheduler_and_controllers_run_a_deployment_on_our_kubelets(
    kubectl: Run,
) -> None:
    await ok(kubectl, "create", "namespace", "web")
    await ok(kubectl, "-n", "web", "create", "deployment", "hello", "--image=nginx", "--replicas=3")
    await ok(kubectl, "-n", "web", "rollout", "status", "deployment/hello", "--timeout=120s")
    pods = json.loads(await ok(kubectl, "-n", "web", "get", "pods", "-o", "json"))["items"]
    assert len(pods) == 3
    # CPU pods stay off the TPU hosts: their taint is tolerated only by a TPU request.
    assert all(p["spec"]["nodeName"].startswith("cpu-") for p in pods)
    assert all(p["status"]["phase"] == "Running" and p["status"].get("podIP") for p in pods)


async def test_a_quota_refusal_reads_as_kubernetes_words_it(kubectl: Run) -> None:
    await ok(kubectl, "create", "namespace", "team")
    await ok(kubectl, "-n", "team", "create", "quota", "tpu", "--hard=requests.google.com/tpu=4")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "big", "namespace": "team"},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"google.com/tpu": "8"}}}
            ]
        },
    }

    async def refuses() -> None:
        # The quota's status is filled by kube-controller-manager a moment after its create.
        err = await refused(kubectl, "apply", "-f", "-", input=json.dumps(pod))
        assert (
            'pods "big" is forbidden: exceeded quota: tpu, requested: '
            "requests.google.com/tpu=8, used: requests.google.com/tpu=0, limited: "
            "requests.google.com/tpu=4"
        ) in err

    await eventually(refuses, 30)
