"""planning layer: pure reconcile decisions (replicas, indices, desired state, plan, status)."""

from __future__ import annotations

from raycluster_operator.planning.actions import PlannedEvent, PodCreate, PodDelete
from raycluster_operator.planning.cluster_plan import ClusterPlan, plan_cluster
from raycluster_operator.planning.deletion import (
    IDLE_TERMINATION_FINALIZER,
    DeletionPlan,
    plan_deletion,
)
from raycluster_operator.planning.group_plan import GroupTally
from raycluster_operator.planning.reasons import CreateReason, DeleteReason, EventReason
from raycluster_operator.planning.slice_state import SliceState, SliceTransition

__all__ = [
    "IDLE_TERMINATION_FINALIZER",
    "ClusterPlan",
    "CreateReason",
    "DeleteReason",
    "DeletionPlan",
    "EventReason",
    "GroupTally",
    "PlannedEvent",
    "PodCreate",
    "PodDelete",
    "SliceState",
    "SliceTransition",
    "plan_cluster",
    "plan_deletion",
]
