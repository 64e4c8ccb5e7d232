"""Crash-loop backoff per slice (docs/design.md §4 rule 13a), in the pure planner: the delays,
the records in the cluster's annotation, the held index, the template that ends a backoff, the
autoscaler's requests honoured meanwhile, and the records a restarted operator reads back."""

from __future__ import annotations

import copy
import itertools
import json
from datetime import datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from raycluster_operator.api import labels
from raycluster_operator.api.models import load_cluster
from raycluster_operator.planning import ClusterPlan, CreateReason, SliceState
from raycluster_operator.planning.desired import desired_slices
from raycluster_operator.planning.feature import Feature
from raycluster_operator.planning.features.backoff import (
    ANNOTATION,
    BackoffPolicy,
    GroupHold,
    read_records,
    render_records,
)
from raycluster_operator.planning.group_plan import GroupInput, plan_group
from raycluster_operator.planning.pods import read_pod
from raycluster_operator.planning.reasons import HoldReason
from raycluster_operator.planning.turn import GroupTurn

from .cluster import cluster_obj, plan_for, worker_group
from .test_group_convergence import scenarios
from .world import BASE, World, stamp, suffixes

POLICY = BackoffPolicy(base=10, max=300, reset=600)


class Held(Feature):
    """A backoff's word on one group, given outright."""

    def __init__(self, hold: GroupHold) -> None:
        self.hold = hold

    def gate(self, turn: GroupTurn) -> GroupHold:
        return self.hold


def test_the_first_break_is_replaced_at_once_then_the_wait_doubles_up_to_the_cap() -> None:
    assert [POLICY.delay(n) for n in range(1, 10)] == [0, 10, 20, 40, 80, 160, 300, 300, 300]
    assert BackoffPolicy(base=0).delay(5) == 0  # base 0 turns backoff off


@given(st.floats(0.001, 1e6), st.floats(0, 1e7), st.integers(1, 10_000))
def test_delays_are_monotone_and_bounded(base: float, cap: float, failures: int) -> None:
    policy = BackoffPolicy(base=base, max=cap)
    assert 0 <= policy.delay(failures) <= cap
    assert policy.delay(failures) <= policy.delay(failures + 1)


class Crashes:
    """A plan-apply loop over a 2-host group whose new pods at ``bad`` indices fail at once,
    with the cluster's annotations carried from plan to plan as the API server would."""

    def __init__(self, replicas: int = 2, **group: Any) -> None:
        self.obj = cluster_obj(worker_group(replicas=replicas, numOfHosts=2, **group))
        self.world = World()
        self.suffix = suffixes()
        self.clock = 0.0
        self.bad: set[int] = set()
        self.created: list[tuple[float, int, CreateReason]] = []

    def now(self) -> datetime:
        return BASE + timedelta(seconds=self.clock)

    def plan(self) -> ClusterPlan:
        return plan_for(
            load_cluster(self.obj),
            self.world.list(),
            [],
            now=self.now(),
            new_suffix=self.suffix,
            backoff=POLICY,
        )

    def step(self, seconds: float = 1.0) -> ClusterPlan:
        plan = self.plan()
        before = set(self.world.pods)
        workers = [c for c in plan.creates if c.group == "workers"]
        self.world.step(
            [d.name for d in plan.deletes], manifests=[c.manifest for c in plan.creates]
        )
        fresh = sorted(
            set(self.world.pods) - before, key=lambda n: self.world.pods[n]["metadata"]["name"][-5:]
        )
        for name, create in zip(fresh, plan.creates, strict=True):
            pod = self.world.pods[name]
            pod["metadata"]["annotations"] = dict(
                create.manifest["metadata"].get("annotations") or {}
            )
            pod["status"]["conditions"][0]["lastTransitionTime"] = _at(self.now())
            if create.replica_index in self.bad:
                pod["status"]["phase"] = "Failed"
                pod["status"]["conditions"][0]["status"] = "False"
        for c in workers:
            if c.host_index == 0:
                self.created.append((self.clock, c.replica_index or 0, c.reason))
        meta = self.obj["metadata"]
        for key, value in plan.annotations.items():
            notes = meta.setdefault("annotations", {})
            if value is None:
                notes.pop(key, None)
            else:
                notes[key] = value
        self.clock += seconds
        return plan

    def run(self, seconds: float, tick: float = 1.0) -> list[ClusterPlan]:
        plans = []
        end = self.clock + seconds
        while self.clock < end:
            plans.append(self.step(tick))
        return plans

    def records(self) -> dict[int, Any]:
        return read_records(self.obj["metadata"].get("annotations")).get("workers", {})

    def group_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.obj["spec"]["workerGroupSpecs"][0]
        return spec


