"""The operator and the dev cluster's node lifecycle with host-loss failover OFF
(``--unready-slice-timeout 0``): a slice host whose kubelet stops is evicted when its
toleration runs out, and the operator replaces the whole slice. Kubernetes decides here; the
operator's own fast failover is proved in test_host_loss.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tests.harness.operator_world import (
    World,
    eventually,
    raycluster,
    ready,
    running_world,
    slices,
    tpu_group,
)

pytestmark = pytest.mark.control_planes

FOUR = [0, 1, 2, 3]
KUBELET = "dev.raycluster-operator.io/kubelet"
SliceCheck = Callable[[], Awaitable[list[dict[str, Any]]]]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    """As the shared world, with a 2 s node grace period instead of the dev default 10 s."""
    async with running_world(node_grace=2.0) as w:
        yield w


async def annotate_kubelet(world: World, node: str, state: str) -> None:
    """What `kubectl annotate node NODE dev.raycluster-operator.io/kubelet=STATE` sends."""
    await world.cluster.client.patch(
        f"/api/v1/nodes/{node}", {"metadata": {"annotations": {KUBELET: state}}}
    )


async def start_slice_tolerating_unreachable(
    world: World, name: str, *, unready_slice_timeout: float = 0
) -> SliceCheck:
    """The operator (host-loss failover off unless asked) and a one-slice RayCluster `name`
    whose hosts tolerate the unreachable taint for 1 s instead of the default 300 s; returns
    the check "one slice, all ready" (which answers the workers)."""
    await world.start_operator(unready_slice_timeout=unready_slice_timeout)
    group = tpu_group("tpu", replicas=1)
    group["template"]["spec"]["tolerations"] = [
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 1,
        }
    ]
    await world.apply(raycluster(name, [group]))

    async def one_ready_slice() -> list[dict[str, Any]]:
        pods = await world.workers(name)
        assert slices(pods) == {0: FOUR}
        assert all(ready(p) for p in pods)
        return pods

    return one_ready_slice


async def test_a_slice_on_a_stopped_node_is_replaced_after_eviction(world: World) -> None:
    one_ready_slice = await start_slice_tolerating_unreachable(world, "lost")
    before = await eventually(one_ready_slice, within=30)
    old_uids = {p["metadata"]["uid"] for p in before}
    host = next(p for p in before if p["metadata"]["labels"]["ray.io/replica-host-index"] == "1")
    node = host["spec"]["nodeName"]
    await annotate_kubelet(world, node, "stopped")

    async def evicted_and_slice_torn_down() -> None:
        pods = await world.pods("lost", live=False)
        lost = next(p for p in pods if p["metadata"]["uid"] == host["metadata"]["uid"])
        assert lost["metadata"].get("deletionTimestamp")  # Terminating: its kubelet is away
        reasons = {c["type"]: c.get("reason") for c in lost["status"]["conditions"]}
        assert reasons.get("DisruptionTarget") == "DeletionByTaintManager"
        # The operator breaks the replica: its healthy hosts go too.
        rest = [p for p in pods if p["metadata"]["uid"] in old_uids - {lost["metadata"]["uid"]}]
        assert all(p["metadata"].get("deletionTimestamp") for p in rest)

    await eventually(evicted_and_slice_torn_down, within=30)
    # The slice's index stays taken while the evicted host is Terminating; the kubelet back
    # finishes it, and the slice comes back whole under its own index.
    await annotate_kubelet(world, node, "running")

    async def replaced() -> None:
        pods = await one_ready_slice()
        assert not {p["metadata"]["uid"] for p in pods} & old_uids
        assert len(await world.pods("lost", live=False)) == len(await world.pods("lost"))

    await eventually(replaced, within=60)


async def test_a_slice_on_a_dead_node_is_replaced_elsewhere_once_it_is_out_of_service(
    world: World,
) -> None:
    """The kubelet never comes back: the admin's out-of-service taint lets the pod garbage
    collector release the evicted host, and the slice comes back whole on another pool."""
    one_ready_slice = await start_slice_tolerating_unreachable(world, "dead")
    before = await eventually(one_ready_slice, within=30)
    old_uids = {p["metadata"]["uid"] for p in before}
    node = before[0]["spec"]["nodeName"]
    pool = {p["spec"]["nodeName"].rsplit("-h", 1)[0] for p in before}
    assert len(pool) == 1
    await annotate_kubelet(world, node, "stopped")

    async def evicted() -> None:
        pods = await world.pods("dead", live=False)
        assert all(
            p["metadata"].get("deletionTimestamp") for p in pods if p["metadata"]["uid"] in old_uids
        )

    await eventually(evicted, within=30)
    await world.cluster.client.patch(
        f"/api/v1/nodes/{node}",
        {
            "spec": {
                "taints": [
                    *(await world.cluster.client.get(f"/api/v1/nodes/{node}"))["spec"]["taints"],
                    {
                        "key": "node.kubernetes.io/out-of-service",
                        "value": "nodeshutdown",
                        "effect": "NoExecute",
                    },
                ]
            }
        },
    )

    async def replaced_elsewhere() -> None:
        pods = await one_ready_slice()
        assert not {p["metadata"]["uid"] for p in pods} & old_uids
        assert {p["spec"]["nodeName"].rsplit("-h", 1)[0] for p in pods}.isdisjoint(pool)

    await eventually(replaced_elsewhere, within=60)
