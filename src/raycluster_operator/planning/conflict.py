"""Rule 2a: another controller acts on a cluster we manage (docs/design.md §4).

Two operators reconciling one RayCluster create and delete each other's pods without end.
Ownership is judged as KubeRay judges it: a controller makes its pods with a controller
ownerReference to the RayCluster (its uid) and its own ``app.kubernetes.io/created-by``
(KubeRay's ``kuberay-operator``; ours ``raycluster-operator``, a key a user's template cannot
override, ``labels.OWNED_KEYS``). So a live pod controlled by this very RayCluster that names
another creator is proof of a second controller. A pod that only carries the cluster's label
(made by hand, by a Helm chart or a Kubebuilder project with its own ``created-by``) proves
nothing: it is a stray (planning/features/strays.py), reported and left alone, and never freezes the
cluster. When a second controller acts, the pass writes nothing to the cluster's pods, services or
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


def controlled_by(pod: Mapping[str, Any], uid: str | None) -> bool:
    """The pod's controller ownerReference is the RayCluster with this uid."""
    if not uid:
        return False
    refs = (pod.get("metadata") or {}).get("ownerReferences") or ()
    return any(
        isinstance(ref, Mapping)
        and ref.get("controller") is True
        and ref.get("kind") == "RayCluster"
        and ref.get("uid") == uid
        for ref in refs
    )


def creator(pod: Mapping[str, Any]) -> str | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(labels.CREATED_BY)
    return str(value) if value else None


def other_controllers(cluster: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Creators other than us of the live pods this RayCluster controls, sorted. A controlled
    pod with no ``created-by`` names no other controller (KubeRay and we always set it): it is
    taken as ours, made before the label, and rule 9 replaces it if it lacks an identity."""
    uid = (cluster.get("metadata") or {}).get("uid")
    found = set()
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp") or not controlled_by(pod, uid):
            continue
        made_by = creator(pod)
        if made_by is not None and made_by != OPERATOR_NAME:
            found.add(made_by)
    return sorted(found)


def message(others: Sequence[str], namespace: str) -> str:
    names = ", ".join(others)
    return (
        f"pods this RayCluster controls (their controller ownerReference) were created by "
        f"{names} ({labels.CREATED_BY}): two "
        f"controllers reconcile it, so raycluster-operator leaves it alone until none of "
        f"{names}'s pods is left. Run one operator per namespace: KubeRay's with "
        f"--watch-namespace excluding {namespace!r}, or raycluster-operator with --namespace "
        f"excluding it; then delete the pods {names} created"
    )


def controller_conflict(
    cluster: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], now: datetime
) -> Conflict | None:
    """None when no other controller's pod is live; else the pass of rule 2a."""
    others = other_controllers(cluster, pods)
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
