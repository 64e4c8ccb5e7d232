"""PodDisruptionBudgets on the dev cluster, against kube's documented behaviour
(https://kubernetes.io/docs/tasks/run-application/configure-pdb/, the eviction API page and
kube-apiserver's eviction REST code): the disruption controller's status, the eviction
subresource's 429s and 500, `unhealthyPodEvictionPolicy`, `kubectl get pdb` and `kubectl drain`.
Everything goes through the real kubectl or the HTTPS API."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devkube import DevCluster
from devkube.machinery.client import ApiError
from tests.harness import kubectl as kubectl_bin
from tests.harness.waiting import eventually

NS_PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: main, image: "nginx:1.27"}
"""


def budget(name: str, selector: dict[str, str], **spec: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": selector}, **spec},
        }
    )


def bare_pod(name: str, node: str, *, ready: bool = True) -> str:
    annotations = {} if ready else {"dev.raycluster-operator.io/ready": "false"}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "solo"}, "annotations": annotations},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "containers": [{"name": "c", "image": "busybox:1.36"}],
            },
        }
    )


@pytest.fixture
async def cluster() -> AsyncIterator[DevCluster]:
    async with DevCluster(nodes=["cpu:3"], kubelet_delay=0.05) as started:
        yield started


@pytest.fixture
def kubectl(cluster: DevCluster, tmp_path: Any) -> kubectl_bin.Run:
    return kubectl_bin.runner(cluster.write_kubeconfig(tmp_path / "kubeconfig"))


async def status_of(cluster: DevCluster, name: str) -> dict[str, Any]:
    pdb = await cluster.client.get(f"{PDBS}/{name}")
    status: dict[str, Any] = pdb.get("status") or {}
    return status


async def running(cluster: DevCluster, selector: str, count: int) -> list[str]:
    async def check() -> list[str]:
        pods = (await cluster.client.list(NS_PODS, labelSelector=selector))["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        assert len(live) == count and all(p["status"].get("phase") == "Running" for p in live)
        return sorted(p["metadata"]["name"] for p in live)

    names: list[str] = await eventually(check)
    return names


async def evict(cluster: DevCluster, pod: str) -> None:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}}
    await cluster.client.create(f"{NS_PODS}/{pod}/eviction", body)


async def refused(cluster: DevCluster, pod: str) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await evict(cluster, pod)
    return caught.value


async def test_status_eviction_429_and_get_pdb_columns(
    cluster: DevCluster, kubectl: kubectl_bin.Run
) -> None:
    assert (await kubectl("apply", "-f", "-", input=DEPLOYMENT)).returncode == 0
    made = await kubectl("create", "-f", "-", input=budget("web", {"app": "web"}, minAvailable=2))
    assert made.returncode == 0, made.stderr
    pods = await running(cluster, "app=web", 3)

    async def settled() -> dict[str, Any]:
        status = await status_of(cluster, "web")
        assert status.get("currentHealthy") == 3, status
        return status

    status = await eventually(settled)
    assert (status["desiredHealthy"], status["expectedPods"]) == (2, 3)
    assert status["disruptionsAllowed"] == 1 and status["observedGeneration"] == 1
    (condition,) = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
    )
    table = await kubectl("get", "pdb", "web")
    header, row = table.stdout.splitlines()
    assert header.split() == [
        "NAME",
        "MIN",
        "AVAILABLE",
        "MAX",
        "UNAVAILABLE",
        "ALLOWED",
        "DISRUPTIONS",
        "AGE",
    ]
    assert row.split()[:4] == ["web", "2", "N/A", "1"]

    # The first eviction spends the one disruption and is recorded; the second is refused.
    await evict(cluster, pods[0])
    status = await status_of(cluster, "web")
    assert status["disruptionsAllowed"] == 0 and pods[0] in status["disruptedPods"]
    error = await refused(cluster, pods[1])
    assert error.status == 429
    assert error.body["reason"] == "TooManyRequests"
    assert error.body["message"] == (
        "Cannot evict pod as it would violate the pod's disruption budget."
    )
    (cause,) = error.body["details"]["causes"]
    assert cause["reason"] == "DisruptionBudget"
    assert cause["message"].startswith("The disruption budget web needs 2 healthy pods and has")
    # The evicted pod carries DisruptionTarget; the refused one nothing.
    first = await cluster.client.get(f"{NS_PODS}/{pods[0]}")
    assert first["metadata"].get("deletionTimestamp")
    assert any(
        c["type"] == "DisruptionTarget" and c["reason"] == "EvictionByEvictionAPI"
        for c in first["status"]["conditions"]
    )
    second = await cluster.client.get(f"{NS_PODS}/{pods[1]}")
    assert not second["metadata"].get("deletionTimestamp")
    assert all(c["type"] != "DisruptionTarget" for c in second["status"].get("conditions") or [])

    # The Deployment brings a third pod back; the budget allows one disruption again and the
    # record of the evicted pod is gone with it.
    async def recovered() -> None:
        status = await status_of(cluster, "web")
        assert status["disruptionsAllowed"] == 1 and not status.get("disruptedPods"), status

    await eventually(recovered)
    text = await kubectl("get", "pdb", "web", "-o", "jsonpath={.status.disruptionsAllowed}")
    assert text.stdout == "1"


