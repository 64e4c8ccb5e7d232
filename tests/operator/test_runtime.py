"""The runtime's promises: no writes at steady state, safe restarts, one writer at a time."""

from __future__ import annotations

import asyncio

import aiohttp

from raycluster_operator.controller.runtime.leader import LeaseTiming
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


async def converged(world: World, name: str, count: int) -> None:
    pods = await world.workers(name)
    assert slices(pods) == {i: FOUR for i in range(count)}
    assert all(ready(p) for p in pods)
    status = (await world.get_cluster(name)).get("status") or {}
    assert status.get("state") == "ready"
    assert status.get("readyWorkerReplicas") == 4 * count


async def test_a_converged_cluster_causes_no_writes_over_many_resyncs(world: World) -> None:
    op = await world.start_operator(resync_period=0.05)
    await world.apply(raycluster("steady", [tpu_group("tpu", replicas=2)]))
    await eventually(lambda: converged(world, "steady", 2))
    await world.reconciled("steady")  # the last status write is in the cache, and seen
    writes = op.writes
    version = (await world.get_cluster("steady"))["metadata"]["resourceVersion"]
    reconciles = op.manager.reconciles
    await world.reconciled("steady", passes=20)  # many passes really happened
    assert op.manager.reconciles - reconciles >= 20
    assert op.writes == writes
    assert (await world.get_cluster("steady"))["metadata"]["resourceVersion"] == version


async def test_an_operator_stopped_mid_scale_up_and_restarted_converges_cleanly(
    world: World,
) -> None:
    world.cluster.faults.slow("create", "pods", seconds=0.15)
    first = await world.start_operator(write_concurrency=2)
    await world.apply(raycluster("restart", [tpu_group("tpu", replicas=4)]))

    async def some_pods() -> None:
        assert 1 <= len(await world.workers("restart")) < 16

    await eventually(some_pods)
    first.task.cancel()  # a crash: no drain, writes in flight are abandoned
    await asyncio.gather(first.task, return_exceptions=True)
    await first.client.close()
    world.cluster.faults.clear()

    await world.start_operator()
    await eventually(lambda: converged(world, "restart", 4), within=30)
    pods = await world.workers("restart")
    assert len(replica_names(pods)) == 4  # one name per index, no partial leftovers
    everything = await world.pods("restart")
    assert len(everything) == 17  # 16 workers and the head, nothing terminating left over


async def test_only_the_leader_writes_and_a_successor_takes_over(world: World) -> None:
    # The Lease lives where deploy/ grants it: the operator's own namespace. A lease long enough
    # that a loaded machine (parallel workers) never lets it lapse: a clean stop releases it,
    # so the takeover below does not wait for it to expire.
    lead = dict(
        leader_elect=True,
        lease_namespace="raycluster-operator",
        lease_name="op-lease",
        lease_timing=LeaseTiming(lease_duration=15.0, renew_deadline=10.0, retry_period=0.1),
    )
    a = await world.start_operator(identity="a", **lead)
    await eventually(lambda: _assert(a.manager.is_leader))
    b = await world.start_operator(identity="b", **lead)
    await world.apply(raycluster("le", [tpu_group("tpu", replicas=1)]))
    await eventually(lambda: converged(world, "le", 1))
    assert b.writes == 0 and not b.manager.is_leader
    assert a.writes > 0

    await a.stop()  # clean stop releases the Lease
    await eventually(lambda: _assert(b.manager.is_leader), within=10)
    cluster = await world.get_cluster("le")
    group = cluster["spec"]["workerGroupSpecs"][0]
    await world.patch_spec("le", {"workerGroupSpecs": [{**group, "replicas": 2}]})
    await eventually(lambda: converged(world, "le", 2))
    assert b.writes > 0


def _assert(cond: bool) -> None:
    assert cond


async def test_probes_and_metrics_are_served(world: World) -> None:
    op = await world.start_operator(metrics_addr="127.0.0.1:0", health_addr="127.0.0.1:0")
    await world.apply(raycluster("obs", [tpu_group("tpu", replicas=1)]))
    await eventually(lambda: converged(world, "obs", 1))
    assert op.manager.metrics_server is not None and op.manager.health_server is not None
    health = op.manager.health_server.port
    metrics = op.manager.metrics_server.port
    async with aiohttp.ClientSession() as http:
        for path in ("/healthz", "/readyz"):
            async with http.get(f"http://127.0.0.1:{health}{path}") as resp:
                assert resp.status == 200
        async with http.get(f"http://127.0.0.1:{metrics}/metrics") as resp:
            text = await resp.text()
    assert 'raycluster_operator_pods_created_total{reason="ScaleUp"} 4.0' in text
    assert 'state="ready"} 1.0' in text
    # Slices are counted in every state of the slice state machine, besides the desired ones.
    for state in ("desired", "pending", "broken", "deleting"):
        assert f'state="{state}"}}' in text
    assert "raycluster_operator_reconcile_duration_seconds_bucket" in text
    assert "raycluster_operator_workqueue_depth" in text
