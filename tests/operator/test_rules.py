"""Every multi-host reconcile rule of docs/design.md §4, end to end through the dev cluster."""

from __future__ import annotations

from typing import Any

import pytest

from raycluster_operator.kube import EVENTS, PODS, Kind
from tests.harness.operator_world import (
    SharedWorld,
    World,
    cpu_group,
    eventually,
    labels_of,
    raycluster,
    ready,
    replica_names,
    slices,
    tpu_group,
)

# One cluster and operator for the module (shared_world); the test that needs pods in place
# before its operator starts takes a private world.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]

NODES = Kind("", "v1", "Node", "nodes", namespaced=False)
FOUR = [0, 1, 2, 3]


def index_of(pod: dict[str, Any]) -> int:
    return int(labels_of(pod)["ray.io/worker-group-replica-index"])


async def events_of(world: World, reason: str) -> list[dict[str, Any]]:
    listing = await world.kube.list(EVENTS, "default")
    return [e for e in listing.items if e.get("reason") == reason]


async def test_a_failed_host_replaces_its_whole_slice_under_the_same_index(
    shared_world: SharedWorld,
) -> None:
    world = shared_world
    await world.start_operator()
    group = tpu_group("tpu", replicas=2)
    group["template"]["spec"]["restartPolicy"] = "Never"
    await world.apply(raycluster("fail", [group]))

    async def two_ready_slices() -> None:
        pods = await world.workers("fail")
        assert slices(pods) == {0: FOUR, 1: FOUR} and all(ready(p) for p in pods)

    await eventually(two_ready_slices)
    before = await world.workers("fail")
    victim = next(p for p in before if index_of(p) == 1)
    old_slice = {p["metadata"]["name"] for p in before if index_of(p) == 1}
    await world.cluster.fail_pod("default", victim["metadata"]["name"])

    async def replaced() -> None:
        pods = await world.workers("fail")
        assert slices(pods) == {0: FOUR, 1: FOUR}
        assert not old_slice & {p["metadata"]["name"] for p in pods}
        assert all(ready(p) for p in pods)

    await eventually(replaced)
    await eventually(lambda: _assert_event(world, "HostFailed"))


async def test_workers_to_delete_naming_one_host_removes_its_slice_in_one_pass(
    shared_world: SharedWorld,
) -> None:
    world = shared_world
    await world.start_operator()
    group = cpu_group("g", replicas=3, hosts=4, minReplicas=0, maxReplicas=4)
    await world.apply(raycluster("wtd", [group], autoscaling=True))
    await eventually(lambda: _assert_slices(world, "wtd", {0: FOUR, 1: FOUR, 2: FOUR}))
    pods = await world.workers("wtd")
    host = next(
        p for p in pods if index_of(p) == 1 and labels_of(p)["ray.io/replica-host-index"] == "2"
    )
    named = host["metadata"]["name"]
    await world.patch_spec(
        "wtd",
        {
            "workerGroupSpecs": [
                {**group, "replicas": 2, "scaleStrategy": {"workersToDelete": [named]}}
            ]
        },
    )
    await eventually(lambda: _assert_slices(world, "wtd", {0: FOUR, 2: FOUR}))

    # The four deletions were one decision (one Event for the replica), and the list is the
    # autoscaler's: the operator never clears it.
    async def one_event_for_four_pods() -> None:
        notes = [e["note"] for e in await events_of(world, "WorkersToDelete")]
        assert len(notes) == 1 and "(4 pods)" in notes[0]

    await eventually(one_event_for_four_pods)
    spec = (await world.get_cluster("wtd"))["spec"]
    assert spec["workerGroupSpecs"][0]["scaleStrategy"]["workersToDelete"] == [named]


async def _assert_event(world: World, reason: str) -> None:
    assert await events_of(world, reason)


async def _assert_slices(world: World, cluster: str, expected: dict[int, list[int]]) -> None:
    assert slices(await world.workers(cluster)) == expected


async def test_scale_down_removes_the_highest_indices(shared_world: SharedWorld) -> None:
    world = shared_world
    await world.start_operator()
    group = cpu_group("g", replicas=4, hosts=2)
    await world.apply(raycluster("down", [group]))
    await eventually(lambda: _assert_slices(world, "down", {i: [0, 1] for i in range(4)}))
    await world.patch_spec("down", {"workerGroupSpecs": [{**group, "replicas": 2}]})
    await eventually(lambda: _assert_slices(world, "down", {0: [0, 1], 1: [0, 1]}))


