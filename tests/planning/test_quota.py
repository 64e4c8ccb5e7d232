"""Rule 13c in the pure planner: new slices are fitted to the namespace's quotas in plan
order, whole or not at all; a waiting slice is in status and one Warning Event; holds from
the executor keep a group's slices back until they end or (a pod refused as built) the
template changes; a refusal mid-slice is settled by the planner (what to undo, how long to
hold), the executor only carries it out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from raycluster_operator.api.models import dump_cluster, load_cluster
from raycluster_operator.planning import ClusterState, PlanContext, PlanOptions, plan_cluster
from raycluster_operator.planning.actions import PodCreate
from raycluster_operator.planning.features.quota import (
    TEMPLATE_HASH,
    AdmissionHold,
    hold_after,
    hold_object,
    settle_creates,
    unit_positions,
)
from raycluster_operator.planning.reasons import CreateReason, DeleteReason, HoldReason

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


QUOTA_403 = 'pods "w" is forbidden: exceeded quota: q, requested: nvidia.com/gpu=4'
PSA_403 = 'pods "w" is forbidden: violates PodSecurity "baseline:latest": privileged'


def create(group: str, index: int | None, host: int | None = None) -> PodCreate:
    name = None if index is None else f"{group}-{index}"
    meta = {"annotations": {TEMPLATE_HASH: f"t-{group}"}}
    return PodCreate(group, index, name, host, CreateReason.SCALE_UP, {"metadata": meta})


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}"}}


def test_a_slices_hosts_are_one_unit_and_anything_else_stands_alone() -> None:
    creates = [create("headgroup", None), create("gpu", 0, 0), create("cpu", None)]
    creates += [create("gpu", 1, 0), create("gpu", 0, 1), create("gpu", 1, 1)]
    assert unit_positions(creates) == [[0], [1, 4], [2], [3, 5]]


def test_a_slice_refused_midway_is_undone_whole_and_held_once_per_group() -> None:
    creates = [create("gpu", i, h) for i in (0, 1, 2) for h in (0, 1)]
    creates.append(create("cpu", None))
    # Slice 0 whole; slices 1 and 2 each lose their second host to quota; the cpu pod fails
    # with something else (neither whole nor refused).
    made = [pod("a"), pod("b"), pod("c"), None, pod("e"), None, None]
    settled = settle_creates(creates, made, {3: QUOTA_403, 5: QUOTA_403})
    assert settled.whole == ()  # gpu was refused in this pass: its strikes are not forgiven
    (refusal,) = settled.refused
    assert refusal.group == "gpu" and refusal.message == QUOTA_403
    assert refusal.template == "t-gpu"
    undo = {(d.name, d.uid, d.replica_index, d.host_index) for d in refusal.undo}
    assert undo == {("c", "uid-c", 1, 0), ("e", "uid-e", 2, 0)}
    assert {d.reason for d in refusal.undo} == {DeleteReason.REPLICA_INCOMPLETE}
    assert all(QUOTA_403 in d.message for d in refusal.undo)


def test_a_group_created_whole_is_released_and_nothing_is_undone() -> None:
    creates = [create("gpu", 0, 0), create("gpu", 0, 1), create("tpu", 0, 0)]
    settled = settle_creates(creates, [pod("a"), pod("b"), None], {2: PSA_403})
    assert settled.whole == ("gpu",)
    assert [(r.group, r.undo) for r in settled.refused] == [("tpu", ())]


def test_holds_double_per_refusal_in_a_row_up_to_the_cap_by_kind() -> None:
    def wait(message: str, strikes: int) -> float:
        return (hold_after(message, "t", strikes, BASE).until - BASE).total_seconds()

    assert [wait(QUOTA_403, n) for n in (1, 2, 3, 7, 20)] == [5, 10, 20, 300, 300]
    assert [wait(PSA_403, n) for n in (1, 2, 4, 5)] == [30, 60, 240, 300]
    assert hold_after(QUOTA_403, "t", 1, BASE).reason == HoldReason.SLICE_QUOTA_EXCEEDED
    held = hold_after(PSA_403, "t", 1, BASE)
    assert held.reason == HoldReason.POD_REJECTED and held.template == "t"


def test_a_service_account_not_made_yet_is_a_race_held_briefly_not_a_spec_problem() -> None:
    """kube-apiserver's ServiceAccount admission refuses pods (403) in a namespace whose
    `default` account kube-controller-manager has not made yet; found on the real control
    plane, where a RayCluster applied with its namespace waited 30 s as "rejected as built"."""
    from datetime import UTC, datetime

    from raycluster_operator.planning.features.quota import RACES, hold_after, refusal_reason
    from raycluster_operator.planning.reasons import HoldReason

    message = (
        'pods "c-head-" is forbidden: error looking up service account default/default: '
        'serviceaccount "default" not found'
    )
    assert refusal_reason(message) == HoldReason.SERVICE_ACCOUNT_PENDING
    assert refusal_reason(message) in RACES
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert (hold_after(message, "t", 1, now).until - now).total_seconds() == 5
    assert refusal_reason("violates PodSecurity") == HoldReason.POD_REJECTED


def kuberay_condition(p: Any) -> dict[str, Any] | None:
    return next((c for c in p.status["conditions"] if c["type"] == "ReplicaFailure"), None)


def test_a_waiting_slice_is_kuberays_replica_failure_too() -> None:
    """Beside ours, KubeRay's `ReplicaFailure` with its reason and its message (the reason,
    a newline, the API's refusal), which its e2e TestRayClusterWithResourceQuota reads."""
    spec = cluster(gpu_group(3))
    p = plan(spec, {"ResourceQuota": [quota({"requests.nvidia.com/gpu": "16"})]})
    cond = kuberay_condition(p)
    assert cond is not None and cond["status"] == "True"
    assert cond["reason"] == "FailedCreateWorkerPod"
    assert cond["message"] == (
        'FailedCreateWorkerPod\npods "demo-gpu-worker-" is forbidden: exceeded quota: q, '
        "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16, "
        "limited: requests.nvidia.com/gpu=16"
    )
    # Once nothing waits, KubeRay removes the condition: so do we.
    later = plan(spec, {"ResourceQuota": [quota({"requests.nvidia.com/gpu": "32"})]}, p.status)
    assert kuberay_condition(later) is None
    assert kuberay_condition(plan(spec, {})) is None


def test_a_waiting_head_is_kuberays_failed_create_head_pod() -> None:
    p = plan(cluster(gpu_group(1)), {"ResourceQuota": [quota({"pods": "0"})]})
    assert not p.creates
    cond = kuberay_condition(p)
    assert cond is not None and cond["reason"] == "FailedCreateHeadPod"
    assert cond["message"].startswith('FailedCreateHeadPod\npods "demo-head-" is forbidden: ')
    assert "forbidden: exceeded quota: q, requested: pods=1" in cond["message"]


def test_a_held_group_carries_the_apis_own_refusal_as_kuberays_message() -> None:
    hold = AdmissionHold(BASE + timedelta(seconds=5), HoldReason.SLICE_QUOTA_EXCEEDED, QUOTA_403)
    p = plan(cluster(gpu_group(1)), {"AdmissionHold": [hold_object("gpu", hold)]})
    cond = kuberay_condition(p)
    assert cond is not None and cond["message"] == f"FailedCreateWorkerPod\n{QUOTA_403}"
