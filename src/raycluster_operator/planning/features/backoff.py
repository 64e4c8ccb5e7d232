"""Crash-loop backoff per slice (docs/design.md §4 rule 13a, §5 state ``backoff``).

A slice that breaks is replaced at once, at its own index (rule 13). If the slice at that
index breaks again before it has stayed ready for ``reset`` seconds, its re-creation waits
``base`` seconds, doubling with each further break up to ``max``: a bad image or command then
costs a few pod creations an hour instead of churning TPU nodes and the API server. The broken
slice itself is still deleted at once (it frees the accelerators); only the re-creation waits,
and its index stays reserved meanwhile. A backoff belongs to one template: once the group's
template hash (docs/design.md §3.8) differs from that of the slice that broke, the next slice
is created at once.

Where the count lives: one annotation on the RayCluster, ``raycluster-operator.io/slice-backoff``
(JSON: group -> index -> record). Status would be pruned under KubeRay's CRD (§3.7: nothing
it lacks may be load-bearing), the pods are gone exactly while the backoff runs, and memory
is lost on a restart, which would turn a backoff into a hot loop. Metadata is never pruned,
``kubectl get raycluster -o yaml`` shows it, and it is written only when a break is counted
or a record ends: a converged cluster costs no writes.

Everything here is pure: the records, the pods and ``now`` in; the records to write, the
Events, the status entries and when to look again out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from kubefacts.timestamps import micro_time, parse_time, rfc3339
from raycluster_operator.api import labels
from raycluster_operator.api.models import WorkerGroupSpec
from raycluster_operator.api.objects import Pod
from raycluster_operator.builders.template_hash import worker_template_hash
from raycluster_operator.planning.actions import PlannedEvent
from raycluster_operator.planning.backoff_policy import DEFAULT_POLICY, BackoffPolicy
from raycluster_operator.planning.feature import Feature, Rule
from raycluster_operator.planning.pods import read_pod
from raycluster_operator.planning.reasons import CreateReason, DeleteReason, HoldReason
from raycluster_operator.planning.slice_state import SliceState
from raycluster_operator.planning.turn import (
    NO_HOLD,
    ClusterTurn,
    GroupHold,
    GroupPlan,
    GroupTurn,
)

__all__ = [
    "ANNOTATION",
    "CRASHES",
    "DEFAULT_POLICY",
    "NO_HOLD",
    "Backoff",
    "BackoffPolicy",
    "GroupHold",
    "Strike",
    "hold_for",
    "read_records",
    "render_records",
    "settle_group",
]

#: The RayCluster annotation holding every group's backoff records.
ANNOTATION = "raycluster-operator.io/slice-backoff"
#: Deletions that end a slice's backoff: its removal was asked for.
_ENDS = frozenset({DeleteReason.SCALE_DOWN, DeleteReason.WORKERS_TO_DELETE})
#: The breaks that are counted: a host of the slice failed (its pod Failed, or its Ray
#: container ended under restartPolicy Never), which is what a bad image, a bad command or a
#: crashing job does. Other faults are not the slice's own doing (a host missing after one of
#: our creates failed, a pod deleted or evicted, two pods or odd labels): replaced at once,
#: uncounted, so a flaky API server never delays a slice.
CRASHES = frozenset({DeleteReason.HOST_FAILED, DeleteReason.POD_FAILED})


@dataclass(frozen=True)
class Strike:
    """One index's record: how many times in a row its slice broke, and what it waits for."""

    failures: int
    #: The slice counted last (replica name, or pod name single-host): it is counted once.
    slice: str
    #: The template hash of the slice that broke (``ray.io/pod-template-hash``).
    template: str
    #: When the next slice may be created (MicroTime).
    next_try: str

    def to_json(self) -> dict[str, Any]:
        return {
            "failures": self.failures,
            "slice": self.slice,
            "template": self.template,
            "nextTry": self.next_try,
        }


#: group -> replica index -> record.
Records = Mapping[str, Mapping[int, Strike]]


def read_records(annotations: Mapping[str, str] | None) -> dict[str, dict[int, Strike]]:
    """The stored records; anything unreadable is dropped (a hand-edited annotation must not
    stop the planner: at worst a slice is recreated at once, as without backoff)."""
    text = (annotations or {}).get(ANNOTATION)
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except ValueError:
        return {}
    out: dict[str, dict[int, Strike]] = {}
    if not isinstance(raw, dict):
        return out
    for group, entries in raw.items():
        if not isinstance(entries, dict):
            continue
        for index, entry in entries.items():
            strike = _strike(index, entry)
            if strike is not None:
                out.setdefault(str(group), {})[int(index)] = strike
    return out


def _strike(index: object, entry: object) -> Strike | None:
    if not (isinstance(index, str) and index.isascii() and index.isdigit()):
        return None
    if not isinstance(entry, dict):
        return None
    failures, next_try = entry.get("failures"), entry.get("nextTry")
    if not isinstance(failures, int) or failures < 1 or not isinstance(next_try, str):
        return None
    try:
        parse_time(next_try)
    except ValueError:
        return None
    return Strike(failures, str(entry.get("slice", "")), str(entry.get("template", "")), next_try)


