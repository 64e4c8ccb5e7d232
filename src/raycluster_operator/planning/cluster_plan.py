"""One reconcile decision for a whole RayCluster: the pure function the controller calls.

``plan_cluster`` reads the spec and the cluster's pods and services as the cache holds them,
and answers with every write the controller should make and the status it should hold. It
never decides from anything else, so replaying the same inputs gives the same plan (given the
same ``new_suffix`` sequence), and tests can prove convergence without a server.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from kubefacts.timestamps import rfc3339
from raycluster_operator import builders
from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster, WorkerGroupSpec
from raycluster_operator.api.names import head_service_name
from raycluster_operator.api.problems import Problem
from raycluster_operator.builders.budgets import avoid_nodes, slice_budget
from raycluster_operator.planning.actions import (
    CREATE_POD,
    DELETE_POD,
    PlannedEvent,
    PodCreate,
    PodDelete,
)
from raycluster_operator.planning.backoff import DEFAULT_POLICY, BackoffPolicy, ClusterBackoff
from raycluster_operator.planning.cluster_upgrade import (
    ClusterUpgrade,
    head_deletes,
    plan_upgrade,
    rollout_condition,
)
from raycluster_operator.planning.desired import (
    autoscaling_on,
    cluster_suspended,
    desired_slices,
)
from raycluster_operator.planning.disruption import (
    DEFAULT_MAX_UNAVAILABLE,
    DEFAULT_WINDOW,
    NO_DISRUPTIONS,
    DisruptionCheck,
    check_disruptions,
)
from raycluster_operator.planning.group_plan import (
    GroupPlan,
    GroupSwitches,
    GroupTally,
    NewReplica,
    plan_group,
    tally_group,
)
from raycluster_operator.planning.head import plan_head
from raycluster_operator.planning.host_loss import (
    NO_CHECK,
    HostCheck,
    HostFault,
    check_hosts,
    force_on_lost_nodes,
)
from raycluster_operator.planning.pods import PodView, read_pod
from raycluster_operator.planning.reasons import (
    BROKEN_REASONS,
    CreateReason,
    DeleteReason,
    EventReason,
)
from raycluster_operator.planning.services import (
    desired_services,
    missing_services,
    service_name,
)
from raycluster_operator.planning.slice_state import SliceState, SliceTransition
from raycluster_operator.planning.spec_check import SpecCheck, check_spec
from raycluster_operator.planning.status import INVALID_SPEC, Deletion, Observed, build_status
from raycluster_operator.planning.suspension import (
    cluster_was_suspending,
    groups_were_suspending,
)

#: How long after its grace period a terminating pod counts as stuck (a lost node): a broken
#: replica's replacement then stops waiting for the replica index that pod holds.
STUCK_AFTER = timedelta(minutes=2)


@dataclass(frozen=True)
class ClusterPlan:
    creates: tuple[PodCreate, ...] = ()
    deletes: tuple[PodDelete, ...] = ()
    #: Every service the cluster needs; the controller creates the missing ones.
    services: tuple[dict[str, Any], ...] = ()
    #: Autoscaler ServiceAccount/Role/RoleBinding, created if missing.
    extra_objects: tuple[dict[str, Any], ...] = ()
    events: tuple[PlannedEvent, ...] = ()
    #: The full desired ``.status``.
    status: dict[str, Any] = field(default_factory=dict)
    #: Validation problems; the parts they name are not touched.
    problems: tuple[Problem, ...] = ()
    #: Names of ``services`` not among the observed services.
    missing_services: tuple[str, ...] = ()
    #: Per worker group, the observed counts (slices by state) the status and metrics report.
    tallies: tuple[GroupTally, ...] = ()
    #: Every slice this plan moves, and why (``slice_state.TRANSITIONS``).
    transitions: tuple[SliceTransition, ...] = ()
    #: RayCluster metadata annotations to merge-patch (None removes one): the crash-loop
    #: backoff's records (planning/backoff.py); empty when nothing changed.
    annotations: dict[str, str | None] = field(default_factory=dict)
    #: Seconds until a timed rule is due (a host's unready timeout runs out, a backoff wait
    #: ends or falls due for reset); None: no timed look.
    requeue_after: float | None = None
    #: Planned disruptions (rule 12b): the PodDisruptionBudget of every slice that keeps one
    #: (created when missing), and the names of the cluster's budgets no slice keeps (deleted).
    budgets: tuple[dict[str, Any], ...] = ()
    stale_budgets: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """Nothing to write except maybe the status (and create-if-missing extra objects)."""
        return not (self.creates or self.deletes or self.missing_services)


def plan_cluster(
    cluster: RayCluster,
    pods: Sequence[Mapping[str, Any]],
    services: Sequence[Mapping[str, Any]],
    *,
    now: datetime,
    new_suffix: Callable[[], str],
    multi_host_indexing: bool = True,
    random_pod_delete: bool = False,
    nodes: Mapping[str, Mapping[str, Any]] | None = None,
    unready_slice_timeout: float = 0.0,
    backoff: BackoffPolicy = DEFAULT_POLICY,
    planned_disruptions: bool = False,
    maintenance_window: float = DEFAULT_WINDOW,
    budgets: Sequence[Mapping[str, Any]] = (),
) -> ClusterPlan:
    """Plan every pod, service and status write for ``cluster``.

    ``pods`` may hold pods of other clusters or namespaces; only pods labelled
    ``ray.io/cluster=<name>`` in the cluster's namespace are considered, so nothing else can
    ever be deleted. ``nodes`` are the nodes those pods run on, by name; with
    ``unready_slice_timeout`` > 0 a host on a lost node or unready too long breaks its slice
    (planning/host_loss.py). With ``planned_disruptions`` the same nodes say which slices a
    drain, a maintenance or a scale-down is about to take, and those move whole
    (planning/disruption.py); ``budgets`` are the cluster's PodDisruptionBudgets as cached.
    """
    check = check_spec(cluster)
    act = not check.cluster_problems
    mine = [v for v in map(read_pod, pods) if _belongs(v, cluster)]
    heads, by_group, removed = _partition(mine, cluster.spec.worker_group_specs)
    # Pods the operator manages (heads, workers of any group); a pod of the cluster that is
    # neither is never touched, so it does not hold a suspension up either.
    managed = [*heads, *removed, *(p for group_pods in by_group.values() for p in group_pods)]
    suspended = cluster_suspended(cluster)
    # One-way suspension (planning/suspension.py): once started, it runs until no pod is left.
    suspending = act and bool(managed) and (suspended or cluster_was_suspending(cluster))
    upgrade = plan_upgrade(cluster, heads, by_group, _desired_by_group(cluster, suspended))
    switches = GroupSwitches(
        scale_down=not autoscaling_on(cluster) or random_pod_delete,
        multi_host_indexing=multi_host_indexing,
        stuck_before=rfc3339(now - STUCK_AFTER),
    )
    host_check = (
        _host_check(cluster, pods, nodes or {}, now, unready_slice_timeout) if act else NO_CHECK
    )
    disruption = (
        check_disruptions(
            [p for p in pods if _owned(p, cluster)],
            nodes or {},
            now=now,
            window=maintenance_window,
        )
        if act and planned_disruptions
        else NO_DISRUPTIONS
    )
    work = _Work()
    # Rule 13a: crash-loop backoff per slice, its records in the cluster's annotation.
    backoffs = ClusterBackoff(cluster, pods, now=now, policy=backoff)
    groups_suspending = _plan_groups(
        cluster,
        by_group,
        work,
        check,
        suspending or suspended,
        switches,
        new_suffix,
        upgrade,
        host_check.faults,
        backoffs,
        disruption,
    )
    head_current = next((p for p in heads if p.live), None)
    wanted_services, extra = _cluster_objects(cluster) if act else ((), ())
    if act:
        head_current = _plan_cluster_pods(
            cluster, heads, removed, managed, work, suspending=suspending, upgrade=upgrade
        )
    if host_check.on_lost_nodes:
        # Host loss: a pod on a lost node goes with grace 0, so its index is free at once.
        work.deletes = force_on_lost_nodes(work.deletes, pods, host_check)
    work.events += backoffs.events
    work.events[:0] = _delete_events(work.deletes)
    work.events[:0] = _problem_events(cluster, check)

    seen = Observed(
        tallies=work.tallies,
        head=head_current,
        head_service=_head_service(cluster, services),
        problems=check.problems,
        cluster_invalid=not act,
        failures=dict(Counter(d.reason for d in work.deletes if d.reason in BROKEN_REASONS)),
        pods_remaining=len(managed),
        suspending=suspending,
        groups_suspending=frozenset(groups_suspending),
        deletions=_headline_deletions(work.deletes),
        rolling_update=rollout_condition(upgrade, work.tallies, paused=suspended or suspending),
        backoff=backoffs.status,
    )
    status = build_status(cluster, seen, now=now)
    return ClusterPlan(
        creates=tuple(work.creates),
        deletes=tuple(work.deletes),
        services=wanted_services,
        extra_objects=extra,
        events=tuple(work.events),
        status=status,
        problems=check.problems,
        missing_services=missing_services(wanted_services, services),
        tallies=tuple(work.tallies),
        transitions=tuple(work.transitions),
        annotations=backoffs.annotations(),
        requeue_after=_soonest(host_check.recheck_after, backoffs.wake, disruption.recheck_after),
        budgets=tuple(work.budgets),
        stale_budgets=_stale_budgets(budgets, work.budgets) if disruption.enabled else (),
    )


def _stale_budgets(
    cached: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, Any]]
) -> tuple[str, ...]:
    """Budgets of the cluster that no slice keeps any more (its slice went, or was released)."""
    keep = {str(b["metadata"]["name"]) for b in wanted}
    names = (str((b.get("metadata") or {}).get("name") or "") for b in cached)
    return tuple(sorted(n for n in names if n and n not in keep))


def _host_check(
    cluster: RayCluster,
    pods: Sequence[Mapping[str, Any]],
    nodes: Mapping[str, Mapping[str, Any]],
    now: datetime,
    timeout: float,
) -> HostCheck:
    """Host loss (docs/design.md §4 rule 8): the hosts' nodes and lost readiness."""
    if timeout <= 0:
        return NO_CHECK
    own = [p for p in pods if _owned(p, cluster)]
    return check_hosts(own, nodes, now=now, unready_timeout=timeout)


