"""Events on the RayCluster say why each slice went, through the real kubectl: the README
quickstart's ``kubectl get events --field-selector involvedObject.kind=RayCluster`` shows the
deletion reason, the slice's name and index, and the pod that triggered it, and the creation
of its replacement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from parity_kubectl import Kubectl

from tests.harness.operator_world import World, eventually, raycluster, tpu_group


def lbl(pod: dict[str, Any], key: str) -> str:
    return str(pod["metadata"]["labels"].get(key, ""))


async def test_a_lost_host_and_a_workers_to_delete_are_explained_on_the_raycluster(
    world: World, tmp_path: Path
) -> None:
    kubectl = Kubectl(world.cluster, tmp_path)
    await world.start_operator()
    await kubectl.apply(raycluster("ev", [tpu_group("tpu", replicas=2)]))

    async def two_slices() -> list[dict[str, Any]]:
        pods = [p for p in await kubectl.pods("ev") if lbl(p, "ray.io/node-type") == "worker"]
        assert len(pods) == 8 and all(p["status"].get("phase") == "Running" for p in pods)
        return pods

    pods = await eventually(two_slices, within=30)
    victim = next(p for p in pods if lbl(p, "ray.io/worker-group-replica-index") == "1")
    victim_name = victim["metadata"]["name"]
    slice_name = lbl(victim, "ray.io/worker-group-replica-name")

    # The quickstart's step: one host dies.
    await kubectl("delete", "pod", victim_name, "--wait=false")

    async def explained() -> None:
        text = await kubectl("get", "events", "--field-selector", "involvedObject.kind=RayCluster")
        line = next(
            (row for row in text.splitlines() if "HostTerminating" in row and slice_name in row),
            None,
        )
        assert line is not None, text
        assert "raycluster/ev" in line
        assert "group tpu" in line and "index 1" in line and victim_name in line
        # The replacement comes back at its own index once the old pods are gone.
        assert any(
            "creating slice" in row and "at index 1" in row and slice_name not in row
            for row in text.splitlines()[1:]
            if "ScaleUp" in row or "ReplaceReplica" in row
        ), text

    await eventually(explained, within=30)

    events = (
        await kubectl.json("get", "events", "--field-selector", "involvedObject.kind=RayCluster")
    )["items"]
    deletion = next(e for e in events if e["reason"] == "HostTerminating")
    assert deletion["involvedObject"]["name"] == "ev"
    assert deletion["type"] == "Warning"
    # No slice deletion is recorded on a pod any more: the RayCluster carries them all.
    on_pods = (await kubectl.json("get", "events", "--field-selector", "involvedObject.kind=Pod"))[
        "items"
    ]
    assert not [e for e in on_pods if e.get("reason") in ("HostTerminating", "WorkersToDelete")]

    # The autoscaler's way of removing a slice names one pod: the Event names it too.
    pods = await eventually(two_slices, within=30)
    named = next(p for p in pods if lbl(p, "ray.io/worker-group-replica-index") == "0")
    await kubectl.scale_down("ev", 1, [named["metadata"]["name"]])

    async def named_in_event() -> None:
        text = await kubectl("get", "events", "--field-selector", "involvedObject.kind=RayCluster")
        row = next((r for r in text.splitlines() if "WorkersToDelete" in r), None)
        assert row is not None, text
        assert named["metadata"]["name"] in row and "index 0" in row

    await eventually(named_in_event, within=30)
