"""Rule 13c in the pure planner: new slices are fitted to the namespace's quotas in plan
order, whole or not at all; a waiting slice is in status and one Warning Event; holds from
the executor keep a group's slices back until they end or (a pod refused as built) the
template changes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from raycluster_operator.api.models import dump_cluster, load_cluster
from raycluster_operator.planning import ClusterState, PlanContext, PlanOptions, plan_cluster
from raycluster_operator.planning.quota import AdmissionHold, hold_object
from raycluster_operator.planning.reasons import HoldReason

from .cluster import cluster, worker_group
from .world import BASE, suffixes

GPU = {"nvidia.com/gpu": "4", "cpu": "1"}


def gpu_group(replicas: int, hosts: int = 2) -> dict[str, Any]:
    group = worker_group("gpu", replicas=replicas, numOfHosts=hosts)
    group["template"]["spec"]["containers"][0]["resources"] = {"requests": GPU, "limits": GPU}
    return group


def quota(hard: dict[str, str], used: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "q", "namespace": "default"},
        "spec": {"hard": hard, **spec},
        "status": {"hard": hard, "used": used or {k: "0" for k in hard}},
    }


def plan(spec: Any, objects: dict[str, Any], before: dict[str, Any] | None = None) -> Any:
    obj = dump_cluster(spec)
    if before is not None:
        obj["status"] = before
    state = ClusterState(obj, objects=objects)
    options = PlanOptions(unready_slice_timeout=0.0)
    return plan_cluster(load_cluster(obj), PlanContext(state, BASE, suffixes(), options))


def slices(p: Any) -> set[int | None]:
    return {c.replica_index for c in p.creates if c.group == "gpu"}


def test_slices_that_fit_are_created_and_the_rest_wait_whole() -> None:
    spec = cluster(gpu_group(3))
    p = plan(spec, {"ResourceQuota": [quota({"requests.nvidia.com/gpu": "16"})]})
    assert slices(p) == {0, 1}  # 8 GPUs a slice: two fit, the third waits whole
    assert len([c for c in p.creates if c.group == "gpu"]) == 4
    group = p.status["workerGroups"][0]
    assert group["quotaWaiting"] == [2]
    cond = next(c for c in p.status["conditions"] if c["type"] == "SliceQuotaExceeded")
    assert cond["status"] == "True" and cond["reason"] == "SliceQuotaExceeded"
    expected = (
        "group gpu: slice at index 2 (2 hosts) waits, not created: exceeded quota: q, "
        "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16, "
        "limited: requests.nvidia.com/gpu=16; missing requests.nvidia.com/gpu=8"
    )
    assert cond["message"] == expected
    warnings = [e for e in p.events if e.reason == HoldReason.SLICE_QUOTA_EXCEEDED]
    assert [e.message for e in warnings] == [expected] and warnings[0].type == "Warning"
    assert not any("at index 2" in e.message and "creating" in e.message for e in p.events)
    # The same wait again: no new Event (it is in the condition already).
    again = plan(spec, {"ResourceQuota": [quota({"requests.nvidia.com/gpu": "16"})]}, p.status)
    assert not [e for e in again.events if e.reason == HoldReason.SLICE_QUOTA_EXCEEDED]


def test_used_quota_counts_and_object_counts_and_scopes() -> None:
    spec = cluster(gpu_group(2))
    used = quota({"count/pods": "4"}, {"count/pods": "1"})
    assert slices(plan(spec, {"ResourceQuota": [used]})) == {0}  # head 1 + 2 + (2 > 4)
    scoped = quota({"pods": "1"}, scopes=["BestEffort"])
    assert slices(plan(spec, {"ResourceQuota": [scoped]})) == {0, 1}  # our pods request cpu


def test_without_quotas_nothing_is_checked_and_no_condition_appears() -> None:
    p = plan(cluster(gpu_group(3)), {})
    assert slices(p) == {0, 1, 2}
    assert not any(c["type"] == "SliceQuotaExceeded" for c in p.status["conditions"])


def test_once_quota_frees_the_condition_turns_false() -> None:
    spec = cluster(gpu_group(3))
    first = plan(spec, {"ResourceQuota": [quota({"requests.nvidia.com/gpu": "16"})]})
    later = plan(spec, {"ResourceQuota": [quota({"requests.nvidia.com/gpu": "32"})]}, first.status)
    assert slices(later) == {0, 1, 2}
    cond = next(c for c in later.status["conditions"] if c["type"] == "SliceQuotaExceeded")
    assert cond["status"] == "False" and cond["reason"] == "QuotaAvailable"
    assert "quotaWaiting" not in later.status["workerGroups"][0]


def test_a_hold_keeps_the_group_back_until_it_ends_or_the_template_changes() -> None:
    spec = cluster(gpu_group(1))
    hold = AdmissionHold(BASE + timedelta(seconds=30), HoldReason.POD_REJECTED, "refused", "x")
    objects = {"AdmissionHold": [hold_object("gpu", hold)]}
    # The hold's template "x" is not the group's: the fix gets a try at once.
    assert slices(plan(spec, objects)) == {0}
    first = plan(spec, {})
    template = first.creates[-1].manifest["metadata"]["annotations"]["ray.io/pod-template-hash"]
    held = AdmissionHold(BASE + timedelta(seconds=30), HoldReason.POD_REJECTED, "refused", template)
    p = plan(spec, {"AdmissionHold": [hold_object("gpu", held)]})
    assert slices(p) == set()
    cond = next(c for c in p.status["conditions"] if c["type"] == "SliceQuotaExceeded")
    assert cond["reason"] == "PodRejected" and "refused" in cond["message"]
    assert p.requeue_after is not None and 29 <= p.requeue_after <= 30
    expired = AdmissionHold(BASE - timedelta(seconds=1), HoldReason.POD_REJECTED, "old", template)
    assert slices(plan(spec, {"AdmissionHold": [hold_object("gpu", expired)]})) == {0}
