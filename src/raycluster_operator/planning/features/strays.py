"""Rule 2b: pods that carry a cluster's label but no controller of it made (docs/design.md §4).

``ray.io/cluster=<name>`` is only a label: anyone may put it on a pod. A pod made by hand, by a
Helm chart or by a Kubebuilder project (each with its own ``app.kubernetes.io/created-by``, or
none) is not the operator's and not another controller's of this RayCluster (rule 2a needs the
controller ownerReference): it is a stray. Counting it would put a pod the operator cannot
replace into the status; deleting it (a worker without a replica identity, rule 9) would
destroy a user's work; freezing the cluster for it would stop every slice over one label. So
the pass plans as if it were not there, and says so: the condition ``StrayPods`` names the
pods while any is live (present once it has been), with one Warning Event when a pod it does
not name yet appears, so a cluster at steady state, or one whose strays go, makes no Event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raycluster_operator import OPERATOR_NAME
from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster
from raycluster_operator.planning.actions import PlannedEvent
from raycluster_operator.planning.conflict import controlled_by, creator
from raycluster_operator.planning.feature import Feature
from raycluster_operator.planning.reasons import (
    Condition,
    ConditionReason,
    ConditionType,
    EventReason,
)
from raycluster_operator.planning.turn import ClusterTurn

#: At most this many pods are named in the condition; the rest are counted.
NAMED = 5


def is_stray(cluster: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Not created by this operator and not controlled by this RayCluster: nobody's of it.

    A pod of ours always carries our ``created-by`` (a key no template overrides); one the
    RayCluster controls with another creator is rule 2a's, not a stray."""
    uid = (cluster.get("metadata") or {}).get("uid")
    return creator(pod) != OPERATOR_NAME and not controlled_by(pod, uid)


def split_strays(
    cluster: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The pods to plan with, and the strays (rule 2b)."""
    kept: list[Mapping[str, Any]] = []
    strays: list[Mapping[str, Any]] = []
    for pod in pods:
        (strays if is_stray(cluster, pod) else kept).append(pod)
    return kept, strays


def describe(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('name')} ({labels.CREATED_BY}: {creator(pod) or 'none'})"


def stray_message(cluster_name: str, strays: Sequence[Mapping[str, Any]]) -> str:
    ordered = sorted(strays, key=lambda p: str((p.get("metadata") or {}).get("name")))
    named = ", ".join(describe(p) for p in ordered[:NAMED])
    more = f" and {len(ordered) - NAMED} more" if len(ordered) > NAMED else ""
    return (
        f"pods {named}{more} carry {labels.CLUSTER}={cluster_name} but have no controller "
        f"ownerReference to this RayCluster: raycluster-operator did not create them and "
        f"neither counts, scales nor deletes them. If they are not Ray nodes of this cluster, "
        f"remove the label (the head Service selects on it)"
    )


def _previous(cluster: RayCluster) -> tuple[str, str] | None:
    conditions = cluster.status.conditions if cluster.status is not None else None
    for condition in conditions or ():
        if condition.type == ConditionType.STRAY_PODS:
            return condition.status, condition.message
    return None


class StrayPods(Feature):
    """Rule 2b's say in a pass: the condition every pass while strays are live, the Warning
    only for a stray it does not name yet."""

    rule = "2b"

    def __init__(self, turn: ClusterTurn) -> None:
        self.strays = [
            p
            for p in turn.context.state.strays
            if not (p.get("metadata") or {}).get("deletionTimestamp")
        ]
        self.before = _previous(turn.cluster)
        self.said: Condition | None = None

    def finish(self, turn: ClusterTurn) -> None:
        if not self.strays:
            if self.before is not None:
                self.said = Condition(
                    ConditionType.STRAY_PODS, False, ConditionReason.NO_STRAY_PODS
                )
            return
        message = stray_message(turn.cluster.metadata.name, self.strays)
        self.said = Condition(ConditionType.STRAY_PODS, True, ConditionReason.STRAY_PODS, message)
        if self._news():
            turn.events.append(PlannedEvent("Warning", EventReason.STRAY_PODS, message))

    def conditions(self) -> Sequence[Condition]:
        return () if self.said is None else (self.said,)

    def _news(self) -> bool:
        """A stray the stored condition does not name yet (the condition turning True, or a
        new pod); one going away changes the message but warns nobody."""
        if self.before is None or self.before[0] != "True":
            return True
        return any(describe(pod) not in self.before[1] for pod in self.strays)
