"""Every write of one pass, as one value (docs/design.md §4): what the planner decides and the
controller carries out.

The features and the planner's rules contribute to a ``ClusterTurn`` while a pass is planned
(planning/turn.py); ``plan_cluster`` freezes it into one ``Writes`` once, and
``plan_pass`` hands that same value to the controller. The cases ``plan_pass`` settles by
itself (a cluster being deleted, another controller's, an unreadable spec) answer a ``Writes``
with the few fields they need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raycluster_operator.api.objects import Resource
from raycluster_operator.api.problems import Problem
from raycluster_operator.planning.actions import PlannedEvent, PodCreate, PodDelete
from raycluster_operator.planning.context import Cached, ObjectId
from raycluster_operator.planning.slice_state import SliceTransition
from raycluster_operator.planning.turn import GroupTally


@dataclass(frozen=True)
class Writes:
    """One pass's writes, in the order the controller carries them out, and what it read."""

    #: RayCluster metadata annotations to merge-patch (None removes one), before any pod
    #: write: the crash-loop backoff's records (planning/features/backoff.py).
    annotations: dict[str, str | None] = field(default_factory=dict)
    #: Objects to create: the wanted ones (``services``, ``extra_objects``) that neither the
    #: caches nor the controller's record of its own creates show (``ClusterState.present``).
    objects: tuple[dict[str, Any], ...] = ()
    deletes: tuple[PodDelete, ...] = ()
    creates: tuple[PodCreate, ...] = ()
    #: Objects of the cluster's namespace to delete, as (kind, name), after the pod writes: a
    #: slice's ComputeDomain (rule 13b), the per-slice budgets no slice keeps (rule 12b).
    object_deletes: tuple[tuple[str, str], ...] = ()
    #: JSON patch releasing Ray's idle-termination finalizer (metadata only).
    release_finalizer: tuple[dict[str, Any], ...] = ()
    #: Recorded after the writes.
    events: tuple[PlannedEvent, ...] = ()
    #: The desired ``.status``; None leaves the status alone.
    status: dict[str, Any] | None = None
    #: Per worker group, the observed counts (slices by state) the status and metrics report;
    #: None leaves the gauges alone.
    tallies: tuple[GroupTally, ...] | None = None
    #: Every slice this plan moves, and why (``slice_state.TRANSITIONS``).
    transitions: tuple[SliceTransition, ...] = ()
    #: Look again after this many seconds without a change (a timed rule is due then: a host's
    #: unready timeout runs out, a backoff wait ends or falls due for reset); None: no timed
    #: look.
    requeue_after: float | None = None
    #: Why the pass does less than a full plan (for the log): empty for a full plan.
    note: str = ""
    #: What a full plan read besides (the plan command shows it): every service the cluster
    #: needs, the other objects it needs (autoscaler RBAC, a feature's objects), the services
    #: not among the observed ones, and the spec's problems (the parts they name are not
    #: touched).
    services: tuple[dict[str, Any], ...] = ()
    extra_objects: tuple[dict[str, Any], ...] = ()
    missing_services: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()

    @property
    def is_empty(self) -> bool:
        """Nothing to write except maybe the status (and create-if-missing extra objects)."""
        return not (self.creates or self.deletes or self.missing_services)


def object_id(obj: Cached) -> ObjectId:
    view = Resource(obj)
    return view.kind, view.name
