"""KubeRay's multi-host e2e scenarios replayed through the dev cluster with the real kubectl.

- ``TestRayClusterAutoscalerWithFakeMultiHostTPU`` (KubeRay test/e2eautoscaler): a group of
  4-host "TPU" slices, 0..3 replicas, autoscaling on. Ray's autoscaler writes are replayed as
  the JSON patches it sends (tests/ray/test_ray_autoscaler_loop.py drives the same with Ray's
  own autoscaler): one slice comes up whole; an idle host named in workersToDelete with
  replicas 0 takes its whole slice; the group ends with no pods.
- The multi-host suspend/resume of raycluster_controller_test.go with two groups: every slice
  goes, the cluster reports Suspended, and on resume each slice comes back whole at index 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from parity_kubectl import Kubectl

from tests.harness.operator_world import SharedWorld, cpu_group, eventually, raycluster

# One world for the tests that need none of their own (tests/operator/conftest.py).
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]


def group_pods(pods: list[dict[str, Any]], group: str) -> list[dict[str, Any]]:
    return [
        p
        for p in pods
        if p["metadata"]["labels"].get("ray.io/group") == group
        and not p["metadata"].get("deletionTimestamp")
    ]


async def test_fake_multi_host_tpu_autoscaling(shared_world: SharedWorld, tmp_path: Path) -> None:
    world = shared_world
    kubectl = Kubectl(world.cluster, tmp_path)
    await world.start_operator()
    group = cpu_group(
        "tpu-group",
        replicas=0,
        hosts=4,
        minReplicas=0,
        maxReplicas=3,
        rayStartParams={"num-cpus": "1", "resources": '"{\\"TPU\\": 4}"'},
    )
    await kubectl.apply(raycluster("ray-cluster", [group], autoscaling=True))

    async def ready_without_workers() -> None:
        status = (await kubectl.json("get", "raycluster", "ray-cluster")).get("status") or {}
        assert status.get("state") == "ready"
        assert status.get("desiredWorkerReplicas") == 0

    await eventually(ready_without_workers, within=30)

    # A detached TPU actor: the autoscaler asks for one slice.
    await kubectl.patch_json(
        "raycluster",
        "ray-cluster",
        [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1}],
    )

    async def one_slice() -> list[dict[str, Any]]:
        pods = group_pods(await kubectl.pods("ray-cluster"), "tpu-group")
        assert len(pods) == 4
        assert {p["metadata"]["labels"]["ray.io/worker-group-replica-index"] for p in pods} == {"0"}
        status = (await kubectl.json("get", "raycluster", "ray-cluster"))["status"]
        assert status["desiredWorkerReplicas"] == 4 and status["desiredWorkerSlices"] == 1
        return pods

    pods = await eventually(one_slice, within=30)

    # One actor ends, its host idles: the autoscaler terminates that host (replicas 0 and the
    # pod in workersToDelete); the whole slice goes in the same pass.
    idle = pods[0]["metadata"]["name"]
    await kubectl.scale_down("ray-cluster", 0, [idle])

    async def no_workers() -> None:
        assert not group_pods(await kubectl.pods("ray-cluster"), "tpu-group")
        status = (await kubectl.json("get", "raycluster", "ray-cluster"))["status"]
        assert status["desiredWorkerReplicas"] == 0

    await eventually(no_workers, within=30)
    events = await kubectl("get", "events", "--field-selector", "involvedObject.kind=RayCluster")
    assert any("WorkersToDelete" in row and idle in row for row in events.splitlines()), events

    # The remaining actors still need a slice: the autoscaler asks again; a new slice is made.
    await kubectl.patch_json(
        "raycluster",
        "ray-cluster",
        [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {}},
        ],
    )
    again = await eventually(one_slice, within=30)
    assert not {p["metadata"]["name"] for p in again} & {p["metadata"]["name"] for p in pods}


async def test_multi_host_suspend_and_resume_with_two_groups(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    world = shared_world
    kubectl = Kubectl(world.cluster, tmp_path)
    await world.start_operator()
    groups = [cpu_group("a", replicas=2, hosts=2), cpu_group("b", replicas=1, hosts=3)]
    await kubectl.apply(raycluster("mhs", groups))

    async def all_up() -> None:
        pods = await kubectl.pods("mhs")
        assert len(group_pods(pods, "a")) == 4 and len(group_pods(pods, "b")) == 3

    await eventually(all_up, within=30)
    await kubectl.patch_merge("raycluster", "mhs", {"spec": {"suspend": True}})

    async def suspended() -> None:
        assert not await kubectl.pods("mhs")
        assert (await kubectl.conditions("mhs"))["RayClusterSuspended"] == "True"

    await eventually(suspended, within=30)
    await kubectl.patch_merge("raycluster", "mhs", {"spec": {"suspend": False}})

    async def resumed() -> None:
        pods = await kubectl.pods("mhs")
        a, b = group_pods(pods, "a"), group_pods(pods, "b")
        assert len(a) == 4 and len(b) == 3
        index = "ray.io/worker-group-replica-index"
        assert sorted(p["metadata"]["labels"][index] for p in a) == ["0", "0", "1", "1"]
        assert {p["metadata"]["labels"][index] for p in b} == {"0"}
        conditions = await kubectl.conditions("mhs")
        assert conditions["RayClusterSuspended"] == "False"

    await eventually(resumed, within=30)
