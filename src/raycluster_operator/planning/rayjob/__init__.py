"""The RayJob planner (docs/design.md §11): its state table, and one pure pass per RayJob."""

from raycluster_operator.planning.rayjob.model import (
    Action,
    ActionKind,
    Context,
    Event,
    JobsApi,
    Observed,
    Plan,
)
from raycluster_operator.planning.rayjob.plan import invalid_spec, needs_jobs_api, plan_rayjob
from raycluster_operator.planning.rayjob.states import (
    TRANSITIONS,
    Cause,
    DeploymentStatus,
    InvalidTransition,
    JobStatus,
    Move,
    check_transition,
)

__all__ = [
    "TRANSITIONS",
    "Action",
    "ActionKind",
    "Cause",
    "Context",
    "DeploymentStatus",
    "Event",
    "InvalidTransition",
    "JobStatus",
    "JobsApi",
    "Move",
    "Observed",
    "Plan",
    "check_transition",
    "invalid_spec",
    "needs_jobs_api",
    "plan_rayjob",
]
