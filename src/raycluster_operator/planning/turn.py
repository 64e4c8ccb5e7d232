"""One pass while it is planned: the values the planner and the lifecycle features share.

A ``ClusterTurn`` is one RayCluster's pass (its context, what was read from it, and the writes
decided so far); a ``GroupTurn`` is one worker group's plan inside it. The planner's rules and
the features' hooks (planning/feature.py) read and extend these, in rule order
(docs/design.md §4), so a feature needs no parameter of its own anywhere. Once every rule and
feature has had its say, ``plan_cluster`` freezes the turn's writes into one ``Writes``
(planning/writes.py), the value the controller carries out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from raycluster_operator.api.models import RayCluster, WorkerGroupSpec
from raycluster_operator.planning.actions import PlannedEvent, PodCreate, PodDelete
from raycluster_operator.planning.context import PlanContext
from raycluster_operator.planning.pods import PodView
from raycluster_operator.planning.reasons import CreateReason, DeleteReason
from raycluster_operator.planning.replicas import GroupPods, Replica
from raycluster_operator.planning.slice_state import SliceState, SliceTransition
from raycluster_operator.planning.spec_check import SpecCheck


@dataclass(frozen=True, slots=True)
class NewReplica:
    """A replica to create: every one of its hosts is created in the same plan (rule 13)."""

    index: int | None
    name: str | None
    #: Host indices to create; ``(None,)`` for a single-host replica.
    hosts: tuple[int | None, ...]
    reason: CreateReason


@dataclass(frozen=True, slots=True)
class GroupTally:
    """What the status reports for one group: observed counts, before the plan is applied."""

    group: str
    num_of_hosts: int
    desired_slices: int
    ready_slices: int
    broken_slices: int
    ready_pods: int
    running_pods: int
    #: How many slices are in each state (absent ones are not counted).
    slices: Mapping[SliceState, int] = field(default_factory=dict)
    #: Serving slices of the current template (rule 12a); None when not computed.
    updated_slices: int | None = None
    #: Planned disruptions (rule 12b): the disrupted slices still serving, as status entries.
    disrupted: tuple[Mapping[str, object], ...] = ()

    @property
    def desired_pods(self) -> int:
        return self.desired_slices * self.num_of_hosts


@dataclass(frozen=True, slots=True)
class GroupPlan:
    deletes: tuple[PodDelete, ...]
    replicas: tuple[NewReplica, ...]
    tally: GroupTally
    events: tuple[PlannedEvent, ...] = ()
    #: Every slice this plan moves, checked against ``slice_state.TRANSITIONS``.
    transitions: tuple[SliceTransition, ...] = ()
    #: Held indices (rule 13a, a gate's ``waiting``) no longer wanted (fewer replicas): their
    #: hold ends.
    released: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupSwitches:
    """How the group may change, decided once per cluster."""

    #: Surplus replicas are removed (autoscaling off, or ENABLE_RANDOM_POD_DELETE).
    scale_down: bool
    #: Feature gate RayMultiHostIndexing.
    multi_host_indexing: bool = True
    #: Terminating pods whose deletion deadline is before this time (RFC 3339) are stuck, as
    #: on a lost node; a broken replica's replacement stops waiting for the index they hold
    #: and takes the lowest free one instead. "" = never.
    stuck_before: str = ""
    #: ENABLE_PROBES_INJECTION (rule 3.4c).
    inject_probes: bool = True


@dataclass(frozen=True, slots=True)
class GroupInput:
    """What one worker group is planned from."""

    spec: WorkerGroupSpec
    pods: Sequence[PodView]
    desired: int
    switches: GroupSwitches
    new_suffix: Callable[[], str]
    #: A suspend reason: every pod goes and nothing is created.
    stop: DeleteReason | None = None


@dataclass(frozen=True)
class GroupHold:
    """A feature's word on which slices may be created (rule 13a, and any gate after it)."""

    #: Indices whose re-creation waits, lowest first: reserved, nobody else takes them.
    waiting: tuple[int, ...] = ()
    #: Indices whose wait is over: a new slice goes there first, with this reason (None: the
    #: usual reason).
    retry: Mapping[int, CreateReason | None] = field(default_factory=dict)
    #: At most this many new slices this pass (None: no limit); the feature that sets it says
    #: why in its own status and Events.
    most: int | None = None


#: No index waits and nothing is limited.
NO_HOLD = GroupHold()


def merge_holds(holds: Sequence[GroupHold]) -> GroupHold:
    """Every feature's gate at once: each one's waits and retries, the smallest limit."""
    if not holds:
        return NO_HOLD
    if len(holds) == 1:
        return holds[0]
    waiting = sorted({i for h in holds for i in h.waiting})
    retry: dict[int, CreateReason | None] = {}
    for hold in holds:
        for index, reason in hold.retry.items():
            retry.setdefault(index, reason)
    limits = [h.most for h in holds if h.most is not None]
    return GroupHold(tuple(waiting), retry, min(limits) if limits else None)


