"""Suspend is one-way until every pod is gone, and never two live heads (docs/design.md
§4, rules 4-5), through the dev cluster with the real kubectl: pods held by a finalizer, suspend,
resume mid-termination, an operator restart in the middle, then the finalizers removed.

Replays KubeRay's own suspend test (raycluster_controller_test.go: after a revert of
``suspend`` while pods terminate, ``RayClusterSuspending`` stays True and nothing is created).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from parity_kubectl import Kubectl

from tests.harness.operator_world import SharedWorld, World, cpu_group, eventually, raycluster

# One world for the tests that need none of their own (tests/operator/conftest.py).
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]

FINALIZER = "example.com/hold"


def node_type(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"].get("ray.io/node-type"))


async def hold_every_pod(kubectl: Kubectl, cluster: str) -> list[str]:
    names = [p["metadata"]["name"] for p in await kubectl.pods(cluster)]
    for name in names:
        await kubectl.patch_merge("pod", name, {"metadata": {"finalizers": [FINALIZER]}})
    return names


async def release(kubectl: Kubectl, names: list[str]) -> None:
    for name in names:
        await kubectl(
            "patch",
            "pod",
            name,
            "--type",
            "json",
            "-p",
            '[{"op":"remove","path":"/metadata/finalizers"}]',
            ok=False,
        )


@pytest.mark.asyncio(loop_scope="function")  # a private world
async def test_resume_mid_termination_waits_for_every_pod_and_never_two_heads(
    world: World, tmp_path: Path
) -> None:
    kubectl = Kubectl(world.cluster, tmp_path)
    op = await world.start_operator()
    await kubectl.apply(raycluster("sus", [cpu_group("g", replicas=2, hosts=2)]))

    async def running() -> None:
        pods = await kubectl.pods("sus")
        assert len(pods) == 5 and all(p["status"].get("phase") == "Running" for p in pods)

    await eventually(running, within=30)
    held = await hold_every_pod(kubectl, "sus")
    old_head = next(
        p["metadata"]["name"] for p in await kubectl.pods("sus") if node_type(p) == "head"
    )

    await kubectl.patch_merge("raycluster", "sus", {"spec": {"suspend": True}})

    async def all_terminating() -> None:
        pods = await kubectl.pods("sus")
        assert len(pods) == 5 and all(p["metadata"].get("deletionTimestamp") for p in pods)
        assert (await kubectl.conditions("sus"))["RayClusterSuspending"] == "True"

    await eventually(all_terminating, within=30)

    # Resume while every pod is still held: nothing is created, Suspending stays True.
    await kubectl.patch_merge("raycluster", "sus", {"spec": {"suspend": False}})
    await world.reconciled("sus")
    pods = await kubectl.pods("sus")
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(held)
    assert (await kubectl.conditions("sus"))["RayClusterSuspending"] == "True"

    # An operator restart in the middle continues the suspension from the status.
    await op.stop()
    await world.start_operator()
    await world.reconciled("sus")
    pods = await kubectl.pods("sus")
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(held)
    assert (await kubectl.conditions("sus"))["RayClusterSuspending"] == "True"

    # The workers' finalizers go first: still no new head beside the held old one.
    await release(kubectl, [n for n in held if n != old_head])

    async def only_the_old_head_left() -> None:
        pods = await kubectl.pods("sus")
        assert [p["metadata"]["name"] for p in pods] == [old_head]

    await eventually(only_the_old_head_left, within=30)
    await world.reconciled("sus")
    assert [p["metadata"]["name"] for p in await kubectl.pods("sus")] == [old_head]

    await release(kubectl, [old_head])

    async def resumed() -> None:
        pods = await kubectl.pods("sus")
        heads = [p for p in pods if node_type(p) == "head"]
        assert len(heads) == 1 and heads[0]["metadata"]["name"] != old_head
        assert len([p for p in pods if node_type(p) == "worker"]) == 4
        conditions = await kubectl.conditions("sus")
        assert conditions["RayClusterSuspending"] == "False"
        assert conditions["RayClusterSuspended"] == "False"

    await eventually(resumed, within=30)


async def test_suspend_completes_to_suspended_and_a_group_suspend_is_one_way(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    world = shared_world
    kubectl = Kubectl(world.cluster, tmp_path)
    await world.start_operator()
    groups = [cpu_group("a", replicas=1, hosts=2), cpu_group("b", replicas=1, hosts=2)]
    await kubectl.apply(raycluster("gs", groups))

    async def five() -> None:
        assert len(await kubectl.pods("gs")) == 5

    await eventually(five, within=30)
    a_pods = [
        p["metadata"]["name"]
        for p in await kubectl.pods("gs")
        if p["metadata"]["labels"].get("ray.io/group") == "a"
    ]
    for name in a_pods:
        await kubectl.patch_merge("pod", name, {"metadata": {"finalizers": [FINALIZER]}})
    await kubectl.patch_json(
        "raycluster",
        "gs",
        [{"op": "add", "path": "/spec/workerGroupSpecs/0/suspend", "value": True}],
    )

    async def a_suspending() -> None:
        obj = await kubectl.json("get", "raycluster", "gs")
        entry = obj["status"]["workerGroups"][0]
        assert entry["groupName"] == "a" and entry.get("suspending") is True

    await eventually(a_suspending, within=30)
    await kubectl.patch_json(
        "raycluster",
        "gs",
        [{"op": "replace", "path": "/spec/workerGroupSpecs/0/suspend", "value": False}],
    )
    await world.reconciled("gs")
    a_now = [
        p for p in await kubectl.pods("gs") if p["metadata"]["labels"].get("ray.io/group") == "a"
    ]
    assert sorted(p["metadata"]["name"] for p in a_now) == sorted(a_pods)
    await release(kubectl, a_pods)

    async def a_back() -> None:
        pods = [
            p
            for p in await kubectl.pods("gs")
            if p["metadata"]["labels"].get("ray.io/group") == "a"
        ]
        assert len(pods) == 2 and not {p["metadata"]["name"] for p in pods} & set(a_pods)

    await eventually(a_back, within=30)

    # Cluster suspend that is not reverted ends in RayClusterSuspended, state suspended.
    await kubectl.patch_merge("raycluster", "gs", {"spec": {"suspend": True}})

    async def suspended() -> None:
        assert not await kubectl.pods("gs")
        obj = await kubectl.json("get", "raycluster", "gs")
        conditions = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
        assert conditions["RayClusterSuspended"] == "True"
        assert conditions["RayClusterSuspending"] == "False"
        assert obj["status"]["state"] == "suspended"

    await eventually(suspended, within=30)


async def test_a_deleted_head_is_replaced_only_after_its_pod_is_gone(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    world = shared_world
    kubectl = Kubectl(world.cluster, tmp_path)
    await world.start_operator()
    await kubectl.apply(raycluster("hd", [cpu_group("g", replicas=1)]))

    async def head() -> str:
        heads = [p for p in await kubectl.pods("hd") if node_type(p) == "head"]
        assert len(heads) == 1 and heads[0]["status"].get("phase") == "Running"
        return str(heads[0]["metadata"]["name"])

    old = await eventually(head, within=30)
    await kubectl.patch_merge("pod", old, {"metadata": {"finalizers": [FINALIZER]}})
    await kubectl("delete", "pod", old, "--wait=false")
    await world.reconciled("hd")
    # The old head terminates but is held: no second head meanwhile.
    assert [p["metadata"]["name"] for p in await kubectl.pods("hd") if node_type(p) == "head"] == [
        old
    ]
    await release(kubectl, [old])

    async def replaced() -> None:
        assert await head() != old

    await eventually(replaced, within=30)
