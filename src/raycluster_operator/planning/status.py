"""The desired ``.status`` of a RayCluster, from what was observed in this pass.

The controller writes the status only when it differs from the stored one, so this function
must give an identical dict for an unchanged world: conditions keep their previous
``lastTransitionTime`` unless their status flips, ``lastUpdateTime`` moves only when something
else changed, and ``now`` is a parameter. Counts of pods are KubeRay's fields; counts of slices
(``desiredWorkerSlices``, ``workerGroups``) are ours, because a slice is the unit users scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from kubefacts.timestamps import rfc3339
from raycluster_operator.api.models import RayCluster
from raycluster_operator.api.names import head_service_name
from raycluster_operator.api.objects import Service
from raycluster_operator.api.problems import Problem
from raycluster_operator.planning.desired import cluster_suspended, max_pods, min_pods
from raycluster_operator.planning.feature import Feature
from raycluster_operator.planning.pods import PodView
from raycluster_operator.planning.reasons import (
    Condition,
    ConditionReason,
    ConditionType,
    DeleteReason,
)
from raycluster_operator.planning.resources import desired_resources
from raycluster_operator.planning.turn import GroupTally

HEAD_POD_READY = ConditionType.HEAD_POD_READY
PROVISIONED = ConditionType.PROVISIONED
REPLICA_FAILURE = ConditionType.REPLICA_FAILURE
SUSPENDING = ConditionType.SUSPENDING
SUSPENDED = ConditionType.SUSPENDED
INVALID_SPEC = ConditionType.INVALID_SPEC
CONDITION_TYPES = tuple(ConditionType)

STATE_READY = "ready"
STATE_SUSPENDED = "suspended"
STATE_FAILED = "failed"


class Deletion(NamedTuple):
    """What this pass deletes in one group, as the status remembers it (``lastDeletion``)."""

    reason: DeleteReason
    message: str
    pods: int


@dataclass(frozen=True, slots=True)
class Observed:
    tallies: Sequence[GroupTally]
    #: The head pod in use (oldest live one), if any.
    head: PodView | None
    head_service: Mapping[str, Any] | None
    problems: Sequence[Problem]
    #: A problem outside any worker group: the cluster is ``failed`` and left alone.
    cluster_invalid: bool
    #: Broken-replica delete reason -> how many pods this pass deletes for it.
    failures: Mapping[DeleteReason, int] = field(default_factory=dict)
    #: Pods of the cluster that still exist at all (terminating ones included).
    pods_remaining: int = 0
    #: Group -> what this pass deletes there, if anything.
    deletions: Mapping[str, Deletion] = field(default_factory=dict)
    #: The cluster's pods are being removed for suspension and some still exist (whatever
    #: ``spec.suspend`` says now: planning/suspension.py).
    suspending: bool = False
    #: Worker groups whose pods are being removed for the group's own suspension.
    groups_suspending: frozenset[str] = frozenset()
    #: The lifecycle features of the pass, in rule order: each adds its own conditions
    #: (``Feature.conditions``) and fields of a group's entry (``Feature.status``).
    features: Sequence[Feature] = ()
    #: The status stored before this pass (``ClusterTurn.previous``).
    previous: Mapping[str, Any] = field(default_factory=dict)


def build_status(cluster: RayCluster, seen: Observed, *, now: datetime) -> dict[str, Any]:
    before = seen.previous
    suspended = cluster_suspended(cluster)
    tallies = seen.tallies
    head_ready = seen.head is not None and seen.head.running_and_ready
    all_ready = (
        head_ready
        and not seen.cluster_invalid
        and all(
            t.ready_pods >= t.desired_pods
            and t.ready_slices >= t.desired_slices
            and t.broken_slices == 0
            for t in tallies
        )
    )
    status: dict[str, Any] = {
        "desiredWorkerReplicas": sum(t.desired_pods for t in tallies),
        "readyWorkerReplicas": sum(t.ready_pods for t in tallies),
        "availableWorkerReplicas": sum(t.running_pods for t in tallies),
        "minWorkerReplicas": min_pods(cluster),
        "maxWorkerReplicas": max_pods(cluster),
        **desired_resources(cluster),
        "desiredWorkerSlices": sum(t.desired_slices for t in tallies),
        "readyWorkerSlices": sum(t.ready_slices for t in tallies),
        "workerGroups": [_group_entry(t, before, seen, now) for t in tallies],
    }
    if cluster.metadata.generation is not None:
        status["observedGeneration"] = cluster.metadata.generation
    head = _head_info(cluster, seen)
    if head:
        status["head"] = head
    endpoints = _endpoints(seen.head_service)
    if endpoints:
        status["endpoints"] = endpoints

    state = _state(before, seen, suspended=suspended, all_ready=all_ready)
    if state:
        status["state"] = state
    if state == STATE_FAILED:
        status["reason"] = "; ".join(str(p) for p in seen.problems if p)
    wanted = _conditions(
        before, seen, suspended=suspended, all_ready=all_ready, head_ready=head_ready
    )
    status["conditions"] = _with_transition_times(before, wanted, cluster, now)

    unchanged = {k: v for k, v in before.items() if k != "lastUpdateTime"} == status
    status["lastUpdateTime"] = (
        before["lastUpdateTime"] if unchanged and "lastUpdateTime" in before else rfc3339(now)
    )
    return status


def _group_entry(
    tally: GroupTally, before: Mapping[str, Any], seen: Observed, now: datetime
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "groupName": tally.group,
        "numOfHosts": tally.num_of_hosts,
        "desiredSlices": tally.desired_slices,
        "readySlices": tally.ready_slices,
        "brokenSlices": tally.broken_slices,
        "desiredPods": tally.desired_pods,
        "readyPods": tally.ready_pods,
    }
    if tally.updated_slices is not None:
        entry["updatedSlices"] = tally.updated_slices
    if tally.group in seen.groups_suspending:
        # Read back by planning/suspension.py: the group keeps suspending after a restart.
        entry["suspending"] = True
    if tally.disrupted:
        # Rule 12b: which slices a planned disruption is moving, why, and by when.
        entry["disruptedSlices"] = [dict(d) for d in tally.disrupted]
    for feature in seen.features:
        entry.update(feature.status(tally.group))
    # "Why did my slice go away?" stays answerable after the Event has expired: the latest
    # deletion in the group, kept from the previous status until a newer one replaces it.
    deletion = seen.deletions.get(tally.group)
    if deletion is not None:
        entry["lastDeletion"] = {
            "reason": deletion.reason.value,
            "message": deletion.message,
            "pods": deletion.pods,
            "time": rfc3339(now),
        }
    else:
        for old in before.get("workerGroups") or ():
            if isinstance(old, Mapping) and old.get("groupName") == tally.group:
                if "lastDeletion" in old:
                    entry["lastDeletion"] = old["lastDeletion"]
                break
    return entry


def _state(
    before: Mapping[str, Any], seen: Observed, *, suspended: bool, all_ready: bool
) -> str | None:
    """KubeRay's ``state``: once ``ready`` it stays so until suspended or invalid."""
    if seen.cluster_invalid:
        return STATE_FAILED
    if suspended:
        return STATE_SUSPENDED if seen.pods_remaining == 0 else before.get("state") or None
    if seen.suspending:
        return before.get("state") or None
    if all_ready or before.get("state") == STATE_READY:
        return STATE_READY
    return None


