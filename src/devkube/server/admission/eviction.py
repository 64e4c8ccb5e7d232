"""The `pods/eviction` subresource, as kube-apiserver's eviction REST storage answers it.

An eviction is a delete that asks the pod's PodDisruptionBudget first. Kube's order, kept
here because clients (kubectl drain, cluster-autoscaler, the operator's tests) branch on it:

1. a pod that is already terminating, or Pending, Succeeded or Failed, is deleted without
   asking any budget (it is not serving);
2. the namespace's budgets whose selector matches the pod are found (a null selector matches
   nothing, an empty one everything, as in policy/v1); more than one is a 500 with kube's
   sentence, and nothing is deleted;
3. a pod that is not Ready may go without spending a disruption when the budget says
   `unhealthyPodEvictionPolicy: AlwaysAllow`, or (the default, `IfHealthyBudget`) when the
   budget is met already (currentHealthy >= desiredHealthy > 0);
4. otherwise a budget whose status has not caught up with its spec (observedGeneration <
   generation) answers 429 with a 10 s Retry-After, and one with no disruption left 429 with
   the `DisruptionBudget` cause; else one disruption is spent and the pod recorded in
   `status.disruptedPods` (so the disruption controller does not count it healthy until it
   is gone), and the pod gets the `DisruptionTarget` condition and is deleted.

A 429 writes nothing anywhere: a refused eviction leaves no trace on the pod or the budget.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from devkube.machinery.selectors import label_selector_matches
from devkube.server.errors import ApiError
from devkube.server.registry.objects import Objects
from devkube.server.registry.resources import ResourceType
from devkube.server.registry.selectors import Selection
from devkube.server.registry.store import Stored

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)
#: kube's `MaxDisruptedPodSize`: evictions not yet confirmed by the disruption controller.
MAX_DISRUPTED_PODS = 2000
#: policy/v1 `DisruptionBudgetCause`.
CAUSE = "DisruptionBudget"


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _too_many(message: str, cause: str, retry_after: int) -> ApiError:
    details: dict[str, Any] = {"causes": [{"reason": CAUSE, "message": cause}]}
    headers = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(429, "TooManyRequests", message, details=details, headers=headers)


def _pdb_type(objects: Objects) -> ResourceType:
    rt = objects.registry.get("policy", "v1", "poddisruptionbudgets")
    assert rt is not None
    return rt


def budgets_for(objects: Objects, pod: Mapping[str, Any]) -> list[Stored]:
    """The budgets of the pod's namespace that select it."""
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    found = []
    for stored in objects.list(_pdb_type(objects), Selection(meta.get("namespace", ""))):
        selector = (stored.obj.get("spec") or {}).get("selector")
        if selector is not None and label_selector_matches(selector, labels):
            found.append(stored)
    return found


def evict(
    objects: Objects, rt: ResourceType, ns: str, name: str, body: Any, *, dry_run: bool = False
) -> dict[str, Any] | None:
    """Evict one pod. Returns a failure `Status` to send as is (the 500 for several budgets,
    which kube answers as a Status, not an error), or None when the pod was deleted."""
    options = dict((body or {}).get("deleteOptions") or {})
    stored = objects.get(rt, ns, name)
    pod = stored.obj
    phase = (pod.get("status") or {}).get("phase")
    if pod["metadata"].get("deletionTimestamp") or phase in ("Pending", "Succeeded", "Failed"):
        _delete(objects, rt, stored, options, dry_run)
        return None
    budgets = budgets_for(objects, pod)
    if len(budgets) > 1:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": MULTIPLE,
            "code": 500,
        }
    if budgets and not _unhealthy_may_go(pod, budgets[0].obj):
        _spend(objects, budgets[0], name, dry_run)
    elif budgets:
        # kube adds a resourceVersion precondition: the pod must still be the unready one.
        options.setdefault("preconditions", {}).setdefault(
            "resourceVersion", pod["metadata"]["resourceVersion"]
        )
    _delete(objects, rt, stored, options, dry_run)
    return None


def _unhealthy_may_go(pod: Mapping[str, Any], pdb: Mapping[str, Any]) -> bool:
    if _ready(pod):
        return False
    if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    status = pdb.get("status") or {}
    desired = int(status.get("desiredHealthy") or 0)
    return int(status.get("currentHealthy") or 0) >= desired > 0


