"""The values one RayJob pass reads and writes (docs/design.md §11): what was observed, the
context of the pass, and the plan it yields (status, actions, Events, moves)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from raycluster_operator.api.objects import Obj
from raycluster_operator.planning.rayjob.slices import SliceBreak
from raycluster_operator.planning.rayjob.states import Move


class ActionKind(StrEnum):
    CREATE_CLUSTER = "CreateCluster"
    CREATE_SUBMITTER = "CreateSubmitter"
    SUBMIT = "Submit"
    STOP_JOB = "StopJob"
    DELETE_CLUSTER = "DeleteCluster"
    DELETE_SUBMITTER = "DeleteSubmitter"
    DELETE_WORKERS = "DeleteWorkers"
    DELETE_SELF = "DeleteSelf"


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    name: str = ""
    body: Obj = field(default_factory=dict)


class JobsApi(StrEnum):
    """What asking the Jobs API about status.jobId gave."""

    NOT_ASKED = "NotAsked"
    FOUND = "Found"
    NOT_FOUND = "NotFound"
    UNREACHABLE = "Unreachable"


@dataclass(frozen=True)
class Observed:
    rayjob: Obj
    #: The RayCluster named in status.rayClusterName (None: absent, or not named yet).
    cluster: Obj | None = None
    #: Its worker pods (for slice breaks).
    pods: Sequence[Obj] = ()
    #: The submitter batch/v1 Job (K8sJobMode).
    submitter: Obj | None = None
    jobs_api: JobsApi = JobsApi.NOT_ASKED
    #: The Jobs API's job details (``status``, ``message``, ``start_time`` ms, ``end_time``).
    job_info: Mapping[str, Any] = field(default_factory=dict)
    #: The cluster's head pods (SidecarMode: the submitter is a container of the head).
    heads: Sequence[Obj] = ()


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    note: str


@dataclass
class Plan:
    status: Obj
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    breaks: list[SliceBreak] = field(default_factory=list)
    requeue_after: float | None = None


@dataclass(frozen=True)
class Context:
    now: datetime
    #: Five random characters for a new job id and cluster name.
    suffix: str
    #: Seconds between passes while the RayJob waits on something outside the API.
    poll: float = 3.0
