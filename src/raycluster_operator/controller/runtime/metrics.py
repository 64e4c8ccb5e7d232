"""Prometheus metrics: what an SRE needs to trust the operator at a glance.

Each operator instance owns its registry (several can run in one process in tests and in the
dev cluster), served by aiohttp on ``--metrics-addr``. ``Metrics`` holds the registry and
what belongs to the process (leadership, API requests); ``ControllerMetrics`` what every
controller counts about its passes, under the kind's prefix, so each kind's passes, errors
and queue read apart. A kind's own metrics live beside its reconciler, on the same registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

PREFIX = "raycluster_operator"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.is_leader = Gauge(
            f"{PREFIX}_leader", "1 when this instance leads.", registry=self.registry
        )

    def track_requests(self, counts: Callable[[], Mapping[str, int]]) -> None:
        """API requests sent, by verb, read from the client when scraped."""
        self.registry.register(_Requests(counts))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def app(self) -> web.Application:
        async def handle(_: web.Request) -> web.Response:
            body = self.render()
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/metrics", handle)
        return app


class ControllerMetrics:
    """One controller's passes: ``<prefix>_reconcile{result}``, its errors, durations and
    queue depth."""

    def __init__(self, registry: CollectorRegistry, prefix: str = PREFIX) -> None:
        r = registry
        self.reconciles = Counter(
            f"{prefix}_reconcile", "Reconciles by result.", ["result"], registry=r
        )
        self.reconcile_errors = Counter(
            f"{prefix}_reconcile_errors", "Reconciles that failed.", registry=r
        )
        self.reconcile_seconds = Histogram(
            f"{prefix}_reconcile_duration_seconds",
            "Time spent in one reconcile.",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.queue_depth = Gauge(f"{prefix}_workqueue_depth", "Keys waiting.", registry=r)

    def track_queue(self, depth: Callable[[], int]) -> None:
        self.queue_depth.set_function(lambda: float(depth()))


class _Requests(Collector):
    def __init__(self, counts: Callable[[], Mapping[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            f"{PREFIX}_api_requests", "API requests sent, by verb.", labels=["verb"]
        )
        for verb, n in sorted(self._counts().items()):
            family.add_metric([verb], float(n))
        yield family