@dataclass
class _Work:
    """What one plan collects, group by group and then for the cluster."""

    creates: list[PodCreate] = field(default_factory=list)
    deletes: list[PodDelete] = field(default_factory=list)
    events: list[PlannedEvent] = field(default_factory=list)
    tallies: list[GroupTally] = field(default_factory=list)
    transitions: list[SliceTransition] = field(default_factory=list)
    budgets: list[dict[str, Any]] = field(default_factory=list)


def _head_service(
    cluster: RayCluster, services: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    name = head_service_name(cluster.metadata.name)
    return next((s for s in services if service_name(s) == name), None)


def _desired_by_group(cluster: RayCluster, suspended: bool) -> dict[str, int]:
    return {
        g.group_name: desired_slices(g, cluster_suspended=suspended)
        for g in cluster.spec.worker_group_specs
    }


def _cluster_objects(
    cluster: RayCluster,
) -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]:
    """Rules 6-7: the services, and the autoscaler's RBAC objects, the cluster needs."""
    extra = tuple(builders.build_autoscaler_rbac(cluster)) if autoscaling_on(cluster) else ()
    return desired_services(cluster), extra


def _plan_groups(
    cluster: RayCluster,
    by_group: Mapping[str, list[PodView]],
    work: _Work,
    check: SpecCheck,
    stopping: bool,
    switches: GroupSwitches,
    new_suffix: Callable[[], str],
    upgrade: ClusterUpgrade,
    host_faults: Mapping[str, HostFault],
    backoffs: ClusterBackoff,
    disruption: DisruptionCheck = NO_DISRUPTIONS,
) -> set[str]:
    """Rules 8-14 for every worker group (``stopping``: the cluster is suspended or
    suspending); answers the groups whose own suspension is under way."""
    suspended = cluster_suspended(cluster)
    group_stopping = groups_were_suspending(cluster)
    groups_suspending: set[str] = set()
    for position, group in enumerate(cluster.spec.worker_group_specs):
        group_pods = by_group.get(group.group_name, [])
        desired = desired_slices(group, cluster_suspended=suspended)
        own = _switches_for(group, switches)
        if check.cluster_problems or position in check.invalid_groups:
            work.tallies.append(
                tally_group(
                    group, group_pods, desired=desired, multi_host_indexing=own.multi_host_indexing
                )
            )
            backoffs.keep(group.group_name)
            continue
        stop: DeleteReason | None = None
        if stopping:
            stop = DeleteReason.CLUSTER_SUSPENDED
        elif group.suspend or (group_pods and group.group_name in group_stopping):
            # A group's suspension is one-way too: it ends only when its last pod is gone.
            stop = DeleteReason.GROUP_SUSPENDED
            if group_pods:
                groups_suspending.add(group.group_name)
        planned = plan_group(
            group,
            group_pods,
            desired=desired,
            switches=own,
            new_suffix=new_suffix,
            stop=stop,
            host_faults=host_faults,
            upgrade=upgrade.groups.get(group.group_name),
            hold=backoffs.hold(group),
            disruption=disruption,
            max_unavailable=group.max_unavailable or DEFAULT_MAX_UNAVAILABLE,
        )
        if stop is None:
            backoffs.settle(
                group,
                deletes=planned.deletes,
                released=planned.released,
                created=[r.index for r in planned.replicas],
                num_of_hosts=planned.tally.num_of_hosts,
            )
        work.tallies.append(_with_backoff(planned.tally, backoffs.waiting.get(group.group_name, 0)))
        work.transitions += planned.transitions
        work.deletes += planned.deletes
        work.creates += _worker_creates(cluster, group, planned, own)
        work.events += planned.events
        work.events += _create_events(group.group_name, planned.replicas)
        if group.num_of_hosts > 1:
            work.budgets += [
                slice_budget(cluster, group.group_name, name, group.num_of_hosts)
                for name in planned.budgeted
            ]
    return groups_suspending


