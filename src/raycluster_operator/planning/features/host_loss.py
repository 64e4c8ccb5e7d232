"""Fast failover on host loss (docs/design.md §4 rules 8a and 8b, §5): which hosts break their slice
because of their node or their lost readiness, read from the pods and the nodes they run on.

Kubernetes evicts pods from a dead node only when their toleration of the
``unreachable``/``not-ready`` NoExecute taints runs out (300 s by default), and a pod on a dead
node never finishes terminating (its kubelet is gone). A TPU or NVLink slice with one lost host
is useless at once, so the planner treats the host as a fault of its slice as soon as the node
says so, and frees the slice's index at once by deleting the lost host with grace 0:

- ``HostLost``: the host's node is Ready=False/Unknown, or carries the ``unreachable`` or
  ``not-ready`` taint with effect NoExecute;
- ``HostUnready``: the host was Ready and has not been Ready for longer than the timeout. "Was
  Ready" is read from the pod alone: the kubelet writes the first Ready=False before it starts
  any container, so a Ready=False condition whose ``lastTransitionTime`` is later than the
  start of the Ray container's current (or previous) run means readiness was lost while Ray
  ran, which only happens after it had been True. A host that never became Ready keeps its
  first transition time, earlier than every start, and is never replaced by the timeout.

A timeout of 0 turns both off: the operator then waits for Kubernetes' eviction as before.
Pure: ``now`` is an argument; the controller hands over the nodes the cluster's pods use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from kubefacts.timestamps import parse_time
from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster
from raycluster_operator.api.objects import Pod, Resource
from raycluster_operator.planning.actions import PodDelete
from raycluster_operator.planning.context import Cached
from raycluster_operator.planning.feature import Feature, Route, Watch
from raycluster_operator.planning.pods import parse_index
from raycluster_operator.planning.reasons import DeleteReason
from raycluster_operator.planning.replicas import GroupPods, Replica
from raycluster_operator.planning.slice_state import SERVING, SliceState
from raycluster_operator.planning.turn import ClusterTurn, GroupTurn

#: Taints the node lifecycle controller puts on a node that stopped reporting or is not Ready.
LOST_TAINTS = frozenset({"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"})


@dataclass(frozen=True, slots=True)
class HostFault:
    """Why one pod breaks its slice, and which node it is on (for the Event and status)."""

    pod: str
    node: str
    cause: DeleteReason
    #: One sentence naming the host, the pod and the node.
    detail: str


@dataclass(frozen=True, slots=True)
class HostCheck:
    """What the nodes and the pods' readiness say about one cluster's hosts."""

    #: Live pods that break their slice, by pod name.
    faults: Mapping[str, HostFault] = field(default_factory=dict)
    #: Every pod of the cluster on a lost node (live or terminating): deleted with grace 0.
    on_lost_nodes: Mapping[str, str] = field(default_factory=dict)
    #: Seconds until the next host's unready timeout runs out; None when none is pending.
    recheck_after: float | None = None


NO_CHECK = HostCheck()


def node_loss(node: Cached) -> str | None:
    """Why a node's pods are lost ("node N is NotReady (reason)"), or None when it is not."""
    view = Resource(node)
    spec: Mapping[str, Any] = node.get("spec") or {}
    status: Mapping[str, Any] = node.get("status") or {}
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Ready" and condition.get("status") != "True":
            state = "Unknown" if condition.get("status") == "Unknown" else "NotReady"
            reason = condition.get("reason") or "no reason given"
            return f"node {view.name} is {state} ({reason})"
    for taint in spec.get("taints") or ():
        if taint.get("key") in LOST_TAINTS and taint.get("effect") == "NoExecute":
            return f"node {view.name} is tainted {taint.get('key')}:NoExecute"
    return None


def check_hosts(
    pods: Iterable[Cached], nodes: Mapping[str, Cached], *, now: datetime, unready_timeout: float
) -> HostCheck:
    """Read every pod of the cluster against its node and its Ready condition."""
    if unready_timeout <= 0:
        return NO_CHECK
    lost = {name: why for name, node in nodes.items() if (why := node_loss(node)) is not None}
    faults: dict[str, HostFault] = {}
    on_lost: dict[str, str] = {}
    recheck: float | None = None
    limit = timedelta(seconds=unready_timeout)
    for obj in pods:
        pod = Pod(obj)
        node = pod.node_name or ""
        if node in lost:
            on_lost[pod.name] = node
            if pod.deletion_timestamp is None:
                faults[pod.name] = HostFault(
                    pod.name,
                    node,
                    DeleteReason.HOST_LOST,
                    f"{_host(pod)} is on a lost node: {lost[node]}",
                )
            continue
        if pod.deletion_timestamp is not None or pod.phase != "Running" or pod.ready:
            continue
        since = _ready_lost_at(pod)
        if since is None:
            continue
        left = (since + limit - now).total_seconds()
        if left > 0:
            recheck = left if recheck is None else min(recheck, left)
            continue
        faults[pod.name] = HostFault(
            pod.name,
            node,
            DeleteReason.HOST_UNREADY,
            f"{_host(pod)} on node {node or '?'} has not been Ready since "
            f"{since.isoformat()} (over the {unready_timeout:g} s unready-slice timeout), "
            "after having been Ready",
        )
    return HostCheck(faults, on_lost, recheck)


def _host(pod: Pod) -> str:
    index = pod.labels.get(labels.HOST_INDEX)
    return f"host {index} (pod {pod.name})" if index is not None else f"pod {pod.name}"


