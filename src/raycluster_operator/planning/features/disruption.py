"""Planned disruptions move whole slices (docs/design.md §4 rule 12b, §5, §6).

Accelerator VMs cannot live-migrate, and a drain evicts one host at a time: left alone, a
drain of one host of a 4-host slice breaks the slice, and nothing stood in for it first. Here a
slice is **disrupted** when a node one of its hosts runs on is

- cordoned (``spec.unschedulable``: ``kubectl drain`` always cordons before it evicts, and so
  do node upgrades): cause ``NodeDrain``;
- tainted ``ToBeDeletedByClusterAutoscaler`` (cluster-autoscaler's scale-down, which drains
  next): ``NodeScaleDown``;
- tainted ``cloud.google.com/impending-node-termination`` (GKE: the VM is about to go):
  ``NodeTermination``;
- labelled ``cloud.google.com/scheduled-maintenance-time`` (GKE's host maintenance notice, a
  Unix time) and inside the maintenance window before that time (default 30 minutes):
  ``HostMaintenance``, whose deadline is that time.

The move is make-before-break. While a group has ready disrupted slices, it may hold up to
``min(disrupted, maxUnavailable)`` slices beyond its desired count: stand-ins, created at the
lowest free index, kept off nodes under a maintenance notice by a required node affinity
(``kubernetes.io/hostname NotIn``; a cordoned or tainted node keeps them off by itself).
Disrupted slices are deleted whole, earliest first, as many as leave the desired count of
ready slices without them: all once the stand-ins are ready, one at a time when more are
disrupted than ``maxUnavailable`` allows stand-ins. A disrupted slice that is not ready yet is
deleted at once (nothing serves on it).

Each multi-host slice has its own PodDisruptionBudget (builders/budgets.py): a drain's eviction
of one host is refused (429) and kubectl retries, until the move deletes the slice; the evicted
pod is then already terminating, which the eviction API lets go, and the drain completes.

Without room for the stand-in (its pods are unschedulable, or the last pass could not create
it for the namespace's quota, rule 13c) the old slice keeps serving until
the latest moment. For a drain, that is its eviction: the planner stops keeping the slice's
budget (deletes it), within the group's ``maxUnavailable`` (ready slices never fewer than
desired - maxUnavailable on that account); the drain's next eviction then succeeds, and the
evicted host (terminating, with Kubernetes' ``DisruptionTarget`` condition) breaks the slice,
which rule 8 deletes whole, for ``SliceEvicted``. For a maintenance, it is the announced time:
the slice is deleted whole then. The stand-in stays pending and serves once capacity returns.

How the operator learns of an eviction attempt: it does not need to. A refused eviction leaves
no trace in Kubernetes (no Event, nothing on the pod or the budget), but a drain always cordons
first, and the cordon is the signal; an eviction that succeeds is seen on the pod.

Pure: ``now`` is an argument; nodes come from the controller's Node cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster
from raycluster_operator.api.objects import Pod
from raycluster_operator.builders.budgets import PDB_KIND, avoid_nodes, budget_name, slice_budget
from raycluster_operator.planning.actions import PlannedEvent
from raycluster_operator.planning.budget_overlap import (
    Overlap,
    group_labels,
    ours,
    overlap_condition,
    previous_condition,
    selecting,
    theirs,
)
from raycluster_operator.planning.context import Cached
from raycluster_operator.planning.feature import Feature, Route, Watch
from raycluster_operator.planning.reasons import (
    Condition,
    CreateReason,
    DeleteReason,
    EventReason,
)
from raycluster_operator.planning.replicas import GroupPods, Replica
from raycluster_operator.planning.slice_state import SliceState
from raycluster_operator.planning.turn import ClusterTurn, GroupPlan, GroupTurn

MAINTENANCE_LABEL = "cloud.google.com/scheduled-maintenance-time"
AUTOSCALER_TAINT = "ToBeDeletedByClusterAutoscaler"
TERMINATION_TAINT = "cloud.google.com/impending-node-termination"
#: Default ``--maintenance-window``: a maintenance is acted on this long before its time.
DEFAULT_WINDOW = 1800.0
#: Default per-group ``maxUnavailable`` (slices a group's planned disruptions may take at once).
DEFAULT_MAX_UNAVAILABLE = 1

_NEVER = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class NodeDisruption:
    """Why one node's pods are about to go, and by when (None: when the drain evicts)."""

    node: str
    cause: DeleteReason
    #: One sentence: "node N is cordoned (a drain evicts next)".
    detail: str
    deadline: datetime | None = None


