"""The planner's inputs for one pass, as one value: what the caches show, the switches, the
clock and the suffix generator (docs/design.md §4, "One pass").

A pass is planned from a ``PlanContext`` alone, so replaying one gives the same plan. What the
caches show grows here and nowhere else: a feature that plans from another kind of object
(quota objects, evictions, domain objects) reads it from ``ClusterState.objects`` by kind, and
no planning signature changes for it. The features' own records (the crash-loop backoff's
annotation) live on the RayCluster itself, so they travel in ``ClusterState.cluster``.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from raycluster_operator.planning.backoff_policy import DEFAULT_POLICY, BackoffPolicy

#: A cached object as the planner reads it (never writes it).
Cached = Mapping[str, Any]
#: (kind, name) of an object in the cluster's namespace.
ObjectId = tuple[str, str]

#: ``spec.managedBy`` values that mean "this operator": KubeRay's own, since we are a drop-in
#: replacement for it, and no name of ours, since KubeRay's CRD admits only
#: ``ray.io/kuberay-operator`` and ``kueue.x-k8s.io/multikueue`` (immutably, by CEL); which of
#: two operators owns a cluster is a matter of namespaces (docs/design.md §3.7, rule 2).
DEFAULT_CONTROLLER_NAMES = frozenset({"ray.io/kuberay-operator"})


@dataclass(frozen=True)
class PlanOptions:
    """The switches that change what is planned (``--feature-gates`` and the environment)."""

    multi_host_indexing: bool = True
    random_pod_delete: bool = False
    controller_names: frozenset[str] = DEFAULT_CONTROLLER_NAMES
    #: ``--unready-slice-timeout`` (seconds): a host that was Ready and has not been for this
    #: long breaks its slice, and so does a host on a lost node; 0 turns host-loss failover
    #: off (planning/features/host_loss.py).
    unready_slice_timeout: float = 60.0
    #: Crash-loop backoff per slice (planning/features/backoff.py), seconds: the first delay,
    #: its cap, and how long a slice stays ready before its count is forgiven.
    slice_backoff_base: float = DEFAULT_POLICY.base
    slice_backoff_max: float = DEFAULT_POLICY.max
    slice_backoff_reset: float = DEFAULT_POLICY.reset
    #: ``--maintenance-window`` (seconds): a node's announced host maintenance
    #: (``cloud.google.com/scheduled-maintenance-time``) moves its slices this long before
    #: its time (planning/features/disruption.py, rule 12b).
    maintenance_window: float = 1800.0
    #: KubeRay's ``ENABLE_PROBES_INJECTION`` (not "false"): the Ray container gets KubeRay's
    #: readiness and liveness probes (builders/probes.py, rule 3.4c).
    inject_probes: bool = True

    @property
    def planned_disruptions(self) -> bool:
        """Rule 12b reads the same Node cache as host loss: on while Nodes are watched."""
        return self.unready_slice_timeout > 0

    @property
    def backoff(self) -> BackoffPolicy:
        return BackoffPolicy(
            self.slice_backoff_base, self.slice_backoff_max, self.slice_backoff_reset
        )


#: Every switch at its default.
DEFAULT_OPTIONS = PlanOptions()


@dataclass(frozen=True)
class ClusterState:
    """What the caches show about one RayCluster: the inputs of a pass."""

    #: The RayCluster as cached (its status overlaid with the controller's own last write
    #: while the cache has not caught up with it).
    cluster: Cached
    #: Pods labelled with the cluster's name (``plan_pass`` leaves the strays out).
    pods: Sequence[Cached] = ()
    #: Services that name the cluster as their owner.
    services: Sequence[Cached] = ()
    #: Answers whether a Service, ServiceAccount, Role, RoleBinding, ComputeDomain or budget
    #: exists in the cluster's namespace: in the caches, or created by the controller and not
    #: yet seen there. Only asked ``in``, so the controller looks names up instead of
    #: listing the namespace (a pass stays O(its cluster)).
    present: Container[ObjectId] = frozenset()
    #: The Nodes the cluster's pods are bound to, by name, as cached (host loss); a node not
    #: cached (or not watched) is missing and reads as healthy.
    nodes: Mapping[str, Cached] = field(default_factory=dict)
    #: Any other cached objects a lifecycle feature plans from, by kind (``ResourceQuota``,
    #: ``Eviction``, a domain object's kind ...): a new input is a new key, not a new parameter.
    objects: Mapping[str, Sequence[Cached]] = field(default_factory=dict)
    #: Pods labelled with the cluster's name that no controller of it made (rule 2b,
    #: planning/features/strays.py): reported, never counted, scaled or deleted.
    strays: Sequence[Cached] = ()


@dataclass(frozen=True)
class PlanContext:
    """Everything one pass is planned from; planning functions take this, not its parts."""

    state: ClusterState
    now: datetime
    #: Draws the random part of a new replica name (tests hand a fixed sequence).
    new_suffix: Callable[[], str]
    options: PlanOptions = DEFAULT_OPTIONS
