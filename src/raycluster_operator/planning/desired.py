"""How many slices and pods a worker group wants, KubeRay's arithmetic exactly.

``replicas``, ``minReplicas`` and ``maxReplicas`` count slices (docs/design.md §3.2); pods
are slices times numOfHosts. The arithmetic matches KubeRay's ``GetWorkerGroupDesiredReplicas``
so that the autoscaler, which reads the same fields, agrees with the operator about the target.
"""

from __future__ import annotations

from raycluster_operator.api.models import INT32_MAX, RayCluster, WorkerGroupSpec


def hosts(group: WorkerGroupSpec) -> int:
    """numOfHosts, never below 1 (an invalid value is reported by validation, not used)."""
    return max(group.num_of_hosts, 1)


def desired_slices(group: WorkerGroupSpec, *, cluster_suspended: bool = False) -> int:
    """clamp(replicas, min, max); a suspended group or cluster wants none.

    Like KubeRay: an unset ``replicas`` means ``minReplicas``, and when min exceeds max the max
    wins.
    """
    if cluster_suspended or group.suspend:
        return 0
    low = group.min_replicas or 0
    high = INT32_MAX if group.max_replicas is None else group.max_replicas
    if low > high:
        return max(high, 0)
    replicas = low if group.replicas is None else group.replicas
    return max(min(max(replicas, low), high), 0)


def desired_pods(group: WorkerGroupSpec, *, cluster_suspended: bool = False) -> int:
    return desired_slices(group, cluster_suspended=cluster_suspended) * hosts(group)


def cluster_suspended(cluster: RayCluster) -> bool:
    """``suspend`` or ``idleSuspend``: Ray's idle policy Suspend sets the latter so that a
    user's own ``suspend`` (and Kueue's) stays theirs; the operator treats both alike."""
    return bool(cluster.spec.suspend or cluster.spec.idle_suspend)


def autoscaling_on(cluster: RayCluster) -> bool:
    return cluster.spec.enable_in_tree_autoscaling is True


def min_pods(cluster: RayCluster) -> int:
    """Sum of minReplicas * numOfHosts over groups not suspended (KubeRay's minWorkerReplicas)."""
    total = sum(
        (g.min_replicas or 0) * hosts(g) for g in cluster.spec.worker_group_specs if not g.suspend
    )
    return min(total, INT32_MAX)


def max_pods(cluster: RayCluster) -> int:
    """Sum of maxReplicas * numOfHosts over groups not suspended, capped at int32 like KubeRay."""
    total = 0
    for g in cluster.spec.worker_group_specs:
        if g.suspend:
            continue
        total += (INT32_MAX if g.max_replicas is None else g.max_replicas) * hosts(g)
    return min(total, INT32_MAX)