@dataclass(frozen=True, slots=True)
class DisruptionCheck:
    """What the nodes say about one cluster's pods."""

    #: Live pods on a disrupted node, by pod name.
    hosts: Mapping[str, NodeDisruption] = field(default_factory=dict)
    #: Terminating pods that were evicted (``DisruptionTarget``), by pod name: their node.
    evicted: Mapping[str, str] = field(default_factory=dict)
    #: Pods the scheduler could not place (``PodScheduled=False``).
    unschedulable: frozenset[str] = frozenset()
    #: Seconds until a maintenance window opens or a maintenance time comes.
    recheck_after: float | None = None
    now: datetime = _NEVER
    enabled: bool = False

    @property
    def nodes(self) -> frozenset[str]:
        """Nodes new slices must be kept off by affinity: those under a maintenance notice.
        A cordoned or NoSchedule-tainted node keeps new pods off by itself, and an affinity
        would outlive the cordon (a stand-in waiting for room could never use the node again
        once it is uncordoned)."""
        return frozenset(
            d.node for d in self.hosts.values() if d.cause is DeleteReason.HOST_MAINTENANCE
        )


NO_DISRUPTIONS = DisruptionCheck()


def node_disruption(
    node: Cached, now: datetime, window: float
) -> tuple[NodeDisruption | None, float | None]:
    """The node's planned disruption, if any, and when to look again (a window not yet open,
    a maintenance time not yet come)."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name") or "")
    spec = node.get("spec") or {}
    for taint in spec.get("taints") or ():
        key = taint.get("key")
        if key == TERMINATION_TAINT:
            detail = f"node {name} is tainted {key} (GKE: the VM is about to stop)"
            return NodeDisruption(name, DeleteReason.NODE_TERMINATION, detail), None
        if key == AUTOSCALER_TAINT:
            detail = f"node {name} is tainted {key} (cluster-autoscaler scale-down)"
            return NodeDisruption(name, DeleteReason.NODE_SCALE_DOWN, detail), None
    stamp = (meta.get("labels") or {}).get(MAINTENANCE_LABEL)
    at: datetime | None = None
    if stamp is not None:
        try:
            at = datetime.fromtimestamp(int(str(stamp)), UTC)
        except (ValueError, OverflowError):
            at = None
    if spec.get("unschedulable"):
        detail = f"node {name} is cordoned (kubectl drain or a node upgrade)"
        return NodeDisruption(name, DeleteReason.NODE_DRAIN, detail, at), None
    if at is None:
        return None, None
    opens = at - timedelta(seconds=window)
    if now < opens:
        return None, (opens - now).total_seconds()
    detail = (
        f"node {name} has a host maintenance scheduled at {at.isoformat()} "
        f"({MAINTENANCE_LABEL}={stamp})"
    )
    left = (at - now).total_seconds()
    return NodeDisruption(name, DeleteReason.HOST_MAINTENANCE, detail, at), (
        left if left > 0 else None
    )


def check_disruptions(
    pods: Iterable[Cached], nodes: Mapping[str, Cached], *, now: datetime, window: float
) -> DisruptionCheck:
    """Read every pod of the cluster against its node."""
    disrupted: dict[str, NodeDisruption] = {}
    recheck: float | None = None
    for name, obj in nodes.items():
        found, again = node_disruption(obj, now, window)
        if found is not None:
            disrupted[name] = found
        if again is not None:
            recheck = again if recheck is None else min(recheck, again)
    hosts: dict[str, NodeDisruption] = {}
    evicted: dict[str, str] = {}
    unschedulable: set[str] = set()
    for raw in pods:
        pod = Pod(raw)
        node = pod.node_name or ""
        conditions = pod.conditions
        if pod.deletion_timestamp is not None:
            if _condition(conditions, "DisruptionTarget") == "True":
                evicted[pod.name] = node
            continue
        if node in disrupted:
            hosts[pod.name] = disrupted[node]
        if not node and _condition(conditions, "PodScheduled") == "False":
            unschedulable.add(pod.name)
    return DisruptionCheck(hosts, evicted, frozenset(unschedulable), recheck, now, True)


def _condition(conditions: Sequence[Mapping[str, Any]], kind: str) -> str | None:
    found = next((c for c in conditions if c.get("type") == kind), None)
    return None if found is None else str(found.get("status"))


def mark_evictions(found: GroupPods, check: DisruptionCheck) -> GroupPods:
    """A slice broken because a host is terminating after an eviction was evicted: its cause
    becomes ``SliceEvicted`` (the Event then names the eviction, not just a terminating pod)."""
    if not check.evicted:
        return found
    replicas = []
    for replica in found.replicas:
        pod = next((p for p in replica.pods if p.name in check.evicted), None)
        if (
            pod is not None
            and replica.state is SliceState.BROKEN
            and replica.cause is DeleteReason.HOST_TERMINATING
        ):
            host = f"host {pod.host_index} (pod {pod.name})" if replica.name else f"pod {pod.name}"
            detail = (
                f"{host} was evicted from node {check.evicted[pod.name] or '?'}; the slice goes "
                "whole"
            )
            replica = replace(replica, cause=DeleteReason.SLICE_EVICTED, detail=detail)
        replicas.append(replica)
    return replace(found, replicas=tuple(replicas))


@dataclass(frozen=True, slots=True)
class Disrupted:
    """One disrupted slice and the host that makes it so (the earliest deadline first)."""

    replica: Replica
    disruption: NodeDisruption
    pod: str
    host: int | None

    @property
    def order(self) -> tuple[datetime, int, str]:
        return (self.disruption.deadline or _NEVER, self.replica.index or 0, self.replica.key)


def disrupted_slices(replicas: Iterable[Replica], check: DisruptionCheck) -> list[Disrupted]:
    out = []
    for replica in replicas:
        hits = [
            Disrupted(replica, check.hosts[p.name], p.name, p.host_index)
            for p in replica.pods
            if p.name in check.hosts
        ]
        if hits:
            out.append(min(hits, key=lambda d: (d.disruption.deadline or _NEVER, d.host or 0)))
    return sorted(out, key=lambda d: d.order)


def surge_for(replicas: Iterable[Replica], check: DisruptionCheck, max_unavailable: int) -> int:
    """How many slices beyond the desired count the group may hold as stand-ins."""
    ready = [d for d in disrupted_slices(replicas, check) if d.replica.state is SliceState.READY]
    return min(len(ready), max_unavailable)


@dataclass(frozen=True, slots=True)
class Move:
    """A disrupted slice the planner deletes now, whole."""

    replica: Replica
    reason: DeleteReason
    message: str
    trigger: str


@dataclass(frozen=True, slots=True)
class GroupMoves:
    deletes: tuple[Move, ...] = ()
    #: Stand-ins the group may hold beyond its desired count after this pass's deletes.
    surge: int = 0
    #: Slices whose budget is not kept (no room for a stand-in: the drain may evict them).
    released: frozenset[str] = frozenset()
    #: For the status: each disrupted slice still serving, as a status entry.
    disrupted: tuple[dict[str, Any], ...] = ()
    #: New slices of the group avoid these nodes.
    avoid: frozenset[str] = frozenset()


NO_MOVES = GroupMoves()


def plan_moves(
    valid: Sequence[Replica],
    check: DisruptionCheck,
    *,
    desired: int,
    max_unavailable: int,
    new_slices_wait: bool = False,
) -> GroupMoves:
    """Rule 12b for one group's serving slices (after rules 8-12a). `new_slices_wait`: the
    last pass could not create a slice of the group for quota (rule 13c), so a stand-in has
    no room, as when its pods are unschedulable."""
    found = disrupted_slices(valid, check)
    if not found:
        return NO_MOVES
    going = {d.replica.key for d in found}
    healthy_ready = sum(1 for r in valid if r.key not in going and r.state is SliceState.READY)
    ready = [d for d in found if d.replica.state is SliceState.READY]
    deletes = [
        _move(d, "it is not ready yet, so it is recreated off the node at once")
        for d in found
        if d.replica.state is not SliceState.READY
    ]
    released: list[str] = []
    # As many disrupted slices go (earliest first) as keep D ready without them: all once the
    # stand-ins are ready, one at a time while maxUnavailable caps the stand-ins below the
    # disrupted count (two drains at once with m = 1 must not wait on each other for ever).
    done = max(0, min(len(ready), healthy_ready + len(ready) - desired))
    deletes += [_move(d, "its stand-in is ready") for d in ready[:done]]
    ready = ready[done:]
    if ready:
        due = [d for d in ready if d.disruption.deadline and d.disruption.deadline <= check.now]
        deletes += [
            _move(d, "the maintenance time has come before a stand-in was ready") for d in due
        ]
        ready = [d for d in ready if d not in due]
        if new_slices_wait or _no_room(valid, going, check):
            serving_ready = sum(1 for r in valid if r.state is SliceState.READY) - done
            unavailable = max(desired - serving_ready, 0) + len(due)
            allowance = max(max_unavailable - unavailable, 0)
            released = [d.replica.key for d in ready[:allowance]]
    return GroupMoves(
        deletes=tuple(deletes),
        surge=min(len(ready), max_unavailable),
        released=frozenset(released),
        disrupted=tuple(_entry(d, d.replica.key in released) for d in ready),
        avoid=check.nodes,
    )


def _no_room(valid: Sequence[Replica], going: set[str], check: DisruptionCheck) -> bool:
    """A stand-in (an undisrupted slice not yet ready) has a host the scheduler cannot place."""
    return any(
        p.name in check.unschedulable
        for r in valid
        if r.key not in going and r.state is SliceState.PENDING
        for p in r.pods
    )


def _move(found: Disrupted, why: str) -> Move:
    replica = found.replica
    what = f"slice {replica.name}" if replica.name else f"pod {replica.key}"
    host = f"host {found.host} (pod {found.pod})" if replica.name else f"pod {found.pod}"
    message = f"{what} is moved off its nodes: {host} runs on {found.disruption.detail}; {why}"
    return Move(replica, found.disruption.cause, message, found.pod)


def _entry(found: Disrupted, released: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "slice": found.replica.key,
        "reason": str(found.disruption.cause),
        "node": found.disruption.node,
        "message": found.disruption.detail,
        "budgetReleased": released,
    }
    if found.replica.index is not None:
        entry["index"] = found.replica.index
    if found.disruption.deadline is not None:
        entry["deadline"] = found.disruption.deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
    return entry


def budgeted(replicas: Iterable[Replica], moves: GroupMoves, deleted: set[str]) -> list[str]:
    """Replica names whose PodDisruptionBudget is kept: every multi-host serving slice not
    being deleted and not released."""
    return sorted(
        r.name
        for r in replicas
        if r.name is not None
        and r.state in (SliceState.PENDING, SliceState.READY)
        and r.key not in deleted
        and r.key not in moves.released
    )


class Disruptions(Feature):
    """Rule 12b as a lifecycle feature: the hosts' nodes, read once per pass, say which slices
    a drain, a maintenance or a scale-down is about to take; those move whole, make before
    break, and every other multi-host slice keeps its own PodDisruptionBudget."""

    rule = "12b"
    #: The nodes' cordons, taints and maintenance labels; a budget per slice, made and removed
    #: (never changed), and a user's budgets of the namespace, which may select the same pods.
    watches = (
        Watch("", "v1", "Node", "nodes", namespaced=False, route=Route.NODE),
        Watch(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            ("create", "delete"),
            route=Route.LABEL_OR_NAMESPACE,
        ),
    )

    def __init__(self, turn: ClusterTurn) -> None:
        context = turn.context
        options = context.options
        self.enabled = turn.acting and options.planned_disruptions
        self.check = NO_DISRUPTIONS
        if self.enabled:
            own = [p for p in context.state.pods if _owned(p, turn.cluster)]
            self.check = check_disruptions(
                own, context.state.nodes, now=context.now, window=options.maintenance_window
            )
        self.cluster = turn.cluster
        self.waited = turn.groups_that_waited() if self.enabled else frozenset()
        self.moves: dict[str, GroupMoves] = {}
        self.budgets: list[dict[str, Any]] = []
        self.planned: set[str] = set()
        # A user's budget over a group's pods: ours stand back (planning/budget_overlap.py).
        found = context.state.objects.get(PDB_KIND, ()) if self.enabled else ()
        self.users = theirs(found)
        self.overlaps: list[Overlap] = []
        self.said: Condition | None = None

    def mark(self, turn: GroupTurn) -> None:
        turn.found = mark_evictions(turn.found, self.check)

    def spare(self, turn: GroupTurn) -> int:
        """Scale-down (rule 12) leaves the stand-ins of ready disrupted slices alone."""
        if not self.enabled:
            return 0
        return surge_for(turn.valid, self.check, _max_unavailable(turn))

    def replace(self, turn: GroupTurn) -> None:
        """Delete the disrupted slices whose stand-ins are ready (or that cannot wait), and ask
        for stand-ins for the rest, within the group's maxUnavailable."""
        if not self.enabled:
            return
        desired = turn.job.desired
        moves = plan_moves(
            turn.valid,
            self.check,
            desired=desired,
            max_unavailable=_max_unavailable(turn),
            new_slices_wait=turn.job.spec.group_name in self.waited,
        )
        for move in moves.deletes:
            turn.out.replica(move.replica, move.reason, move.message, move.trigger)
        turn.valid = [r for r in turn.valid if r.key not in turn.out.replica_keys]
        valid = len(turn.valid)
        ordinary = max(desired - valid if turn.need is None else turn.need, 0)
        extra = max(desired + moves.surge - valid, 0) - max(desired - valid, 0)
        if extra > 0:
            turn.need = ordinary + extra
            turn.reasons.append((extra, CreateReason.SLICE_MOVE))
        self.moves[turn.job.spec.group_name] = moves

    def settle(self, turn: GroupTurn, plan: GroupPlan) -> GroupPlan:
        """The group's budgets, and its disrupted slices for the status."""
        if not self.enabled:
            return plan
        spec = turn.job.spec
        self.planned.add(spec.group_name)
        moves = self.moves.get(spec.group_name, NO_MOVES)
        if turn.job.stop is None and spec.num_of_hosts > 1:
            names = budgeted(turn.found.replicas, moves, turn.out.replica_keys)
            pods = [p for r in turn.found.replicas for p in r.pods]
            users = selecting(self.users, group_labels(self.cluster, spec), pods)
            if users:
                cluster = self.cluster.metadata.name
                mine = tuple(budget_name(cluster, n) for n in names)
                self.overlaps.append(Overlap(spec.group_name, users, mine))
            else:
                self.budgets += [
                    slice_budget(self.cluster, spec.group_name, name, spec.num_of_hosts)
                    for name in names
                ]
        if not moves.disrupted:
            return plan
        return replace(plan, tally=replace(plan.tally, disrupted=moves.disrupted))

    def finish(self, turn: ClusterTurn) -> None:
        if not self.enabled:
            return
        if self.check.recheck_after is not None:
            turn.requeue.append(self.check.recheck_after)
        turn.objects += self.budgets
        keep = {str(b["metadata"]["name"]) for b in self.budgets}
        groups = {g.group_name for g in turn.cluster.spec.worker_group_specs}
        self._say_overlaps(turn)
        for cached in turn.context.state.objects.get(PDB_KIND, ()):
            if not ours(cached, self.cluster.metadata.name):
                continue  # a user's budget, even one labelled with the cluster
            meta = cached.get("metadata") or {}
            name = str(meta.get("name") or "")
            group = (meta.get("labels") or {}).get(labels.GROUP)
            # A budget of a group not planned this pass (an invalid group spec) is kept.
            if name and name not in keep and (group in self.planned or group not in groups):
                turn.object_deletes.append((PDB_KIND, name))
        avoid = {g: m.avoid for g, m in self.moves.items() if m.avoid}
        if avoid:
            turn.creates = [
                replace(c, manifest=avoid_nodes(c.manifest, avoid[c.group]))
                if c.group in avoid
                else c
                for c in turn.creates
            ]

    def _say_overlaps(self, turn: ClusterTurn) -> None:
        condition, warning = overlap_condition(self.overlaps, previous_condition(self.cluster))
        self.said = condition
        if warning is not None:
            reason = EventReason.DISRUPTION_BUDGET_OVERLAP
            turn.events.append(PlannedEvent("Warning", reason, warning))

    def conditions(self) -> Sequence[Condition]:
        return () if self.said is None else (self.said,)


def _max_unavailable(turn: GroupTurn) -> int:
    return turn.job.spec.max_unavailable or DEFAULT_MAX_UNAVAILABLE


def _owned(obj: Cached, cluster: RayCluster) -> bool:
    meta = obj.get("metadata") or {}
    return (meta.get("labels") or {}).get(labels.CLUSTER) == cluster.metadata.name and meta.get(
        "namespace"
    ) in (None, cluster.metadata.namespace)
