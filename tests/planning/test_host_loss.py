"""Host-loss failover in the pure planner (planning/features/host_loss.py, docs/design.md §4
rules 8a and 8b):
node facts and readiness history in, slice deletions (grace 0 on a lost node), the slice's
state, its Event and the timed requeue out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from raycluster_operator.planning import ClusterState, PlanOptions, SliceState, plan_pass
from raycluster_operator.planning.features.host_loss import node_loss
from raycluster_operator.planning.reasons import CreateReason, DeleteReason
from raycluster_operator.planning.slice_state import FAULTS, is_valid
from tests.harness.objects import Obj

from .cluster import cluster, cluster_obj, plan_for, worker_group
from .world import BASE, make_pod, stamp, suffixes

NOW = BASE + timedelta(seconds=1000)


def node(name: str, ready: str = "True", taints: list[Obj] | None = None) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady"}]},
    }


def slice_pods(name: str = "workers-abcde", index: int = 0, hosts: int = 4) -> list[Obj]:
    pods = []
    for h in range(hosts):
        pod = make_pod(
            f"p{index}-{h}", replica_index=index, replica_name=name, host_index=h, created=1
        )
        pod["spec"]["nodeName"] = f"n{index}-{h}"
        pods.append(pod)
    return pods


def unready(pod: Obj, *, started: int, lost: int) -> Obj:
    """Running, Ready=False since `lost`, the Ray container started at `started`."""
    pod["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "lastTransitionTime": stamp(lost)}
    ]
    pod["status"]["containerStatuses"] = [
        {"name": "ray-worker", "state": {"running": {"startedAt": stamp(started)}}}
    ]
    return pod


def plan(pods: list[Obj], nodes: dict[str, Obj], timeout: float = 60.0) -> Any:
    spec = cluster(worker_group(replicas=1, numOfHosts=4))
    return plan_for(
        spec,
        pods,
        [],
        now=NOW,
        new_suffix=suffixes(),
        nodes=nodes,
        unready_slice_timeout=timeout,
    )


def healthy_nodes(pods: list[Obj]) -> dict[str, Obj]:
    return {p["spec"]["nodeName"]: node(p["spec"]["nodeName"]) for p in pods}


def test_a_node_reads_lost_when_not_ready_unknown_or_tainted_no_execute() -> None:
    assert node_loss(node("a")) is None
    assert node_loss(node("a", "Unknown")) == "node a is Unknown (KubeletReady)"
    assert node_loss(node("a", "False")) == "node a is NotReady (KubeletReady)"
    for key in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"):
        tainted = node("a", taints=[{"key": key, "effect": "NoExecute"}])
        assert node_loss(tainted) == f"node a is tainted {key}:NoExecute"
        assert node_loss(node("a", taints=[{"key": key, "effect": "NoSchedule"}])) is None


def test_a_host_on_a_lost_node_breaks_its_whole_slice_and_goes_with_grace_0() -> None:
    pods = slice_pods()
    nodes = healthy_nodes(pods)
    nodes["n0-2"] = node("n0-2", "Unknown")
    result = plan(pods, nodes)
    by_pod = {d.name: d for d in result.deletes}
    assert set(by_pod) == {"p0-0", "p0-1", "p0-2", "p0-3"}
    assert {d.reason for d in by_pod.values()} == {DeleteReason.HOST_LOST}
    assert by_pod["p0-2"].grace_period_seconds == 0
    assert {by_pod[n].grace_period_seconds for n in ("p0-0", "p0-1", "p0-3")} == {None}
    # One Event for the slice, naming the host, its pod and its node; the pod is `related`.
    (event,) = [e for e in result.events if e.reason is DeleteReason.HOST_LOST]
    assert event.type == "Warning" and event.related == "p0-2"
    assert "host 2 (pod p0-2) is on a lost node: node n0-2 is Unknown" in event.message
    (move,) = result.transitions[:1]
    assert (move.source, move.target, move.cause) == (
        SliceState.BROKEN,
        SliceState.DELETING,
        DeleteReason.HOST_LOST,
    )
    (group,) = result.status["workerGroups"]
    assert group["brokenSlices"] == 1
    assert group["lastDeletion"]["reason"] == "HostLost"
    failure = next(
        c for c in result.status["conditions"] if c["type"] == "RayClusterReplicaFailure"
    )
    assert failure["reason"] == "HostLost"


def test_the_slice_comes_back_at_its_index_once_its_pods_are_gone() -> None:
    """Grace 0 frees the lost host's index at once; the replacement waits only for the
    healthy hosts' graceful exit, then takes index 0 again (rule 13)."""
    pods = slice_pods()
    for pod in pods[:3]:
        pod["metadata"]["deletionTimestamp"] = stamp(1010)
    terminating = plan(pods[:3], healthy_nodes(pods))
    assert not [c for c in terminating.creates if c.group == "workers"]
    back = [c for c in plan([], {}).creates if c.group == "workers"]
    assert {c.replica_index for c in back} == {0}
    assert {c.reason for c in back} == {CreateReason.SCALE_UP}


