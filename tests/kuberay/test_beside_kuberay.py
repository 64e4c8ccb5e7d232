"""Beside KubeRay's own operator, on Kubernetes' own control plane (issue #33 item 3).

KubeRay v1.6's operator runs as built from the Go module proxy, with its kustomize base's
CRDs (their CEL rules live in kube-apiserver) and RBAC, owning `kuberay-a` (and `both`); ours
owns `ours-a`. Every pod create and delete is read from one pod watch, so "the other left it
alone" is counted, not assumed; steady-state writes are each operator's own counts (ours: its
client; KubeRay's: client-go's request metric), read after each operator's barrier."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from raycluster_operator.kube import EVENTS, RAYCLUSTERS
from tests.harness.barrier import reconciled
from tests.harness.operator_world import cpu_group, raycluster
from tests.harness.waiting import eventually
from tests.kuberay.beside import Beside, beside

pytestmark = [pytest.mark.kubernetes, pytest.mark.asyncio(loop_scope="module")]

OURS, KUBERAY, BOTH = "ours-a", "kuberay-a", "both"
OUR_NAME, KUBERAY_NAME = "raycluster-operator", "kuberay-operator"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world() -> AsyncIterator[Beside]:
    async with beside((KUBERAY, BOTH), ["cpu:2"]) as w:
        for ns in (OURS, KUBERAY, BOTH):
            await w.cluster.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
        await w.start_ours(OURS)
        yield w


def small(name: str, replicas: int, namespace: str) -> dict[str, Any]:
    obj = raycluster(name, [cpu_group("w", replicas=replicas)])
    obj["metadata"]["namespace"] = namespace
    return obj


async def test_each_operator_leaves_the_others_clusters_alone(world: Beside) -> None:
    ours = world.operators[0]
    for ns in (OURS, KUBERAY):
        await world.cluster.apply(small("rc", 2, ns), ns)
    mine = await world.ready("rc", OURS)
    theirs = await world.ready("rc", KUBERAY)
    assert {c for _, c in world.pods.created(OURS)} == {OUR_NAME}
    assert {c for _, c in world.pods.created(KUBERAY)} == {KUBERAY_NAME}
    owners = {e[1]: e[4] for e in world.pods.events if e[0] == "ADDED"}
    assert owners[OURS] == mine["metadata"]["uid"]
    assert owners[KUBERAY] == theirs["metadata"]["uid"]

    # Both scale 2 -> 3: each cluster's one new pod is made by its own operator only.
    mark = world.pods.mark()
    for ns in (OURS, KUBERAY):
        await world.admin.patch(
            RAYCLUSTERS, ns, "rc", {"spec": {"workerGroupSpecs": [cpu_group("w", replicas=3)]}}
        )

    async def scaled() -> None:
        assert len(world.pods.created(OURS, mark)) == 1
        assert len(world.pods.created(KUBERAY, mark)) == 1

    await eventually(scaled, 60)

    async def three_ready(namespace: str) -> None:
        # `state` was ready before the scale-up too: wait for the status to count the new pod,
        # or its write (by either operator) lands in the steady window below.
        obj = await world.ready("rc", namespace)
        assert (obj.get("status") or {}).get("readyWorkerReplicas") == 3, obj.get("status")

    for ns in (OURS, KUBERAY):
        await eventually(lambda ns=ns: three_ready(ns), 120)
    assert [c for _, c in world.pods.created(OURS, mark)] == [OUR_NAME]
    assert [c for _, c in world.pods.created(KUBERAY, mark)] == [KUBERAY_NAME]
    assert not world.pods.removed(OURS, mark) and not world.pods.removed(KUBERAY, mark)

    # Steady state: after each has looked again, 0 pod events and 0 writes by either.
    await reconciled(ours, world.admin, "rc", OURS, passes=2)
    await world.kuberay_passed("rc", KUBERAY)
    mark = world.pods.mark()
    our_writes, (kuberay_writes, _) = ours.writes, await world.kuberay_counts()
    await reconciled(ours, world.admin, "rc", OURS, passes=2)
    await world.kuberay_passed("rc", KUBERAY)
    await world.kuberay_passed("rc", KUBERAY)
    assert world.pods.events[mark:] == []
    assert ours.writes == our_writes
    assert (await world.kuberay_counts())[0] == kuberay_writes


async def test_a_cluster_both_claim_is_left_to_kuberay_with_one_condition_and_warning(
    world: Beside,
) -> None:
    """A misconfigured partition: ours also watches `both`, where KubeRay already runs a
    cluster. Ours sets ControllerConflict once, warns once, and makes and removes no pod."""
    await world.cluster.apply(small("shared", 2, BOTH), BOTH)
    await world.ready("shared", BOTH)
    mark = world.pods.mark()
    second = await world.start_ours(BOTH)

    async def conflicted() -> None:
        obj = await world.admin.get(RAYCLUSTERS, BOTH, "shared")
        conditions = (obj.get("status") or {}).get("conditions") or []
        mine = [c for c in conditions if c["type"] == "ControllerConflict"]
        assert mine and mine[0]["status"] == "True" and KUBERAY_NAME in mine[0]["message"]

    await eventually(conflicted, 60)
    await reconciled(second, world.admin, "shared", BOTH, passes=2)
    await world.kuberay_passed("shared", BOTH)
    await reconciled(second, world.admin, "shared", BOTH, passes=2)
    warnings = [
        e
        for e in (await world.admin.list(EVENTS, BOTH)).items
        if e.get("reason") == "ControllerConflict"
    ]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning"
    assert int(warnings[0].get("count") or 1) == 1
    assert world.pods.created(BOTH, mark) == [] and not world.pods.removed(BOTH, mark)
    await conflicted()  # KubeRay's own status writes kept the condition
    assert second.writes == 2  # the condition and the Warning