def _at(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def retries_at(loop: Crashes, index: int) -> list[float]:
    return [t for t, i, _ in loop.created if i == index]


def test_a_slice_that_keeps_breaking_is_recreated_after_a_doubling_wait() -> None:
    loop = Crashes()
    loop.run(5)
    assert {i for _, i, _ in loop.created} == {0, 1}
    loop.bad = {1}
    start = loop.clock
    # Kill the running slice at index 1 once; from then on every new slice there fails at once.
    for pod in loop.world.pods.values():
        if pod["metadata"]["labels"].get(labels.REPLICA_INDEX) == "1":
            pod["status"]["phase"] = "Failed"
    loop.created.clear()
    loop.run(200)
    times = [t - start for t in retries_at(loop, 1)]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # A new slice fails at once and is seen (and deleted) on the next step, 1 s later; the
    # wait counts from that deletion: 10, 20, 40, 80 s.
    assert len(times) == 5, times
    assert [round(g) for g in gaps] == [11, 21, 41, 81], gaps
    assert retries_at(loop, 0) == []  # the healthy slice is never touched
    reasons = [r for _, i, r in loop.created if i == 1]
    assert reasons[0] is not CreateReason.BACKOFF_RETRY  # the first break: replaced at once
    assert set(reasons[1:]) == {CreateReason.BACKOFF_RETRY}
    record = loop.records()[1]
    assert record.failures == 6


def test_a_host_that_goes_missing_again_and_again_is_not_a_crash_loop() -> None:
    """A missing host (a create of ours failed, a pod deleted) is replaced at once every time:
    only failed hosts count, so a flaky API server never delays a slice."""
    loop = Crashes()
    loop.run(5)
    for _ in range(4):
        name = next(
            n
            for n, p in loop.world.pods.items()
            if p["metadata"]["labels"].get(labels.REPLICA_INDEX) == "1"
        )
        del loop.world.pods[name]
        loop.created.clear()
        loop.run(3)
        assert retries_at(loop, 1), "not replaced at once"
    assert loop.records() == {}


def test_the_index_is_held_and_reported_while_the_slice_waits() -> None:
    loop = Crashes()
    loop.run(5)
    loop.bad = {1}
    _fail_index(loop, 1)
    plans = loop.run(20)
    waiting = [p for p in plans if _group_status(p).get("backoff")]
    assert waiting, "the status never showed the backoff"
    entry = _group_status(waiting[-1])["backoff"][0]
    assert entry["index"] == 1 and entry["failures"] >= 2 and entry["nextTryTime"]
    events = [e for p in plans for e in p.events if e.reason is HoldReason.SLICE_BACKOFF]
    assert events and events[0].type == "Warning"
    assert (
        "group workers: slice at index 1 broke 2 times in a row; next try at" in events[0].message
    )
    holding = waiting[-1]
    assert holding.requeue_after is not None and 0 < holding.requeue_after <= 20
    assert holding.tallies[0].slices[SliceState.BACKOFF] == 1
    moves = {(m.source, m.target) for m in holding.transitions}
    assert (SliceState.ABSENT, SliceState.BACKOFF) in moves
    assert not [c for c in holding.creates if c.replica_index == 1]


def test_a_fixed_template_ends_the_backoff_at_once() -> None:
    loop = Crashes()
    loop.run(5)
    loop.bad = {1}
    _fail_index(loop, 1)
    loop.run(40)  # deep in backoff: the wait is now 20 s or more
    waiting = loop.records()[1]
    assert waiting.failures >= 3
    loop.bad = set()
    loop.group_spec()["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:fixed"
    plan = loop.step()
    made = [c for c in plan.creates if c.replica_index == 1]
    assert len(made) == 2 and {c.reason for c in made} == {CreateReason.TEMPLATE_FIXED}
    loop.run(3)
    pods = [
        p for p in loop.world.list() if p["metadata"]["labels"].get(labels.REPLICA_INDEX) == "1"
    ]
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)


def test_scale_down_ends_a_backoff_and_scale_up_goes_around_the_held_index() -> None:
    loop = Crashes(replicas=2)
    loop.run(5)
    loop.bad = {1}
    _fail_index(loop, 1)
    loop.run(8)
    assert loop.records()[1].failures >= 2
    loop.group_spec()["replicas"] = 3
    plan = loop.step()
    assert {c.replica_index for c in plan.creates} == {2}  # index 1 still waits
    # Back to 2 replicas: slices 0 and 2 serve, so the waiting one is the surplus; a healthy
    # slice is never removed to make room for one that may break again (rule 13).
    loop.group_spec()["replicas"] = 2
    plan = loop.run(3)[0]
    assert 1 not in loop.records()
    assert ANNOTATION not in (loop.obj["metadata"].get("annotations") or {})
    assert not plan.deletes
    assert any(
        (m.source, m.target) == (SliceState.BACKOFF, SliceState.ABSENT) for m in plan.transitions
    )
    loop.run(30)
    assert not [c for c in loop.created if c[1] == 1 and c[0] > loop.clock - 33]


def test_a_record_no_slice_is_wanted_for_ends_once_its_pods_are_gone() -> None:
    loop = Crashes(replicas=2)
    loop.run(5)
    _fail_index(loop, 1)
    loop.group_spec()["replicas"] = 1  # the slice broke just as fewer were asked for
    loop.step()
    assert loop.records()[1].failures == 1  # counted while its pods exist
    loop.run(3)
    assert loop.records() == {}
    assert ANNOTATION not in (loop.obj["metadata"].get("annotations") or {})


def test_workers_to_delete_naming_a_retried_slice_ends_its_backoff() -> None:
    loop = Crashes(replicas=2)
    loop.run(5)
    loop.bad = {1}
    _fail_index(loop, 1)
    loop.run(8)
    loop.bad = set()
    loop.run(30)  # the retry comes up and stays up
    assert 1 in loop.records()
    named = next(
        n
        for n, p in loop.world.pods.items()
        if p["metadata"]["labels"].get(labels.REPLICA_INDEX) == "1"
    )
    loop.group_spec()["replicas"] = 1
    loop.group_spec()["scaleStrategy"] = {"workersToDelete": [named]}
    loop.step()
    assert 1 not in loop.records()


def test_a_slice_ready_for_the_reset_period_is_forgiven() -> None:
    loop = Crashes()
    loop.run(5)
    loop.bad = {1}
    _fail_index(loop, 1)
    loop.run(8)
    loop.bad = set()
    loop.run(30)
    assert loop.records()[1].failures >= 2
    plan = loop.plan()
    assert plan.requeue_after is not None and plan.requeue_after <= POLICY.reset
    loop.clock += POLICY.reset
    loop.step()
    assert loop.records() == {}
    assert loop.step().annotations == {}  # converged: nothing more to write


def test_a_restarted_planner_reads_the_wait_back_from_the_annotation() -> None:
    """Nothing but the annotation carries the wait: a planner fed only the stored cluster and
    pods (as after an operator restart) keeps holding the index until the next try."""
    loop = Crashes()
    loop.run(5)
    loop.bad = {1}
    _fail_index(loop, 1)
    while 1 not in loop.records() or loop.records()[1].failures < 2:
        loop.step()
    loop.step()  # the broken pods are gone; 9 s of the 10 s wait are left
    stored = copy.deepcopy(loop.obj)

    def restarted() -> ClusterPlan:
        """A planner that knows only the stored cluster and the pods."""
        return plan_for(
            load_cluster(stored),
            loop.world.list(),
            [],
            now=loop.now(),
            new_suffix=suffixes(99),
            backoff=POLICY,
        )

    fresh = restarted()
    assert not [c for c in fresh.creates if c.replica_index == 1]
    assert fresh.requeue_after is not None and fresh.requeue_after > 0
    assert fresh.annotations == {}  # nothing to write: the record is already stored
    # Without the annotation (the only memory), the same planner recreates at once.
    del stored["metadata"]["annotations"][ANNOTATION]
    forgetful = restarted()
    assert [c for c in forgetful.creates if c.replica_index == 1]


def test_an_unreadable_annotation_is_ignored() -> None:
    assert read_records({ANNOTATION: "{not json"}) == {}
    assert read_records({ANNOTATION: json.dumps({"g": {"x": {}, "1": {"failures": "2"}}})}) == {}
    text = json.dumps(
        {"g": {"1": {"failures": 2, "slice": "s", "template": "t", "nextTry": stamp(5)}}}
    )
    assert render_records(read_records({ANNOTATION: text})) == json.dumps(
        json.loads(text), sort_keys=True, separators=(",", ":")
    )


def _fail_index(loop: Crashes, index: int) -> None:
    for pod in loop.world.pods.values():
        if pod["metadata"]["labels"].get(labels.REPLICA_INDEX) == str(index):
            pod["status"]["phase"] = "Failed"
            pod["status"]["conditions"][0]["status"] = "False"


def _group_status(plan: ClusterPlan) -> dict[str, Any]:
    groups: list[dict[str, Any]] = plan.status["workerGroups"]
    return groups[0]


@settings(max_examples=200, deadline=None)
@given(
    scenarios(),
    st.sets(st.integers(0, 7), max_size=3),
    st.dictionaries(
        st.integers(0, 7),
        st.sampled_from([None, CreateReason.BACKOFF_RETRY, CreateReason.TEMPLATE_FIXED]),
        max_size=3,
    ),
)
def test_a_held_index_is_never_created_and_every_backoff_move_is_in_the_table(
    scenario: Any, waiting: set[int], retry: dict[int, CreateReason | None]
) -> None:
    """From any pods and any backoff: no slice is created at a reserved index, a released
    index was waiting, each slice is created at most once per index, and every move (checked
    against the table inside the planner) is valid, or plan_group would have raised."""
    spec, pods, switches = scenario
    retry = {i: r for i, r in retry.items() if i not in waiting}
    hold = GroupHold(tuple(sorted(waiting)), retry)
    job = GroupInput(spec, [read_pod(p) for p in pods], desired_slices(spec), switches, suffixes())
    plan = plan_group(job, [Held(hold)])
    made = [r.index for r in plan.replicas if r.index is not None]
    assert len(made) == len(set(made))
    held = {m.slice for m in plan.transitions if m.target is SliceState.BACKOFF}
    assert not {f"index {i}" for i in made} & held
    assert set(plan.released) <= waiting
    for replica in plan.replicas:
        if replica.reason in (CreateReason.BACKOFF_RETRY, CreateReason.TEMPLATE_FIXED):
            assert retry.get(replica.index) is replica.reason
