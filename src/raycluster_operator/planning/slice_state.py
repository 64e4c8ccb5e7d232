"""A slice's lifecycle as one state machine: its states, how each is read from pods, and which
moves between them are valid, with their causes.

A slice is one replica of a worker group: the pods sharing a replica name (multi-host) or one
single-host pod. It is in exactly one ``SliceState`` at a time, derived by ``derive_state``
from its pods alone, so the planner, the status, the Events and the metrics all speak of the
same thing. ``TRANSITIONS`` lists every move that may happen between two observations, and why:
the planner's own decisions (create, delete) carry a ``CreateReason`` or ``DeleteReason``; what
the cluster does to a slice (a kubelet marks it ready, a host fails, someone deletes its pods)
carries the ``DeleteReason`` of the fault or an ``Observation``. The planner checks each move it
makes against the table (``check_transition``), so a rule that would move a slice in a way the
table does not name fails loudly in tests instead of acting.

``BACKOFF`` is the one state pods alone cannot show: no pods, plus a running crash-loop backoff
record for the slice's index (planning/features/backoff.py, docs/design.md §4 rule 13a).

Adding a state (a rolling upgrade, host loss, crash-loop backoff) is this module only: a member
of ``SliceState``, its row (and the rows that lead to it) in ``TRANSITIONS``, and the pod facts
that reveal it in ``derive_state``. See docs/design.md §5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import NamedTuple

from raycluster_operator.planning.pods import PodView
from raycluster_operator.planning.reasons import CreateReason, DeleteReason, HoldReason


class SliceState(StrEnum):
    #: No pod of the slice exists: before it is created, and after its last pod is gone.
    ABSENT = "absent"
    #: Every host has a live pod, but not all are running and ready yet (scheduling, image
    #: pulls, Ray starting, or a host whose readiness probe fails).
    PENDING = "pending"
    #: Every host has a live pod that is running and ready: the slice serves.
    READY = "ready"
    #: The slice cannot serve (a host failed, is missing or terminating, or the pods disagree
    #: on who they are) and some of its pods are not yet deleted: it goes whole, this pass.
    BROKEN = "broken"
    #: Every pod of the slice is terminating: nothing is left to delete, but its replica index
    #: stays taken until the pods are gone (hostnames and TPU_NAME never name two slices).
    DELETING = "deleting"
    #: No pod of the slice exists and its re-creation waits out a crash-loop backoff: it broke
    #: again soon after it was recreated (planning/features/backoff.py). Its index stays reserved.
    BACKOFF = "backoff"


class Observation(StrEnum):
    """Causes of moves the planner does not make but sees (kubelet, users, the GC)."""

    #: Every host became running and ready.
    HOSTS_READY = "HostsReady"
    #: A host is no longer ready (a failing readiness probe, a restarting container).
    HOST_NOT_READY = "HostNotReady"
    #: Pods appeared already in this state: created and started (or failed, or deleted)
    #: between two observations.
    CREATED = "Created"
    #: A fault went away before the planner acted on it: the planner leaves a group with an
    #: invalid spec alone, so a reverted numOfHosts or a duplicate pod force-deleted by hand
    #: can make a broken slice whole again. (A slice the planner deleted never comes back.)
    FAULT_CLEARED = "FaultCleared"
    #: Every remaining pod was deleted by someone else (kubectl, an eviction, the GC).
    PODS_TERMINATING = "PodsTerminating"
    #: The last pod left the API.
    PODS_GONE = "PodsGone"


#: Why a slice moves: a decision of the planner, a fault it observed, or an observation.
Cause = CreateReason | DeleteReason | Observation | HoldReason

#: States whose slice counts towards the desired replicas (it serves or is about to).
SERVING = frozenset({SliceState.PENDING, SliceState.READY})

#: Faults that make a slice BROKEN: one of its own pods or labels says it cannot serve.
FAULTS = frozenset(
    {
        DeleteReason.REPLICA_INCOMPLETE,
        DeleteReason.HOST_FAILED,
        DeleteReason.HOST_TERMINATING,
        DeleteReason.DUPLICATE_HOST,
        DeleteReason.REPLICA_SHAPE_CHANGED,
        DeleteReason.INCONSISTENT_REPLICA_LABELS,
        # A pod without the identity labels is a slice of its own that cannot serve.
        DeleteReason.POD_WITHOUT_REPLICA_IDENTITY,
        # Gate RayMultiHostIndexing off: one failed pod, replaced on its own.
        DeleteReason.POD_FAILED,
        # Host loss (planning/features/host_loss.py): read from the host's node and Ready condition.
        DeleteReason.HOST_LOST,
        DeleteReason.HOST_UNREADY,
        # Hosts built from two templates (docs/design.md §4, rule 12a).
        DeleteReason.MIXED_TEMPLATES,
        # A host of a disrupted slice was evicted (docs/design.md §4, rule 12b).
        DeleteReason.SLICE_EVICTED,
        # The slice's ComputeDomain is gone under its pods (rule 13b).
        DeleteReason.COMPUTE_DOMAIN_LOST,
    }
)
#: What removes a whole cluster or group, whatever state its slices are in.
_STOPS = frozenset(
    {
        DeleteReason.CLUSTER_SUSPENDED,
        DeleteReason.GROUP_SUSPENDED,
        DeleteReason.GROUP_REMOVED,
        DeleteReason.CLUSTER_DELETING,
    }
)
#: Why the planner removes a slice that could serve.
_REQUESTS = _STOPS | {
    DeleteReason.WORKERS_TO_DELETE,
    DeleteReason.SCALE_DOWN,
    # Two slices claim one index: the newer one goes, however healthy.
    DeleteReason.DUPLICATE_REPLICA_INDEX,
    # An upgrade replaces a slice built from an older template (docs/design.md §4, rule 12a).
    DeleteReason.TEMPLATE_CHANGED,
    # A planned disruption takes a host's node: the slice is moved (rule 12b).
    DeleteReason.NODE_DRAIN,
    DeleteReason.NODE_SCALE_DOWN,
    DeleteReason.NODE_TERMINATION,
    DeleteReason.HOST_MAINTENANCE,
}
#: Why a slice in backoff is created: its wait is over, or its template changed.
_RETRIES = frozenset({CreateReason.BACKOFF_RETRY, CreateReason.TEMPLATE_FIXED})
#: Why the planner creates an absent slice: every create reason but the head's and the
#: backoff's (those start from BACKOFF).
_CREATES = frozenset(CreateReason) - {CreateReason.HEAD_MISSING} - _RETRIES

_S = SliceState
_O = Observation

#: Every valid move: source -> target -> the causes that may bring it about. A move not listed
#: is invalid: a terminating pod never comes back (DELETING leads only to ABSENT), the planner
#: deletes a broken slice only for its fault or with its whole group, never scales it down.
TRANSITIONS: Mapping[SliceState, Mapping[SliceState, frozenset[Cause]]] = {
    _S.ABSENT: {
        # The planner creates every host of a slice in one pass.
        _S.PENDING: _CREATES | {_O.CREATED},
        # Created and started before the next observation.
        _S.READY: frozenset({_O.CREATED}),
        # A partial create (a POST failed), or a pod that failed at once.
        _S.BROKEN: FAULTS,
        # Created and deleted by someone else before the next observation.
        _S.DELETING: frozenset({_O.PODS_TERMINATING}),
        # Crash-loop backoff: a slice whose break was counted is held back (rule 13a).
        _S.BACKOFF: frozenset({HoldReason.SLICE_BACKOFF}),
    },
    _S.PENDING: {
        _S.READY: frozenset({_O.HOSTS_READY}),
        _S.BROKEN: FAULTS,
        # The planner's decisions (below) and other deleters alike.
        _S.DELETING: _REQUESTS | {_O.PODS_TERMINATING},
        _S.ABSENT: frozenset({_O.PODS_GONE}),
    },
    _S.READY: {
        _S.PENDING: frozenset({_O.HOST_NOT_READY}),
        _S.BROKEN: FAULTS,
        _S.DELETING: _REQUESTS | {_O.PODS_TERMINATING},
        _S.ABSENT: frozenset({_O.PODS_GONE}),
    },
    _S.BROKEN: {
        # Deleted whole for its fault, or with everything else (suspend, group removed).
        _S.DELETING: FAULTS | _STOPS | {_O.PODS_TERMINATING},
        _S.ABSENT: frozenset({_O.PODS_GONE}),
        _S.PENDING: frozenset({_O.FAULT_CLEARED}),
        _S.READY: frozenset({_O.FAULT_CLEARED}),
        # Crash-loop backoff: its pods vanished on their own after its break was counted.
        _S.BACKOFF: frozenset({_O.PODS_GONE}),
    },
    _S.DELETING: {
        _S.ABSENT: frozenset({_O.PODS_GONE}),
        # Crash-loop backoff: the last pod of a slice whose break was counted left the API.
        _S.BACKOFF: frozenset({_O.PODS_GONE}),
    },
    # -- crash-loop backoff (planning/features/backoff.py) --
    _S.BACKOFF: {
        # The wait is over, or the template changed: created at its own index.
        _S.PENDING: _RETRIES,
        # Not wanted any more (fewer replicas, the group or cluster stops): the backoff ends.
        _S.ABSENT: _STOPS | {DeleteReason.SCALE_DOWN},
    },
}


class InvalidTransition(ValueError):
    """A move the table does not allow: a planning rule is wrong, so nothing is written."""


@dataclass(frozen=True, slots=True)
class SliceTransition:
    """One move of one slice, as the planner decides it (or a test observes it)."""

    #: The replica name, or the pod name of a single-host slice (``index N`` for one not yet
    #: created).
    slice: str
    source: SliceState
    target: SliceState
    cause: Cause


def is_valid(source: SliceState, target: SliceState, cause: Cause) -> bool:
    return cause in TRANSITIONS.get(source, {}).get(target, frozenset())


def check_transition(move: SliceTransition) -> SliceTransition:
    if not is_valid(move.source, move.target, move.cause):
        raise InvalidTransition(
            f"slice {move.slice}: {move.source} -> {move.target} is not valid for "
            f"{move.cause.value}"
        )
    return move


class SliceReading(NamedTuple):
    state: SliceState
    #: Why the slice cannot serve (BROKEN, DELETING), from its pods; None when it can.
    cause: DeleteReason | None = None
    #: One sentence naming the pod or label at fault, for the Event and the log.
    detail: str = ""


_ABSENT = SliceReading(SliceState.ABSENT)
_READY = SliceReading(SliceState.READY)
_PENDING = SliceReading(SliceState.PENDING)


def derive_state(
    pods: Sequence[PodView], num_of_hosts: int, *, name: str | None, index: int | None
) -> SliceReading:
    """The state of one slice from its pods alone.

    ``name`` is the replica name (None for a single-host slice, whose only pod is ``pods[0]``);
    ``index`` the replica index its pods agree on (None when they disagree or lack it).
    """
    if not pods:
        return _ABSENT
    if name is None:
        pod = pods[0]
        if pod.failed:
            return _broken(pods, DeleteReason.HOST_FAILED, f"pod {pod.name} failed")
        if pod.terminating:
            return _broken(pods, DeleteReason.HOST_TERMINATING, f"pod {pod.name} is terminating")
        return _READY if pod.running_and_ready else _PENDING
    if (
        index is not None
        and len(pods) == num_of_hosts > 1
        and all(p.live for p in pods)
        and {p.host_index for p in pods} == _all_hosts(num_of_hosts)
        and _one_template(pods)
    ):
        # The common case, checked cheaply.
        return _READY if all(p.running_and_ready for p in pods) else _PENDING
    cause, detail = _fault(name, pods, num_of_hosts, index)
    if cause is None:
        return _READY if all(p.running_and_ready for p in pods) else _PENDING
    return _broken(pods, cause, detail)


def _broken(pods: Sequence[PodView], cause: DeleteReason, detail: str) -> SliceReading:
    """BROKEN while some pod is still to be deleted; DELETING once every pod is going."""
    if all(p.terminating for p in pods):
        return SliceReading(SliceState.DELETING, cause, detail)
    return SliceReading(SliceState.BROKEN, cause, detail)


@cache
def _all_hosts(num_of_hosts: int) -> frozenset[int | None]:
    return frozenset(range(num_of_hosts))


def _fault(
    name: str, pods: Sequence[PodView], num_of_hosts: int, index: int | None
) -> tuple[DeleteReason | None, str]:
    """The most telling fault first: a failure explains an incomplete replica, not vice versa."""
    failed = [p.name for p in pods if p.failed]
    if failed:
        return DeleteReason.HOST_FAILED, f"replica {name}: pod {failed[0]} failed"
    going = [p.name for p in pods if p.terminating]
    if going:
        return DeleteReason.HOST_TERMINATING, f"replica {name}: pod {going[0]} is terminating"
    if index is None or any(p.host_index is None for p in pods):
        return (
            DeleteReason.INCONSISTENT_REPLICA_LABELS,
            f"replica {name}: pods disagree on or lack the replica or host index label",
        )
    top = max(p.host_index or 0 for p in pods)
    if num_of_hosts == 1 or top >= num_of_hosts:
        return (
            DeleteReason.REPLICA_SHAPE_CHANGED,
            f"replica {name} has host index {top}, but numOfHosts is {num_of_hosts}",
        )
    hosts = [p.host_index for p in pods]
    if len(set(hosts)) != len(hosts):
        return DeleteReason.DUPLICATE_HOST, f"replica {name}: two pods claim one host index"
    if len(pods) < num_of_hosts:
        return (
            DeleteReason.REPLICA_INCOMPLETE,
            f"replica {name} has {len(pods)} of {num_of_hosts} hosts",
        )
    if not _one_template(pods):
        return (
            DeleteReason.MIXED_TEMPLATES,
            f"replica {name}: its hosts were built from different pod templates",
        )
    return None, ""


def _one_template(pods: Sequence[PodView]) -> bool:
    """All hosts carry one ray.io/pod-template-hash (or none: pods older than the hash)."""
    first = pods[0].template_hash
    return all(p.template_hash == first for p in pods)
