"""KubeRay's own multi-host and single-host examples (docs/design.md §9.1), end to end."""

from __future__ import annotations

import pytest

from tests.harness.operator_world import (
    SharedWorld,
    cpu_group,
    eventually,
    raycluster,
    replica_names,
    slices,
)

# One cluster and operator for the module: no test here needs a world of its own.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]


async def test_multi_host_scale_workers_to_delete_scale_up_and_heal(
    shared_world: SharedWorld,
) -> None:
    world = shared_world
    await world.start_operator()
    group = cpu_group("g", replicas=3, hosts=4, minReplicas=0, maxReplicas=4)
    await world.apply(raycluster("mh", [group]))

    async def twelve_pods() -> None:
        pods = await world.workers("mh")
        assert len(pods) == 12
        assert slices(pods) == {0: [0, 1, 2, 3], 1: [0, 1, 2, 3], 2: [0, 1, 2, 3]}
        assert len(replica_names(pods)) == 3

    await eventually(twelve_pods)

    async def status_counts() -> None:
        status = (await world.get_cluster("mh")).get("status") or {}
        assert (
            status.get("desiredWorkerReplicas"),
            status.get("minWorkerReplicas"),
            status.get("maxWorkerReplicas"),
        ) == (12, 0, 16)

    await eventually(status_counts)

    # The autoscaler's way: replicas 2 and the 4 pods of one slice in workersToDelete.
    pods = await world.workers("mh")
    victim = [
        p for p in pods if p["metadata"]["labels"]["ray.io/worker-group-replica-index"] == "1"
    ]
    await world.patch_spec(
        "mh",
        {
            "workerGroupSpecs": [
                {
                    **group,
                    "replicas": 2,
                    "scaleStrategy": {"workersToDelete": [p["metadata"]["name"] for p in victim]},
                }
            ]
        },
    )

    async def eight_pods() -> None:
        pods = await world.workers("mh")
        assert len(pods) == 8
        assert set(slices(pods)) == {0, 2}

    await eventually(eight_pods)

    await world.patch_spec(
        "mh",
        {"workerGroupSpecs": [{**group, "replicas": 4, "scaleStrategy": {"workersToDelete": []}}]},
    )

    async def sixteen_pods() -> None:
        pods = await world.workers("mh")
        assert len(pods) == 16
        assert slices(pods) == {i: [0, 1, 2, 3] for i in range(4)}

    await eventually(sixteen_pods)

    # Delete one pod: its whole slice is replaced, under the same index.
    pods = await world.workers("mh")
    one = next(
        p for p in pods if p["metadata"]["labels"]["ray.io/worker-group-replica-index"] == "2"
    )
    old_name = one["metadata"]["labels"]["ray.io/worker-group-replica-name"]
    from raycluster_operator.kube import PODS

    await world.kube.delete(PODS, "default", one["metadata"]["name"])

    async def healed() -> None:
        pods = await world.workers("mh")
        assert len(pods) == 16
        assert slices(pods) == {i: [0, 1, 2, 3] for i in range(4)}
        assert old_name not in replica_names(pods)

    await eventually(healed)


async def test_single_host_indices_and_reuse_of_a_deleted_index(shared_world: SharedWorld) -> None:
    world = shared_world
    await world.start_operator()
    await world.apply(raycluster("sh", [cpu_group("cpu", replicas=3)]))

    async def three() -> None:
        pods = await world.workers("sh")
        assert sorted(
            int(p["metadata"]["labels"]["ray.io/worker-group-replica-index"]) for p in pods
        ) == [0, 1, 2]

    await eventually(three)
    pods = await world.workers("sh")
    one = next(
        p for p in pods if p["metadata"]["labels"]["ray.io/worker-group-replica-index"] == "1"
    )
    from raycluster_operator.kube import PODS

    await world.kube.delete(PODS, "default", one["metadata"]["name"])

    async def replaced() -> None:
        pods = await world.workers("sh")
        names = {p["metadata"]["name"] for p in pods}
        assert one["metadata"]["name"] not in names
        assert sorted(
            int(p["metadata"]["labels"]["ray.io/worker-group-replica-index"]) for p in pods
        ) == [0, 1, 2]

    await eventually(replaced)


async def test_min_and_max_clamp_replicas(shared_world: SharedWorld) -> None:
    world = shared_world
    await world.start_operator()
    group = cpu_group("g", replicas=2, hosts=4, minReplicas=2, maxReplicas=3)
    await world.apply(raycluster("mm", [group]))

    async def counts() -> None:
        status = (await world.get_cluster("mm")).get("status") or {}
        assert (status.get("minWorkerReplicas"), status.get("maxWorkerReplicas")) == (8, 12)

    await eventually(counts)
    unbounded = {k: v for k, v in group.items() if k != "maxReplicas"}
    await world.patch_spec("mm", {"workerGroupSpecs": [{**unbounded, "replicas": 5}]})

    async def twenty() -> None:
        assert len(await world.workers("mm")) == 20

    await eventually(twenty)
    await world.patch_spec("mm", {"workerGroupSpecs": [{**group, "replicas": 5}]})

    async def twelve() -> None:
        pods = await world.workers("mm")
        assert len(pods) == 12
        assert set(slices(pods)) == {0, 1, 2}

    await eventually(twelve)
