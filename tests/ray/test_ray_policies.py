"""Operator policies the autoscaler relies on: hands off replicas, suspend removes slices."""

from __future__ import annotations

from typing import Any

HOSTS = 4


def _reconciled(world: Any, ns: str, name: str) -> bool:
    obj = world.get_cluster(ns, name)
    status = obj.get("status") or {}
    return bool(status.get("observedGeneration") == obj["metadata"].get("generation"))


def test_lowering_replicas_without_workers_to_delete_deletes_nothing(
    world: Any, ns: str, kit: Any
) -> None:
    world.create_cluster(
        ns,
        kit.raycluster(
            "keep",
            kit.tpu_group("tpu", replicas=2, max_replicas=3),
            kit.cpu_group("cpu", replicas=2),
        ),
    )
    pods_of = lambda: {p["metadata"]["name"] for p in world.pods(ns, "keep")}  # noqa: E731
    world.wait(
        "two slices and two cpu workers",
        lambda: (
            len(kit.complete_slices(world.pods(ns, "keep"), "tpu", HOSTS)) == 2
            and len(kit.workers(world.pods(ns, "keep"), "cpu")) == 2
        ),
    )
    before = pods_of()

    world.patch_cluster(
        ns,
        "keep",
        [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
            {"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 0},
        ],
        kind="json",
    )
    world.wait("the operator to observe the change", lambda: _reconciled(world, ns, "keep"))
    assert pods_of() == before
    assert not any(kit.is_terminating(p) for p in world.pods(ns, "keep"))

    # v2 restores replicas from what it observes on its next request.
    provider = world.v2_provider(ns, "keep")
    provider.launch({"cpu": 1}, "one-more")
    assert provider.poll_errors() == []
    groups = world.get_cluster(ns, "keep")["spec"]["workerGroupSpecs"]
    assert (groups[0]["replicas"], groups[1]["replicas"]) == (2, 3)


def test_suspending_a_group_removes_its_slices(world: Any, ns: str, kit: Any) -> None:
    tpu, cpu = kit.tpu_group(replicas=2, max_replicas=2), kit.cpu_group(replicas=1)
    world.create_cluster(ns, kit.raycluster("susp", tpu, cpu))
    world.wait(
        "two slices and a cpu worker",
        lambda: (
            len(kit.complete_slices(world.pods(ns, "susp"), "tpu", HOSTS)) == 2
            and len(kit.workers(world.pods(ns, "susp"), "cpu")) == 1
        ),
    )
    provider = world.v2_provider(ns, "susp")

    suspend = {"op": "add", "path": "/spec/workerGroupSpecs/0/suspend", "value": True}
    world.patch_cluster(ns, "susp", [suspend], kind="json")
    world.wait(
        "every tpu pod terminating", lambda: not world.live_names(ns, "susp", "tpu"), timeout=5
    )
    by_type: dict[str, int] = {}
    for node in provider.get_non_terminated().values():
        by_type[node.node_type] = by_type.get(node.node_type, 0) + 1
    assert by_type == {"headgroup": 1, "cpu": 1}
    world.wait(
        "status without the suspended group",
        lambda: (
            (world.get_cluster(ns, "susp").get("status") or {}).get("desiredWorkerReplicas") == 1
        ),
    )
    assert len(kit.workers(world.pods(ns, "susp"), "cpu")) == 1
