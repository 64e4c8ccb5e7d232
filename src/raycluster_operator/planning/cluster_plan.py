"""One reconcile decision for a readable RayCluster (``plan_pass`` decides the other cases).

``plan_cluster`` reads the spec, and the cluster's pods and services as the cache holds them
(its ``PlanContext``), and answers with every write the controller should make and the status
it should hold. It never decides from anything else, so replaying the same context gives the
same plan (given the same ``new_suffix`` sequence), and tests can prove convergence without a
server.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from kubefacts.timestamps import rfc3339
from raycluster_operator import builders
from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster, WorkerGroupSpec
from raycluster_operator.api.names import head_service_name
from raycluster_operator.planning.actions import (
    CREATE_POD,
    DELETE_POD,
    PlannedEvent,
    PodCreate,
    PodDelete,
)
from raycluster_operator.planning.context import PlanContext
from raycluster_operator.planning.desired import (
    autoscaling_on,
    cluster_suspended,
    desired_slices,
)
from raycluster_operator.planning.feature import Feature
from raycluster_operator.planning.group_plan import plan_group, tally_group
from raycluster_operator.planning.head import plan_head
from raycluster_operator.planning.lifecycle import features_for
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
from raycluster_operator.planning.spec_check import SpecCheck, check_spec
from raycluster_operator.planning.status import INVALID_SPEC, Deletion, Observed, build_status
from raycluster_operator.planning.suspension import (
    cluster_was_suspending,
    groups_were_suspending,
)
from raycluster_operator.planning.turn import (
    ClusterTurn,
    GroupInput,
    GroupPlan,
    GroupSwitches,
    NewReplica,
    previous_status,
)
from raycluster_operator.planning.writes import Writes, object_id

#: How long after its grace period a terminating pod counts as stuck (a lost node): a broken
#: replica's replacement then stops waiting for the replica index that pod holds.
STUCK_AFTER = timedelta(minutes=2)


#: The name ``plan_cluster`` answers under (one ``Writes``, as ``plan_pass`` does).
ClusterPlan = Writes


def plan_cluster(cluster: RayCluster, context: PlanContext) -> Writes:
    """Plan every pod, service and status write for ``cluster``.

    ``context.state.pods`` may hold pods of other clusters or namespaces; only pods labelled
    ``ray.io/cluster=<name>`` in the cluster's namespace are considered, so nothing else can
    ever be deleted. The lifecycle features (planning/lifecycle.py) have their say through
    their hooks, in rule order (planning/feature.py).
    """
    turn = _read(cluster, context)
    features = features_for(turn)
    groups_suspending = _plan_groups(turn, features)
    head = next((p for p in turn.heads if p.live), None)
    services: tuple[dict[str, Any], ...] = ()
    if turn.acting:
        services = desired_services(cluster)
        if autoscaling_on(cluster):
            turn.objects += builders.build_autoscaler_rbac(cluster)
        head = _plan_cluster_pods(turn)
    for feature in features:
        feature.finish(turn)
    deletes = [_with_grace(d, turn.grace) for d in turn.deletes]
    turn.events[:0] = _delete_events(deletes)
    turn.events[:0] = _problem_events(cluster, turn.check)
    seen = Observed(
        tallies=turn.tallies,
        head=head,
        head_service=_head_service(cluster, context.state.services),
        problems=turn.check.problems,
        cluster_invalid=not turn.acting,
        failures=dict(Counter(d.reason for d in deletes if d.reason in BROKEN_REASONS)),
        pods_remaining=len(turn.managed),
        suspending=turn.suspending,
        groups_suspending=frozenset(groups_suspending),
        deletions=_headline_deletions(deletes),
        features=features,
        previous=turn.previous,
    )
    wanted = (*services, *turn.objects)
    present = context.state.present
    return Writes(
        annotations=turn.annotations,
        objects=tuple(o for o in wanted if object_id(o) not in present),
        deletes=tuple(deletes),
        creates=tuple(turn.creates),
        object_deletes=tuple(turn.object_deletes),
        events=tuple(turn.events),
        status=build_status(cluster, seen, now=context.now),
        tallies=tuple(turn.tallies),
        transitions=tuple(turn.transitions),
        requeue_after=min(turn.requeue) if turn.requeue else None,
        services=services,
        extra_objects=tuple(turn.objects),
        missing_services=missing_services(services, context.state.services),
        problems=turn.check.problems,
    )


def _read(cluster: RayCluster, context: PlanContext) -> ClusterTurn:
    """What the pass reads before any rule: the spec's problems and the cluster's own pods,
    sorted into heads, groups in the spec and groups no longer in it."""
    check = check_spec(cluster)
    mine = [v for v in map(read_pod, context.state.pods) if _belongs(v, cluster)]
    heads, by_group, removed = _partition(mine, cluster.spec.worker_group_specs)
    # Pods the operator manages (heads, workers of any group); a pod of the cluster that is
    # neither is never touched, so it does not hold a suspension up either.
    managed = [*heads, *removed, *(p for group_pods in by_group.values() for p in group_pods)]
    suspended = cluster_suspended(cluster)
    # One-way suspension (planning/suspension.py): once started, it runs until no pod is left.
    suspending = (
        not check.cluster_problems
        and bool(managed)
        and (suspended or cluster_was_suspending(cluster))
    )
    return ClusterTurn(
        context,
        cluster,
        check,
        heads,
        by_group,
        removed,
        managed,
        suspended,
        suspending,
        previous=previous_status(cluster),
    )


def _with_grace(delete: PodDelete, grace: Mapping[str, int]) -> PodDelete:
    """Rule 8b: a feature's word on a pod's grace period holds whoever deletes the pod."""
    seconds = grace.get(delete.name)
    return delete if seconds is None else replace(delete, grace_period_seconds=seconds)


def _head_service(
    cluster: RayCluster, services: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    name = head_service_name(cluster.metadata.name)
    return next((s for s in services if service_name(s) == name), None)


def _plan_groups(turn: ClusterTurn, features: Sequence[Feature]) -> set[str]:
    """Rules 8-14 for every worker group; answers the groups whose own suspension is under
    way."""
    cluster, check = turn.cluster, turn.check
    switches = _switches(turn)
    groups_suspending: set[str] = set()
    for position, group in enumerate(cluster.spec.worker_group_specs):
        group_pods = turn.by_group.get(group.group_name, [])
        desired = desired_slices(group, cluster_suspended=turn.suspended)
        own = _switches_for(group, switches)
        if check.cluster_problems or position in check.invalid_groups:
            indexed = own.multi_host_indexing
            turn.tallies.append(
                tally_group(group, group_pods, desired=desired, multi_host_indexing=indexed)
            )
            continue
        stop = _group_stop(turn, group, group_pods)
        if stop is DeleteReason.GROUP_SUSPENDED and group_pods:
            groups_suspending.add(group.group_name)
        job = GroupInput(group, group_pods, desired, own, turn.context.new_suffix, stop)
        planned = plan_group(job, features)
        turn.tallies.append(planned.tally)
        turn.transitions += planned.transitions
        turn.deletes += planned.deletes
        turn.creates += _worker_creates(cluster, group, planned, own)
        turn.events += planned.events
        turn.events += _create_events(group.group_name, planned.replicas)
    return groups_suspending


def _switches(turn: ClusterTurn) -> GroupSwitches:
    options = turn.context.options
    return GroupSwitches(
        scale_down=not autoscaling_on(turn.cluster) or options.random_pod_delete,
        multi_host_indexing=options.multi_host_indexing,
        stuck_before=rfc3339(turn.context.now - STUCK_AFTER),
        inject_probes=options.inject_probes,
    )


def _group_stop(
    turn: ClusterTurn, group: WorkerGroupSpec, pods: Sequence[PodView]
) -> DeleteReason | None:
    """Rule 4: the cluster is suspended or suspending, or the group is; a group's suspension
    is one-way too: it ends only when its last pod is gone."""
    if turn.suspending or turn.suspended:
        return DeleteReason.CLUSTER_SUSPENDED
    if group.suspend or (pods and group.group_name in groups_were_suspending(turn.cluster)):
        return DeleteReason.GROUP_SUSPENDED
    return None


def _plan_cluster_pods(turn: ClusterTurn) -> PodView | None:
    """Pods outside the groups: removed groups' pods, the head (rules 4-5), and every managed
    pod while suspending. Answers the head in use."""
    turn.deletes += [
        _pod_delete(
            pod,
            DeleteReason.GROUP_REMOVED,
            f"worker group {pod.group!r} is no longer in the spec",
        )
        for pod in turn.removed
        if not pod.terminating
    ]
    head = plan_head(turn.heads, suspended=turn.suspended or turn.suspending)
    turn.deletes += head.deletes
    going = {d.name for d in turn.deletes}
    if turn.suspending:
        # Every managed pod goes, whichever group (or none in the spec) it belongs to.
        turn.deletes += [
            _pod_delete(
                pod,
                DeleteReason.CLUSTER_SUSPENDED,
                f"cluster suspending: removing pod {pod.name}",
            )
            for pod in turn.managed
            if not pod.terminating and pod.name not in going
        ]
    if head.create:
        probes = turn.context.options.inject_probes
        turn.creates.insert(0, _head_create(turn.cluster, inject_probes=probes))
        turn.events.append(
            PlannedEvent(
                "Normal", CreateReason.HEAD_MISSING, "creating the head pod", action=CREATE_POD
            )
        )
    return head.current


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


def _head_create(cluster: RayCluster, *, inject_probes: bool) -> PodCreate:
    return PodCreate(
        labels.HEAD_GROUP,
        None,
        None,
        None,
        CreateReason.HEAD_MISSING,
        builders.build_head_pod(cluster, inject_probes=inject_probes),
    )


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
    pods = builders.WorkerPods(cluster, group, inject_probes=switches.inject_probes)
    for replica in planned.replicas:
        for host in replica.hosts:
            manifest = pods.build(
                replica_index=replica.index,
                replica_name=replica.name,
                host_index=host,
                indexing_labels=switches.multi_host_indexing,
            )
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
        # A slice's Event always counts its pods: one host terminating by itself leaves one
        # pod of a 2-host slice to delete, and "(1 pod)" still says it is a slice going.
        many = len(items) > 1
        count = f" ({len(items)} pod{'s' if many else ''})" if many or first.replica_name else ""
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
