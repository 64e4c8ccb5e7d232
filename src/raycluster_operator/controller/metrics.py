"""Prometheus metrics: what an SRE needs to trust the operator at a glance.

Each operator instance owns its registry (several can run in one process in tests and in the
dev cluster), served by aiohttp on ``--metrics-addr``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from raycluster_operator.planning import GroupTally, SliceState

PREFIX = "raycluster_operator"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.reconciles = Counter(
            f"{PREFIX}_reconcile", "Reconciles by result.", ["result"], registry=r
        )
        self.reconcile_errors = Counter(
            f"{PREFIX}_reconcile_errors", "Reconciles that failed.", registry=r
        )
        self.reconcile_seconds = Histogram(
            f"{PREFIX}_reconcile_duration_seconds",
            "Time spent in one reconcile.",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
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
        self.queue_depth = Gauge(f"{PREFIX}_workqueue_depth", "Keys waiting.", registry=r)
        self.is_leader = Gauge(f"{PREFIX}_leader", "1 when this instance leads.", registry=r)
        self.api_requests = Gauge(
            f"{PREFIX}_api_requests", "API requests sent, by verb.", ["verb"], registry=r
        )

    def track_queue(self, depth: Callable[[], int]) -> None:
        self.queue_depth.set_function(lambda: float(depth()))

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

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def app(self) -> web.Application:
        async def handle(_: web.Request) -> web.Response:
            body = self.render()
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/metrics", handle)
        return app


#: Absent slices do not exist to be counted.
_COUNTED = tuple(s for s in SliceState if s is not SliceState.ABSENT)