async def test_new_budget_answers_429_until_observed_and_max_unavailable_scales(
    cluster: DevCluster, kubectl: kubectl_bin.Run
) -> None:
    assert (await kubectl("apply", "-f", "-", input=DEPLOYMENT)).returncode == 0
    pods = await running(cluster, "app=web", 3)
    made = await kubectl(
        "create", "-f", "-", input=budget("web", {"app": "web"}, maxUnavailable="34%")
    )
    assert made.returncode == 0

    async def settled() -> dict[str, Any]:
        status = await status_of(cluster, "web")
        assert status.get("observedGeneration") == 1 and status["currentHealthy"] == 3, status
        return status

    status = await eventually(settled)
    # 34% of the Deployment's 3 replicas, rounded up: 2 may go.
    assert (status["expectedPods"], status["desiredHealthy"]) == (3, 1)
    assert status["disruptionsAllowed"] == 2
    # A spec change is not observed yet: kube answers 429 "still being processed" meanwhile.
    # (The controller may catch up at once, so the check reads the budget before evicting.)
    await cluster.client.patch(f"{PDBS}/web", {"spec": {"maxUnavailable": 0}})
    stored = await cluster.client.get(f"{PDBS}/web")
    if stored["status"]["observedGeneration"] < stored["metadata"]["generation"]:
        error = await refused(cluster, pods[0])
        assert error.status == 429
        assert "still being processed" in error.body["details"]["causes"][0]["message"]

    async def zero() -> None:
        status = await status_of(cluster, "web")
        assert status["observedGeneration"] == 2 and status["disruptionsAllowed"] == 0, status
        assert status["conditions"][0]["reason"] == "InsufficientPods"

    await eventually(zero)
    assert (await refused(cluster, pods[0])).status == 429


async def test_unhealthy_pod_eviction_policy(cluster: DevCluster, kubectl: kubectl_bin.Run) -> None:
    for name, node, ready in (
        ("a", "cpu-0-n0", True),
        ("b", "cpu-0-n1", True),
        ("c", "cpu-0-n2", False),
    ):
        assert (
            await kubectl("create", "-f", "-", input=bare_pod(name, node, ready=ready))
        ).returncode == 0
    await running(cluster, "app=solo", 3)
    made = await kubectl("create", "-f", "-", input=budget("solo", {"app": "solo"}, minAvailable=2))
    assert made.returncode == 0

    async def healthy(count: int) -> None:
        status = await status_of(cluster, "solo")
        assert status.get("currentHealthy") == count and status["expectedPods"] >= count, status

    await eventually(lambda: healthy(2))
    # IfHealthyBudget (the default): the budget is met (2 >= 2), so the unready pod may go
    # without spending a disruption; a ready one may not (0 allowed).
    assert (await refused(cluster, "a")).status == 429
    await evict(cluster, "c")
    assert (await status_of(cluster, "solo"))["disruptionsAllowed"] == 0

    # Now one of the two ready pods turns unready: the budget is not met (1 < 2), so under
    # IfHealthyBudget the unready pod is guarded too ...
    await kubectl("annotate", "pod", "b", "dev.raycluster-operator.io/ready=false")
    await eventually(lambda: healthy(1))
    error = await refused(cluster, "b")
    assert (
        error.status == 429
        and "needs 2 healthy pods and has 1" in error.body["details"]["causes"][0]["message"]
    )
    # ... and AlwaysAllow lets it go.
    await cluster.client.patch(
        f"{PDBS}/solo", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}
    )

    async def observed() -> None:
        assert (await status_of(cluster, "solo"))["observedGeneration"] == 2

    await eventually(observed)
    await evict(cluster, "b")
    assert (await refused(cluster, "a")).status == 429


