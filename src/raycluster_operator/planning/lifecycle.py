"""The lifecycle features, in rule order (docs/design.md §4): the planner makes each one once
per pass and calls its hooks in this order (planning/feature.py). A new feature is a
``Feature`` subclass in its own module and one entry here, where its rule stands."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from raycluster_operator.planning.feature import Feature
from raycluster_operator.planning.features.backoff import Backoff
from raycluster_operator.planning.features.cluster_upgrade import Upgrades
from raycluster_operator.planning.features.compute_domains import ComputeDomains
from raycluster_operator.planning.features.disruption import Disruptions
from raycluster_operator.planning.features.host_loss import HostLoss
from raycluster_operator.planning.features.kueue_topology import KueueTopology
from raycluster_operator.planning.features.quota import Quota
from raycluster_operator.planning.features.slice_scaling import SliceScaling
from raycluster_operator.planning.features.strays import StrayPods
from raycluster_operator.planning.features.unsupported import UnsupportedFields
from raycluster_operator.planning.turn import ClusterTurn

#: Each feature's constructor, by rule: 2b pods with the cluster's label that no controller of
#: it made (a condition and a Warning only), 3a KubeRay fields not acted on (a condition and a
#: Warning only), 7b slice reservations (a Warning only), 8a/8b host
#: loss, 12a upgrades, 12b planned disruptions, 13a crash-loop backoff, 13b a ComputeDomain
#: per slice, 13c a slice whole or not at all (quota), 13d one slice at a time under Kueue's
#: Topology Aware Scheduling.
FEATURES: Sequence[Callable[[ClusterTurn], Feature]] = (
    StrayPods,
    UnsupportedFields,
    SliceScaling,
    HostLoss,
    Upgrades,
    Disruptions,
    Backoff,
    ComputeDomains,
    Quota,
    KueueTopology,
)


class _Types:
    """``FEATURES`` as classes, read when asked (a test may plug a toy feature in)."""

    def __iter__(self) -> Iterator[type[Feature]]:
        for make in FEATURES:
            if isinstance(make, type) and issubclass(make, Feature):
                yield make


#: The feature classes of ``FEATURES``, for what each declares (``watches``, ``rules``).
FEATURE_TYPES = _Types()


def features_for(turn: ClusterTurn) -> list[Feature]:
    """This pass's features, in rule order."""
    return [make(turn) for make in FEATURES]
