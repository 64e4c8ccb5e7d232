"""Ray's own slice API scales TPU slices: `slice_placement_group(num_slices=2)` from 0 slices.

The RayCluster is the TPU group a KubeRay user writes (GKE TPU nodeSelectors, `google.com/tpu`,
`numOfHosts: 2`, autoscaler v2, `replicas: 0`, no labels). A driver in the head pod calls
`ray.util.tpu.slice_placement_group(topology="2x2x2", accelerator_version="v5p",
num_slices=2)`; Ray reserves each slice's head (`{TPU-v5p-16-head: 1}` selecting
`ray.io/tpu-worker-id=0, ray.io/tpu-pod-type=v5p-16`), its autoscaler (the sidecar, with the
slice-scaling correction of design rule 7b) raises `replicas` one slice at a time, and the
placement group lands on the four hosts of two slices, each host where its labels say. Once
the placement group is removed, `get_num_ready_tpu_slices` counts both slices idle, and once
the driver is gone the idle slices go, whole. Nothing but Ray's autoscaler writes the spec.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from raycluster_operator.kube import RAYCLUSTERS
from tests.harness.ray_world import (
    RESULT_MARK,
    RayWorld,
    eventually,
    labels_of,
    raycluster,
    start_world,
)
from tests.harness.ray_world import stop_world as _stop

# Real Ray on five pods of a shared 2-core machine takes minutes: the hang guard is raised
# (a guard, not a limit the test asserts on).
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(2400)]

NAME = "reserve"

RESERVE = f"""
import time
from ray.util.placement_group import placement_group_table
from ray.util.tpu import get_num_ready_tpu_slices, get_num_tpu_slices, slice_placement_group
ray.init(address="auto", logging_level="ERROR")
before = get_num_tpu_slices("2x2x2", "TPU-V5P")
start = time.monotonic()
spg = slice_placement_group("2x2x2", "v5p", num_slices=2, head_reservation_timeout_s=600)
ray.get(spg.placement_group.ready(), timeout=600)
ready_s = time.monotonic() - start
spg.release_head_pgs()
nodes = {{n["NodeID"]: n for n in ray.nodes() if n["Alive"]}}
placed = placement_group_table(spg.placement_group)["bundles_to_node_id"]
bundles = [nodes[placed[i]]["Labels"] for i in sorted(placed)]
intact = get_num_tpu_slices("2x2x2", "TPU-V5P")
busy = get_num_ready_tpu_slices("2x2x2", "TPU-V5P")
spg.shutdown()
deadline = time.monotonic() + 60
idle = 0
while time.monotonic() < deadline and idle < 2:
    idle = get_num_ready_tpu_slices("2x2x2", "TPU-V5P")
    time.sleep(0.5)
print("{RESULT_MARK}" + json.dumps({{
    "before": before, "ready_s": ready_s, "bundles": bundles, "selector": spg.bundle_label_selector,
    "intact": intact, "busy": busy, "idle": idle,
}}))
"""


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world() -> AsyncIterator[RayWorld]:
    w = await start_world()
    try:
        yield w
    finally:
        await _stop(w)


async def test_slice_placement_group_brings_two_slices_from_zero_and_they_go_whole(
    world: RayWorld,
) -> None:
    await world.cluster.apply(raycluster(NAME, replicas=0, autoscaling=True, idle_timeout=10))

    async def head_up() -> str:
        head = await world.head(NAME)
        name: str = head["metadata"]["name"]
        assert world.ray_started(name)
        assert not await world.workers(NAME)
        return name

    head = await eventually(head_up, within=180)
    result = await world.driver(head, RESERVE, seconds=900)

    assert result["before"] == 0
    # Four bundles, one per host: slice by slice, each host of a slice once, each bundle on a
    # node whose slice name is the one Ray reserved for it.
    bundles = result["bundles"]
    assert len(bundles) == 4
    slices = [b["ray.io/tpu-slice-name"] for b in bundles]
    assert sorted(set(slices)) == ["tpu-0", "tpu-1"]
    assert [s["ray.io/tpu-slice-name"] for s in result["selector"]] == slices
    for name in ("tpu-0", "tpu-1"):
        ids = sorted(
            b["ray.io/tpu-worker-id"] for b in bundles if b["ray.io/tpu-slice-name"] == name
        )
        assert ids == ["0", "1"]
    assert {b["ray.io/tpu-pod-type"] for b in bundles} == {"v5p-16"}
    # Both slices intact while reserved, and both counted ready once the group is removed.
    # (While reserved, Ray 2.60's per-node availability still shows their TPUs free, so
    # `get_num_ready_tpu_slices` is not a busy test: not asserted.)
    assert (result["intact"], result["idle"]) == (2, 2)
    print(f"reservation of 2 slices from 0 ready after {result['ready_s']:.1f} s")

    # Only Ray's autoscaler wrote the spec, and it asked for whole slices.
    group = (await world.kube.get(RAYCLUSTERS, "default", NAME))["spec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 2
    assert "labels" not in group
    workers = await world.workers(NAME)
    assert sorted(
        (
            labels_of(p)["ray.io/worker-group-replica-index"],
            labels_of(p)["ray.io/replica-host-index"],
        )
        for p in workers
    ) == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
    log = world.log_of(head, "autoscaler")
    assert "raycluster-operator slice scaling: applied to Ray 2.60" in log

    # The placement group was removed and the driver has exited: idle slices go, whole.
    async def slices_gone() -> None:
        pods = await world.pods(NAME, live=False)
        assert [labels_of(p)["ray.io/node-type"] for p in pods] == ["head"]

    await eventually(slices_gone, within=300)
    group = (await world.kube.get(RAYCLUSTERS, "default", NAME))["spec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 0
