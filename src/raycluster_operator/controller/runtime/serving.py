"""Serving: what the operator offers the cluster around the reconcile loop.

The metrics endpoint, the kubelet's probes (ready once the caches have synced: a standby
replica is ready too) and leader election, which decides when the controller leads (without
it, from the start).
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from raycluster_operator.controller.runtime.leader import LeaderElector, LeaseTiming
from raycluster_operator.controller.runtime.metrics import Metrics
from raycluster_operator.controller.runtime.probes import HttpServer, probes_app
from raycluster_operator.kube import KubeClient


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ServingOptions:
    #: ``host:port`` of /metrics; None serves none.
    metrics_addr: str | None = ":8080"
    #: ``host:port`` of /healthz and /readyz; None serves none.
    health_addr: str | None = ":8082"
    leader_elect: bool = True
    lease_namespace: str = "default"
    lease_name: str = "raycluster-operator-leader"
    lease_timing: LeaseTiming = field(default_factory=LeaseTiming)
    #: This replica's name in the Lease and in its Events.
    identity: str = field(default_factory=default_identity)


class Serving:
    def __init__(
        self,
        client: KubeClient,
        options: ServingOptions,
        metrics: Metrics,
        *,
        ready: Callable[[], bool],
    ) -> None:
        self.options = options
        self._metrics = metrics
        self._ready = ready
        self.elector: LeaderElector | None = None
        if options.leader_elect:
            self.elector = LeaderElector(
                client,
                namespace=options.lease_namespace,
                name=options.lease_name,
                identity=options.identity,
                timing=options.lease_timing,
            )
        self.metrics_server: HttpServer | None = None
        self.health_server: HttpServer | None = None

    async def start(self) -> None:
        if self.options.metrics_addr:
            self.metrics_server = HttpServer(self._metrics.app(), self.options.metrics_addr)
            await self.metrics_server.start()
        if self.options.health_addr:
            self.health_server = HttpServer(
                probes_app(lambda: True, self._ready), self.options.health_addr
            )
            await self.health_server.start()

    async def stop(self) -> None:
        for server in (self.metrics_server, self.health_server):
            if server is not None:
                await server.stop()

    async def lead(self, term: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``term`` for every leadership term (once, without leader election)."""
        if self.elector is None:
            await term()
        else:
            await self.elector.run(term)