async def test_changing_num_of_hosts_rebuilds_every_slice(shared_world: SharedWorld) -> None:
    world = shared_world
    await world.start_operator()
    group = cpu_group("g", replicas=2, hosts=2)
    await world.apply(raycluster("shape", [group]))
    await eventually(lambda: _assert_slices(world, "shape", {0: [0, 1], 1: [0, 1]}))
    old_names = replica_names(await world.workers("shape"))
    await world.patch_spec("shape", {"workerGroupSpecs": [{**group, "numOfHosts": 3}]})

    async def rebuilt() -> None:
        pods = await world.workers("shape")
        assert slices(pods) == {0: [0, 1, 2], 1: [0, 1, 2]}
        assert not replica_names(pods) & old_names

    await eventually(rebuilt)


@pytest.mark.asyncio(loop_scope="function")  # its own world: the strays come before the operator
async def test_unlabelled_pods_of_a_multi_host_group_are_replaced_and_removed(
    world: World,
) -> None:
    group = cpu_group("g", replicas=1, hosts=2)
    created = await world.apply(raycluster("orph", [group]))
    owner = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "name": "orph",
        "uid": created["metadata"]["uid"],
        "controller": True,
    }
    strays = []
    for _ in range(2):  # as an operator without the gate would have made them
        stray = await world.kube.create(
            PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "generateName": "orph-g-worker-",
                    "labels": {
                        "ray.io/cluster": "orph",
                        "ray.io/group": "g",
                        "ray.io/node-type": "worker",
                    },
                    "ownerReferences": [owner],
                },
                "spec": group["template"]["spec"],
            },
            namespace="default",
        )
        strays.append(stray["metadata"]["name"])
    await world.start_operator()

    async def replaced() -> None:
        pods = await world.workers("orph")
        assert slices(pods) == {0: [0, 1]}
        assert not set(strays) & {p["metadata"]["name"] for p in pods}

    await eventually(replaced)
    await eventually(lambda: _assert_event(world, "PodWithoutReplicaIdentity"))


async def test_an_invalid_group_is_reported_while_the_rest_keeps_working(
    shared_world: SharedWorld,
) -> None:
    world = shared_world
    await world.start_operator()
    bad = tpu_group("bad", replicas=1)
    bad["numOfHosts"] = 3  # a v6e 4x4 slice has 4 hosts
    await world.apply(raycluster("mixed", [cpu_group("good", replicas=2), bad]))
    await world.apply(raycluster("other", [cpu_group("w", replicas=1)]))

    async def good_runs_bad_is_reported() -> None:
        assert len(await world.workers("mixed", "good")) == 2
        assert await world.workers("mixed", "bad") == []
        assert len(await world.workers("other")) == 1
        status = (await world.get_cluster("mixed")).get("status") or {}
        invalid = [c for c in status.get("conditions") or [] if c["type"] == "InvalidSpec"]
        assert invalid and invalid[0]["status"] == "True"
        assert "numOfHosts" in invalid[0]["message"]

    await eventually(good_runs_bad_is_reported)
    warnings = await events_of(world, "InvalidSpec")
    assert warnings and all(e["type"] == "Warning" for e in warnings)
    assert {e["regarding"]["name"] for e in warnings} == {"mixed"}


async def test_tpu_pods_carry_identity_env_and_each_slice_shares_one_node_pool(
    shared_world: SharedWorld,
) -> None:
    world = shared_world
    await world.start_operator()
    await world.apply(raycluster("tpu", [tpu_group("tpu-v6e", replicas=2)]))

    async def running() -> None:
        pods = await world.workers("tpu")
        assert slices(pods) == {0: FOUR, 1: FOUR} and all(ready(p) for p in pods)

    await eventually(running)
    nodes = {n["metadata"]["name"]: n for n in (await world.kube.list(NODES)).items}
    pools: dict[int, set[str]] = {}
    for pod in await world.workers("tpu"):
        r, h = index_of(pod), int(labels_of(pod)["ray.io/replica-host-index"])
        spec = pod["spec"]
        env = {e["name"]: e.get("value") for e in spec["containers"][0].get("env", [])}
        assert spec["hostname"] == f"tpu-v6e-{r}-{h}"
        assert spec["subdomain"] == "tpu-headless"
        assert env["TPU_WORKER_ID"] == str(h)
        assert env["TPU_NAME"] == f"tpu-v6e-{r}"
        assert env["TPU_WORKER_HOSTNAMES"] == ",".join(
            f"tpu-v6e-{r}-{i}.tpu-headless" for i in range(4)
        )
        assert labels_of(pod)["replicaIndex"] == f"tpu-v6e-{r}"
        node = nodes[spec["nodeName"]]
        pools.setdefault(r, set()).add(node["metadata"]["labels"]["cloud.google.com/gke-nodepool"])
    assert all(len(p) == 1 for p in pools.values())
    assert pools[0] != pools[1]