def _spend(objects: Objects, budget: Stored, pod_name: str, dry_run: bool) -> None:
    """kube's checkAndDecrement: refuse, or spend one disruption and record the pod."""
    pdb = budget.obj
    meta, status = pdb["metadata"], dict(pdb.get("status") or {})
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise _too_many(
            VIOLATION,
            f"The disruption budget {meta['name']} is still being processed by the server.",
            10,
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    disrupted = dict(status.get("disruptedPods") or {})
    if allowed < 0:
        raise _forbidden(meta["name"], "pdb disruptions allowed is negative")
    if len(disrupted) > MAX_DISRUPTED_PODS:
        raise _forbidden(
            meta["name"],
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        )
    if allowed == 0:
        raise _too_many(
            VIOLATION,
            f"The disruption budget {meta['name']} needs {int(status.get('desiredHealthy') or 0)}"
            f" healthy pods and has {int(status.get('currentHealthy') or 0)} currently",
            0,
        )
    if dry_run:
        return
    status["disruptionsAllowed"] = allowed - 1
    disrupted[pod_name] = objects.now()
    status["disruptedPods"] = disrupted
    if allowed - 1 == 0:
        status["conditions"] = allowed_condition(status.get("conditions") or [], status, objects)
    updated = copy.deepcopy(pdb)
    updated["status"] = status
    objects.replace(_pdb_type(objects), budget, updated, subresource="status")


def allowed_condition(
    conditions: list[Mapping[str, Any]], status: Mapping[str, Any], objects: Objects | None
) -> list[dict[str, Any]]:
    """`DisruptionAllowed` as kube's pdb helper sets it (SufficientPods / InsufficientPods),
    its transition time moving only when the status does."""
    allowed = int(status.get("disruptionsAllowed") or 0) > 0
    want = "True" if allowed else "False"
    reason = "SufficientPods" if allowed else "InsufficientPods"
    return set_condition(conditions, "DisruptionAllowed", want, reason, "", status, objects)


def set_condition(
    conditions: list[Mapping[str, Any]],
    kind: str,
    want: str,
    reason: str,
    message: str,
    status: Mapping[str, Any],
    objects: Objects | None,
    now: str = "",
) -> list[dict[str, Any]]:
    """metav1 SetStatusCondition for one condition type."""
    old = next((c for c in conditions if c.get("type") == kind), None)
    if old is None or old.get("status") != want:
        stamp = objects.now() if objects else now
    else:
        stamp = str(old.get("lastTransitionTime"))
    condition = {
        "type": kind,
        "status": want,
        "reason": reason,
        "message": message,
        "observedGeneration": int(status.get("observedGeneration") or 0),
        "lastTransitionTime": stamp,
    }
    return [dict(c) for c in conditions if c.get("type") != kind] + [condition]


def _forbidden(name: str, why: str) -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'poddisruptionbudget.policy "{name}" is forbidden: {why}',
        details={"name": name, "group": "policy", "kind": "poddisruptionbudget"},
    )


def _delete(
    objects: Objects, rt: ResourceType, stored: Stored, options: dict[str, Any], dry_run: bool
) -> None:
    """kube's addConditionAndDeletePod: a live pod learns why it goes (`DisruptionTarget`,
    `EvictionByEvictionAPI`) before the delete."""
    pod = stored.obj
    meta = pod["metadata"]
    phase = (pod.get("status") or {}).get("phase")
    if not dry_run and not meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        updated = copy.deepcopy(pod)
        status = updated.setdefault("status", {})
        conditions = [
            c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"
        ]
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
                "lastTransitionTime": objects.now(),
            }
        )
        status["conditions"] = conditions
        pre = options.get("preconditions") or {}
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            pass  # the delete below answers the Conflict
        else:
            stored = objects.replace(rt, stored, updated, subresource="status")
            if pre.get("resourceVersion"):
                options["preconditions"] = {
                    **pre,
                    "resourceVersion": stored.obj["metadata"]["resourceVersion"],
                }
    objects.delete(rt, meta.get("namespace"), meta["name"], options, dry_run=dry_run)
