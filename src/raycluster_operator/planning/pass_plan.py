"""One pass over any RayCluster object, whatever state it is in: the controller's only decision.

``plan_cluster`` plans a readable, live cluster. Around it, this module decides the cases the
controller used to settle itself, so that every decision is made here from what the caches
show and the controller only carries the writes out (docs/design.md §7):

- a cluster being deleted with Ray's finalizer: its pods go, then the finalizer is released;
- a cluster another controller manages (``spec.managedBy``): nothing at all;
- a cluster whose spec cannot be read: the InvalidSpec condition, and one Warning Event when
  the condition first appears or its text changes, and nothing else;
- the services and the autoscaler's ServiceAccount/Role/RoleBinding: created when neither the
  caches nor the controller's record of its own recent creates show them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from raycluster_operator.api.objects import RayClusterObject, Resource
from raycluster_operator.api.problems import Problem
from raycluster_operator.api.validation import parse_cluster
from raycluster_operator.planning.actions import DELETE_POD, PlannedEvent, PodCreate, PodDelete
from raycluster_operator.planning.backoff import DEFAULT_POLICY, BackoffPolicy
from raycluster_operator.planning.cluster_plan import ClusterPlan, plan_cluster
from raycluster_operator.planning.deletion import plan_deletion
from raycluster_operator.planning.group_plan import GroupTally
from raycluster_operator.planning.quota import CONDITION as QUOTA_CONDITION
from raycluster_operator.planning.quota import (
    AdmissionHold,
    fit_slices,
    soonest_hold,
    with_quota_status,
    without_create_events,
)
from raycluster_operator.planning.reasons import DeleteReason, EventReason
from raycluster_operator.planning.status import INVALID_SPEC, unreadable_status

Obj = Mapping[str, Any]
#: (kind, name) of an object in the cluster's namespace.
ObjectId = tuple[str, str]

#: ``spec.managedBy`` values that mean "this operator" (KubeRay's own value included: we are
#: a drop-in replacement for it).
DEFAULT_CONTROLLER_NAMES = frozenset({"ray.io/kuberay-operator", "ray.io/raycluster-operator"})


@dataclass(frozen=True)
class PlanOptions:
    """The switches that change what is planned (``--feature-gates`` and the environment)."""

    multi_host_indexing: bool = True
    random_pod_delete: bool = False
    controller_names: frozenset[str] = DEFAULT_CONTROLLER_NAMES
    #: ``--unready-slice-timeout`` (seconds): a host that was Ready and has not been for this
    #: long breaks its slice, and so does a host on a lost node; 0 turns host-loss failover
    #: off (planning/host_loss.py).
    unready_slice_timeout: float = 60.0
    #: Crash-loop backoff per slice (planning/backoff.py), seconds: the first delay, its cap,
    #: and how long a slice stays ready before its count is forgiven.
    slice_backoff_base: float = DEFAULT_POLICY.base
    slice_backoff_max: float = DEFAULT_POLICY.max
    slice_backoff_reset: float = DEFAULT_POLICY.reset

    @property
    def backoff(self) -> BackoffPolicy:
        return BackoffPolicy(
            self.slice_backoff_base, self.slice_backoff_max, self.slice_backoff_reset
        )


@dataclass(frozen=True)
class ClusterState:
    """What the caches show about one RayCluster: the inputs of a pass."""

    #: The RayCluster as cached (its status overlaid with the controller's own last write
    #: while the cache has not caught up with it).
    cluster: Obj
    #: Pods labelled with the cluster's name.
    pods: Sequence[Obj] = ()
    #: Services that name the cluster as their owner.
    services: Sequence[Obj] = ()
    #: Services, ServiceAccounts, Roles and RoleBindings known to exist in the cluster's
    #: namespace: in the caches, or created by the controller and not yet seen there.
    present: frozenset[ObjectId] = frozenset()
    #: The Nodes the cluster's pods are bound to, by name, as cached (host loss); a node not
    #: cached (or not watched) is missing and reads as healthy.
    nodes: Mapping[str, Obj] = field(default_factory=dict)
    #: The ResourceQuotas of the cluster's namespace as cached; None when the operator does
    #: not watch them (no grant): slices are then not checked before creation (rule 13b).
    quotas: Sequence[Obj] | None = None
    #: Per worker group, the executor's record of a pod of its slice refused by the API
    #: (rule 13b): the group creates no slice until the hold ends.
    holds: Mapping[str, AdmissionHold] = field(default_factory=dict)


@dataclass(frozen=True)
class PassPlan:
    """Every write of one pass, in the order the controller carries them out."""

    #: Services and autoscaler RBAC objects to create.
    objects: tuple[dict[str, Any], ...] = ()
    deletes: tuple[PodDelete, ...] = ()
    creates: tuple[PodCreate, ...] = ()
    #: JSON patch releasing Ray's idle-termination finalizer (metadata only).
    release_finalizer: tuple[dict[str, Any], ...] = ()
    #: Recorded after the writes.
    events: tuple[PlannedEvent, ...] = ()
    #: The desired ``.status``; None leaves the status alone.
    status: dict[str, Any] | None = None
    #: Per worker group slice figures for the metrics; None leaves the gauges alone.
    slices: tuple[GroupTally, ...] | None = None
    #: Why the pass does less than a full plan (for the log): empty for a full plan.
    note: str = ""
    #: RayCluster metadata annotations to merge-patch (None removes one), before any pod
    #: write: the crash-loop backoff's records (planning/backoff.py).
    annotations: dict[str, str | None] = field(default_factory=dict)
    #: Look again after this many seconds without a change (a timed rule is due then: a
    #: host's unready timeout runs out, a backoff ends);
    #: None = no timed requeue.
    requeue_after: float | None = None


def plan_pass(
    state: ClusterState,
    *,
    now: datetime,
    new_suffix: Callable[[], str],
    options: PlanOptions = PlanOptions(),
) -> PassPlan:
    obj = state.cluster
    stored = RayClusterObject(obj)
    if stored.deleting:
        return _deleting(state)
    managed_by = stored.managed_by
    if managed_by and managed_by not in options.controller_names:
        return PassPlan(note=f"managed by {managed_by}")
    cluster, problems = parse_cluster(obj)
    if cluster is None:
        return _unreadable(obj, problems, now)
    plan = plan_cluster(
        cluster,
        state.pods,
        state.services,
        now=now,
        new_suffix=new_suffix,
        multi_host_indexing=options.multi_host_indexing,
        random_pod_delete=options.random_pod_delete,
        nodes=state.nodes,
        unready_slice_timeout=options.unready_slice_timeout,
        backoff=options.backoff,
    )
    return _fit_quota(_full(plan, state.present), state, stored, now)


def _fit_quota(
    plan: PassPlan, state: ClusterState, stored: RayClusterObject, now: datetime
) -> PassPlan:
    """Rule 13b: slices that do not fit the namespace's quotas, or whose group is held after
    a refusal, wait whole; the status and a Warning Event say which and why."""
    creates, waiting = fit_slices(plan.creates, state.quotas, state.holds, now)
    before = stored.status
    had = any(c.get("type") == QUOTA_CONDITION for c in before.get("conditions") or ())
    if not waiting and not had:
        return plan
    if plan.status is None:
        return replace(plan, creates=creates)
    status, events = with_quota_status(plan.status, before, waiting, stored.generation, now)
    due = [d for d in (plan.requeue_after, soonest_hold(state.holds, now)) if d is not None]
    return replace(
        plan,
        creates=creates,
        events=(*without_create_events(plan.events, waiting), *events),
        status=status,
        requeue_after=min(due) if due else None,
    )


def _full(plan: ClusterPlan, present: frozenset[ObjectId]) -> PassPlan:
    wanted = (*plan.services, *plan.extra_objects)
    return PassPlan(
        objects=tuple(o for o in wanted if object_id(o) not in present),
        deletes=plan.deletes,
        creates=plan.creates,
        events=plan.events,
        status=plan.status,
        slices=plan.tallies,
        annotations=plan.annotations,
        requeue_after=plan.requeue_after,
    )


def _deleting(state: ClusterState) -> PassPlan:
    plan = plan_deletion(state.cluster, state.pods)
    if plan is None:
        return PassPlan(note="deleting")
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
    return PassPlan(
        deletes=plan.deletes,
        release_finalizer=plan.release_finalizer,
        events=events,
        note="deleting",
    )


def _unreadable(obj: Obj, problems: Sequence[Problem], now: datetime) -> PassPlan:
    stored = RayClusterObject(obj)
    before = stored.status
    status = unreadable_status(before, problems, stored.generation, now=now)
    text = "; ".join(str(p) for p in problems) or "the RayCluster cannot be read"
    return PassPlan(
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


def object_id(obj: Obj) -> ObjectId:
    view = Resource(obj)
    return view.kind, view.name
