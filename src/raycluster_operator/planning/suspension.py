"""Suspension is one-way until every pod is gone (docs/design.md §4, rules 4-5).

Once a cluster (or a worker group) starts suspending, every pass deletes its pods and creates
none until no pod of it exists, whatever the spec says by then: resuming half-way would put a
new head beside a terminating one and new slices beside old ones holding their hostnames.
The state lives in the status the operator wrote (the ``RayClusterSuspending`` condition, and
``workerGroups[].suspending`` for a group), never in memory, so a restarted operator carries
on where the last one stopped. KubeRay does the same for the cluster (its suspend branch of
``reconcilePods`` keys on the Suspending condition, not on ``spec.suspend``).
"""

from __future__ import annotations

from collections.abc import Mapping

from raycluster_operator.api.models import RayCluster

#: KubeRay's condition type, written by ``status.build_status``.
SUSPENDING = "RayClusterSuspending"


def cluster_was_suspending(cluster: RayCluster) -> bool:
    """The last status written says the cluster's pods were being removed for suspension."""
    status = cluster.status
    for condition in status.conditions if status and status.conditions else ():
        if condition.type == SUSPENDING and condition.status == "True":
            return True
    return False


def groups_were_suspending(cluster: RayCluster) -> frozenset[str]:
    """Worker groups the last status marks ``suspending: true`` (an extra field of ours)."""
    status = cluster.status
    out: set[str] = set()
    for entry in status.worker_groups if status and status.worker_groups else ():
        extra: Mapping[str, object] = entry.model_extra or {}
        if extra.get("suspending") is True:
            out.add(entry.group_name)
    return frozenset(out)
