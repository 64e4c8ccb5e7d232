"""Ray's own slice API scales TPU slices, on the spec a user gets from `make run`.

The README's block ("Scaling TPU slices the Ray way") as written, on
examples/tpu-v5p-2x2x2-local.yaml as `make run` applies it (one 2-host v5p 2x2x2 slice,
`maxReplicas: 2`, `minReplicas: 1`, autoscaler v2): `slice_placement_group(topology="2x2x2",
accelerator_version="v5p", num_slices=2)` gets the second slice, and after the release the group
goes back to one slice, whole (both hosts of one slice go; never one host of each). Only Ray's
autoscaler writes `replicas`, and no `labels` are added.

From `replicas: 0` (the same spec, its autoscaler raising `replicas` one slice at a time, each
bundle on the hosts of the slice Ray reserved) is Ray Train's path in
tests/e2e/test_ray_jax_multislice.py; Serve replicas reserving slices, 1 -> 2 -> 1, are
tests/e2e/test_rayservice_quickstart.py's. A test of its own here cost the suite ~45 s for what
those two prove (issue #36's budget)."""

from __future__ import annotations

import pytest

from raycluster_operator.kube import RAYCLUSTERS
from tests.harness.examples import load_example, readme_block
from tests.harness.ray_world import (
    REAL_RAY_MODULE,
    RESULT_MARK,
    RayWorld,
    eventually,
    labels_of,
    module_world,
)

pytestmark = [*REAL_RAY_MODULE, pytest.mark.slow(seconds=110)]

EXAMPLE = "tpu-v5p-2x2x2-local"
#: The README's block, then what the test reads back (the slices still whole right after the
#: release: the example's idle timeout is 30 s).
README_DRIVER = (
    readme_block("### Scaling TPU slices the Ray way", "python")
    + "from ray.util.tpu import get_num_tpu_slices\n"
    + f'print("{RESULT_MARK}" + json.dumps({{"intact": get_num_tpu_slices("2x2x2", "TPU-V5P")}}))\n'
)


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