def _plan_cluster_pods(
    cluster: RayCluster,
    heads: Sequence[PodView],
    removed: Sequence[PodView],
    managed: Sequence[PodView],
    work: _Work,
    *,
    suspending: bool,
    upgrade: ClusterUpgrade,
) -> PodView | None:
    """Pods outside the groups: removed groups' pods, the head (rules 4-5, 12a), and every
    managed pod while suspending. Answers the head in use."""
    work.deletes += [
        _pod_delete(
            pod,
            DeleteReason.GROUP_REMOVED,
            f"worker group {pod.group!r} is no longer in the spec",
        )
        for pod in removed
        if not pod.terminating
    ]
    head = plan_head(heads, suspended=cluster_suspended(cluster) or suspending)
    work.deletes += head.deletes
    going = {d.name for d in work.deletes}
    if not (cluster_suspended(cluster) or suspending):
        work.deletes += [d for d in head_deletes(upgrade, heads) if d.name not in going]
    if suspending:
        # Every managed pod goes, whichever group (or none in the spec) it belongs to.
        work.deletes += [
            _pod_delete(
                pod,
                DeleteReason.CLUSTER_SUSPENDED,
                f"cluster suspending: removing pod {pod.name}",
            )
            for pod in managed
            if not pod.terminating and pod.name not in going
        ]
    if head.create:
        work.creates.insert(0, _head_create(cluster))
        work.events.append(
            PlannedEvent(
                "Normal", CreateReason.HEAD_MISSING, "creating the head pod", action=CREATE_POD
            )
        )
    return head.current


