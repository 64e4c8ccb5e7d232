"""Finishing a RayCluster's deletion that Ray's idle policy Delete started.

Ray's autoscaler adds the finalizer ``ray.io/idle-termination-cleanup-finalizer`` and then
deletes the RayCluster, leaving the cleanup to the operator (as KubeRay's GCS finalizer does):
the cluster's pods go first, and only once none remain is the finalizer released, so the
RayCluster never disappears while its pods still run. A cluster being deleted without that
finalizer is left to the garbage collector (its pods carry an owner reference).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raycluster_operator.api import labels
from raycluster_operator.api.objects import RayClusterObject
from raycluster_operator.planning.actions import PodDelete
from raycluster_operator.planning.pods import read_pod
from raycluster_operator.planning.reasons import DeleteReason

IDLE_TERMINATION_FINALIZER = "ray.io/idle-termination-cleanup-finalizer"


@dataclass(frozen=True)
class DeletionPlan:
    deletes: tuple[PodDelete, ...] = ()
    #: A JSON patch that removes the finalizer, guarded by a ``test`` of its position so a
    #: concurrent change to the list fails the patch instead of removing someone else's entry.
    #: Empty while any pod of the cluster remains.
    release_finalizer: tuple[dict[str, Any], ...] = ()


def plan_deletion(
    cluster: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> DeletionPlan | None:
    """The cleanup of a deleted cluster carrying Ray's finalizer; None when there is none to do.

    Takes the raw object: a cluster whose spec no longer parses must still be cleaned up.
    """
    cluster_view = RayClusterObject(cluster)
    finalizers = list(cluster_view.finalizers)
    if not cluster_view.deleting or IDLE_TERMINATION_FINALIZER not in finalizers:
        return None
    name, namespace = cluster_view.name, cluster_view.namespace
    mine = [
        view
        for view in map(read_pod, pods)
        if view.labels.get(labels.CLUSTER) == name and view.namespace in (None, namespace)
    ]
    if mine:
        deletes = tuple(
            PodDelete(
                pod.name,
                pod.group or "",
                pod.replica_name,
                DeleteReason.CLUSTER_DELETING,
                f"RayCluster {name} is being deleted: removing pod {pod.name}",
                pod.replica_index,
                pod.host_index,
                pod.uid,
            )
            for pod in mine
            if not pod.terminating
        )
        return DeletionPlan(deletes=deletes)
    at = finalizers.index(IDLE_TERMINATION_FINALIZER)
    path = f"/metadata/finalizers/{at}"
    return DeletionPlan(
        release_finalizer=(
            {"op": "test", "path": path, "value": IDLE_TERMINATION_FINALIZER},
            {"op": "remove", "path": path},
        )
    )
