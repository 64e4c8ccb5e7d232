"""Ray's own slice API scales TPU slices, on the spec a user gets from `make run`.

First the README's block ("Scaling TPU slices the Ray way") as written, on
examples/tpu-v5p-2x2x2-local.yaml as `make run` applies it (one 2-host v5p 2x2x2 slice,
`maxReplicas: 2`, `minReplicas: 1`, autoscaler v2): `slice_placement_group(topology="2x2x2",
accelerator_version="v5p", num_slices=2)` gets the second slice, and after the release the group
goes back to one slice, whole (both hosts of one slice go; never one host of each).

Then the same example from `replicas: 0` (`minReplicas: 0`, a 10 s idle timeout): Ray reserves
each slice's head (`{TPU-v5p-16-head: 1}` selecting `ray.io/tpu-worker-id=0,
ray.io/tpu-pod-type=v5p-16`), its autoscaler (the sidecar, with the slice-scaling correction of
design rule 7b) raises `replicas` one slice at a time, and the placement group lands on the four
hosts of two slices, each host where its labels say. Once the placement group is removed,
`get_num_ready_tpu_slices` counts both slices idle, and once the driver is gone the idle slices
go, whole. Nothing but Ray's autoscaler writes `replicas`, and no `labels` are added.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from raycluster_operator.kube import RAYCLUSTERS
from tests.harness.examples import load_example, readme_block
from tests.harness.ray_world import (
    NO_DASHBOARD,
    REAL_RAY_MODULE,
    RESULT_MARK,
    RayWorld,
    eventually,
    labels_of,
    module_world,
)

pytestmark = [*REAL_RAY_MODULE, pytest.mark.slow(seconds=210)]

EXAMPLE = "tpu-v5p-2x2x2-local"
NAME = "reserve"
#: The README's block, then what the test reads back (the slices still whole right after the
#: release: the example's idle timeout is 30 s).
README_DRIVER = (
    readme_block("### Scaling TPU slices the Ray way", "python")
    + "from ray.util.tpu import get_num_tpu_slices\n"
    + f'print("{RESULT_MARK}" + json.dumps({{"intact": get_num_tpu_slices("2x2x2", "TPU-V5P")}}))\n'
)


def example(**changes: Any) -> dict[str, Any]:
    """The example's RayCluster; ``changes`` set fields of its TPU group, ``name`` and
    ``idle_timeout`` the cluster's. Its head runs Ray's dashboard without its modules
    (`NO_DASHBOARD`): the first test runs make run's example as written; this one reads Ray's
    placement groups and nodes, never the dashboard."""
    (cluster,) = load_example(EXAMPLE)
    cluster = copy.deepcopy(cluster)
    cluster["spec"]["headGroupSpec"]["rayStartParams"].update(NO_DASHBOARD)
    if "name" in changes:
        cluster["metadata"]["name"] = changes.pop("name")
    if "idle_timeout" in changes:
        cluster["spec"]["autoscalerOptions"]["idleTimeoutSeconds"] = changes.pop("idle_timeout")
    cluster["spec"]["workerGroupSpecs"][0].update(changes)
    return cluster


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


world = module_world()


async def slice_indices(world: RayWorld, cluster: str) -> list[tuple[str, str]]:
    """(replica index, host index) of every live worker pod."""
    return sorted(
        (
            labels_of(p)["ray.io/worker-group-replica-index"],
            labels_of(p)["ray.io/replica-host-index"],
        )
        for p in await world.workers(cluster)
    )


async def test_the_readme_block_gets_make_runs_example_its_second_slice(
    world: RayWorld,
) -> None:
    (cluster,) = load_example(EXAMPLE)
    name = cluster["metadata"]["name"]
    await world.cluster.apply(cluster)
    head = await world.ray_up(name, workers=2)
    result = await world.driver(head, README_DRIVER, seconds=900)
    # The README's own print (get_num_ready_tpu_slices) came out, then both slices intact.
    printed = world.logs[-1].splitlines()
    mark = next(i for i, line in enumerate(printed) if line.startswith(RESULT_MARK))
    assert any(line.strip().isdigit() for line in printed[:mark]), printed[-10:]
    assert result["intact"] == 2
    group = (await world.kube.get(RAYCLUSTERS, "default", name))["spec"]["workerGroupSpecs"][0]
    assert "labels" not in group

    # Released: back to minReplicas, one whole slice (both hosts of the same slice).
    async def back_to_one() -> None:
        indices = await slice_indices(world, name)
        assert len(indices) == 2 and len({i for i, _ in indices}) == 1, indices
        live = await world.kube.get(RAYCLUSTERS, "default", name)
        assert live["spec"]["workerGroupSpecs"][0]["replicas"] == 1

    await eventually(back_to_one, within=300)
    assert "raycluster-operator slice scaling: applied to Ray 2.60" in world.log_of(
        head, "autoscaler"
    )
    # The next test needs both TPU pools.
    await world.clean(within=180)


async def test_slice_placement_group_brings_two_slices_from_zero_and_they_go_whole(
    world: RayWorld,
) -> None:
    await world.cluster.apply(
        example(name=NAME, replicas=0, minReplicas=0, idle_timeout=10),
    )
    head = await world.ray_up(NAME)
    result = await world.driver(head, RESERVE, seconds=900)

    assert result["before"] == 0
    # Four bundles, one per host: slice by slice, each host of a slice once, each bundle on a
    # node whose slice name is the one Ray reserved for it.
    bundles = result["bundles"]
    assert len(bundles) == 4
    slices = [b["ray.io/tpu-slice-name"] for b in bundles]
    assert sorted(set(slices)) == ["tpu-v5p-0", "tpu-v5p-1"]
    assert [s["ray.io/tpu-slice-name"] for s in result["selector"]] == slices
    for name in ("tpu-v5p-0", "tpu-v5p-1"):
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
    assert await slice_indices(world, NAME) == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
    log = world.log_of(head, "autoscaler")
    assert "raycluster-operator slice scaling: applied to Ray 2.60" in log

    # The placement group was removed and the driver has exited: idle slices go, whole.
    async def slices_gone() -> None:
        pods = await world.pods(NAME, live=False)
        assert [labels_of(p)["ray.io/node-type"] for p in pods] == ["head"]

    await eventually(slices_gone, within=300)
    group = (await world.kube.get(RAYCLUSTERS, "default", NAME))["spec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 0
