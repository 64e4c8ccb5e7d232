"""Rule 13d (docs/design.md §4): under Kueue's Topology Aware Scheduling (the group's template
carries Kueue's topology gate), a group creates one slice at a time, the next once Kueue's
ungater has placed every pod of the last; without the gate nothing is held."""

from __future__ import annotations

from typing import Any

from raycluster_operator.api import labels

from .cluster import Loop, cluster, worker_group

GATE = {"name": labels.KUEUE_TOPOLOGY_GATE}


def gated_group(**fields: Any) -> dict[str, Any]:
    group = worker_group(numOfHosts=2, replicas=3, **fields)
    group["template"]["spec"]["schedulingGates"] = [dict(GATE)]
    return group


def worker_indices(loop: Loop) -> list[int]:
    plan = loop.plan()
    loop.apply(plan)
    return sorted(
        c.replica_index
        for c in plan.creates
        if c.group == "workers" and c.replica_index is not None
    )


def ungate(loop: Loop) -> None:
    """What Kueue's ungater does: the gate goes from every pod."""
    for pod in loop.world.pods.values():
        pod["spec"] = {**pod["spec"], "schedulingGates": []}


def test_slices_are_created_one_at_a_time_while_kueue_places_them() -> None:
    loop = Loop(cluster(gated_group()))
    assert worker_indices(loop) == [0, 0]  # one slice, both its hosts
    assert worker_indices(loop) == []  # its pods still wait for the ungater
    ungate(loop)
    assert worker_indices(loop) == [1, 1]
    ungate(loop)
    assert worker_indices(loop) == [2, 2]
    ungate(loop)
    assert worker_indices(loop) == []  # all three there
    assert len([p for p in loop.world.pods.values() if "workers" in p["metadata"]["name"]]) == 6


def test_a_gated_pod_that_went_away_holds_nothing() -> None:
    loop = Loop(cluster(gated_group()))
    assert worker_indices(loop) == [0, 0]
    for pod in loop.world.pods.values():
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    # The terminating pods no longer count: the next slice is not held by them.
    assert worker_indices(loop)


def test_without_kueues_gate_every_slice_comes_in_one_pass() -> None:
    loop = Loop(cluster(worker_group(numOfHosts=2, replicas=3)))
    assert worker_indices(loop) == [0, 0, 1, 1, 2, 2]
