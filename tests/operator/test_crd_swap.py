"""A CRD replaced under a running operator (a KubeRay upgrade does exactly that): noticed at
once through the watch on that one CRD, and a converged cluster then costs 0 writes for the
issue's 20 s window, ours -> KubeRay's and KubeRay's -> ours. An operator started under
KubeRay's CRD reads the cluster with that CRD's defaults (``priority: 0``, a port's
``protocol: TCP``) and still finds every pod current: under ``Recreate`` none is deleted
(before builders/template_hash.py left those defaults out, both pods were)."""

from __future__ import annotations

import asyncio
from typing import Any

from kuberay_crd import kuberay_crd

from raycluster_operator.controller.crds import crd_manifest
from raycluster_operator.controller.raycluster.crdfit import served_schema
from tests.harness.operator_world import World, cpu_group, eventually, raycluster

WINDOW = 20.0  # seconds, the issue's


def held_schema(op: Any) -> Any:
    reconciler = op.manager.controller.reconciler
    return None if reconciler is None else reconciler.crd._schema


async def swap(world: World, op: Any, crd: dict[str, Any]) -> None:
    """Install ``crd`` and wait until the operator holds its schema (the barrier)."""
    await world.cluster.apply(crd)
    wanted = served_schema(crd)

    def noticed() -> None:
        assert held_schema(op) == wanted

    await eventually(noticed)


async def quiet_for(op: Any, seconds: float, passes: int = 10) -> None:
    """No write for ``seconds`` while the operator keeps passing over the cluster (at least
    ``passes`` times: the resync asks for one every 0.5 s)."""
    writes, before = op.writes, op.manager.reconciles
    await asyncio.sleep(seconds)
    assert op.manager.reconciles >= before + passes, "the operator did not keep passing"
    assert op.writes == writes


async def test_a_swapped_crd_costs_no_writes_at_steady_state(world: World) -> None:
    op = await world.start_operator(resync_period=0.5)
    cluster = raycluster("swap", [cpu_group("w", replicas=1)])
    cluster["spec"]["upgradeStrategy"] = {"type": "Recreate"}
    for group in (cluster["spec"]["headGroupSpec"], *cluster["spec"]["workerGroupSpecs"]):
        group["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 6379}]
    await world.apply(cluster)

    async def converged() -> None:
        status = (await world.get_cluster("swap")).get("status") or {}
        assert status.get("readyWorkerReplicas") == 1 and status.get("readyWorkerSlices") == 1

    await eventually(converged)
    await quiet_for(op, 2.0, passes=2)  # converged: passes write nothing

    writes = op.writes
    await swap(world, op, kuberay_crd())
    await quiet_for(op, WINDOW)
    assert op.writes == writes  # not even one write since the swap
    status = (await world.get_cluster("swap")).get("status") or {}
    assert "readyWorkerSlices" not in status  # KubeRay's CRD prunes our extension

    # A restart lists the cluster as KubeRay's CRD defaults it: its pods are still current.
    pods = {p["metadata"]["uid"] for p in await world.pods("swap")}
    await op.stop()
    op = await world.start_operator(resync_period=0.5)
    assert (await world.get_cluster("swap"))["spec"]["workerGroupSpecs"][0]["priority"] == 0
    await world.reconciled("swap", passes=3)
    assert {p["metadata"]["uid"] for p in await world.pods("swap", live=False)} == pods
    assert {p["metadata"]["uid"] for p in await world.pods("swap")} == pods  # none deleting
    assert op.writes == 0

    await swap(world, op, crd_manifest())

    async def extensions_back() -> None:
        status = (await world.get_cluster("swap")).get("status") or {}
        assert status.get("readyWorkerSlices") == 1

    # Under our CRD the slice counts are status again: one write fills them in.
    await eventually(extensions_back)
    await quiet_for(op, WINDOW)


async def test_kuberay_v17s_fields_survive_a_swap_to_ours_and_stay_warned_once(
    world: World,
) -> None:
    """A cluster stored under KubeRay v1.7's CRD with v1.7's fields: once ours replaces it, the
    server reads every value back (before, ours pruned them: the user's data lost), and the
    operator, which warned once under KubeRay's CRD, does not warn again (rule 3a)."""
    from raycluster_operator.kube import EVENTS

    op = await world.start_operator(resync_period=0.5)
    await swap(world, op, kuberay_crd())
    cluster = raycluster("v17", [cpu_group("w", replicas=1, priority=4)])
    v17 = {
        "tlsOptions": {"enabled": True},
        "networkPolicy": {"mode": "DenyAllEgress"},
        "historyServerOptions": {"collectorOptions": {"image": "collector:1"}},
        "autoscalerOptions": {"command": ["autoscaler"], "args": ["-v"]},
    }
    cluster["spec"] |= v17
    cluster["spec"]["headGroupSpec"]["ingressOptions"] = {"host": "ray.example.com"}
    await world.apply(cluster)

    async def warned() -> list[Any]:
        events = (await world.kube.list(EVENTS, "default")).items
        return [e for e in events if e["reason"] == "UnsupportedField"]

    async def said() -> None:
        status = (await world.get_cluster("v17")).get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or ()}
        assert conditions.get("UnsupportedFields") == "True"
        assert status.get("readyWorkerReplicas") == 1
        assert len(await warned()) == 1

    await eventually(said)
    await swap(world, op, crd_manifest())
    await world.reconciled("v17", passes=3)
    spec = (await world.get_cluster("v17"))["spec"]
    assert {field: spec[field] for field in v17} == v17
    assert spec["headGroupSpec"]["ingressOptions"] == {"host": "ray.example.com"}
    assert spec["workerGroupSpecs"][0]["priority"] == 4
    assert len(await warned()) == 1
