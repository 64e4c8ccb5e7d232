"""Ray's own autoscaler under the real Kueue, on Kubernetes' own control plane (issue #34):
demand -> Kueue admits a new workload slice -> a whole TPU slice -> placement group -> idle ->
the slice gone whole and its quota back.

The RayCluster is queued and elastic (`kueue.x-k8s.io/elastic-job: "true"`, Kueue's
`ElasticJobsViaWorkloadSlices`, which `--with kueue` turns on): Kueue lets it run Ray's
autoscaler, and gates every pod until it has admitted the size the pod belongs to. A driver in
the head asks for one whole slice (two bundles of 4 TPU chips on distinct hosts); the real
`ray kuberay-autoscaler` sidecar (v2) raises `replicas`; the operator creates both hosts
behind Kueue's gate; Kueue admits the new size as a new Workload and opens the gates; both
raylets join and the placement group is placed on the slice. Once the driver is gone and the
idle timeout passes, the autoscaler removes the slice whole; Kueue's Workload shrinks in place
and the ClusterQueue counts no TPU chip in use.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from raycluster_operator.kube import RAYCLUSTERS
from tests.harness import control_planes
from tests.harness.kueue import flavor, queue, require_kueue, running_kueue
from tests.harness.objects import Obj
from tests.harness.ray_world import (
    NODES,
    REAL_RAY_MODULE,
    SLICE_DEMAND,
    RayWorld,
    eventually,
    labels_of,
    raycluster,
    start_world,
    stop_world,
)

pytestmark = [*REAL_RAY_MODULE, pytest.mark.kubernetes, pytest.mark.slow(seconds=60)]

NAME = "queued-scaled"
QUEUE = "kueue.x-k8s.io/queue-name"
ELASTIC = "kueue.x-k8s.io/elastic-job"  # the annotation, and the scheduling gate
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world() -> AsyncIterator[RayWorld]:
    require_kueue()
    w = await start_world(NODES, control_plane=control_planes.KUBERNETES)
    try:
        async with running_kueue(w.cluster):
            # TPU quota of one v5p 2x2x2 slice (2 hosts x 4 chips), on LocalQueue `team`.
            for obj in [flavor("v5p"), *queue("team", "slices", namespace="default", chips=8)]:
                await w.cluster.apply(obj)
            yield w
    finally:
        await stop_world(w)


def condition(obj: Obj, kind: str) -> bool:
    return any(
        c["type"] == kind and c["status"] == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


async def live_workload(world: RayWorld) -> Obj:
    """The one Workload of the cluster that is not Finished (a replaced workload slice is)."""
    items = (await world.cluster.client.get(WORKLOADS))["items"]
    live = [w for w in items if not condition(w, "Finished")]
    assert len(live) == 1, [w["metadata"]["name"] for w in live]
    workload: Obj = live[0]
    return workload


def tpu_hosts(workload: Obj) -> int:
    """How many pods of the TPU group Kueue has admitted."""
    assignments = workload["status"]["admission"]["podSetAssignments"]
    return int(next(a["count"] for a in assignments if a["name"] == "tpu"))


def tpu_asked(workload: Obj) -> int:
    """How many pods of the TPU group the Workload asks for now (a shrink is written here,
    in place; the admission keeps the count it was admitted with)."""
    return int(next(p["count"] for p in workload["spec"]["podSets"] if p["name"] == "tpu"))


async def tpu_in_use(world: RayWorld) -> str:
    """The TPU chips the ClusterQueue counts in use."""
    queue = await world.cluster.client.get("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/slices")
    usage = queue["status"]["flavorsUsage"][0]["resources"]
    return str(next(r["total"] for r in usage if r["name"] == "google.com/tpu"))


async def test_the_autoscaler_brings_a_whole_slice_that_kueue_admits_then_removes_it(
    world: RayWorld,
) -> None:
    cluster = raycluster(NAME, replicas=0, autoscaling=True, idle_timeout=10)
    cluster["metadata"]["labels"] = {QUEUE: "team"}
    cluster["metadata"]["annotations"] = {ELASTIC: "true"}
    await world.cluster.apply(cluster)
    head = await world.ray_up(NAME)
    first = await live_workload(world)
    assert condition(first, "Admitted") and tpu_hosts(first) == 0

    # The driver blocks until the autoscaler, Kueue, the operator and both raylets have done
    # their part; its placement group is on the two hosts of one new slice.
    asked = time.monotonic()
    placed = await world.driver(head, SLICE_DEMAND, seconds=420)
    print(f"\nE2E-FIGURES autoscaler under Kueue: the slice's placement group placed "
          f"{time.monotonic() - asked:.1f} s after the driver asked")  # fmt: skip
    assert len(placed) == 2
    assert {n["labels"].get("ray.io/tpu-slice-name") for n in placed} == {"tpu-0"}
    assert sorted(n["labels"]["ray.io/tpu-worker-id"] for n in placed) == ["0", "1"]
    workers = [p for p in await world.pods(NAME) if labels_of(p)["ray.io/node-type"] == "worker"]
    assert len(workers) == 2
    assert {labels_of(p)["ray.io/worker-group-replica-index"] for p in workers} == {"0"}
    # Kueue's gate is open on both (it was in the template, so on each pod from its creation).
    assert all(ELASTIC not in str(p["spec"].get("schedulingGates")) for p in workers)
    group = (await world.kube.get(RAYCLUSTERS, "default", NAME))["spec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 1
    assert [g["name"] for g in group["template"]["spec"]["schedulingGates"]] == [ELASTIC]
    # Admitted as a new workload slice of the new size, which replaced the first Workload.
    grown = await live_workload(world)
    assert grown["metadata"]["name"] != first["metadata"]["name"]
    assert condition(grown, "Admitted") and tpu_hosts(grown) == tpu_asked(grown) == 2
    assert await tpu_in_use(world) == "8"

    # The driver has exited: the slice idles, Ray's autoscaler removes it whole, and Kueue's
    # Workload counts no TPU host again.
    async def slice_gone() -> None:
        pods = await world.pods(NAME, live=False)
        assert [labels_of(p)["ray.io/node-type"] for p in pods] == ["head"]
        assert tpu_asked(await live_workload(world)) == 0
        assert await tpu_in_use(world) == "0"

    await eventually(slice_gone, within=240)
    group = (await world.kube.get(RAYCLUSTERS, "default", NAME))["spec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 0
