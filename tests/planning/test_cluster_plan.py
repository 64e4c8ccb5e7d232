"""The whole-cluster plan: head, services, suspend, invalid specs, events and status."""

from __future__ import annotations

from raycluster_operator.api import labels
from raycluster_operator.planning import CreateReason, DeleteReason
from raycluster_operator.planning.status import INVALID_SPEC

from .cluster import Loop, cluster, cluster_obj, worker_group
from .world import World, make_pod


def conditions(status: dict[str, object]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}  # type: ignore[attr-defined]


def test_a_new_cluster_gets_a_head_its_slices_and_both_services() -> None:
    plan = Loop(cluster(worker_group(numOfHosts=2, replicas=2))).plan()
    assert plan.creates[0].reason is CreateReason.HEAD_MISSING
    assert plan.creates[0].group == labels.HEAD_GROUP
    workers = [c for c in plan.creates if c.group == "workers"]
    assert sorted((c.replica_index, c.host_index) for c in workers) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
    assert plan.missing_services == ("demo-head-svc", "demo-headless")
    assert not plan.is_empty


def test_single_host_clusters_get_no_headless_service() -> None:
    plan = Loop(cluster(worker_group(replicas=1))).plan()
    assert plan.missing_services == ("demo-head-svc",)


def test_autoscaling_adds_rbac_objects() -> None:
    plan = Loop(cluster(worker_group(replicas=1), enableInTreeAutoscaling=True)).plan()
    assert plan.extra_objects
    assert not Loop(cluster(worker_group(replicas=1))).plan().extra_objects


def test_converged_cluster_plans_nothing_and_repeats_its_status_exactly() -> None:
    loop = Loop(cluster(worker_group(numOfHosts=4, replicas=2)))
    settled = loop.settle()
    loop.cluster.status = type(loop.cluster.status).model_validate(settled.status)  # type: ignore[union-attr]
    again = loop.plan()  # a later `now`
    assert again.is_empty and not again.events
    assert again.status == settled.status
    assert again.status["state"] == "ready"
    assert conditions(again.status)["HeadPodReady"] == "True"


def test_pods_of_other_clusters_namespaces_and_unknown_kinds_are_never_touched() -> None:
    foreign = [
        make_pod("other-cluster", cluster="other"),
        make_pod("other-ns", namespace="elsewhere"),
        make_pod("no-group", group=None),
        make_pod("not-a-node", node_type="something"),
    ]
    loop = Loop(cluster(worker_group(replicas=1)), World.of(foreign))
    for _ in range(4):
        plan = loop.plan()
        assert not {d.name for d in plan.deletes} & {p["metadata"]["name"] for p in foreign}
        loop.apply(plan)
    assert all(p["metadata"]["name"] in loop.world.pods for p in foreign)


def test_pods_of_a_removed_group_are_deleted() -> None:
    loop = Loop(cluster(worker_group(replicas=1)), World.of([make_pod("old", group="gone")]))
    plan = loop.plan()
    assert {d.name: d.reason for d in plan.deletes} == {"old": DeleteReason.GROUP_REMOVED}


def test_failed_head_is_deleted_then_recreated_once_it_is_gone() -> None:
    head = make_pod("head", group=labels.HEAD_GROUP, node_type="head", state="failed")
    loop = Loop(cluster(), World.of([head]))
    first = loop.plan()
    assert [(d.name, d.reason) for d in first.deletes] == [("head", DeleteReason.HEAD_FAILED)]
    assert not first.creates
    loop.apply(first)
    # Still terminating: never two heads, so no replacement yet (docs/design.md §4, rules 4-5).
    second = loop.plan()
    assert not second.creates
    loop.apply(second)  # the old head vanishes
    third = loop.plan()
    assert [c.reason for c in third.creates] == [CreateReason.HEAD_MISSING]


def test_an_invalid_group_is_left_alone_while_others_proceed() -> None:
    bad = worker_group("bad", numOfHosts=0, replicas=1)
    world = World.of([make_pod("bad-pod", group="bad", state="failed")])
    loop = Loop(cluster(bad, worker_group(replicas=1)), world)
    plan = loop.plan()
    assert plan.problems and plan.problems[0].path.startswith("spec.workerGroupSpecs[0]")
    assert "bad-pod" not in {d.name for d in plan.deletes}
    assert {c.group for c in plan.creates} == {labels.HEAD_GROUP, "workers"}
    assert conditions(plan.status)[INVALID_SPEC] == "True"
    assert [e.reason for e in plan.events if e.type == "Warning"] == ["InvalidSpec"]