def _conditions(
    before: Mapping[str, Any],
    seen: Observed,
    *,
    suspended: bool,
    all_ready: bool,
    head_ready: bool,
) -> list[Condition]:
    why = ConditionReason
    out: list[Condition] = []
    if head_ready:
        out.append(Condition(HEAD_POD_READY, True, why.HEAD_POD_RUNNING_AND_READY))
    elif seen.head is None:
        out.append(Condition(HEAD_POD_READY, False, why.HEAD_POD_NOT_FOUND, "no live head pod"))
    else:
        out.append(
            Condition(
                HEAD_POD_READY, False, why.HEAD_POD_NOT_READY, f"head {seen.head.name} not ready"
            )
        )

    was_provisioned = any(
        c.get("type") == PROVISIONED and c.get("status") == "True"
        for c in before.get("conditions") or ()
    )
    if suspended or seen.suspending:
        # KubeRay's reason and message, which its own e2e test (TestRayClusterSuspend) reads.
        out.append(
            Condition(PROVISIONED, False, why.PODS_PROVISIONING, "RayCluster has been suspended")
        )
    elif all_ready or was_provisioned:
        out.append(Condition(PROVISIONED, True, why.ALL_PODS_READY_FIRST_TIME))
    else:
        out.append(
            Condition(PROVISIONED, False, why.PODS_PROVISIONING, "pods are being provisioned")
        )

    if seen.failures:
        worst = sorted(seen.failures.items(), key=lambda kv: (-kv[1], kv[0]))
        message = ", ".join(f"{reason.value}: {count} pods" for reason, count in worst)
        out.append(
            Condition(REPLICA_FAILURE, True, worst[0][0], f"deleting broken replicas ({message})")
        )
    else:
        out.append(Condition(REPLICA_FAILURE, False, why.NO_REPLICA_FAILURE))

    remaining = seen.pods_remaining > 0
    # One-way: stays True until no pod is left, even if the spec resumed meanwhile.
    if seen.suspending or (suspended and remaining):
        out.append(Condition(SUSPENDING, True, why.SUSPENDING, f"{seen.pods_remaining} pods left"))
    else:
        # KubeRay keeps the condition's own name as the reason when False too.
        out.append(Condition(SUSPENDING, False, why.SUSPENDING))
    if suspended and not remaining:
        out.append(Condition(SUSPENDED, True, why.SUSPENDED))
    else:
        out.append(Condition(SUSPENDED, False, why.SUSPENDED))

    if seen.problems:
        text = "; ".join(str(p) for p in seen.problems)
        out.append(Condition(INVALID_SPEC, True, why.INVALID_SPEC, text))
    else:
        out.append(Condition(INVALID_SPEC, False, why.SPEC_VALID))
    for feature in seen.features:
        out += feature.conditions()
    return out