def render_records(records: Records) -> str | None:
    """The annotation's value (None: no record left, the annotation goes)."""
    body = {
        group: {str(i): entries[i].to_json() for i in sorted(entries)}
        for group, entries in sorted(records.items())
        if entries
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")) if body else None


def hold_for(records: Mapping[int, Strike], template: str, now: datetime) -> GroupHold:
    waiting: list[int] = []
    retry: dict[int, CreateReason | None] = {}
    for index in sorted(records):
        strike = records[index]
        running = parse_time(strike.next_try) > now
        if strike.template != template and strike.failures > 1:
            retry[index] = CreateReason.TEMPLATE_FIXED if running else CreateReason.BACKOFF_RETRY
        elif running:
            waiting.append(index)
        else:
            retry[index] = CreateReason.BACKOFF_RETRY if strike.failures > 1 else None
    return GroupHold(tuple(waiting), retry)


@dataclass(frozen=True)
class GroupOutcome:
    """A group's records after this pass, and what to say about them."""

    records: dict[int, Strike]
    events: tuple[PlannedEvent, ...] = ()
    #: ``status.workerGroups[].backoff``: the indices waiting, and until when.
    status: tuple[dict[str, Any], ...] = ()
    #: Seconds until something here changes by time alone (a wait ends, a reset falls due).
    wake: float | None = None


def settle_group(
    records: Mapping[int, Strike],
    plan: GroupPlan,
    pods: Sequence[Mapping[str, Any]],
    *,
    template: str,
    now: datetime,
    policy: BackoffPolicy,
) -> GroupOutcome:
    """Count the breaks this pass acts on, end the records no longer due, say what waits.

    ``plan`` is the group's plan: its deletions, the waiting indices it no longer wants
    (``released``: fewer replicas) and the indices it creates slices at. ``pods`` are the
    group's pods as the caches hold them (for the broken slice's template and for how long a
    slice has been ready). A record whose wait is over and whose index nothing holds (no pod,
    no slice created there this pass) is no longer wanted either, and ends.
    """
    group, num_of_hosts = plan.tally.group, plan.tally.num_of_hosts
    deletes = plan.deletes
    created = [r.index for r in plan.replicas]
    out = dict(records)
    for index in plan.released:
        out.pop(index, None)
    events: list[PlannedEvent] = []
    by_name = {Pod(p).name: p for p in pods}
    counted: set[str] = set()
    for item in deletes:
        at = item.replica_index
        if at is None:
            continue
        if item.reason in _ENDS:
            out.pop(at, None)
            continue
        key = item.replica_name or item.name
        if item.reason not in CRASHES or key in counted:
            continue
        counted.add(key)
        old = out.get(at)
        if old is not None and old.slice == key:
            continue  # counted already (a pass that saw it before its pods were terminating)
        broke = _template_of(by_name.get(item.name))
        failures = old.failures + 1 if old is not None and old.template == broke else 1
        wait = policy.delay(failures)
        next_try = now + timedelta(seconds=wait)
        out[at] = Strike(failures, key, broke, micro_time(next_try))
        if wait > 0:
            events.append(
                PlannedEvent(
                    "Warning",
                    HoldReason.SLICE_BACKOFF,
                    f"group {group}: slice at index {at} broke {failures} times in a row; "
                    f"next try at {rfc3339(next_try)} (in {wait:g}s)",
                )
            )
    wakes: list[float] = []
    status: list[dict[str, Any]] = []
    held = {read_pod(p).replica_index for p in pods} | set(created)
    for index in sorted(out):
        strike = out[index]
        due = parse_time(strike.next_try)
        if index not in held and not (due > now and strike.template == template):
            del out[index]  # its wait is over and no slice is wanted there: nothing to count
            continue
        if due > now and strike.template == template:
            wakes.append((due - now).total_seconds())
            status.append(
                {"index": index, "failures": strike.failures, "nextTryTime": rfc3339(due)}
            )
            continue
        since = _ready_since(pods, index, num_of_hosts)
        if since is None:
            continue
        healthy_until = since + timedelta(seconds=policy.reset)
        if healthy_until <= now:
            del out[index]  # stayed ready long enough: forgiven
        else:
            wakes.append((healthy_until - now).total_seconds())
    return GroupOutcome(out, tuple(events), tuple(status), min(wakes) if wakes else None)


def _template_of(pod: Mapping[str, Any] | None) -> str:
    if pod is None:
        return ""
    return Pod(pod).annotations.get(labels.POD_TEMPLATE_HASH_ANNOTATION, "")


def _ready_since(
    pods: Sequence[Mapping[str, Any]], index: int, num_of_hosts: int
) -> datetime | None:
    """When every host of the live slice at ``index`` became ready (None: it is not)."""
    latest: datetime | None = None
    hosts = 0
    for obj in pods:
        view = read_pod(obj)
        if view.replica_index != index or not view.live:
            continue
        if not view.running_and_ready:
            return None
        hosts += 1
        moment = _ready_time(Pod(obj))
        if moment is None:
            return None
        latest = moment if latest is None or moment > latest else latest
    return latest if hosts == num_of_hosts else None


def _ready_time(pod: Pod) -> datetime | None:
    for condition in pod.conditions:
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            when = condition.get("lastTransitionTime")
            if isinstance(when, str):
                try:
                    return parse_time(when)
                except ValueError:
                    return None
    return None


def _int32(description: str) -> dict[str, str]:
    return {"description": description, "type": "integer", "format": "int32"}


class Backoff(Feature):
    """Rule 13a as a lifecycle feature: the backoff records of one RayCluster through one pass,
    read from its annotation, held against each group's plan (``gate``), settled with what the
    plan deletes (``settle``), written back if changed (``finish``)."""

    rule = "13a"
    #: Its records live in an annotation of the RayCluster (metadata only).
    rules = (Rule("ray.io", "rayclusters", ("patch",)),)

    def __init__(self, turn: ClusterTurn) -> None:
        self.cluster = turn.cluster
        self.now = turn.context.now
        self.policy = turn.context.options.backoff
        self.stored_text = (self.cluster.metadata.annotations or {}).get(ANNOTATION)
        self.before = read_records(self.cluster.metadata.annotations)
        self.after: dict[str, dict[int, Strike]] = {}
        self.events: list[PlannedEvent] = []
        self.status_of: dict[str, tuple[dict[str, Any], ...]] = {}
        self.waiting: dict[str, int] = {}
        self._wakes: list[float] = []
        self._pods = turn.context.state.pods
        self._by_group: dict[str, list[Mapping[str, Any]]] | None = None
        #: Groups the pass planned (a group it leaves alone keeps its records).
        self._planned: set[str] = set()

    def _template(self, group: WorkerGroupSpec) -> str:
        return worker_template_hash(self.cluster, group)

    def gate(self, turn: GroupTurn) -> GroupHold:
        group = turn.job.spec
        records = self.before.get(group.group_name)
        if not records:
            return NO_HOLD
        return hold_for(records, self._template(group), self.now)

    def settle(self, turn: GroupTurn, plan: GroupPlan) -> GroupPlan:
        group = turn.job.spec
        self._planned.add(group.group_name)
        if turn.job.stop is None:
            self._settle(group, plan)
        waiting = self.waiting.get(group.group_name, 0)
        if not waiting:
            return plan
        # Slices waiting out a backoff are counted in state ``backoff`` (metrics).
        tally = plan.tally
        slices = {**tally.slices, SliceState.BACKOFF: waiting}
        return replace(plan, tally=replace(tally, slices=slices))

    def _settle(self, group: WorkerGroupSpec, plan: GroupPlan) -> None:
        name = group.group_name
        records = self.before.get(name, {})
        if not records and not any(d.reason in CRASHES for d in plan.deletes):
            return
        outcome = settle_group(
            records,
            plan,
            self._group_pods(name),
            template=self._template(group),
            now=self.now,
            policy=self.policy,
        )
        self.after[name] = outcome.records
        self.events += outcome.events
        if outcome.status:
            self.status_of[name] = outcome.status
            self.waiting[name] = len(outcome.status)
        if outcome.wake is not None:
            self._wakes.append(outcome.wake)

    def finish(self, turn: ClusterTurn) -> None:
        for group in turn.cluster.spec.worker_group_specs:
            name = group.group_name
            if name not in self._planned and name in self.before:
                self.after[name] = dict(self.before[name])
        turn.events += self.events
        turn.annotations.update(self.annotations())
        if self._wakes:
            turn.requeue.append(min(self._wakes))

    fields = {
        "backoff": {
            "description": "Slices whose re-creation waits out a crash-loop backoff: they broke "
            "again soon after they were recreated.",
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "index": _int32("Replica index reserved for the slice."),
                    "failures": _int32("Breaks in a row."),
                    "nextTryTime": {
                        "description": "When the slice is created again.",
                        "type": "string",
                        "format": "date-time",
                    },
                },
            },
        }
    }

    def status(self, group: str) -> Mapping[str, Any]:
        """Rule 13a in the group's entry: which indices wait out a backoff, until when."""
        waiting = self.status_of.get(group)
        return {"backoff": [dict(w) for w in waiting]} if waiting else {}

    def annotations(self) -> dict[str, str | None]:
        """The metadata annotations to merge-patch: empty when the stored value is right."""
        text = render_records(self.after)
        if text == self.stored_text:
            return {}
        return {ANNOTATION: text}

    def _group_pods(self, group: str) -> list[Mapping[str, Any]]:
        if self._by_group is None:
            self._by_group = {}
            for obj in self._pods:
                key = Pod(obj).labels.get(labels.GROUP)
                if key is not None:
                    self._by_group.setdefault(key, []).append(obj)
        return self._by_group.get(group, [])