def test_an_invalid_cluster_touches_nothing_and_warns_once() -> None:
    obj = cluster_obj(worker_group(replicas=1))
    obj["metadata"]["name"] = "Not_Valid"
    from raycluster_operator.api.models import load_cluster

    world = World.of([make_pod("w", cluster="Not_Valid", state="failed")])
    loop = Loop(load_cluster(obj), world)
    plan = loop.plan()
    assert not plan.creates and not plan.deletes and not plan.services
    assert plan.status["state"] == "failed"
    assert [e.reason for e in plan.events] == ["InvalidSpec"]
    loop.apply(plan)
    assert not loop.plan().events  # the same problems are not announced again


def test_suspend_removes_everything_then_reports_suspended() -> None:
    loop = Loop(cluster(worker_group(numOfHosts=2, replicas=1)))
    loop.settle()
    loop.respec(cluster_obj(worker_group(numOfHosts=2, replicas=1), suspend=True))
    plan = loop.plan()
    assert {d.reason for d in plan.deletes} == {DeleteReason.CLUSTER_SUSPENDED}
    assert len(plan.deletes) == 3
    assert conditions(plan.status)["RayClusterSuspending"] == "True"
    loop.apply(plan)
    final = loop.settle()
    assert final.status["state"] == "suspended"
    assert conditions(final.status)["RayClusterSuspended"] == "True"


def test_broken_replicas_reach_events_and_the_replica_failure_condition() -> None:
    loop = Loop(cluster(worker_group(numOfHosts=2, replicas=1)))
    loop.settle()
    victim = next(
        p for p in loop.world.pods.values() if p["metadata"]["labels"][labels.NODE_TYPE] == "worker"
    )
    victim["status"]["phase"] = "Failed"
    plan = loop.plan()
    assert {d.reason for d in plan.deletes} == {DeleteReason.HOST_FAILED}
    warnings = [e for e in plan.events if e.type == "Warning"]
    assert [e.reason for e in warnings] == ["HostFailed"]  # one Event for the whole replica
    condition = next(
        c for c in plan.status["conditions"] if c["type"] == "RayClusterReplicaFailure"
    )
    assert (condition["status"], condition["reason"]) == ("True", "HostFailed")


def test_condition_transition_time_moves_only_when_status_flips() -> None:
    loop = Loop(cluster(worker_group(replicas=1)))
    first = loop.plan()
    loop.apply(first)
    head_ready = {c["type"]: c for c in first.status["conditions"]}["HeadPodReady"]
    assert head_ready["status"] == "False"
    second = loop.plan()
    after = {c["type"]: c for c in second.status["conditions"]}["HeadPodReady"]
    assert after["status"] == "True"
    assert after["lastTransitionTime"] > head_ready["lastTransitionTime"]
    loop.apply(second)
    third = {c["type"]: c for c in loop.plan().status["conditions"]}["HeadPodReady"]
    assert third["lastTransitionTime"] == after["lastTransitionTime"]


def test_status_counts_pods_and_resources_like_kuberay() -> None:
    loop = Loop(cluster(worker_group(numOfHosts=4, replicas=2)))
    status = loop.settle().status
    assert status["desiredWorkerReplicas"] == 8
    assert status["readyWorkerReplicas"] == 8 and status["availableWorkerReplicas"] == 8
    assert status["desiredCPU"] == "9" and status["desiredMemory"] == "9Gi"
    assert status["workerGroups"] == [
        {
            "groupName": "workers",
            "numOfHosts": 4,
            "desiredSlices": 2,
            "readySlices": 2,
            "brokenSlices": 0,
            "desiredPods": 8,
            "readyPods": 8,
            "updatedSlices": 2,
        }
    ]
    assert status["observedGeneration"] == 1


def test_the_last_deletion_of_a_group_stays_in_the_status_after_healing() -> None:
    loop = Loop(cluster(worker_group(numOfHosts=2, replicas=1)))
    loop.settle()
    victim = next(
        p for p in loop.world.pods.values() if p["metadata"]["labels"][labels.NODE_TYPE] == "worker"
    )
    victim["status"]["phase"] = "Failed"
    loop.apply(loop.plan())
    healed = loop.settle()
    last = healed.status["workerGroups"][0]["lastDeletion"]
    assert (last["reason"], last["pods"]) == ("HostFailed", 2)
    loop.apply(healed)
    assert loop.plan().status == healed.status


def test_a_terminating_host_names_how_many_pods_its_slice_deletion_takes() -> None:
    """`kubectl delete pod` of one host of a 2-host slice: the other host is the one pod
    deleted, and the Event counts it as every other deletion Event does (issue 38 item 3)."""
    loop = Loop(cluster(worker_group(numOfHosts=2, replicas=1)))
    loop.settle()
    victim = next(
        p for p in loop.world.pods.values() if p["metadata"]["labels"][labels.NODE_TYPE] == "worker"
    )
    victim["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    plan = loop.plan()
    assert {d.reason for d in plan.deletes} == {DeleteReason.HOST_TERMINATING}
    (event,) = [e for e in plan.events if e.reason == "HostTerminating"]
    assert "(1 pod)" in event.message, event.message