def _with_transition_times(
    before: Mapping[str, Any],
    wanted: Sequence[Condition],
    cluster: RayCluster,
    now: datetime,
) -> list[dict[str, Any]]:
    previous = {c.get("type"): c for c in before.get("conditions") or ()}
    out = []
    for want in wanted:
        value = "True" if want.status else "False"
        old = previous.get(want.type)
        since = (
            old["lastTransitionTime"]
            if old and old.get("status") == value and old.get("lastTransitionTime")
            else rfc3339(now)
        )
        condition: dict[str, Any] = {
            "type": str(want.type),
            "status": value,
            "reason": str(want.reason),
            "message": want.message,
            "lastTransitionTime": since,
        }
        if cluster.metadata.generation is not None:
            condition["observedGeneration"] = cluster.metadata.generation
        out.append(condition)
    return out


def unreadable_status(
    before: Mapping[str, Any],
    problems: Sequence[Problem],
    generation: int | None,
    *,
    now: datetime,
) -> dict[str, Any]:
    """The status of a RayCluster whose spec cannot even be read (a field of the wrong type):
    nothing is planned, so only the InvalidSpec condition and observedGeneration change; the
    other fields keep what was last known. The transition time is kept while the condition
    stays true, so an unchanged object costs no status writes."""
    text = "; ".join(str(p) for p in problems) or "the RayCluster cannot be read"
    old = next((c for c in before.get("conditions") or () if c.get("type") == INVALID_SPEC), None)
    since = (
        old["lastTransitionTime"]
        if old and old.get("status") == "True" and old.get("lastTransitionTime")
        else rfc3339(now)
    )
    condition: dict[str, Any] = {
        "type": INVALID_SPEC.value,
        "status": "True",
        "reason": ConditionReason.INVALID_SPEC.value,
        "message": text,
        "lastTransitionTime": since,
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    others = [c for c in before.get("conditions") or () if c.get("type") != INVALID_SPEC]
    status = {**before, "conditions": [*others, condition], "reason": text}
    if generation is not None:
        status["observedGeneration"] = generation
    return status


def _head_info(cluster: RayCluster, seen: Observed) -> dict[str, str]:
    info: dict[str, str] = {"serviceName": head_service_name(cluster.metadata.name)}
    if seen.head is not None:
        info["podName"] = seen.head.name
        if seen.head.pod_ip:
            info["podIP"] = seen.head.pod_ip
    if seen.head_service is not None:
        service = Service(seen.head_service)
        # As KubeRay: a headless head service (ours by default) has no virtual IP, so the
        # head pod's IP stands for it, and `kubectl get rayclusters -o wide` shows one.
        ip = service.cluster_ip
        if ip is None and service.headless and seen.head is not None:
            ip = seen.head.pod_ip
        if ip:
            info["serviceIP"] = ip
    return info


def _endpoints(service: Mapping[str, Any] | None) -> dict[str, str]:
    """KubeRay's ``endpoints``: the head service's port numbers by port name."""
    ports = Service(service).ports if service is not None else ()
    return {str(p["name"]): str(p["port"]) for p in ports if p.get("name") and "port" in p}