def _soonest(*delays: float | None) -> float | None:
    due = [d for d in delays if d is not None]
    return min(due) if due else None


def _with_backoff(tally: GroupTally, waiting: int) -> GroupTally:
    """Rule 13a: slices waiting out a backoff are counted in state ``backoff`` (metrics)."""
    if not waiting:
        return tally
    return replace(tally, slices={**tally.slices, SliceState.BACKOFF: waiting})


def _pod_delete(pod: PodView, reason: DeleteReason, message: str) -> PodDelete:
    """A cluster-level deletion (group removed, cluster suspending) of one pod, by uid."""
    return PodDelete(
        pod.name,
        pod.group or "",
        pod.replica_name,
        reason,
        message,
        pod.replica_index,
        pod.host_index,
        pod.uid,
    )


def _head_create(cluster: RayCluster) -> PodCreate:
    return PodCreate(
        labels.HEAD_GROUP,
        None,
        None,
        None,
        CreateReason.HEAD_MISSING,
        builders.build_head_pod(cluster),
    )


def _owned(obj: Mapping[str, Any], cluster: RayCluster) -> bool:
    """``_belongs`` for a pod not yet read (host loss reads the raw pod's node and status)."""
    meta = obj.get("metadata") or {}
    return (meta.get("labels") or {}).get(labels.CLUSTER) == cluster.metadata.name and meta.get(
        "namespace"
    ) in (None, cluster.metadata.namespace)


def _belongs(pod: PodView, cluster: RayCluster) -> bool:
    return pod.labels.get(labels.CLUSTER) == cluster.metadata.name and pod.namespace in (
        None,
        cluster.metadata.namespace,
    )


def _partition(
    pods: Iterable[PodView], groups: Sequence[WorkerGroupSpec]
) -> tuple[list[PodView], dict[str, list[PodView]], list[PodView]]:
    """Head pods, worker pods by group in the spec, and worker pods of groups not in it.

    A pod of the cluster that is neither a head nor a worker with a group label is left out:
    the operator cannot tell what it is, so it does not touch it.
    """
    names = {g.group_name for g in groups}
    heads: list[PodView] = []
    by_group: dict[str, list[PodView]] = {}
    removed: list[PodView] = []
    for pod in pods:
        kind = pod.node_type
        if kind == labels.NODE_TYPE_HEAD:
            heads.append(pod)
        elif kind == labels.NODE_TYPE_WORKER and pod.group:
            if pod.group in names:
                by_group.setdefault(pod.group, []).append(pod)
            else:
                removed.append(pod)
    return heads, by_group, removed


