"""Rule 2a: a stand-in plays KubeRay's operator on one of our clusters. The operator deletes
none of its pods, writes nothing more to that cluster once it has said so (one condition, one
Warning Event), and resumes by itself when the stand-in's pods are gone. Nothing of that is
remembered in memory, so a restart of the operator (clean or a crash) writes and warns no
more: one status write and one Warning across any number of restarts."""

from __future__ import annotations

from typing import Any

import pytest
from kuberay_crd import kuberay_crd

from raycluster_operator.kube import EVENTS, PODS
from tests.harness.operator_world import World, cpu_group, eventually, raycluster, running_world

KUBERAY = "kuberay-operator"


def reconciles(op: Any) -> float:
    """Passes the operator finished, whatever their outcome (the barrier of this test)."""
    return sum(
        sample.value
        for metric in op.manager.controller.metrics.reconciles.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
    )


def kuberay_worker(cluster: dict[str, Any], name: str) -> dict[str, Any]:
    """A worker pod as KubeRay's operator makes it: its labels and a controller reference."""
    meta = cluster["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {
                "ray.io/cluster": meta["name"],
                "ray.io/group": "w",
                "ray.io/node-type": "worker",
                "ray.io/is-ray-node": "yes",
                "ray.io/identifier": f"{meta['name']}-worker",
                "app.kubernetes.io/name": "kuberay",
                "app.kubernetes.io/created-by": KUBERAY,
            },
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": "RayCluster",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]},
    }


def conflict_condition(cluster: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "ControllerConflict"), None)


async def test_the_operator_stands_back_while_another_controller_acts(world: World) -> None:
    op = await world.start_operator()
    await world.apply(raycluster("both", [cpu_group("w", replicas=1)]))

    async def converged() -> None:
        assert len(await world.workers("both")) == 1
        assert (await world.get_cluster("both")).get("status", {}).get("conditions")

    await eventually(converged)
    cluster = await world.get_cluster("both")
    await world.kube.create(PODS, kuberay_worker(cluster, "both-w-worker-kuber"), "default")

    async def raised() -> None:
        condition = conflict_condition(await world.get_cluster("both"))
        assert condition is not None and condition["status"] == "True"
        assert KUBERAY in condition["message"] and "--watch-namespace" in condition["message"]
        events = (await world.kube.list(EVENTS, "default")).items
        warned = [e for e in events if e["reason"] == "ControllerConflict"]
        assert len(warned) == 1 and warned[0]["type"] == "Warning"
        assert KUBERAY in warned[0].get("note", warned[0].get("message", ""))

    await eventually(raised)
    writes, passes = op.writes, reconciles(op)
    # A spec change asks for a pass that, without the conflict, would create a worker and
    # delete the stand-in's pod (it has no replica identity: rule 9).
    await world.patch_spec("both", {"workerGroupSpecs": [cpu_group("w", replicas=2)]})

    async def passed_twice() -> None:
        assert reconciles(op) >= passes + 2

    await eventually(passed_twice)
    assert op.writes == writes
    pods = await world.pods("both")
    assert "both-w-worker-kuber" in {p["metadata"]["name"] for p in pods}
    assert len(await world.workers("both")) == 2  # ours (1) and the stand-in's

    await world.kube.delete(PODS, "default", "both-w-worker-kuber", grace_period=0)

    async def resumed() -> None:
        assert conflict_condition(await world.get_cluster("both")) is None
        ours = await world.workers("both")
        assert len(ours) == 2
        assert all(p["metadata"]["labels"]["app.kubernetes.io/created-by"] != KUBERAY for p in ours)

    await eventually(resumed)


@pytest.mark.parametrize("crd", ["ours", "kuberay"])
async def test_restarts_neither_write_nor_warn_again(crd: str) -> None:
    """The condition on the object is the only memory of rule 2a: an operator that starts
    (after a clean stop, then after a crash) finds it current and passes without a write,
    under our CRD and under KubeRay's (where that operator would be installed)."""
    async with running_world(crd=kuberay_crd() if crd == "kuberay" else None) as world:
        await _restarts_neither_write_nor_warn_again(world)


async def _restarts_neither_write_nor_warn_again(world: World) -> None:
    op = await world.start_operator()
    await world.apply(raycluster("held", [cpu_group("w", replicas=1)]))

    async def converged() -> None:
        assert len(await world.workers("held")) == 1

    await eventually(converged)
    cluster = await world.get_cluster("held")
    await world.kube.create(PODS, kuberay_worker(cluster, "held-w-worker-kuber"), "default")

    async def warnings() -> list[dict[str, Any]]:
        events = (await world.kube.list(EVENTS, "default")).items
        return [e for e in events if e["reason"] == "ControllerConflict"]

    async def raised() -> None:
        condition = conflict_condition(await world.get_cluster("held"))
        assert condition is not None and condition["status"] == "True"
        assert len(await warnings()) == 1

    await eventually(raised)
    await world.reconciled("held", passes=2)
    stored = await world.get_cluster("held")
    pods = {p["metadata"]["uid"] for p in await world.pods("held")}

    for restart in ("stop", "crash"):
        await (op.stop() if restart == "stop" else op.crash())
        op = await world.start_operator()
        await world.reconciled("held", passes=3)  # the barrier: it has seen the cluster
        assert op.writes == 0, restart
        now = await world.get_cluster("held")
        assert now["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        assert conflict_condition(now) == conflict_condition(stored)
        assert len(await warnings()) == 1, restart
        assert {p["metadata"]["uid"] for p in await world.pods("held")} == pods