def _ready_lost_at(pod: Pod) -> datetime | None:
    """When readiness was lost, if the pod had been Ready before (see the module docstring)."""
    ready = next((c for c in pod.conditions if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") == "True" or not ready.get("lastTransitionTime"):
        return None
    since = parse_time(str(ready["lastTransitionTime"]))
    starts = _ray_container_starts(pod)
    if any(since > start for start in starts):
        return since
    return None


def _ray_container_starts(pod: Pod) -> list[datetime]:
    statuses = pod.container_statuses
    if not statuses:
        return []
    containers = pod.containers
    ray_name = containers[0].get("name") if containers else None
    chosen: Mapping[str, Any] = next(
        (s for s in statuses if s.get("name") == ray_name), statuses[0]
    )
    out = []
    running = (chosen.get("state") or {}).get("running") or {}
    previous = (chosen.get("lastState") or {}).get("terminated") or {}
    for started in (running.get("startedAt"), previous.get("startedAt")):
        if started:
            out.append(parse_time(str(started)))
    return out


def mark_host_faults(found: GroupPods, faults: Mapping[str, HostFault]) -> GroupPods:
    """A pending or ready slice with a faulty host is BROKEN for that host's cause; any slice
    with one names that host as the pod at fault (for the Event)."""
    if not faults:
        return found
    replicas = []
    for replica in found.replicas:
        fault = host_fault(replica, faults)
        if fault is not None and replica.state in SERVING:
            detail = f"replica {replica.key}: {fault.detail}" if replica.name else fault.detail
            replica = replace(
                replica,
                state=SliceState.BROKEN,
                cause=fault.cause,
                detail=detail,
                trigger=fault.pod,
            )
        elif fault is not None:
            replica = replace(replica, trigger=fault.pod)
        replicas.append(replica)
    return replace(found, replicas=tuple(replicas))


def host_fault(replica: Replica, faults: Mapping[str, HostFault]) -> HostFault | None:
    """The first host of the replica (by host index) that breaks it, if any."""
    hits = [faults[p.name] for p in replica.pods if p.name in faults]
    if not hits:
        return None
    lost = [f for f in hits if f.cause is DeleteReason.HOST_LOST]
    return (lost or hits)[0]


def terminating_on_lost_nodes(
    planned: Iterable[str], pods: Iterable[Cached], check: HostCheck
) -> list[PodDelete]:
    """Rule 8b for pods already terminating on a lost node: deleted again with grace 0 (what
    ``kubectl delete --force`` sends), since their kubelet cannot finish a graceful deletion
    and the object would hold its slice's index until Kubernetes' pod GC. ``planned``: pods
    this pass deletes anyway. The trade-off: a partitioned node may still run the old
    containers until its kubelet returns and finds its pods gone (docs/design.md §4 rule 8b)."""
    going = set(planned)
    out = []
    for obj in pods:
        pod = Pod(obj)
        if (
            pod.name in going
            or pod.name not in check.on_lost_nodes
            or pod.deletion_timestamp is None
            or pod.meta.get("deletionGracePeriodSeconds") == 0
        ):
            continue
        node = check.on_lost_nodes[pod.name]
        out.append(
            PodDelete(
                name=pod.name,
                group=pod.labels.get(labels.GROUP) or "",
                replica_name=pod.labels.get(labels.REPLICA_NAME),
                reason=DeleteReason.HOST_LOST,
                message=(
                    f"{_host(pod)} is terminating on lost node {node}; removed at once so its "
                    "slice's index is free"
                ),
                replica_index=parse_index(pod.labels.get(labels.REPLICA_INDEX)),
                host_index=parse_index(pod.labels.get(labels.HOST_INDEX)),
                uid=pod.uid,
                trigger=pod.name,
                grace_period_seconds=0,
            )
        )
    return out


class HostLoss(Feature):
    """Rules 8a and 8b as a lifecycle feature: the hosts' nodes and lost readiness, read once
    per pass, mark slices broken; a pod on a lost node is deleted with grace 0."""

    rule = "8a"
    #: Cluster-scoped: even the namespaced install grants this (a ClusterRole of its own).
    watches = (Watch("", "v1", "Node", "nodes", namespaced=False, route=Route.NODE),)

    def __init__(self, turn: ClusterTurn) -> None:
        context = turn.context
        timeout = context.options.unready_slice_timeout
        self.check = NO_CHECK
        if turn.acting and timeout > 0:
            own = [p for p in context.state.pods if _owned(p, turn.cluster)]
            self.check = check_hosts(
                own, context.state.nodes, now=context.now, unready_timeout=timeout
            )

    def mark(self, turn: GroupTurn) -> None:
        turn.found = mark_host_faults(turn.found, self.check.faults)

    def finish(self, turn: ClusterTurn) -> None:
        check = self.check
        if check.recheck_after is not None:
            turn.requeue.append(check.recheck_after)
        if not check.on_lost_nodes:
            return
        turn.grace.update(dict.fromkeys(check.on_lost_nodes, 0))
        planned = [d.name for d in turn.deletes]
        turn.deletes += terminating_on_lost_nodes(planned, turn.context.state.pods, check)


def _owned(obj: Cached, cluster: RayCluster) -> bool:
    """A pod of ``cluster`` (its label and namespace), read from the raw pod."""
    meta = obj.get("metadata") or {}
    return (meta.get("labels") or {}).get(labels.CLUSTER) == cluster.metadata.name and meta.get(
        "namespace"
    ) in (None, cluster.metadata.namespace)