class Deletions:
    """Collects deletes, once per pod, never for a pod that is already terminating."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.items: dict[str, PodDelete] = {}
        self.replica_keys: set[str] = set()

    def pod(
        self,
        pod: PodView,
        reason: DeleteReason,
        message: str,
        replica: Replica | None = None,
        trigger: str | None = None,
    ) -> None:
        if pod.terminating or pod.name in self.items:
            return
        self.items[pod.name] = PodDelete(
            name=pod.name,
            group=self.group,
            replica_name=pod.replica_name,
            reason=reason,
            message=message,
            replica_index=replica.index if replica else pod.replica_index,
            host_index=pod.host_index,
            uid=pod.uid,
            trigger=trigger,
        )

    def replica(
        self, replica: Replica, reason: DeleteReason, message: str, trigger: str | None = None
    ) -> None:
        self.replica_keys.add(replica.key)
        for pod in replica.pods:
            self.pod(pod, reason, message, replica, trigger)


@dataclass
class GroupTurn:
    """One group's plan while it is made (gate RayMultiHostIndexing on; off, only ``job``)."""

    job: GroupInput
    #: The group's slices as read from its pods, then as the features' marks leave them.
    found: GroupPods
    out: Deletions
    #: Serving slices the plan keeps so far (after rules 8-12, then the features' replacements).
    valid: list[Replica] = field(default_factory=list)
    #: Slices to create; None: as many as ``valid`` falls short of the desired.
    need: int | None = None
    #: Indices new slices wait for (the slice replaced there comes back at its own index).
    awaited: set[int] = field(default_factory=set)
    #: After the stand-ins for broken slices, how many creates carry which reason, in order.
    reasons: list[tuple[int, CreateReason]] = field(default_factory=list)


#: A group's status field naming the indices of slices the pass did not create for quota or a
#: hold (rule 13c); read back by planned disruptions (rule 12b) as "a new slice has no room".
QUOTA_WAITING = "quotaWaiting"


def previous_status(cluster: RayCluster) -> dict[str, Any]:
    """The status stored before this pass, as plain data (what features compare with)."""
    if cluster.status is None:
        return {}
    return cluster.status.model_dump(by_alias=True, exclude_none=True, mode="json")


@dataclass
class ClusterTurn:
    """One RayCluster's pass: its context, what was read from it, and the writes so far."""

    context: PlanContext
    cluster: RayCluster
    check: SpecCheck
    heads: list[PodView]
    #: Worker pods by group in the spec; ``removed``: of groups no longer in it.
    by_group: dict[str, list[PodView]]
    removed: list[PodView]
    #: The pods the operator manages (heads, workers of any group).
    managed: list[PodView]
    #: The spec suspends the cluster; ``suspending``: its pods are being removed for it.
    suspended: bool = False
    suspending: bool = False
    creates: list[PodCreate] = field(default_factory=list)
    deletes: list[PodDelete] = field(default_factory=list)
    events: list[PlannedEvent] = field(default_factory=list)
    tallies: list[GroupTally] = field(default_factory=list)
    transitions: list[SliceTransition] = field(default_factory=list)
    #: Objects to create when the caches do not show them (services come apart).
    objects: list[dict[str, Any]] = field(default_factory=list)
    #: RayCluster metadata annotations to merge-patch (None removes one).
    annotations: dict[str, str | None] = field(default_factory=dict)
    #: Objects of the cluster's namespace to delete, as (kind, name): a slice's ComputeDomain
    #: (rule 13b), the per-slice budgets no slice keeps (rule 12b).
    object_deletes: list[tuple[str, str]] = field(default_factory=list)
    #: Pod name -> ``gracePeriodSeconds`` for its delete, whoever planned it (rule 8b).
    grace: dict[str, int] = field(default_factory=dict)
    #: Seconds until a feature's timed rule is due; the plan asks to look again at the soonest.
    requeue: list[float] = field(default_factory=list)
    #: The status stored before this pass (``previous_status``), read once for everyone.
    previous: Mapping[str, Any] = field(default_factory=dict)

    @property
    def acting(self) -> bool:
        """The spec is readable at the cluster level: the pass may write pods."""
        return not self.check.cluster_problems

    def previous_condition(self, kind: str) -> Mapping[str, Any] | None:
        """The stored condition of this type, if any."""
        for condition in self.previous.get("conditions") or ():
            if isinstance(condition, Mapping) and condition.get("type") == kind:
                return condition
        return None

    def groups_that_waited(self) -> frozenset[str]:
        """Groups with a slice the last pass did not create for quota or a hold
        (``QUOTA_WAITING``): a new slice of theirs has no room, as if unschedulable (12b)."""
        return frozenset(
            str(g.get("groupName"))
            for g in self.previous.get("workerGroups") or ()
            if isinstance(g, Mapping) and g.get(QUOTA_WAITING)
        )
