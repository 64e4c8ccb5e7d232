"""The head pod: exactly one live head, recreated when it fails.

Never two live heads (docs/design.md §4, rules 4-5): a replacement head is created only once no
head pod of the cluster exists at all, not merely once the old one is terminating. A
terminating head may run for its whole grace period (or as long as a finalizer holds it),
still answering at the head service and holding GCS state; a second head beside it would
split the cluster. A failed head is deleted in one pass and replaced after it is gone, as a
StatefulSet replaces its pods.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raycluster_operator.api import labels
from raycluster_operator.planning.actions import PodDelete
from raycluster_operator.planning.pods import PodView
from raycluster_operator.planning.reasons import DeleteReason


@dataclass(frozen=True, slots=True)
class HeadPlan:
    create: bool
    deletes: tuple[PodDelete, ...]
    #: The head pod the cluster uses now (the oldest live one), if any.
    current: PodView | None


def plan_head(head_pods: Sequence[PodView], *, suspended: bool) -> HeadPlan:
    deletes: list[PodDelete] = []

    def delete(pod: PodView, reason: DeleteReason, message: str) -> None:
        if not pod.terminating:
            deletes.append(
                PodDelete(pod.name, labels.HEAD_GROUP, None, reason, message, uid=pod.uid)
            )

    if suspended:
        for pod in head_pods:
            delete(
                pod, DeleteReason.CLUSTER_SUSPENDED, f"cluster suspended: removing head {pod.name}"
            )
        return HeadPlan(False, tuple(deletes), None)
    live = sorted((p for p in head_pods if p.live), key=lambda p: (p.created, p.name))
    current = live[0] if live else None
    for pod in live[1:]:
        delete(pod, DeleteReason.DUPLICATE_HEAD, f"head {pod.name} duplicates {live[0].name}")
    failed = [p for p in head_pods if p.failed and not p.terminating]
    for pod in failed:
        delete(pod, DeleteReason.HEAD_FAILED, f"head {pod.name} failed; it is recreated")
    return HeadPlan(not head_pods, tuple(deletes), current)
