"""Property: from any pod set, re-planning one group converges to exactly the desired slices,
and no healthy slice is ever deleted except by scale-down or workersToDelete.

Random groups and random pod sets (missing, extra, failed, terminating, unlabelled and
duplicated hosts, stale shapes, leftover indices) are planned, the plan applied by the tiny
simulator in ``world.py``, and planned again, until a plan is empty.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from raycluster_operator.api import labels
from raycluster_operator.api.models import WorkerGroupSpec
from raycluster_operator.planning.desired import desired_slices
from raycluster_operator.planning.group_plan import (
    GroupInput,
    GroupPlan,
    GroupSwitches,
    plan_group,
)
from raycluster_operator.planning.pods import parse_index, read_pod
from raycluster_operator.planning.reasons import DeleteReason
from raycluster_operator.planning.replicas import sort_into_replicas

from .world import Create, World, make_pod, suffixes

MAX_STEPS = 8
STATES = st.sampled_from(["ready", "ready", "ready", "pending", "failed", "crashed", "terminating"])


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[WorkerGroupSpec, list[dict[str, Any]], GroupSwitches]:
    hosts = draw(st.integers(1, 4))
    spec: dict[str, Any] = {
        "groupName": "workers",
        "numOfHosts": hosts,
        "replicas": draw(st.integers(0, 5)),
    }
    if draw(st.booleans()):
        spec["minReplicas"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        spec["maxReplicas"] = draw(st.integers(2, 4))
    pods: list[dict[str, Any]] = []
    serial = 0

    def name() -> str:
        nonlocal serial
        serial += 1
        return f"pod{serial}"

    for r in range(draw(st.integers(0, 5))):
        index = draw(st.integers(0, 6))
        rname = f"workers-r{r}"
        host_count = draw(st.integers(1, 5))
        for _ in range(host_count):
            host = draw(st.integers(0, 4)) if draw(st.booleans()) else len(pods) % (hosts + 1)
            single = hosts == 1 and draw(st.booleans())
            pods.append(
                make_pod(
                    name(),
                    replica_index=index,
                    replica_name=None if single else rname,
                    host_index=None if single else host,
                    state=draw(STATES),
                    created=draw(st.integers(0, 50)),
                )
            )
    for _ in range(draw(st.integers(0, 3))):
        pods.append(make_pod(name(), state=draw(STATES)))
    named = [p["metadata"]["name"] for p in pods]
    chosen = draw(st.lists(st.sampled_from(named), max_size=3)) if named else []
    spec["scaleStrategy"] = {"workersToDelete": [*chosen, "not-a-pod"]}
    autoscaling = draw(st.booleans())
    random_delete = draw(st.booleans())
    switches = GroupSwitches(scale_down=not autoscaling or random_delete)
    return WorkerGroupSpec.model_validate(spec), pods, switches


def plan_once(
    spec: WorkerGroupSpec, world: World, switches: GroupSwitches, suffix: Any
) -> GroupPlan:
    pods = [read_pod(p) for p in world.list()]
    return plan_group(GroupInput(spec, pods, desired_slices(spec), switches, suffix))


def indices_held(world: World) -> set[int]:
    held = set()
    for pod in world.list():
        index = parse_index(pod["metadata"]["labels"].get(labels.REPLICA_INDEX))
        if index is not None:
            held.add(index)
    return held


#: The only reasons a healthy slice may be deleted for (docs/design.md §4, rule 13).
ASKED_FOR = {DeleteReason.SCALE_DOWN, DeleteReason.WORKERS_TO_DELETE}


def healthy_slices(world: World, hosts: int) -> dict[str, tuple[int | None, frozenset[str]]]:
    """Replica key -> (index, pod names) of every complete replica whose index no other
    complete replica shares (two sharing one index is itself a fault: the newer is broken)."""
    found = sort_into_replicas([read_pod(p) for p in world.list()], hosts)
    complete = [r for r in found.replicas if r.complete]
    counts: dict[int | None, int] = defaultdict(int)
    for replica in complete:
        counts[replica.index] += 1
    return {
        r.key: (r.index, frozenset(p.name for p in r.pods))
        for r in complete
        if counts[r.index] == 1
    }


def assert_no_healthy_slice_deleted_unasked(world: World, hosts: int, plan: GroupPlan) -> set[str]:
    """Every delete of a healthy slice's pod is a scale-down or workersToDelete; returns the
    healthy slices that plan removes on purpose."""
    reasons = {d.name: d.reason for d in plan.deletes}
    removed = set()
    for key, (_, members) in healthy_slices(world, hosts).items():
        for name in members & reasons.keys():
            assert reasons[name] in ASKED_FOR, f"healthy slice {key} deleted for {reasons[name]}"
            removed.add(key)
    return removed


def apply(world: World, plan: GroupPlan) -> None:
    creates = [Create("workers", r.index, r.name, host) for r in plan.replicas for host in r.hosts]
    world.step([d.name for d in plan.deletes], creates)


def live_replicas(world: World, hosts: int) -> dict[int, list[tuple[str | None, int | None]]]:
    by_index: dict[int, list[tuple[str | None, int | None]]] = defaultdict(list)
    for pod in world.list():
        meta = pod["metadata"]
        assert not meta.get("deletionTimestamp")
        lab = meta["labels"]
        index = parse_index(lab.get(labels.REPLICA_INDEX))
        assert index is not None, f"{meta['name']} left without identity"
        by_index[index].append(
            (lab.get(labels.REPLICA_NAME), parse_index(lab.get(labels.HOST_INDEX)))
        )
    return by_index


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_replanning_converges_to_exactly_the_desired_slices(
    scenario: tuple[WorkerGroupSpec, list[dict[str, Any]], GroupSwitches],
) -> None:
    spec, pods, switches = scenario
    world = World.of(pods)
    suffix = suffixes()
    hosts = spec.num_of_hosts
    desired = desired_slices(spec)
    first = True
    removed: set[str] = set()
    start = healthy_slices(world, hosts)
    for _ in range(MAX_STEPS):
        plan = plan_once(spec, world, switches, suffix)
        removed |= assert_no_healthy_slice_deleted_unasked(world, hosts, plan)
        names = {p["metadata"]["name"]: p for p in world.list()}
        for delete in plan.deletes:
            assert not names[delete.name]["metadata"].get("deletionTimestamp")
        held = indices_held(world)
        for replica in plan.replicas:
            # New replicas: all hosts at once, at an index no existing pod carries.
            assert replica.index not in held
            assert replica.hosts == (tuple(range(hosts)) if hosts > 1 else (None,))
        if first:
            # workersToDelete: every named live pod goes in the first pass, with its replica.
            named = set(spec.workers_to_delete)
            gone = {d.name for d in plan.deletes}
            for pod_name, pod in names.items():
                if pod_name in named and not pod["metadata"].get("deletionTimestamp"):
                    assert pod_name in gone
            first = False
        if not plan.deletes and not plan.replicas and not world.terminating():
            break
        apply(world, plan)
    else:
        raise AssertionError(f"no convergence in {MAX_STEPS} steps")

    slices = live_replicas(world, hosts)
    # A healthy slice not removed on purpose is still there, at the same index.
    end = healthy_slices(world, hosts)
    for key, (index, _) in start.items():
        if key not in removed:
            assert key in end and end[key][0] == index, f"healthy slice {key} moved or vanished"
    if switches.scale_down:
        assert len(slices) == desired
    else:
        assert len(slices) >= desired
    for members in slices.values():
        if hosts > 1:
            assert len({n for n, _ in members}) == 1  # one replica per index
            assert sorted(h for _, h in members) == list(range(hosts))
        else:
            assert len(members) == 1
    # Converged: another pass changes nothing.
    again = plan_once(spec, world, switches, suffix)
    assert not again.deletes and not again.replicas
    assert again.tally.broken_slices == 0


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_every_delete_names_a_reason_and_a_pod_of_the_group(
    scenario: tuple[WorkerGroupSpec, list[dict[str, Any]], GroupSwitches],
) -> None:
    spec, pods, switches = scenario
    world = World.of(pods)
    plan = plan_once(spec, world, switches, suffixes())
    names = {p["metadata"]["name"] for p in pods}
    for delete in plan.deletes:
        assert delete.name in names
        assert isinstance(delete.reason, DeleteReason)
        assert delete.message
    assert len({d.name for d in plan.deletes}) == len(plan.deletes)
