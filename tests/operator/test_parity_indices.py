"""The slice index policy through the dev cluster with the real kubectl, autoscaling off and
on (docs/design.md §4, rule 13): a healthy slice keeps its index (and its pods) for
life; a new slice takes the lowest free index; scale-down without workersToDelete removes
the highest index; a broken slice comes back at its own index.

Replays KubeRay's multi-host scenario (raycluster_controller_test.go, "multi-host indexing":
3 slices of 4 hosts, workersToDelete one slice, scale up, delete a pod) with our index rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from parity_kubectl import Kubectl

from tests.harness.operator_world import World, cpu_group, eventually, raycluster

pytestmark = pytest.mark.control_planes

INDEX = "ray.io/worker-group-replica-index"
NAME = "ray.io/worker-group-replica-name"


async def slices(kubectl: Kubectl, cluster: str) -> dict[int, tuple[str, frozenset[str]]]:
    """Live slices: index -> (replica name, pod names)."""
    out: dict[int, tuple[str, set[str]]] = {}
    for pod in await kubectl.pods(cluster):
        lbl = pod["metadata"]["labels"]
        if lbl.get("ray.io/node-type") != "worker" or pod["metadata"].get("deletionTimestamp"):
            continue
        entry = out.setdefault(int(lbl[INDEX]), (lbl[NAME], set()))
        assert entry[0] == lbl[NAME], "two slices share an index"
        entry[1].add(pod["metadata"]["name"])
    return {i: (n, frozenset(p)) for i, (n, p) in sorted(out.items())}


async def wait_for(kubectl: Kubectl, cluster: str, indices: set[int], hosts: int) -> Any:
    async def check() -> dict[int, tuple[str, frozenset[str]]]:
        found = await slices(kubectl, cluster)
        assert set(found) == indices, found
        assert all(len(pods) == hosts for _, pods in found.values())
        everything = await kubectl.pods(cluster)
        assert not [p for p in everything if p["metadata"].get("deletionTimestamp")]
        return found

    return await eventually(check, within=40)


@pytest.mark.parametrize("autoscaling", [False, True])
async def test_a_healthy_slice_keeps_its_index_for_life(
    world: World, tmp_path: Path, autoscaling: bool
) -> None:
    kubectl = Kubectl(world.cluster, tmp_path)
    await world.start_operator()
    group = cpu_group("g", replicas=3, hosts=4, minReplicas=0, maxReplicas=4)
    await kubectl.apply(raycluster("idx", [group], autoscaling=autoscaling))
    first = await wait_for(kubectl, "idx", {0, 1, 2}, 4)

    # workersToDelete removes slice 0 (named by one host, as the autoscaler does).
    named = sorted(first[0][1])[0]
    await kubectl.scale_down("idx", 2, [named])
    after = await wait_for(kubectl, "idx", {1, 2}, 4)
    # Slices 1 and 2 are the same slices, same pods: nothing is rebuilt to compact to 0..1.
    assert after == {1: first[1], 2: first[2]}
    await world.reconciled("idx")
    assert await slices(kubectl, "idx") == after

    # A new slice takes the lowest free index, 0.
    await kubectl.patch_json(
        "raycluster",
        "idx",
        [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3},
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {}},
        ],
    )
    grown = await wait_for(kubectl, "idx", {0, 1, 2}, 4)
    assert grown[1] == first[1] and grown[2] == first[2]
    assert grown[0][0] != first[0][0]

    # A broken slice comes back at its own index, as a new slice with new pods.
    one = sorted(grown[1][1])[2]
    await kubectl("delete", "pod", one, "--wait=false")

    async def healed() -> None:
        now = await wait_for(kubectl, "idx", {0, 1, 2}, 4)
        assert now[1][0] != grown[1][0]
        assert now[0] == grown[0] and now[2] == grown[2]

    await eventually(healed, within=40)

    if autoscaling:
        # With autoscaling on, lowering replicas alone deletes nothing.
        await kubectl.patch_json(
            "raycluster",
            "idx",
            [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2}],
        )
        await world.reconciled("idx")
        assert set(await slices(kubectl, "idx")) == {0, 1, 2}
        return

    # Scale-down without workersToDelete removes the highest index.
    before = await slices(kubectl, "idx")
    await kubectl.patch_json(
        "raycluster",
        "idx",
        [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2}],
    )
    shrunk = await wait_for(kubectl, "idx", {0, 1}, 4)
    assert shrunk == {0: before[0], 1: before[1]}
