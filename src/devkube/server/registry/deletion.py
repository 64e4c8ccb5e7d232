"""What a DELETE does to one object: a pure decision from the object, the options and now.

Three outcomes, as in the real registry: remove the object now; keep it untouched (it is
already terminating and the request would not shorten its grace); or mark it terminating
(deletionTimestamp, deletionGracePeriodSeconds, garbage-collection finalizers) and let
finalizer owners or the kubelet finish the job.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from kubefacts.timestamps import rfc3339

GC_FINALIZERS = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}


class Outcome(Enum):
    REMOVE = "remove"
    KEEP = "keep"
    MARK = "mark"


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    marked: dict[str, Any] | None = None  # the terminating object, for MARK


def precondition_failure(meta: dict[str, Any], options: dict[str, Any]) -> str | None:
    """The Conflict message when DeleteOptions preconditions do not hold."""
    pre = options.get("preconditions") or {}
    if pre.get("uid") and pre["uid"] != meta.get("uid"):
        return (
            f"Precondition failed: UID in precondition: {pre['uid']}, "
            f"UID in object meta: {meta.get('uid')}"
        )
    if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
        return (
            f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
            f"ResourceVersion in object meta: {meta.get('resourceVersion')}"
        )
    return None


def pod_grace(pod: dict[str, Any], options: dict[str, Any]) -> int:
    """Seconds a pod gets to terminate; 0 when nothing runs it (unbound or finished)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    grace = options.get("gracePeriodSeconds")
    if grace is None:
        grace = spec.get("terminationGracePeriodSeconds", 30)
    return max(int(grace), 0)


def decide(
    obj: dict[str, Any],
    options: dict[str, Any],
    now: datetime,
    *,
    is_pod: bool,
    is_namespace: bool,
) -> Decision:
    meta = obj["metadata"]
    policy = options.get("propagationPolicy")
    if options.get("orphanDependents") is True:
        policy = "Orphan"
    finalizers = list(meta.get("finalizers") or [])
    gc_finalizer = GC_FINALIZERS.get(policy or "")
    terminating = bool(meta.get("deletionTimestamp"))
    if gc_finalizer and gc_finalizer not in finalizers and not terminating:
        finalizers.append(gc_finalizer)
    grace = pod_grace(obj, options) if is_pod else 0
    if terminating:
        if grace >= int(meta.get("deletionGracePeriodSeconds") or 0):
            return Decision(Outcome.KEEP)  # a longer grace never extends a running one
        if grace == 0 and not finalizers:
            return Decision(Outcome.REMOVE)
    elif grace == 0 and not finalizers and not is_namespace:
        return Decision(Outcome.REMOVE)
    marked = copy.deepcopy(obj)
    m = marked["metadata"]
    if is_namespace:
        marked.setdefault("status", {})["phase"] = "Terminating"
    if finalizers:
        m["finalizers"] = finalizers
    m["deletionTimestamp"] = rfc3339(now + timedelta(seconds=grace))
    m["deletionGracePeriodSeconds"] = grace
    return Decision(Outcome.MARK, marked)