def test_a_terminating_pod_on_a_lost_node_is_removed_at_once() -> None:
    pods = slice_pods()
    for pod in pods:
        pod["metadata"]["deletionTimestamp"] = stamp(1030)
        pod["metadata"]["deletionGracePeriodSeconds"] = 30
    nodes = healthy_nodes(pods)
    nodes["n0-0"] = node(
        "n0-0", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]
    )
    result = plan(pods, nodes)
    assert [(d.name, d.grace_period_seconds) for d in result.deletes] == [("p0-0", 0)]
    # Done once: a pod already deleted with grace 0 is not deleted again.
    pods[0]["metadata"]["deletionGracePeriodSeconds"] = 0
    assert not plan(pods, nodes).deletes


def test_a_host_unready_after_being_ready_breaks_its_slice_after_the_timeout() -> None:
    pods = slice_pods()
    unready(pods[1], started=100, lost=1000 - 61)
    result = plan(pods, healthy_nodes(pods))
    assert {d.reason for d in result.deletes} == {DeleteReason.HOST_UNREADY}
    assert all(d.grace_period_seconds is None for d in result.deletes)
    (event,) = [e for e in result.events if e.reason is DeleteReason.HOST_UNREADY]
    assert event.related == "p0-1"
    assert "host 1 (pod p0-1) on node n0-1 has not been Ready since" in event.message


def test_before_the_timeout_the_plan_asks_to_look_again_when_it_runs_out() -> None:
    pods = slice_pods()
    unready(pods[1], started=100, lost=1000 - 20)
    unready(pods[3], started=100, lost=1000 - 50)
    result = plan(pods, healthy_nodes(pods))
    assert not result.deletes
    assert result.requeue_after == 10.0


def test_a_host_never_ready_is_left_to_start() -> None:
    """Ready=False since before the container started: it never was Ready."""
    pods = slice_pods()
    unready(pods[1], started=500, lost=400)
    result = plan(pods, healthy_nodes(pods))
    assert not result.deletes and result.requeue_after is None


def test_a_restarted_host_that_lost_readiness_during_its_previous_run_counts() -> None:
    pods = slice_pods()
    unready(pods[1], started=900, lost=800)
    pods[1]["status"]["containerStatuses"][0]["lastState"] = {
        "terminated": {"startedAt": stamp(100)}
    }
    assert {d.reason for d in plan(pods, healthy_nodes(pods)).deletes} == {
        DeleteReason.HOST_UNREADY
    }


def test_timeout_0_turns_failover_off() -> None:
    pods = slice_pods()
    unready(pods[1], started=100, lost=100)
    nodes = healthy_nodes(pods)
    nodes["n0-2"] = node("n0-2", "Unknown")
    result = plan(pods, nodes, timeout=0)
    assert not result.deletes and result.requeue_after is None


def test_the_pass_hands_nodes_in_and_the_requeue_out() -> None:
    pods = slice_pods()
    unready(pods[0], started=100, lost=1000 - 55)
    obj = cluster_obj(worker_group(replicas=1, numOfHosts=4))
    state = ClusterState(cluster=obj, pods=pods, nodes=healthy_nodes(pods))
    passed = plan_pass(state, now=NOW, new_suffix=suffixes(), options=PlanOptions())
    assert passed.requeue_after == 5.0
    off = plan_pass(
        state, now=NOW, new_suffix=suffixes(), options=PlanOptions(unready_slice_timeout=0)
    )
    assert off.requeue_after is None


def test_host_loss_faults_are_table_faults() -> None:
    for cause in (DeleteReason.HOST_LOST, DeleteReason.HOST_UNREADY):
        assert cause in FAULTS and cause.is_warning
        for source in (SliceState.PENDING, SliceState.READY):
            assert is_valid(source, SliceState.BROKEN, cause)
        assert is_valid(SliceState.BROKEN, SliceState.DELETING, cause)
        assert not is_valid(SliceState.READY, SliceState.DELETING, cause)
