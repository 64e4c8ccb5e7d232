"""Upgrades in the pure planner (docs/design.md §4, rule 12a): None, Recreate, RollingUpdate.

The world here makes new pods Pending; a test (or hypothesis) decides when each slice turns
Ready, so the rolling bounds are checked against every readiness order, not only the happy one.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from raycluster_operator.api import labels
from raycluster_operator.api.models import load_cluster
from raycluster_operator.planning import ClusterPlan
from raycluster_operator.planning.reasons import CreateReason, DeleteReason
from raycluster_operator.planning.upgrade import Bounds, resolve_bounds, upgrade_problems

from .cluster import Loop, cluster_obj, worker_group
from .world import suffixes

HASH = labels.POD_TEMPLATE_HASH_ANNOTATION


def spec(
    *, replicas: int = 3, hosts: int = 4, strategy: dict[str, Any] | None = None, image: str = "a"
) -> dict[str, Any]:
    group = worker_group(numOfHosts=hosts, replicas=replicas)
    group["template"]["spec"]["containers"][0]["image"] = f"ray:{image}"
    extra = {"upgradeStrategy": strategy} if strategy is not None else {}
    return cluster_obj(group, **extra)


def with_image(obj: dict[str, Any], image: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = (
        f"ray:{image}"
    )
    return out


def workers(loop: Loop) -> list[dict[str, Any]]:
    return [
        p
        for p in loop.world.list()
        if p["metadata"]["labels"].get(labels.NODE_TYPE) == "worker"
        and not p["metadata"].get("deletionTimestamp")
    ]


def slices(loop: Loop) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in workers(loop):
        out.setdefault(pod["metadata"]["labels"][labels.REPLICA_NAME], []).append(pod)
    return out


def hash_of(pod: dict[str, Any]) -> str | None:
    annotations: dict[str, str] = pod["metadata"].get("annotations") or {}
    return annotations.get(HASH)


def ready(pod: dict[str, Any]) -> bool:
    return bool(pod["status"]["conditions"][0]["status"] == "True")


def ready_slices(loop: Loop, hosts: int) -> int:
    return sum(1 for pods in slices(loop).values() if len(pods) == hosts and all(map(ready, pods)))


def assert_one_template_per_slice(loop: Loop) -> None:
    for name, pods in slices(loop).items():
        assert len({hash_of(p) for p in pods}) == 1, f"slice {name} mixes templates"


def step(loop: Loop, *, pending: bool = True) -> ClusterPlan:
    """One pass; the pods it creates start Pending (not ready) when ``pending``."""
    before = set(loop.world.pods)
    plan = loop.plan()
    loop.apply(plan)
    if pending:
        for name in set(loop.world.pods) - before:
            loop.world.pods[name]["status"]["conditions"][0]["status"] = "False"
    return plan


def make_ready(loop: Loop, replica: str) -> None:
    for pod in slices(loop).get(replica, []):
        pod["status"]["conditions"][0]["status"] = "True"


def settled(obj: dict[str, Any]) -> Loop:
    loop = Loop(load_cluster(obj))
    loop.settle()
    return loop


def test_none_keeps_old_pods_and_scales_up_with_the_new_template() -> None:
    obj = spec(replicas=2)
    loop = settled(obj)
    old = {p["metadata"]["name"] for p in workers(loop)}
    loop.respec(with_image(obj, "b"))
    plan = loop.settle()
    assert {p["metadata"]["name"] for p in workers(loop)} == old
    assert plan.status["workerGroups"][0]["updatedSlices"] == 0
    grown = with_image(obj, "b")
    grown["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    loop.respec(grown)
    loop.settle()
    new = [p for p in workers(loop) if p["metadata"]["name"] not in old]
    assert len(new) == 4 and len({hash_of(p) for p in new}) == 1
    assert hash_of(new[0]) not in {hash_of(p) for p in workers(loop) if p not in new}
    assert not any(c["type"] == "RollingUpdate" for c in loop.plan().status["conditions"])


def test_recreate_replaces_every_pod_once_and_ignores_replicas() -> None:
    obj = spec(replicas=2, strategy={"type": "Recreate"})
    loop = settled(obj)
    before = set(loop.world.pods)
    loop.respec(with_image(obj, "b"))
    first = loop.plan()
    # Every pod, the head included, goes in one pass, for TemplateChanged.
    assert {d.name for d in first.deletes} == before
    assert {d.reason for d in first.deletes} == {DeleteReason.TEMPLATE_CHANGED}
    assert not first.creates
    loop.apply(first)
    loop.settle()
    assert not set(loop.world.pods) & before
    assert len(workers(loop)) == 8
    after = set(loop.world.pods)
    scaled = with_image(obj, "b")
    scaled["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    loop.respec(scaled)
    loop.settle()
    assert after <= set(loop.world.pods)


def test_a_head_template_change_under_recreate_recreates_the_workers_too() -> None:
    obj = spec(replicas=1, hosts=2, strategy={"type": "Recreate"})
    loop = settled(obj)
    changed = copy.deepcopy(obj)
    changed["spec"]["headGroupSpec"]["rayStartParams"] = {"num-cpus": "0"}
    loop.respec(changed)
    plan = loop.plan()
    assert len(plan.deletes) == 3


def test_pods_without_the_annotation_count_as_current() -> None:
    """An operator upgrade must not recreate a running fleet: pods made before the hash."""
    obj = spec(replicas=2, strategy={"type": "RollingUpdate"})
    loop = settled(obj)
    for pod in loop.world.list():
        pod["metadata"].pop("annotations", None)
    plan = loop.plan()
    assert plan.is_empty and not plan.deletes
    assert plan.status["workerGroups"][0]["updatedSlices"] == 2


def roll(obj: dict[str, Any], *, hosts: int, max_steps: int = 60) -> tuple[Loop, list[int]]:
    """Change the image and run the rollout, each new slice turning Ready one pass after it
    was created; answers the loop and the ready-slice count seen before every pass. Slices
    are created for the upgrade (ScaleUp only for the last one, once no outdated pod is left
    to say a rollout is under way)."""
    loop = settled(obj)
    loop.respec(with_image(obj, "b"))
    seen = []
    reasons: set[CreateReason] = set()
    for _ in range(max_steps):
        assert reasons <= {CreateReason.UPGRADE, CreateReason.SCALE_UP}
        seen.append(ready_slices(loop, hosts))
        assert_one_template_per_slice(loop)
        for name in slices(loop):
            make_ready(loop, name)
        going = loop.world.terminating()
        plan = step(loop)
        reasons |= {c.reason for c in plan.creates}
        if plan.is_empty and not going:
            for name in slices(loop):
                make_ready(loop, name)
            assert CreateReason.UPGRADE in reasons
            return loop, seen
    raise AssertionError("the rollout did not finish")


def test_rolling_update_without_surge_keeps_two_of_three_slices_ready() -> None:
    obj = spec(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}})
    loop, seen = roll(obj, hosts=4)
    assert min(seen) >= 2
    pods = workers(loop)
    current = {hash_of(p) for p in pods}
    assert len(pods) == 12 and len(current) == 1 and None not in current
    indices = Counter(p["metadata"]["labels"][labels.REPLICA_INDEX] for p in pods)
    assert indices == {"0": 4, "1": 4, "2": 4}
    status = loop.plan().status
    assert status["workerGroups"][0]["updatedSlices"] == 3
    condition = {c["type"]: c for c in status["conditions"]}["RollingUpdate"]
    assert (condition["status"], condition["reason"]) == ("False", "Complete")


def test_rolling_update_with_surge_never_drops_below_the_desired_ready_slices() -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    loop, seen = roll(spec(strategy=strategy), hosts=4)
    assert min(seen) >= 3
    assert len(workers(loop)) == 12
    assert len({hash_of(p) for p in workers(loop)}) == 1


def test_the_surge_slice_is_created_first_at_a_free_index() -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    obj = spec(strategy=strategy)
    loop = settled(obj)
    loop.respec(with_image(obj, "b"))
    plan = step(loop)
    assert not plan.deletes
    assert {c.replica_index for c in plan.creates} == {3}
    assert {c.reason for c in plan.creates} == {CreateReason.UPGRADE}
    # Until it is Ready, no old slice goes.
    assert not step(loop).deletes
    condition = {c["type"]: c for c in loop.plan().status["conditions"]}["RollingUpdate"]
    assert (condition["status"], condition["reason"]) == ("True", "Progressing")


def test_a_head_template_change_under_rolling_update_recreates_the_head_alone() -> None:
    obj = spec(replicas=1, hosts=2, strategy={"type": "RollingUpdate"})
    loop = settled(obj)
    changed = copy.deepcopy(obj)
    changed["spec"]["headGroupSpec"]["rayStartParams"] = {"num-cpus": "0"}
    loop.respec(changed)
    plan = loop.plan()
    assert [(d.group, d.reason) for d in plan.deletes] == [
        (labels.HEAD_GROUP, DeleteReason.TEMPLATE_CHANGED)
    ]


def test_a_slice_named_in_workers_to_delete_is_deleted_not_upgraded() -> None:
    obj = spec(strategy={"type": "RollingUpdate"})
    loop = settled(obj)
    victim = sorted(slices(loop))[-1]
    host = slices(loop)[victim][0]["metadata"]["name"]
    changed = with_image(obj, "b")
    changed["spec"]["workerGroupSpecs"][0]["replicas"] = 2
    changed["spec"]["enableInTreeAutoscaling"] = True
    changed["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": [host]}
    loop.respec(changed)
    plan = loop.plan()
    reasons = {d.replica_name: d.reason for d in plan.deletes if d.group == "workers"}
    assert reasons.pop(victim) is DeleteReason.WORKERS_TO_DELETE
    # Of the two slices left for replicas 2, one may be unavailable: one is upgraded, and its
    # stand-in waits for its index; the named slice is not replaced.
    assert list(reasons.values()) == [DeleteReason.TEMPLATE_CHANGED]
    assert not [c for c in plan.creates if c.group == "workers"]


def test_a_slice_whose_hosts_mix_templates_is_broken() -> None:
    loop = settled(spec(replicas=1, hosts=2))
    pod = workers(loop)[0]
    pod["metadata"]["annotations"][HASH] = "0000000000"
    plan = loop.plan()
    assert {d.reason for d in plan.deletes} == {DeleteReason.MIXED_TEMPLATES}


def test_suspension_pauses_the_rollout() -> None:
    obj = spec(strategy={"type": "RollingUpdate"})
    loop = settled(obj)
    changed = with_image(obj, "b")
    changed["spec"]["suspend"] = True
    loop.respec(changed)
    plan = loop.plan()
    assert DeleteReason.TEMPLATE_CHANGED not in {d.reason for d in plan.deletes}
    condition = {c["type"]: c for c in plan.status["conditions"]}["RollingUpdate"]
    assert condition["reason"] == "Paused"


def test_a_rollout_resumes_from_the_pods_alone() -> None:
    """A restarted operator has nothing but the pods: a fresh loop over the same world (new
    name suffixes, no memory) finishes the rollout."""
    obj = spec(strategy={"type": "RollingUpdate"})
    loop = settled(obj)
    loop.respec(with_image(obj, "b"))
    step(loop, pending=False)
    step(loop, pending=False)
    restarted = Loop(loop.cluster, loop.world)
    restarted.suffix = suffixes(500)
    restarted.settle(max_steps=30)
    assert len({hash_of(p) for p in workers(restarted)}) == 1
    assert len(workers(restarted)) == 12


def test_steady_state_writes_nothing_after_a_rollout() -> None:
    obj = spec(strategy={"type": "RollingUpdate"})
    loop, _ = roll(obj, hosts=4)
    first = loop.plan()
    loop.apply(first)
    assert loop.plan().status == first.status


def test_bounds_are_counted_in_slices_like_a_deployment_rounds() -> None:
    from raycluster_operator.api.models import RollingUpdate

    def bounds(u: int | str | None, s: int | str | None, desired: int) -> Bounds:
        return resolve_bounds(RollingUpdate(maxUnavailable=u, maxSurge=s), desired)

    assert resolve_bounds(None, 5) == Bounds(1, 0)
    assert bounds("25%", "25%", 5) == Bounds(1, 2)
    assert bounds("10%", "0%", 3) == Bounds(1, 0)  # both round to 0: one may be unavailable
    assert bounds(0, "1%", 3) == Bounds(0, 1)


def test_both_bounds_zero_is_an_invalid_spec_naming_the_field() -> None:
    obj = spec(
        strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}}
    )
    problems = upgrade_problems(load_cluster(obj))
    assert [p.path for p in problems] == ["spec.upgradeStrategy.rollingUpdate"]
    bad = spec(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "x%"}})
    assert [p.path for p in upgrade_problems(load_cluster(bad))] == [
        "spec.upgradeStrategy.rollingUpdate.maxSurge"
    ]
    plan = Loop(load_cluster(obj)).plan()
    assert not plan.creates
    assert {c["type"]: c for c in plan.status["conditions"]}["InvalidSpec"]["status"] == "True"


@settings(max_examples=60, deadline=None)
@given(
    desired=st.integers(1, 5),
    unavailable=st.integers(0, 2),
    surge=st.integers(0, 2),
    coins=st.lists(st.booleans(), min_size=200, max_size=200),
)
def test_any_readiness_order_keeps_the_bounds_and_one_template_per_slice(
    desired: int, unavailable: int, surge: int, coins: list[bool]
) -> None:
    if unavailable == surge == 0:
        surge = 1
    hosts = 2
    strategy = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": unavailable, "maxSurge": surge},
    }
    obj = spec(replicas=desired, hosts=hosts, strategy=strategy)
    loop = settled(obj)
    loop.respec(with_image(obj, "b"))
    flips = iter(coins)
    for _ in range(400):
        before = ready_slices(loop, hosts)
        going = loop.world.terminating()
        plan = step(loop)
        assert_one_template_per_slice(loop)
        deleted_ready = {
            d.replica_name for d in plan.deletes if d.reason is DeleteReason.TEMPLATE_CHANGED
        }
        after = ready_slices(loop, hosts)
        # The operator's own deletions never take ready slices below desired - maxUnavailable.
        if deleted_ready:
            assert after >= min(before, desired - unavailable)
        assert len(slices(loop)) <= desired + surge
        if plan.is_empty and not going and all(ready(p) for p in workers(loop)):
            break
        # Each pending slice turns ready or not, as the coins say.
        for name in slices(loop):
            if next(flips, True):
                make_ready(loop, name)
    else:
        raise AssertionError("the rollout did not finish")
    assert len(workers(loop)) == desired * hosts
    assert len({hash_of(p) for p in workers(loop)}) == 1


def test_the_upgrade_moves_are_in_the_slice_table() -> None:
    from raycluster_operator.planning.slice_state import SliceState, is_valid

    for source in (SliceState.PENDING, SliceState.READY):
        assert is_valid(source, SliceState.DELETING, DeleteReason.TEMPLATE_CHANGED)
        assert is_valid(source, SliceState.BROKEN, DeleteReason.MIXED_TEMPLATES)
    # An upgrade never takes a broken slice: its fault does (rule 8).
    assert not is_valid(SliceState.BROKEN, SliceState.DELETING, DeleteReason.TEMPLATE_CHANGED)
    assert is_valid(SliceState.ABSENT, SliceState.PENDING, CreateReason.UPGRADE)


def test_the_autoscaler_raising_replicas_mid_rollout_gets_new_template_slices() -> None:
    obj = spec(strategy={"type": "RollingUpdate"})
    loop = settled(obj)
    old = {hash_of(p) for p in workers(loop)}
    changed = with_image(obj, "b")
    loop.respec(changed)
    step(loop, pending=False)
    grown = copy.deepcopy(changed)
    grown["spec"]["workerGroupSpecs"][0]["replicas"] = 5
    grown["spec"]["enableInTreeAutoscaling"] = True
    loop.respec(grown)
    plan = loop.plan()
    made = [c for c in plan.creates if c.group == "workers"]
    assert made and not {c.manifest["metadata"]["annotations"][HASH] for c in made} & old
    loop.apply(plan)
    loop.settle(max_steps=40)
    assert len(slices(loop)) == 5
    assert len({hash_of(p) for p in workers(loop)}) == 1


def test_lowering_replicas_alone_under_autoscaling_holds_the_rollout() -> None:
    """With autoscaling on, lowering replicas alone deletes nothing (rule 12): the rollout
    holds until the autoscaler names the slice to remove, then finishes on the rest."""
    obj = spec(strategy={"type": "RollingUpdate"})
    obj["spec"]["enableInTreeAutoscaling"] = True
    loop = settled(obj)
    lowered = with_image(obj, "b")
    lowered["spec"]["workerGroupSpecs"][0]["replicas"] = 2
    loop.respec(lowered)
    plan = loop.settle(max_steps=10)
    assert len(slices(loop)) == 3 and not plan.deletes
    host = slices(loop)[sorted(slices(loop))[0]][0]["metadata"]["name"]
    named = copy.deepcopy(lowered)
    named["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": [host]}
    loop.respec(named)
    loop.settle(max_steps=40)
    assert len(slices(loop)) == 2
    assert len({hash_of(p) for p in workers(loop)}) == 1
