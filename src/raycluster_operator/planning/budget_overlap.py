"""A user's PodDisruptionBudget over the same pods as our per-slice ones (docs/design.md §4
rule 12b, "a budget of the user's").

Kubernetes' eviction API refuses any pod that two budgets select, with a 500 ("This pod has
more than one PodDisruptionBudget, which the eviction subresource does not support."): a
namespace-wide budget of the user's (``app: my-team``, or an empty selector) over a slice we
keep a budget for makes every ``kubectl drain`` of its nodes fail, and cluster-autoscaler can
never scale those nodes down. The user's budget says what the user wants of their pods, so
the operator stands back: for a worker group whose live pods any user budget selects, it
keeps no per-slice budget of its own (deleting those it made), says so with the condition
``DisruptionBudgetOverlap`` naming both, and one Warning Event when an overlap appears that
the condition does not name yet. Its budgets come back in the first pass after the user's
budget stops selecting the group (deleted, or its selector narrowed). The slice moves of rule
12b still happen on the cordon; only the eviction's refusal is then the user's budget's.

A budget is ours when it carries our ``app.kubernetes.io/created-by``: a user's may carry
``ray.io/cluster`` as well, and is never deleted for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kubefacts.selectors import selects
from raycluster_operator import OPERATOR_NAME
from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster, WorkerGroupSpec
from raycluster_operator.builders.metadata import base_labels, default_labels, merge_labels
from raycluster_operator.planning.context import Cached
from raycluster_operator.planning.pods import PodView
from raycluster_operator.planning.reasons import Condition, ConditionReason, ConditionType

#: The eviction API's answer to a pod two budgets select (kube-apiserver's eviction storage).
EVICTION_REFUSAL = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)


def ours(budget: Cached, cluster: str) -> bool:
    """One of this cluster's per-slice budgets (builders/budgets.py labels them so)."""
    found = (budget.get("metadata") or {}).get("labels") or {}
    return found.get(labels.CREATED_BY) == OPERATOR_NAME and found.get(labels.CLUSTER) == cluster


def theirs(budgets: Iterable[Cached]) -> list[Cached]:
    """The budgets no raycluster-operator made (ours of other clusters select other pods)."""
    return [
        b
        for b in budgets
        if ((b.get("metadata") or {}).get("labels") or {}).get(labels.CREATED_BY) != OPERATOR_NAME
        and not (b.get("metadata") or {}).get("deletionTimestamp")
    ]


def group_labels(cluster: RayCluster, group: WorkerGroupSpec) -> dict[str, str]:
    """The labels every worker pod of the group carries, whatever its slice: judged even while
    the group has no live pod (a slice replaced whole), so an overlap does not flap."""
    template = group.template.get("metadata") or {}
    ours = base_labels(cluster, group=group.group_name, node_type=labels.NODE_TYPE_WORKER)
    return merge_labels(template.get("labels"), ours, default_labels(cluster))


def selecting(
    budgets: Iterable[Cached], common: Mapping[str, str], pods: Iterable[PodView]
) -> tuple[str, ...]:
    """Names of the budgets that select the group's pods: by the labels they all carry, or
    any live pod (a selector on a slice's own labels; a terminating pod is evicted without
    asking any budget)."""
    live = [p.labels for p in pods if p.live]
    out = []
    for budget in budgets:
        selector = (budget.get("spec") or {}).get("selector")
        if any(selects(selector, found) for found in (common, *live)):
            out.append(str((budget.get("metadata") or {}).get("name") or ""))
    return tuple(sorted(out))


@dataclass(frozen=True, slots=True)
class Overlap:
    """One worker group whose pods a user's budget selects."""

    group: str
    #: The user's budgets selecting the group's pods.
    users: tuple[str, ...]
    #: Our per-slice budgets of the group this pass does not keep (made or would be).
    ours: tuple[str, ...]

    def phrases(self) -> list[str]:
        """One sentence start per user budget: what the condition's message is searched for
        to tell a new overlap from one already reported."""
        return [
            f"PodDisruptionBudget {u} selects pods of worker group {self.group}" for u in self.users
        ]

    def sentence(self) -> str:
        named = ", ".join(self.ours) if self.ours else "none yet"
        return (
            f"{' and '.join(self.phrases())}, as the operator's per-slice budgets do "
            f"({named}): the operator keeps none for this group while it does"
        )


def overlap_message(overlaps: Sequence[Overlap]) -> str:
    said = "; ".join(o.sentence() for o in overlaps)
    return (
        f"{said}. Kubernetes refuses to evict a pod two budgets select (500 "
        f'"{EVICTION_REFUSAL}"), so drains follow the user\'s budget alone and may take one '
        f"host of a slice (the slice is then replaced whole). To keep a budget per slice, "
        f"scope the user's budget to other pods (for example with "
        f"{labels.NODE_TYPE} NotIn (worker))"
    )


def overlap_condition(
    overlaps: Sequence[Overlap], before: tuple[str, str] | None
) -> tuple[Condition | None, str | None]:
    """The condition (None: leave it out), and the Warning's message when an overlap appears
    that the stored condition does not name yet (None: no Warning)."""
    kind = ConditionType.DISRUPTION_BUDGET_OVERLAP
    if not overlaps:
        if before is None:
            return None, None
        return Condition(kind, False, ConditionReason.NO_DISRUPTION_BUDGET_OVERLAP), None
    message = overlap_message(overlaps)
    condition = Condition(kind, True, ConditionReason.DISRUPTION_BUDGET_OVERLAP, message)
    known = before[1] if before is not None and before[0] == "True" else ""
    news = any(p not in known for o in overlaps for p in o.phrases())
    return condition, message if news else None


def previous_condition(cluster: RayCluster) -> tuple[str, str] | None:
    conditions = cluster.status.conditions if cluster.status is not None else None
    for condition in conditions or ():
        if condition.type == ConditionType.DISRUPTION_BUDGET_OVERLAP:
            return condition.status, condition.message
    return None
