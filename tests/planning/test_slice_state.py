"""The slice state machine: every state can be read from pods, every move the planner makes
(and every move the cluster makes between two passes) is in the table, and a move outside the
table is rejected."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raycluster_operator.api.models import WorkerGroupSpec
from raycluster_operator.planning.desired import desired_slices
from raycluster_operator.planning.group_plan import (
    GroupInput,
    GroupPlan,
    GroupSwitches,
    plan_group,
)
from raycluster_operator.planning.pods import read_pod
from raycluster_operator.planning.reasons import CreateReason, DeleteReason
from raycluster_operator.planning.replicas import sort_into_replicas
from raycluster_operator.planning.slice_state import (
    TRANSITIONS,
    Cause,
    InvalidTransition,
    Observation,
    SliceReading,
    SliceState,
    SliceTransition,
    check_transition,
    derive_state,
    is_valid,
)

from .test_group_convergence import plan_once as plan_of
from .test_group_convergence import scenarios
from .test_group_rules import STATIC
from .world import Create, World, make_pod, stamp, suffixes

Scenario = tuple[WorkerGroupSpec, list[dict[str, Any]], GroupSwitches]


def read(states: list[str], hosts: int = 4) -> SliceReading:
    pods = [
        make_pod(f"s-h{h}", replica_index=0, replica_name="s", host_index=h, state=state)
        for h, state in enumerate(states)
    ]
    return derive_state([read_pod(p) for p in pods], hosts, name="s", index=0)


# -- every state is derivable -------------------------------------------------------------


def test_every_state_is_read_from_pods() -> None:
    seen = {
        derive_state((), 4, name="s", index=0).state,
        read(["ready"] * 4).state,
        read(["ready", "pending", "ready", "ready"]).state,
        read(["ready", "failed", "ready", "ready"]).state,
        read(["terminating"] * 4).state,
    }
    # BACKOFF is the one state pods alone cannot show: no pods, plus the cluster's backoff
    # record for the index (planning/features/backoff.py; tests/planning/test_backoff.py).
    assert seen == set(SliceState) - {SliceState.BACKOFF}


@pytest.mark.parametrize(
    ("states", "hosts", "expected", "cause"),
    [
        (["ready"] * 4, 4, SliceState.READY, None),
        (["ready", "pending", "ready", "ready"], 4, SliceState.PENDING, None),
        (["ready", "crashed", "ready", "ready"], 4, SliceState.BROKEN, DeleteReason.HOST_FAILED),
        (["ready", "terminating"], 4, SliceState.BROKEN, DeleteReason.HOST_TERMINATING),
        (["ready"] * 3, 4, SliceState.BROKEN, DeleteReason.REPLICA_INCOMPLETE),
        (["ready"] * 4, 2, SliceState.BROKEN, DeleteReason.REPLICA_SHAPE_CHANGED),
        (["terminating"] * 2, 2, SliceState.DELETING, DeleteReason.HOST_TERMINATING),
    ],
)
def test_a_slice_state_and_its_cause_come_from_its_pods(
    states: list[str], hosts: int, expected: SliceState, cause: DeleteReason | None
) -> None:
    reading = read(states, hosts)
    assert (reading.state, reading.cause) == (expected, cause)


def test_a_slice_whose_pods_all_go_is_deleting_and_keeps_its_first_fault() -> None:
    pods = [
        make_pod("a", replica_index=0, replica_name="s", host_index=0, state="terminating"),
        make_pod("b", replica_index=0, replica_name="s", host_index=1, state="failed"),
    ]
    pods[1]["metadata"]["deletionTimestamp"] = stamp(5)
    reading = derive_state([read_pod(p) for p in pods], 2, name="s", index=0)
    assert (reading.state, reading.cause) == (SliceState.DELETING, DeleteReason.HOST_FAILED)


def test_a_single_host_slice_is_its_pod() -> None:
    def single(state: str) -> SliceState:
        view = read_pod(make_pod("p", replica_index=0, state=state))
        return derive_state((view,), 1, name=None, index=0).state

    assert single("ready") is SliceState.READY
    assert single("pending") is SliceState.PENDING
    assert single("failed") is SliceState.BROKEN
    assert single("terminating") is SliceState.DELETING


# -- the table ----------------------------------------------------------------------------


def test_every_state_is_reachable_and_none_is_a_dead_end() -> None:
    reached, frontier = {SliceState.ABSENT}, [SliceState.ABSENT]
    while frontier:
        for target in TRANSITIONS.get(frontier.pop(), {}):
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    assert reached == set(SliceState)
    for state in SliceState:
        if state is not SliceState.ABSENT:
            assert SliceState.ABSENT in TRANSITIONS[state], f"{state} never ends"


@pytest.mark.parametrize(
    ("source", "target", "cause"),
    [
        # A terminating pod never comes back.
        (SliceState.DELETING, SliceState.READY, Observation.HOSTS_READY),
        (SliceState.DELETING, SliceState.PENDING, CreateReason.REPLACE_REPLICA),
        # A broken slice goes for its fault, never as surplus.
        (SliceState.BROKEN, SliceState.DELETING, DeleteReason.SCALE_DOWN),
        # A healthy slice is not deleted for a fault it does not have.
        (SliceState.READY, SliceState.DELETING, DeleteReason.HOST_FAILED),
        # Creating is only from nothing.
        (SliceState.READY, SliceState.PENDING, CreateReason.SCALE_UP),
    ],
)
def test_a_move_outside_the_table_is_rejected(
    source: SliceState, target: SliceState, cause: Cause
) -> None:
    assert not is_valid(source, target, cause)
    with pytest.raises(InvalidTransition):
        check_transition(SliceTransition("s", source, target, cause))


def test_a_move_in_the_table_passes() -> None:
    move = SliceTransition("s", SliceState.BROKEN, SliceState.DELETING, DeleteReason.HOST_FAILED)
    assert check_transition(move) is move


# -- the planner's moves (properties) -----------------------------------------------------


def states_of(world: World, hosts: int) -> dict[str, SliceReading]:
    """Every slice of the group as the planner would read it, keyed like its transitions."""
    found = sort_into_replicas([read_pod(p) for p in world.list()], hosts)
    out = {r.key: SliceReading(r.state, r.cause, r.detail) for r in found.replicas}
    for pod in found.unidentified:
        state = SliceState.DELETING if pod.terminating else SliceState.BROKEN
        out[pod.name] = SliceReading(state, DeleteReason.POD_WITHOUT_REPLICA_IDENTITY)
    return out


def check_planner_moves(plan: GroupPlan, before: dict[str, SliceReading]) -> None:
    """Each move the plan reports starts where the pods say, is in the table, and every
    delete of the plan belongs to a reported move."""
    moved = {m.slice for m in plan.transitions}
    for move in plan.transitions:
        assert is_valid(move.source, move.target, move.cause), move
        if move.target is SliceState.DELETING:
            assert before[move.slice].state is move.source, move
            if move.source is SliceState.BROKEN and move.cause not in _STOPS:
                assert move.cause is before[move.slice].cause  # the fault names the Event
        else:
            assert (move.source, move.target) == (SliceState.ABSENT, SliceState.PENDING)
            assert isinstance(move.cause, CreateReason)
    for delete in plan.deletes:
        assert (delete.replica_name or delete.name) in moved
    assert sum(1 for m in plan.transitions if m.source is SliceState.ABSENT) == len(plan.replicas)


_STOPS = {DeleteReason.CLUSTER_SUSPENDED, DeleteReason.GROUP_SUSPENDED}


def observed_cause(source: SliceState, target: SliceState, reading: SliceReading) -> Cause:
    """Why the cluster (not the planner) moved a slice, as the table names it."""
    if target is SliceState.ABSENT:
        return Observation.PODS_GONE
    if target is SliceState.DELETING:
        return Observation.PODS_TERMINATING
    if target is SliceState.BROKEN:
        assert reading.cause is not None
        return reading.cause
    if source is SliceState.ABSENT:
        return Observation.CREATED
    if source is SliceState.BROKEN:
        return Observation.FAULT_CLEARED
    return Observation.HOSTS_READY if target is SliceState.READY else Observation.HOST_NOT_READY


def disturb(world: World, rng: random.Random) -> None:
    """What the cluster does between two passes: a pod gets ready or unready, fails, is
    evicted, finishes terminating, or is force-deleted (``--grace-period=0 --force``)."""
    for _ in range(rng.randint(0, 4)):
        if not world.pods:
            return
        name = rng.choice(sorted(world.pods))
        pod = world.pods[name]
        meta, status = pod["metadata"], pod["status"]
        event = rng.choice(["ready", "unready", "fail", "evict", "vanish", "force"])
        if event == "force":
            del world.pods[name]
        elif meta.get("deletionTimestamp"):
            if event == "vanish":
                del world.pods[name]
        elif status.get("phase") == "Failed":
            continue  # a failed pod never runs again
        elif event == "ready":
            status["phase"] = "Running"
            status["conditions"] = [{"type": "Ready", "status": "True"}]
        elif event == "unready":
            status["conditions"] = [{"type": "Ready", "status": "False"}]
        elif event == "fail":
            status["phase"] = "Failed"
        elif event == "evict":
            meta["deletionTimestamp"] = stamp(world.clock + 30)


@settings(max_examples=150, deadline=None)
@given(scenarios(), st.sampled_from([None, *_STOPS]))
def test_every_move_the_planner_makes_from_any_pods_is_in_the_table(
    scenario: Scenario, stop: DeleteReason | None
) -> None:
    spec, pods, switches = scenario
    world = World.of(pods)
    before = states_of(world, spec.num_of_hosts)
    pods = [read_pod(p) for p in world.list()]
    plan = plan_group(GroupInput(spec, pods, desired_slices(spec), switches, suffixes(), stop))
    check_planner_moves(plan, before)
    if stop is not None:
        assert not plan.replicas


@settings(max_examples=150, deadline=None)
@given(scenarios(), st.integers(0, 2**32 - 1))
def test_every_move_over_a_sequence_of_passes_is_in_the_table(
    scenario: Scenario, seed: int
) -> None:
    """Plan, apply (some creates and deletes fail), let the cluster change things, plan
    again: between two passes, every slice moved along the table from where the planner left
    it."""
    spec, pods, switches = scenario
    rng = random.Random(seed)
    world = World.of(pods)
    suffix = suffixes()
    hosts = spec.num_of_hosts
    for _ in range(6):
        before = states_of(world, hosts)
        plan = plan_of(spec, world, switches, suffix)
        check_planner_moves(plan, before)
        creates = [
            Create("workers", r.index, r.name, host)
            for r in plan.replicas
            for host in r.hosts
            if rng.random() > 0.15  # the POST of this pod failed
        ]
        deletes = [d for d in plan.deletes if rng.random() > 0.1]  # else the DELETE failed
        world.step([d.name for d in deletes], creates)
        disturb(world, rng)
        after = states_of(world, hosts)
        # Where the planner left each slice: moved, unless one of its deletes failed.
        failed = {d.replica_name or d.name for d in plan.deletes if d not in deletes}
        start = {key: reading.state for key, reading in before.items()}
        start.update({m.slice: m.target for m in plan.transitions if m.slice not in failed})
        absent = SliceReading(SliceState.ABSENT)
        for key in start.keys() | after.keys():
            old, new = start.get(key, SliceState.ABSENT), after.get(key, absent)
            if old is not new.state and not key.startswith("index "):
                cause = observed_cause(old, new.state, new)
                assert is_valid(old, new.state, cause), (key, old, new, cause)


def test_the_planner_rejects_its_own_invalid_move(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner checks its moves: with a table that forbids replacing a broken slice, the
    plan that would do it raises instead of acting."""
    from raycluster_operator.planning import slice_state

    strict = {**slice_state.TRANSITIONS, SliceState.BROKEN: {}}
    monkeypatch.setattr(slice_state, "TRANSITIONS", strict)
    spec = WorkerGroupSpec.model_validate({"groupName": "workers", "numOfHosts": 2, "replicas": 1})
    pods = [
        make_pod("a", replica_index=0, replica_name="workers-a", host_index=0),
        make_pod("b", replica_index=0, replica_name="workers-a", host_index=1, state="failed"),
    ]
    with pytest.raises(InvalidTransition, match="broken -> deleting"):
        plan_of(spec, World.of(pods), STATIC, suffixes())
