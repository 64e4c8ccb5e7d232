"""The whole loop with Ray's own autoscaler: demand -> slice -> placement group -> idle -> gone.

The head pod runs the real `ray kuberay-autoscaler` sidecar (autoscaler v2), which reaches the
dev API server with the service-account token and CA mounted where in-cluster clients look. A
driver asks for one whole slice (two bundles of 4 TPU chips on distinct hosts); the autoscaler
raises `replicas`, the operator creates both hosts together, their raylets join, the placement
group is placed on the slice. Once the driver is gone and the idle timeout passes, the slice
is removed whole.
"""

from __future__ import annotations

import time

import pytest

from raycluster_operator.kube import RAYCLUSTERS
from tests.harness.ray_world import (
    REAL_RAY_MODULE,
    SLICE_DEMAND,
    RayWorld,
    eventually,
    labels_of,
    module_world,
    raycluster,
)

pytestmark = [*REAL_RAY_MODULE, pytest.mark.slow(seconds=55)]

NAME = "scaled"


world = module_world()


async def test_the_autoscaler_brings_a_whole_slice_for_a_placement_group_and_removes_it(
    world: RayWorld,
) -> None:
    await world.cluster.apply(raycluster(NAME, replicas=0, autoscaling=True, idle_timeout=10))
    head = await world.ray_up(NAME)

    # The driver blocks until the autoscaler, the operator and both raylets have done their
    # part; its placement group is on the two hosts of one new slice.
    asked = time.monotonic()
    placed = await world.driver(head, SLICE_DEMAND, seconds=420)
    print(f"\nE2E-FIGURES autoscaler without Kueue: the slice's placement group placed "
          f"{time.monotonic() - asked:.1f} s after the driver asked")  # fmt: skip
    slice_names = {n["labels"].get("ray.io/tpu-slice-name") for n in placed}
    assert len(placed) == 2
    assert slice_names == {"tpu-0"}
    assert sorted(n["labels"]["ray.io/tpu-worker-id"] for n in placed) == ["0", "1"]
    workers = await world.workers(NAME)
    assert len(workers) == 2
    assert {labels_of(p)["ray.io/worker-group-replica-index"] for p in workers} == {"0"}
    # Nobody but Ray's autoscaler writes the spec: it asked for one slice.
    group = (await world.kube.get(RAYCLUSTERS, "default", NAME))["spec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 1
    assert "Starting the autoscaler" in world.log_of(head, "autoscaler")

    # The driver has exited: its placement group is gone, the slice idles, and goes whole.
    async def slice_gone() -> None:
        pods = await world.pods(NAME, live=False)
        assert [labels_of(p)["ray.io/node-type"] for p in pods] == ["head"]
        assert [p.name for p in world.runtime.pods.values()] == [head]  # no worker process left

    await eventually(slice_gone, within=240)
    group = (await world.kube.get(RAYCLUSTERS, "default", NAME))["spec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 0
