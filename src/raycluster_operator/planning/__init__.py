"""planning layer: pure reconcile decisions (replicas, indices, desired state, plan, status)."""

from __future__ import annotations

from raycluster_operator.planning.actions import PlannedEvent, PodCreate, PodDelete
from raycluster_operator.planning.cluster_plan import ClusterPlan, plan_cluster
from raycluster_operator.planning.context import ClusterState, PlanContext, PlanOptions
from raycluster_operator.planning.deletion import (
    IDLE_TERMINATION_FINALIZER,
    DeletionPlan,
    plan_deletion,
)
from raycluster_operator.planning.feature import Feature
from raycluster_operator.planning.pass_plan import (
    DEFAULT_CONTROLLER_NAMES,
    ObjectId,
    PassPlan,
    object_id,
    plan_pass,
)
from raycluster_operator.planning.reasons import CreateReason, DeleteReason, EventReason
from raycluster_operator.planning.slice_state import SliceState, SliceTransition
from raycluster_operator.planning.turn import GroupTally
from raycluster_operator.planning.writes import Writes

__all__ = [
    "DEFAULT_CONTROLLER_NAMES",
    "IDLE_TERMINATION_FINALIZER",
    "ClusterPlan",
    "ClusterState",
    "CreateReason",
    "DeleteReason",
    "DeletionPlan",
    "EventReason",
    "Feature",
    "GroupTally",
    "ObjectId",
    "PassPlan",
    "PlanContext",
    "PlanOptions",
    "PlannedEvent",
    "PodCreate",
    "PodDelete",
    "SliceState",
    "SliceTransition",
    "Writes",
    "object_id",
    "plan_cluster",
    "plan_deletion",
    "plan_pass",
]
