"""What a plan asks the controller to do: plain values, one per API write or Event."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from raycluster_operator.planning.reasons import CreateReason, DeleteReason, Reason


@dataclass(frozen=True, slots=True)
class PodCreate:
    #: Worker group name, or ``headgroup`` for the head pod.
    group: str
    replica_index: int | None
    #: ``ray.io/worker-group-replica-name``; None for single-host and head pods.
    replica_name: str | None
    host_index: int | None
    reason: CreateReason
    #: The pod to POST (``generateName``, labels, owner reference), built by ``builders``.
    manifest: dict[str, Any] = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class PodDelete:
    name: str
    group: str
    replica_name: str | None
    reason: DeleteReason
    #: One sentence for the Event and the log: which replica, and what was wrong with it.
    message: str
    replica_index: int | None = None
    host_index: int | None = None
    #: Lets the controller delete with a uid precondition, so a recreated namesake is safe.
    uid: str | None = None
    #: The pod whose state or naming caused the deletion (a failed host, a name in
    #: workersToDelete); None when the cause is the spec (scale-down, suspend).
    trigger: str | None = None
    #: ``gracePeriodSeconds`` of the delete; None = the pod's own. 0 for a pod on a lost node
    #: (planning/features/host_loss.py): its kubelet cannot finish a graceful deletion.
    grace_period_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class PlannedEvent:
    type: Literal["Normal", "Warning"]
    reason: Reason
    message: str
    #: Pod name the Event is about; None means the RayCluster itself.
    regarding: str | None = None
    #: The Event's ``action``: what the operator does about it (``CreatePod``, ``DeletePod``),
    #: decided with the Event rather than guessed from its reason afterwards.
    action: str = "Reconcile"
    #: A pod the Event also names (``related``), such as the host that took its slice down.
    related: str | None = None


#: Event actions for pod writes.
CREATE_POD = "CreatePod"
DELETE_POD = "DeletePod"
