"""One pass over any RayCluster object, whatever state it is in: the controller's only decision.

``plan_cluster`` plans a readable, live cluster. Around it, this module decides the cases the
controller used to settle itself, so that every decision is made here from what the caches
show and the controller only carries the writes out (docs/design.md §7):

- a cluster being deleted with Ray's finalizer: its pods go, then the finalizer is released;
- a cluster another controller manages (``spec.managedBy``): nothing at all;
- a cluster another controller acts on (pods it controls name another creator): one
  condition and one Warning, then nothing (``conflict``, rule 2a);
- pods with the cluster's label that no controller of it made: set aside before anything is
  planned, so no rule counts or deletes them (``strays``, rule 2b);
- a cluster whose spec cannot be read: the InvalidSpec condition, and one Warning Event when
  the condition first appears or its text changes, and nothing else;
- the services and the autoscaler's ServiceAccount/Role/RoleBinding: created when neither the
  caches nor the controller's record of its own recent creates show them.

The inputs travel on as one ``PlanContext`` (planning/context.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from raycluster_operator.api.objects import RayClusterObject
from raycluster_operator.api.problems import Problem
from raycluster_operator.api.validation import parse_cluster
from raycluster_operator.planning.actions import DELETE_POD, PlannedEvent
from raycluster_operator.planning.cluster_plan import plan_cluster
from raycluster_operator.planning.conflict import controller_conflict
from raycluster_operator.planning.context import (
    DEFAULT_CONTROLLER_NAMES,
    DEFAULT_OPTIONS,
    Cached,
    ClusterState,
    ObjectId,
    PlanContext,
    PlanOptions,
)
from raycluster_operator.planning.deletion import plan_deletion
from raycluster_operator.planning.features.strays import split_strays
from raycluster_operator.planning.reasons import DeleteReason, EventReason
from raycluster_operator.planning.status import INVALID_SPEC, unreadable_status
from raycluster_operator.planning.writes import Writes, object_id

__all__ = [
    "DEFAULT_CONTROLLER_NAMES",
    "ClusterState",
    "ObjectId",
    "PassPlan",
    "PlanOptions",
    "Writes",
    "object_id",
    "plan_pass",
]


#: The name ``plan_pass`` answers under: one ``Writes`` (planning/writes.py).
PassPlan = Writes


def plan_pass(
    state: ClusterState,
    *,
    now: datetime,
    new_suffix: Callable[[], str],
    options: PlanOptions = DEFAULT_OPTIONS,
) -> Writes:
    obj = state.cluster
    stored = RayClusterObject(obj)
    pods, strays = split_strays(obj, state.pods)  # rule 2b
    if stored.deleting:
        return _deleting(replace(state, pods=pods))
    managed_by = stored.managed_by
    if managed_by and managed_by not in options.controller_names:
        return Writes(note=f"managed by {managed_by}")
    conflict = controller_conflict(obj, state.pods, now)
    if conflict is not None:  # rule 2a
        return Writes(status=conflict.status, events=conflict.events, note=conflict.note)
    state = replace(state, pods=pods, strays=strays)
    cluster, problems = parse_cluster(obj)
    if cluster is None:
        return _unreadable(obj, problems, now)
    return plan_cluster(cluster, PlanContext(state, now, new_suffix, options))


def _deleting(state: ClusterState) -> Writes:
    plan = plan_deletion(state.cluster, state.pods)
    if plan is None:
        return Writes(note="deleting")
    events: tuple[PlannedEvent, ...] = ()
    if plan.deletes:
        events = (
            PlannedEvent(
                "Normal",
                DeleteReason.CLUSTER_DELETING,
                f"RayCluster is being deleted: removing {len(plan.deletes)} pods",
                action=DELETE_POD,
            ),
        )
    return Writes(
        deletes=plan.deletes,
        release_finalizer=plan.release_finalizer,
        events=events,
        note="deleting",
    )


def _unreadable(obj: Cached, problems: Sequence[Problem], now: datetime) -> Writes:
    stored = RayClusterObject(obj)
    before = stored.status
    status = unreadable_status(before, problems, stored.generation, now=now)
    text = "; ".join(str(p) for p in problems) or "the RayCluster cannot be read"
    return Writes(
        events=() if _reported(before, text) else (_invalid_event(text),),
        status=status,
        note="invalid",
    )


def _reported(status: Mapping[str, Any], text: str) -> bool:
    """The InvalidSpec condition already says this: the Warning went out when it was set."""
    return any(
        isinstance(c, Mapping)
        and c.get("type") == INVALID_SPEC
        and c.get("status") == "True"
        and c.get("message") == text
        for c in status.get("conditions") or ()
    )


def _invalid_event(text: str) -> PlannedEvent:
    return PlannedEvent("Warning", EventReason.INVALID_SPEC, text, action="Validate")
