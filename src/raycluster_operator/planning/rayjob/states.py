"""A RayJob's lifecycle as one state machine: its ``jobDeploymentStatus`` values and every move
between them, with its cause (docs/design.md §11, the state table).

The values are KubeRay's (``rayjob_types.go``); "" is New. ``TRANSITIONS`` is the one place a
reader learns what a RayJob can do: the planner (``plan.py``) asks ``check_transition`` before
each move it makes, so a rule that would move a RayJob in a way the table does not name fails
loudly in tests instead of acting. Rows marked EXTENSION are ours (the slice failure policy);
every other row is a move KubeRay's controller makes for the same cause.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class DeploymentStatus(StrEnum):
    NEW = ""
    INITIALIZING = "Initializing"
    RUNNING = "Running"
    COMPLETE = "Complete"
    FAILED = "Failed"
    VALIDATION_FAILED = "ValidationFailed"
    SUSPENDING = "Suspending"
    SUSPENDED = "Suspended"
    RETRYING = "Retrying"
    WAITING = "Waiting"


class JobStatus(StrEnum):
    """The Ray job's status as the Jobs API reports it ("" before it exists)."""

    NEW = ""
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


TERMINAL_JOB = frozenset({JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED})
TERMINAL = frozenset({DeploymentStatus.COMPLETE, DeploymentStatus.FAILED})


class Cause(StrEnum):
    """Why a RayJob moves; also the reason of the Event each move emits."""

    #: New: the job id and cluster name are chosen, the start time set.
    INITIALIZED = "Initialized"
    #: The spec cannot run (no entrypoint, no cluster, an unsupported submission mode).
    INVALID_SPEC = "ValidationFailed"
    #: spec.suspend became true (Kueue took the job's quota away).
    SUSPEND = "Suspend"
    #: spec.suspend became false again.
    RESUME = "Resume"
    #: activeDeadlineSeconds passed since startTime.
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    #: preRunningDeadlineSeconds passed before the job ran.
    PRE_RUNNING_DEADLINE_EXCEEDED = "PreRunningDeadlineExceeded"
    #: The cluster's head and every worker slice are ready: the job is submitted (K8sJobMode:
    #: the submitter Job is created; HTTPMode: the operator submits next).
    CLUSTER_READY = "ClusterReady"
    #: InteractiveMode: the cluster is ready; the user submits and names the job in spec.jobId.
    AWAIT_USER = "WaitingForSubmission"
    #: InteractiveMode: spec.jobId is set.
    USER_SUBMITTED = "JobIdSet"
    #: The Jobs API says SUCCEEDED or STOPPED (and the submitter, if any, has finished).
    JOB_ENDED = "JobEnded"
    #: The Jobs API says FAILED.
    APP_FAILED = "AppFailed"
    #: The submitter Job failed, or finished without the Ray job existing.
    SUBMISSION_FAILED = "SubmissionFailed"
    #: A failed attempt with retries left (backoffLimit): a new cluster for the next one.
    RETRY = "Retry"
    #: The cluster and submitter of a suspended or retried attempt are gone.
    RESOURCES_RELEASED = "ResourcesReleased"
    #: EXTENSION: a slice broke while the job ran, policy Resubmit: the Ray job is stopped and
    #: submitted again once every slice is ready (counted against backoffLimit).
    SLICE_RESUBMIT = "SliceBrokeResubmit"
    #: EXTENSION: a slice broke while the job ran, policy FailJob.
    SLICE_FAILED = "SliceFailed"


class Move(NamedTuple):
    source: DeploymentStatus
    target: DeploymentStatus
    cause: Cause


_S = DeploymentStatus
_C = Cause

#: Every move a RayJob may make, and why.
TRANSITIONS: frozenset[Move] = frozenset(
    Move(s, t, c)
    for s, t, c in (
        (_S.NEW, _S.INITIALIZING, _C.INITIALIZED),
        (_S.NEW, _S.VALIDATION_FAILED, _C.INVALID_SPEC),
        (_S.INITIALIZING, _S.SUSPENDING, _C.SUSPEND),
        (_S.INITIALIZING, _S.FAILED, _C.DEADLINE_EXCEEDED),
        (_S.INITIALIZING, _S.FAILED, _C.PRE_RUNNING_DEADLINE_EXCEEDED),
        (_S.INITIALIZING, _S.RUNNING, _C.CLUSTER_READY),
        (_S.INITIALIZING, _S.WAITING, _C.AWAIT_USER),
        (_S.WAITING, _S.RUNNING, _C.USER_SUBMITTED),
        (_S.WAITING, _S.FAILED, _C.PRE_RUNNING_DEADLINE_EXCEEDED),
        (_S.RUNNING, _S.SUSPENDING, _C.SUSPEND),
        (_S.RUNNING, _S.FAILED, _C.DEADLINE_EXCEEDED),
        (_S.RUNNING, _S.COMPLETE, _C.JOB_ENDED),
        (_S.RUNNING, _S.FAILED, _C.APP_FAILED),
        (_S.RUNNING, _S.FAILED, _C.SUBMISSION_FAILED),
        (_S.RUNNING, _S.INITIALIZING, _C.SLICE_RESUBMIT),
        (_S.RUNNING, _S.FAILED, _C.SLICE_FAILED),
        (_S.FAILED, _S.RETRYING, _C.RETRY),
        (_S.RETRYING, _S.NEW, _C.RESOURCES_RELEASED),
        (_S.SUSPENDING, _S.SUSPENDED, _C.RESOURCES_RELEASED),
        (_S.SUSPENDED, _S.NEW, _C.RESUME),
    )
)

#: Moves that are ours, not KubeRay's.
EXTENSIONS = frozenset(m for m in TRANSITIONS if m.cause in (_C.SLICE_RESUBMIT, _C.SLICE_FAILED))

#: Failures that are never retried (KubeRay: a deadline is final).
NOT_RETRIED = frozenset({_C.DEADLINE_EXCEEDED, _C.PRE_RUNNING_DEADLINE_EXCEEDED, _C.SLICE_FAILED})

#: status.reason written on entering Failed, by cause (KubeRay's JobFailedReason values, and
#: ours for a slice).
FAILED_REASON: dict[Cause, str] = {
    _C.DEADLINE_EXCEEDED: "DeadlineExceeded",
    _C.PRE_RUNNING_DEADLINE_EXCEEDED: "PreRunningDeadlineExceeded",
    _C.APP_FAILED: "AppFailed",
    _C.SUBMISSION_FAILED: "SubmissionFailed",
    _C.SLICE_FAILED: "SliceFailed",
    _C.INVALID_SPEC: "ValidationFailed",
}


class InvalidTransition(AssertionError):
    """The planner tried a move the table does not name."""


def check_transition(source: DeploymentStatus, target: DeploymentStatus, cause: Cause) -> Move:
    move = Move(source, target, cause)
    if move not in TRANSITIONS:
        raise InvalidTransition(f"RayJob {source or 'New'!s} -> {target or 'New'!s} by {cause}")
    return move


def successors(source: DeploymentStatus) -> frozenset[DeploymentStatus]:
    return frozenset(m.target for m in TRANSITIONS if m.source == source)
