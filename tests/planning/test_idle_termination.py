"""Ray's idle termination as the planner sees it: idleSuspend, and the Delete finalizer."""

from __future__ import annotations

from typing import Any

import jsonpatch

from raycluster_operator.planning import (
    IDLE_TERMINATION_FINALIZER,
    DeleteReason,
    plan_deletion,
)

from .cluster import Loop, cluster, cluster_obj, worker_group
from .world import make_pod


def test_idle_suspend_suspends_like_suspend() -> None:
    loop = Loop(cluster(worker_group(numOfHosts=2, replicas=1)))
    loop.settle()
    loop.respec(cluster_obj(worker_group(numOfHosts=2, replicas=1), idleSuspend=True))
    plan = loop.plan()
    assert {d.reason for d in plan.deletes} == {DeleteReason.CLUSTER_SUSPENDED}
    assert len(plan.deletes) == 3  # head and both hosts of the slice
    loop.apply(plan)
    assert loop.settle().status["state"] == "suspended"


def _deleted(finalizers: list[str]) -> dict[str, Any]:
    obj = cluster_obj(worker_group(replicas=1))
    obj["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=finalizers)
    return obj


def test_a_live_cluster_or_one_without_rays_finalizer_needs_no_cleanup() -> None:
    pods = [make_pod("w-0")]
    assert plan_deletion(cluster_obj(worker_group(replicas=1)), pods) is None
    assert plan_deletion(_deleted(["other.io/keep"]), pods) is None


def test_pods_go_first_and_only_those_of_the_cluster() -> None:
    pods = [
        make_pod("w-0"),
        make_pod("w-1", state="terminating"),
        make_pod("head", group="headgroup", node_type="head"),
        make_pod("stranger", cluster="other"),
        make_pod("elsewhere", namespace="other-ns"),
    ]
    plan = plan_deletion(_deleted([IDLE_TERMINATION_FINALIZER]), pods)
    assert plan is not None
    assert sorted(d.name for d in plan.deletes) == ["head", "w-0"]
    assert {d.reason for d in plan.deletes} == {DeleteReason.CLUSTER_DELETING}
    assert not plan.release_finalizer


def test_while_a_terminating_pod_remains_the_finalizer_stays() -> None:
    plan = plan_deletion(
        _deleted([IDLE_TERMINATION_FINALIZER]), [make_pod("w-1", state="terminating")]
    )
    assert plan is not None and not plan.deletes and not plan.release_finalizer


def test_with_no_pods_left_only_rays_finalizer_is_removed() -> None:
    obj = _deleted(["a.io/first", IDLE_TERMINATION_FINALIZER, "b.io/last"])
    plan = plan_deletion(obj, [make_pod("stranger", cluster="other")])
    assert plan is not None and not plan.deletes
    patched = jsonpatch.apply_patch(obj, list(plan.release_finalizer))
    assert patched["metadata"]["finalizers"] == ["a.io/first", "b.io/last"]
    assert patched["spec"] == obj["spec"]
    # A list changed meanwhile fails the guard instead of removing another finalizer.
    moved = _deleted([IDLE_TERMINATION_FINALIZER, "a.io/first", "b.io/last"])
    try:
        jsonpatch.apply_patch(moved, list(plan.release_finalizer))
    except jsonpatch.JsonPatchTestFailed:
        pass
    else:
        raise AssertionError("the test op did not guard the removal")
