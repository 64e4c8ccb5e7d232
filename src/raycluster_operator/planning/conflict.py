"""Rule 2a: another controller acts on a cluster we manage (docs/design.md §4).

Two operators reconciling one RayCluster create and delete each other's pods without end.
KubeRay's operator marks every pod it makes with ``app.kubernetes.io/created-by:
kuberay-operator``; ours carry ``raycluster-operator``, a key a user's template cannot
override (``labels.OWNED_KEYS``). So a live pod of the cluster that names another creator is
proof of a second controller. Then the pass writes nothing to the cluster's pods, services or
status, except one thing: the ``ControllerConflict`` condition, set by one status write when
the conflict appears (or its text changes) with one Warning Event of the same reason, naming
the other controller and what to do. The condition is the user's evidence on the object
itself; writing it once and never again keeps "nothing more" true while the conflict lasts.
Nothing is remembered: once no such pod is live, the next pass plans as usual, and its status
(which never carries this condition) removes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubefacts.timestamps import rfc3339
from raycluster_operator import OPERATOR_NAME
from raycluster_operator.api import labels
from raycluster_operator.planning.actions import PlannedEvent
from raycluster_operator.planning.reasons import EventReason

#: Condition type and reason, and the Event's reason.
CONTROLLER_CONFLICT = "ControllerConflict"


@dataclass(frozen=True)
class Conflict:
    """What a pass in conflict does: at most one status write and one Event."""

    status: dict[str, Any] | None
    events: tuple[PlannedEvent, ...]
    note: str


def other_controllers(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Creators other than us named by the cluster's live pods, sorted."""
    found = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        creator = (meta.get("labels") or {}).get(labels.CREATED_BY)
        if creator and creator != OPERATOR_NAME:
            found.add(str(creator))
    return sorted(found)


def message(others: Sequence[str], namespace: str) -> str:
    names = ", ".join(others)
    return (
        f"pods of this RayCluster were created by {names} ({labels.CREATED_BY}): two "
        f"controllers reconcile it, so raycluster-operator leaves it alone until none of "
        f"{names}'s pods is left. Run one operator per namespace: KubeRay's with "
        f"--watch-namespace excluding {namespace!r}, or raycluster-operator with --namespace "
        f"excluding it; then delete the pods {names} created"
    )


def controller_conflict(
    cluster: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], now: datetime
) -> Conflict | None:
    """None when no other controller's pod is live; else the pass of rule 2a."""
    others = other_controllers(pods)
    if not others:
        return None
    namespace = str((cluster.get("metadata") or {}).get("namespace") or "")
    text = message(others, namespace)
    before = cluster.get("status") or {}
    conditions = [c for c in before.get("conditions") or () if isinstance(c, Mapping)]
    current = next((c for c in conditions if c.get("type") == CONTROLLER_CONFLICT), None)
    note = f"controller conflict with {', '.join(others)}"
    if current and current.get("status") == "True" and current.get("message") == text:
        return Conflict(None, (), note)
    condition = {
        "type": CONTROLLER_CONFLICT,
        "status": "True",
        "reason": CONTROLLER_CONFLICT,
        "message": text,
        "lastTransitionTime": rfc3339(now),
    }
    others_kept = [dict(c) for c in conditions if c.get("type") != CONTROLLER_CONFLICT]
    status = {**before, "conditions": [*others_kept, condition]}
    event = PlannedEvent("Warning", EventReason.CONTROLLER_CONFLICT, text)
    return Conflict(status, (event,), note)
