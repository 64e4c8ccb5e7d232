"""How a lifecycle feature plugs into the planner (docs/design.md §4, "Lifecycle features").

A feature (host loss, upgrades, the crash-loop backoff, ...) is a ``Feature`` subclass made
once per pass from the ``ClusterTurn``: its constructor reads what it needs (the options, the
clock, nodes or other objects from ``turn.context.state``, its records from the RayCluster).
``planning/lifecycle.py`` lists the features in rule order; the planner calls each hook of
every feature in that order, at the point of the rules where it stands:

=========  ==================================================================================
``mark``    after a group's slices are read (rule 8): add faults or marks to slices from
            other state (a node, an eviction, a domain object). A slice that changes state
            changes through ``slice_state``'s table.
``spare``   before scale-down (rule 12): how many slices above the desired number are not
            surplus (an upgrade's surge, a make-before-break replacement).
``replace`` after scale-down (rule 12a): delete serving slices whole (``turn.out``), with
            ``turn.need``, ``turn.awaited`` and ``turn.reasons`` saying what replaces them.
``gate``    as indices are chosen (rule 13a), ``turn.need`` slices about to be created
            (for a stopped group, with none): indices held or retried, at most how many new
            slices (a ``GroupHold``).
``settle``  after the group's plan: records, the group's tally, events (may return a new plan).
``finish``  after every group and the head: writes of the cluster (``turn.objects``,
            ``turn.annotations``, ``turn.grace``), Events, and when to look again
            (``turn.requeue``).
=========  ==================================================================================

Then the status builder asks each feature, in the same order, for its contributions to the
status, typed: ``conditions()``, the conditions it owns (listed after the planner's own), and
``status(group)``, fields of that group's ``workerGroups`` entry (each one declared, with its
schema, in the feature's ``fields``).

A feature also declares, as class attributes, what the operator must do for it beyond the
planner: ``watches``, the kinds it plans from and how a change of each finds its cluster (the
controller watches them by their ``route``, hands them over in ``ClusterState.objects`` by
kind, and its install grants ``list``/``watch`` plus the watch's ``verbs``); ``rules``, any
other permission it needs; and ``fields``, the schema of its status fields. The controller's
sources, the install's RBAC and the CRDs' status schema are made from ``lifecycle.FEATURES``
(docs/design.md §4).

Every hook does nothing unless a feature overrides it, so a feature overrides the few it needs.
A feature with unindexed pods (gate RayMultiHostIndexing off) sees only ``settle``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from raycluster_operator.planning.reasons import Condition
from raycluster_operator.planning.turn import (
    NO_HOLD,
    ClusterTurn,
    GroupHold,
    GroupPlan,
    GroupTurn,
)


@dataclass(frozen=True)
class Rule:
    """A permission a feature needs, as an RBAC rule says it."""

    group: str
    resource: str
    verbs: tuple[str, ...]


class Route(StrEnum):
    """How a change of a watched kind finds the clusters it concerns."""

    #: Its objects carry the ``ray.io/cluster`` label of their cluster: the controller gives
    #: the kind label-selected informers of its own.
    LABEL = "label"
    #: A Node concerns every cluster with a pod bound to it.
    NODE = "node"
    #: Every cluster of the object's namespace (a quota, a LimitRange).
    NAMESPACE = "namespace"
    #: The operator's own by the label, a user's by namespace (disruption budgets).
    LABEL_OR_NAMESPACE = "label-or-namespace"
    #: By the label, and watched only where the kind turns out to be served (ComputeDomains).
    LABEL_WHERE_SERVED = "label-where-served"


@dataclass(frozen=True)
class Watch:
    """A kind a feature plans from, and how a change of it finds its cluster (``route``)."""

    group: str
    version: str
    kind: str
    plural: str
    #: Writes the feature plans on the kind (``create``, ``delete``), beyond list and watch.
    verbs: tuple[str, ...] = ()
    namespaced: bool = True
    route: Route = Route.LABEL

    @property
    def rule(self) -> Rule:
        return Rule(self.group, self.plural, ("list", "watch", *self.verbs))


class Feature:
    """One lifecycle feature's say in one pass; the hooks are documented in the module."""

    #: The rule it implements (docs/design.md §4), which places it in ``lifecycle.FEATURES``.
    rule: ClassVar[str] = ""
    #: The kinds it plans from (``ClusterState.objects``), watched for it.
    watches: ClassVar[tuple[Watch, ...]] = ()
    #: Other permissions it needs.
    rules: ClassVar[tuple[Rule, ...]] = ()
    #: The fields ``status(group)`` writes in a group's ``workerGroups`` entry, each with its
    #: OpenAPI schema: the installed CRDs declare them (``controller/crds.py``).
    fields: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    def mark(self, turn: GroupTurn) -> None:
        return None

    def spare(self, turn: GroupTurn) -> int:
        return 0

    def replace(self, turn: GroupTurn) -> None:
        return None

    def gate(self, turn: GroupTurn) -> GroupHold:
        return NO_HOLD

    def settle(self, turn: GroupTurn, plan: GroupPlan) -> GroupPlan:
        return plan

    def finish(self, turn: ClusterTurn) -> None:
        return None

    def conditions(self) -> Sequence[Condition]:
        return ()

    def status(self, group: str) -> Mapping[str, Any]:
        return {}
