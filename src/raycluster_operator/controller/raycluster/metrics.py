"""The RayCluster controller's own metrics: pods and slices, on the operator's registry."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge

from raycluster_operator.controller.runtime.metrics import PREFIX
from raycluster_operator.planning import GroupTally, SliceState


class ClusterMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.pods_created = Counter(
            f"{PREFIX}_pods_created", "Pods created, by reason.", ["reason"], registry=r
        )
        self.pods_deleted = Counter(
            f"{PREFIX}_pods_deleted", "Pods deleted, by reason.", ["reason"], registry=r
        )
        self.slices = Gauge(
            f"{PREFIX}_worker_slices",
            "Worker slices by state (desired, or a slice state), per cluster and group.",
            ["namespace", "cluster", "group", "state"],
            registry=r,
        )
        self.slices_moved = Counter(
            f"{PREFIX}_slices_moved",
            "Slices moved whole for a planned disruption (NodeDrain, NodeScaleDown, "
            "NodeTermination, HostMaintenance) or taken whole by an eviction (SliceEvicted), "
            "by cause.",
            ["cause"],
            registry=r,
        )

    def set_slices(self, namespace: str, cluster: str, groups: Sequence[GroupTally]) -> None:
        """Per group: the desired slices, and how many slices are in each ``SliceState``
        (``ready`` and ``broken`` are the status's readySlices and brokenSlices)."""
        for group in groups:
            gauge = self.slices
            gauge.labels(namespace, cluster, group.group, "desired").set(group.desired_slices)
            for state in _COUNTED:
                count = group.slices.get(state, 0)
                gauge.labels(namespace, cluster, group.group, state.value).set(count)

    def forget_cluster(self, namespace: str, cluster: str) -> None:
        for labels in list(self._slice_label_sets()):
            if labels[0] == namespace and labels[1] == cluster:
                self.slices.remove(*labels)

    def _slice_label_sets(self) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = []
        for metric in self.slices.collect():
            for sample in metric.samples:
                lbl = sample.labels
                out.append((lbl["namespace"], lbl["cluster"], lbl["group"], lbl["state"]))
        return out


#: Absent slices do not exist to be counted.
_COUNTED = tuple(s for s in SliceState if s is not SliceState.ABSENT)
