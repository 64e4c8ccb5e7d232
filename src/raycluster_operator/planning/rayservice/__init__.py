"""The RayService planner (docs/design.md §12): one pure pass per RayService."""

from raycluster_operator.planning.rayservice.model import (
    Action,
    ActionKind,
    Context,
    Event,
    Observed,
    Plan,
    ServeAnswer,
)
from raycluster_operator.planning.rayservice.plan import invalid_spec, plan_rayservice
from raycluster_operator.planning.rayservice.serving import slice_host

__all__ = [
    "Action",
    "ActionKind",
    "Context",
    "Event",
    "Observed",
    "Plan",
    "ServeAnswer",
    "invalid_spec",
    "plan_rayservice",
    "slice_host",
]