def _switches_for(group: WorkerGroupSpec, switches: GroupSwitches) -> GroupSwitches:
    """The gate RayMultiHostIndexing only switches single-host groups to KubeRay's unindexed
    pods: a multi-host group without replica identity could not be kept atomic, which is the
    point of this operator, so multi-host groups are always indexed."""
    if switches.multi_host_indexing or group.num_of_hosts <= 1:
        return switches
    return replace(switches, multi_host_indexing=True)


def _worker_creates(
    cluster: RayCluster, group: WorkerGroupSpec, planned: GroupPlan, switches: GroupSwitches
) -> list[PodCreate]:
    out: list[PodCreate] = []
    if not planned.replicas:
        return out
    pods = builders.WorkerPods(cluster, group)
    for replica in planned.replicas:
        for host in replica.hosts:
            manifest = pods.build(
                replica_index=replica.index,
                replica_name=replica.name,
                host_index=host,
                indexing_labels=switches.multi_host_indexing,
            )
            if planned.moves.avoid:
                # Rule 12b: new slices stay off the nodes a planned disruption takes.
                manifest = avoid_nodes(manifest, planned.moves.avoid)
            out.append(
                PodCreate(
                    group.group_name, replica.index, replica.name, host, replica.reason, manifest
                )
            )
    return out


def _create_events(group: str, replicas: Sequence[NewReplica]) -> list[PlannedEvent]:
    """One Event on the RayCluster per slice created, naming group, slice and index."""
    out = []
    for replica in replicas:
        what = f"slice {replica.name}" if replica.name else "a pod"
        where = f" at index {replica.index}" if replica.index is not None else ""
        size = f" ({len(replica.hosts)} hosts)" if replica.name else ""
        out.append(
            PlannedEvent(
                "Normal",
                replica.reason,
                f"group {group}: creating {what}{where}{size}",
                action=CREATE_POD,
            )
        )
    return out


def _delete_events(deletes: Sequence[PodDelete]) -> list[PlannedEvent]:
    """One Event on the RayCluster per deleted slice (not per pod): the group, the slice name
    and index, the reason, and the pod that triggered it, so that
    ``kubectl get events --field-selector involvedObject.kind=RayCluster`` answers "why did
    my slice go?". The triggering pod is also the Event's ``related`` object."""
    grouped: dict[tuple[str, str, DeleteReason], list[PodDelete]] = {}
    for item in deletes:
        key = (item.group, item.replica_name or item.name, item.reason)
        grouped.setdefault(key, []).append(item)
    out = []
    for (group, _, reason), items in grouped.items():
        first = items[0]
        what = f"slice {first.replica_name}" if first.replica_name else f"pod {first.name}"
        where = f" at index {first.replica_index}" if first.replica_index is not None else ""
        count = f" ({len(items)} pods)" if len(items) > 1 else ""
        cause = f", triggered by pod {first.trigger}" if first.trigger else ""
        out.append(
            PlannedEvent(
                "Warning" if reason.is_warning else "Normal",
                reason,
                f"group {group or '?'}: deleting {what}{where}{count}{cause}: {first.message}",
                None,
                action=DELETE_POD,
                related=first.trigger,
            )
        )
    return out


def _headline_deletions(deletes: Sequence[PodDelete]) -> dict[str, Deletion]:
    """Per group, the deletion to remember in the status: a failure before a request."""
    by_group: dict[str, list[PodDelete]] = {}
    for item in deletes:
        by_group.setdefault(item.group, []).append(item)
    out = {}
    for group, items in by_group.items():
        first = next((d for d in items if d.reason in BROKEN_REASONS), items[0])
        count = sum(1 for d in items if d.reason is first.reason)
        out[group] = Deletion(first.reason, first.message, count)
    return out


def _problem_events(cluster: RayCluster, check: SpecCheck) -> list[PlannedEvent]:
    """A Warning when the problems first appear or change, not on every pass."""
    if not check.problems:
        return []
    text = "; ".join(str(p) for p in check.problems)
    before = cluster.status.conditions if cluster.status and cluster.status.conditions else []
    for condition in before:
        if (condition.type, condition.status, condition.message) == (INVALID_SPEC, "True", text):
            return []
    return [PlannedEvent("Warning", EventReason.INVALID_SPEC, text)]