async def test_two_budgets_answer_500_and_nothing_is_deleted(
    cluster: DevCluster, kubectl: kubectl_bin.Run
) -> None:
    assert (await kubectl("create", "-f", "-", input=bare_pod("a", "cpu-0-n0"))).returncode == 0
    await running(cluster, "app=solo", 1)
    for name in ("one", "two"):
        made = await kubectl(
            "create", "-f", "-", input=budget(name, {"app": "solo"}, maxUnavailable=1)
        )
        assert made.returncode == 0
    error = await refused(cluster, "a")
    assert error.status == 500
    assert error.body["message"] == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
        "not support."
    )
    pod = await cluster.client.get(f"{NS_PODS}/a")
    assert not pod["metadata"].get("deletionTimestamp")


async def test_kubectl_drain_retries_until_the_budget_allows(
    cluster: DevCluster, kubectl: kubectl_bin.Run
) -> None:
    assert (await kubectl("apply", "-f", "-", input=DEPLOYMENT)).returncode == 0
    await running(cluster, "app=web", 3)
    made = await kubectl("create", "-f", "-", input=budget("web", {"app": "web"}, maxUnavailable=0))
    assert made.returncode == 0

    async def zero() -> None:
        status = await status_of(cluster, "web")
        assert status.get("observedGeneration") == 1 and status["currentHealthy"] == 3

    await eventually(zero)
    pods = (await cluster.client.list(NS_PODS, labelSelector="app=web"))["items"]
    node = pods[0]["spec"]["nodeName"]
    started = time.monotonic()
    drain = asyncio.ensure_future(
        kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
    )

    async def cordoned() -> None:
        got = await cluster.client.get(f"/api/v1/nodes/{node}")
        assert got["spec"].get("unschedulable") is True

    await eventually(cordoned)
    await asyncio.sleep(6)  # kubectl retries every 5 s: at least one refusal is seen
    assert not drain.done()
    await kubectl("patch", "pdb", "web", "--type=merge", "-p", '{"spec":{"maxUnavailable":1}}')
    done = await drain
    assert done.returncode == 0, done.stderr
    assert "Cannot evict pod as it would violate the pod's disruption budget." in done.stderr
    assert "will retry after 5s" in done.stderr
    assert f"node/{node} drained" in done.stdout
    assert time.monotonic() - started >= 5


async def test_kubectl_create_pdb_sends_protobuf_and_the_budget_is_enforced(
    cluster: DevCluster, kubectl: kubectl_bin.Run
) -> None:
    assert (await kubectl("apply", "-f", "-", input=DEPLOYMENT)).returncode == 0
    pods = await running(cluster, "app=web", 3)
    made = await kubectl("create", "pdb", "web", "--selector", "app=web", "--min-available", "3")
    assert made.returncode == 0, made.stderr
    assert "poddisruptionbudget.policy/web created" in made.stdout

    async def observed() -> None:
        status = await status_of(cluster, "web")
        assert status.get("observedGeneration") == 1 and status["currentHealthy"] == 3, status

    await eventually(observed)
    evicting = await kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/default/pods/{pods[0]}/eviction",
        "-f",
        "-",
        input=json.dumps(
            {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pods[0]}}
        ),
    )
    assert evicting.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget." in evicting.stderr
