"""An unreliable API server: failed writes, dropped watches, expired history."""

from __future__ import annotations

import asyncio

from raycluster_operator.controller.runtime.informer import Informer
from raycluster_operator.controller.runtime.store import object_key
from tests.harness.objects import Obj
from tests.harness.operator_world import (
    World,
    eventually,
    raycluster,
    ready,
    replica_names,
    slices,
    tpu_group,
)

FOUR = [0, 1, 2, 3]


async def test_converges_through_failed_creates_dropped_watches_and_410s(world: World) -> None:
    faults = world.cluster.faults
    faults.fail("create", "pods", rate=0.3, code=500)
    faults.fail("patch", "rayclusters/status", rate=0.3, code=503)
    faults.drop_watches_every = 0.3
    op = await world.start_operator()
    await world.apply(raycluster("chaos", [tpu_group("tpu", replicas=3)]))
    await asyncio.sleep(1.0)
    # One step, no await between: every informer's version predates the expiry (the newest
    # included), and no stream can carry a newer one before it is cut, so each resume gets 410.
    before = {i.name: i.relists for i in op.manager.informers}
    faults.expire_watch_history()
    faults.drop_watches()

    async def three_slices_eventually() -> None:
        pods = await world.workers("chaos")
        assert slices(pods) == {0: FOUR, 1: FOUR, 2: FOUR}
        assert len(replica_names(pods)) == 3
        assert all(ready(p) for p in pods)

    # A hang guard, not a limit: by the faults' luck the convergence needs 0.7-6.5 s of CPU,
    # which a loaded 2-core machine stretched past 40 s in a proof run.
    await eventually(three_slices_eventually, within=180)
    faults.clear()

    async def status_ready() -> None:
        status = (await world.get_cluster("chaos")).get("status") or {}
        assert status.get("state") == "ready"
        assert status.get("readyWorkerReplicas") == 12

    await eventually(status_ready)
    pods = await world.workers("chaos")
    per_name = [
        sum(1 for p in pods if p["metadata"]["labels"]["ray.io/worker-group-replica-name"] == n)
        for n in replica_names(pods)
    ]
    assert per_name == [4, 4, 4]  # no partial slice survived a failed create
    after = {i.name: i.relists for i in op.manager.informers}
    assert [n for n in before if after[n] <= before[n]] == [], f"no relist: {before} {after}"
    await eventually(lambda: caches_match_server(world, op.manager.informers))


async def caches_match_server(world: World, informers: list[Informer]) -> None:
    """Every informer's cache holds what the server lists for it, version for version."""
    for informer in informers:
        listing = await world.kube.list(
            informer.kind, informer.namespace, label_selector=informer.label_selector
        )
        served = {object_key(o): _rv(o) for o in listing.items}
        cached = {k: _rv(informer.store.get(k)) for k in informer.store}
        assert cached == served, informer.name


def _rv(obj: Obj | None) -> str:
    return str((obj or {}).get("metadata", {}).get("resourceVersion"))
