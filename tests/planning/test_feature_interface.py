"""The lifecycle feature interface (planning/feature.py, docs/design.md §4) carries what this
round's features need, shown with toy features plugged in beside the real ones: marks from
objects in ``ClusterState.objects``, a gate with a reason, make-before-break replacement
(extra slices first, the old one once the new is Ready), object writes, Events, annotations
and a requeue. Every move a toy makes is still checked against the slice state table."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from raycluster_operator.planning import EventReason, PlannedEvent, SliceState, lifecycle
from raycluster_operator.planning.feature import Feature
from raycluster_operator.planning.reasons import DeleteReason
from raycluster_operator.planning.turn import ClusterTurn, GroupHold, GroupTurn

from .cluster import Loop, cluster, worker_group
from .world import make_pod

Make = Callable[[ClusterTurn], Feature]


@pytest.fixture
def plug(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Make], None]]:
    def add(make: Make) -> None:
        monkeypatch.setattr(lifecycle, "FEATURES", (*lifecycle.FEATURES, make))

    yield add


def slice_pods(index: int, name: str, hosts: int = 2) -> list[dict[str, Any]]:
    return [
        make_pod(f"{name}-{h}", replica_index=index, replica_name=name, host_index=h)
        for h in range(hosts)
    ]


def evicted(turn: ClusterTurn) -> set[str]:
    return {o["pod"] for o in turn.context.state.objects.get("Eviction", ())}


class Evictions(Feature):
    """(a) A slice with a pod named by an Eviction object is broken, for a table fault."""

    def __init__(self, turn: ClusterTurn) -> None:
        self.pods = evicted(turn)

    def mark(self, turn: GroupTurn) -> None:
        replicas = []
        for r in turn.found.replicas:
            hit = next((p.name for p in r.pods if p.name in self.pods), None)
            if hit is not None and r.state in (SliceState.READY, SliceState.PENDING):
                r = replace(r, state=SliceState.BROKEN, cause=DeleteReason.HOST_LOST, trigger=hit)
            replicas.append(r)
        turn.found = replace(turn.found, replicas=tuple(replicas))


def test_a_mark_from_other_objects_breaks_the_slice_whole(plug: Callable[[Make], None]) -> None:
    plug(Evictions)
    pods = [*slice_pods(0, "workers-aaaaa"), *slice_pods(1, "workers-bbbbb")]
    loop = Loop(
        cluster(worker_group(numOfHosts=2, replicas=2)),
        objects={"Eviction": [{"pod": "workers-bbbbb-1"}]},
    )
    loop.world.pods = {p["metadata"]["name"]: p for p in pods}
    plan = loop.plan()
    assert {d.name for d in plan.deletes} == {"workers-bbbbb-0", "workers-bbbbb-1"}
    assert {d.trigger for d in plan.deletes} == {"workers-bbbbb-1"}
    assert not [c for c in plan.creates if c.group == "workers"]  # it waits for index 1


class Quota(Feature):
    """(b), (d), (e) No new slice fits: creation waits, with an Event and a requeue (a real
    feature brings its own Event reason)."""

    def __init__(self, turn: ClusterTurn) -> None:
        self.held: list[str] = []

    def gate(self, turn: GroupTurn) -> GroupHold:
        self.held.append(turn.job.spec.group_name)
        return GroupHold(most=0)

    def finish(self, turn: ClusterTurn) -> None:
        for group in self.held:
            text = f"group {group}: waiting for quota"
            turn.events.append(PlannedEvent("Normal", EventReason.INVALID_SPEC, text))
        turn.objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "q"}})
        turn.annotations["example.com/quota"] = "waiting"
        turn.requeue.append(30.0)


def test_a_gate_holds_creation_and_the_feature_writes_and_requeues(
    plug: Callable[[Make], None],
) -> None:
    plug(Quota)
    plan = Loop(cluster(worker_group(numOfHosts=2, replicas=2))).plan()
    assert [c.group for c in plan.creates] == ["headgroup"]
    assert any("waiting for quota" in e.message for e in plan.events)
    assert [o["kind"] for o in plan.extra_objects] == ["ConfigMap"]
    assert plan.annotations == {"example.com/quota": "waiting"}
    assert plan.requeue_after == 30.0


class MakeBeforeBreak(Feature):
    """(c) A disrupted slice gets a stand-in first at a free index; it goes once one is Ready."""

    def __init__(self, turn: ClusterTurn) -> None:
        self.pods = evicted(turn)

    def _disrupted(self, turn: GroupTurn) -> list[Any]:
        return [r for r in turn.valid if any(p.name in self.pods for p in r.pods)]

    def spare(self, turn: GroupTurn) -> int:
        return len(self._disrupted(turn))

    def replace(self, turn: GroupTurn) -> None:
        old = self._disrupted(turn)
        if not old:
            return
        staying = [r for r in turn.valid if r not in old]
        if sum(1 for r in staying if r.state is SliceState.READY) >= turn.job.desired:
            for r in old:
                turn.out.replica(r, DeleteReason.TEMPLATE_CHANGED, "disrupted: replaced")
            turn.valid = staying
        # The disrupted slices do not count: their stand-ins are created at free indices.
        turn.need = max(turn.job.desired - len(staying), 0)


def test_make_before_break_creates_first_and_deletes_once_ready(
    plug: Callable[[Make], None],
) -> None:
    plug(MakeBeforeBreak)
    loop = Loop(
        cluster(worker_group(numOfHosts=2, replicas=1)),
        objects={"Eviction": [{"pod": "workers-aaaaa-0"}]},
    )
    loop.world.pods = {p["metadata"]["name"]: p for p in slice_pods(0, "workers-aaaaa")}
    first = loop.plan()
    assert not first.deletes
    assert [(c.replica_index, c.host_index) for c in first.creates if c.group == "workers"] == [
        (1, 0),
        (1, 1),
    ]
    loop.apply(first)  # the stand-in appears Ready
    second = loop.plan()
    assert {d.name for d in second.deletes} == {"workers-aaaaa-0", "workers-aaaaa-1"}
    assert not [c for c in second.creates if c.group == "workers"]
