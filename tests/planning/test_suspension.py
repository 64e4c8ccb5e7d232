"""Suspension is one-way until every pod is gone; never two live heads (docs/design.md
§4, rules 4-5). Pure planner scenarios; tests/operator/test_parity_suspend.py proves the same
through the dev cluster with kubectl and real finalizers."""

from __future__ import annotations

from raycluster_operator.api import labels
from raycluster_operator.api.models import load_cluster
from raycluster_operator.planning import CreateReason, DeleteReason

from .cluster import Loop, cluster, cluster_obj, worker_group
from .world import World


def conditions(status: dict[str, object]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}  # type: ignore[attr-defined]


def running(loop: Loop) -> Loop:
    loop.settle()
    return loop


def test_resume_while_pods_terminate_keeps_suspending_and_creates_nothing() -> None:
    loop = running(Loop(cluster(worker_group(numOfHosts=2, replicas=1))))
    loop.world.held = set(loop.world.pods)  # a finalizer on every pod
    loop.respec(cluster_obj(worker_group(numOfHosts=2, replicas=1), suspend=True))
    plan = loop.plan()
    assert {d.reason for d in plan.deletes} == {DeleteReason.CLUSTER_SUSPENDED}
    loop.apply(plan)
    # The user resumes at once; the pods are still there, held terminating.
    loop.respec(cluster_obj(worker_group(numOfHosts=2, replicas=1)))
    for _ in range(3):
        plan = loop.plan()
        assert not plan.creates and not plan.deletes
        assert conditions(plan.status)["RayClusterSuspending"] == "True"
        assert conditions(plan.status)["RayClusterSuspended"] == "False"
        loop.apply(plan)
    loop.world.held.clear()
    loop.apply(loop.plan())  # the held pods vanish on this step
    assert not loop.world.pods
    plan = loop.plan()
    # Every pod is gone and the spec says resume: the cluster starts again.
    assert plan.creates[0].reason is CreateReason.HEAD_MISSING
    assert conditions(plan.status)["RayClusterSuspending"] == "False"
    assert conditions(plan.status)["RayClusterSuspended"] == "False"
    loop.apply(plan)
    loop.settle()


def test_a_restarted_operator_continues_a_suspension_from_the_status() -> None:
    loop = running(Loop(cluster(worker_group(numOfHosts=2, replicas=1))))
    loop.world.held = set(loop.world.pods)
    loop.respec(cluster_obj(worker_group(numOfHosts=2, replicas=1), suspend=True))
    loop.apply(loop.plan())
    resumed = load_cluster(cluster_obj(worker_group(numOfHosts=2, replicas=1)))
    resumed.status = loop.cluster.status
    # A new process: same world, only the stored status to go by.
    restarted = Loop(resumed, loop.world)
    plan = restarted.plan()
    assert not plan.creates
    assert conditions(plan.status)["RayClusterSuspending"] == "True"


def test_suspension_ends_in_suspended_when_the_spec_still_says_so() -> None:
    loop = running(Loop(cluster(worker_group(numOfHosts=2, replicas=1))))
    loop.respec(cluster_obj(worker_group(numOfHosts=2, replicas=1), suspend=True))
    final = loop.settle()
    assert conditions(final.status)["RayClusterSuspended"] == "True"
    assert conditions(final.status)["RayClusterSuspending"] == "False"


def test_a_suspended_group_is_one_way_too() -> None:
    loop = running(Loop(cluster(worker_group(numOfHosts=2, replicas=1))))
    loop.world.held = {
        n
        for n, p in loop.world.pods.items()
        if p["metadata"]["labels"][labels.NODE_TYPE] == "worker"
    }
    loop.respec(cluster_obj(worker_group(numOfHosts=2, replicas=1, suspend=True)))
    plan = loop.plan()
    assert {d.reason for d in plan.deletes} == {DeleteReason.GROUP_SUSPENDED}
    assert plan.status["workerGroups"][0]["suspending"] is True
    loop.apply(plan)
    loop.respec(cluster_obj(worker_group(numOfHosts=2, replicas=1)))
    plan = loop.plan()
    assert not plan.creates
    assert plan.status["workerGroups"][0]["suspending"] is True
    loop.apply(plan)
    loop.world.held.clear()
    loop.apply(loop.plan())
    plan = loop.plan()
    assert [c.group for c in plan.creates] == ["workers", "workers"]
    assert "suspending" not in plan.status["workerGroups"][0]


def test_a_failed_head_is_replaced_only_once_its_pod_is_gone() -> None:
    loop = running(Loop(cluster(worker_group(replicas=1))))
    head = next(
        n for n, p in loop.world.pods.items() if p["metadata"]["labels"][labels.NODE_TYPE] == "head"
    )
    loop.world.pods[head]["status"]["phase"] = "Failed"
    loop.world.held = {head}
    plan = loop.plan()
    assert [d.reason for d in plan.deletes] == [DeleteReason.HEAD_FAILED]
    assert not plan.creates
    loop.apply(plan)
    assert not [c for c in loop.plan().creates if c.group == labels.HEAD_GROUP]
    loop.world.held.clear()
    loop.apply(loop.plan())
    assert [c.reason for c in loop.plan().creates] == [CreateReason.HEAD_MISSING]


def test_a_deleted_head_is_not_replaced_while_it_terminates() -> None:
    world = World()
    loop = running(Loop(cluster(worker_group(replicas=1)), world))
    head = next(
        n for n, p in world.pods.items() if p["metadata"]["labels"][labels.NODE_TYPE] == "head"
    )
    world.held = {head}
    world.step([head])  # deleted by someone: terminating, held by a finalizer
    assert not [c for c in loop.plan().creates if c.group == labels.HEAD_GROUP]
