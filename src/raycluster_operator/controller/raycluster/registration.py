"""RayClusters, plugged into the generic controller (docs/design.md §7).

The keys are the cached clusters; a change the sources map to a cluster is first shown to the
term's reconciler (``observe``: it proves or retracts a write the pass waits for), then
enqueued. Each term gets a fresh ``Reconciler`` (so fresh expectations: what a predecessor
wrote is read from the caches, not remembered) and follows the installed CRD beside its
workers (``crdwatch``), passing every cluster again when it changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from raycluster_operator.controller.raycluster.crdwatch import follow_crd
from raycluster_operator.controller.raycluster.metrics import ClusterMetrics
from raycluster_operator.controller.raycluster.reconciler import Reconciler
from raycluster_operator.controller.raycluster.sources import Change, Sources
from raycluster_operator.controller.runtime.controller import LoopOptions
from raycluster_operator.controller.runtime.events import EventRecorder
from raycluster_operator.controller.runtime.informer import Informer
from raycluster_operator.controller.runtime.writer import Writer
from raycluster_operator.kube import KubeClient
from raycluster_operator.planning import PlanOptions


@dataclass(frozen=True)
class ControllerOptions:
    #: Clusters reconciled at once (a cluster is never reconciled by two workers).
    reconcile_concurrency: int = 4
    #: API writes in flight at once, across all clusters.
    write_concurrency: int = 32
    #: Seconds between enqueueing every cluster again.
    resync_period: float = 300.0
    #: Seconds a cluster waits at most for the cache to show its writes.
    expectations_timeout: float = 120.0
    #: Per-key retry backoff after a failed reconcile.
    retry_base_delay: float = 0.05
    retry_max_delay: float = 60.0
    #: Seconds in-flight passes (of every kind) may finish in on a clean stop.
    drain_timeout: float = 10.0

    def loop(self) -> LoopOptions:
        return LoopOptions(
            concurrency=self.reconcile_concurrency,
            resync_period=self.resync_period,
            retry_base_delay=self.retry_base_delay,
            retry_max_delay=self.retry_max_delay,
            drain_timeout=self.drain_timeout,
        )


class RayClusters:
    name = "raycluster"

    def __init__(
        self,
        client: KubeClient,
        sources: Sources,
        options: ControllerOptions,
        planning: PlanOptions,
        *,
        metrics: ClusterMetrics,
        recorder: EventRecorder,
    ) -> None:
        self.client = client
        self.sources = sources
        self.options = options
        self.planning = planning
        self.metrics = metrics
        self.recorder = recorder
        #: One writer across terms: its bound is the operator's, not a term's.
        self.writer = Writer(options.write_concurrency)
        self._current: Reconciler | None = None

    @property
    def informers(self) -> Sequence[Informer]:
        return self.sources.informers

    def route(self, enqueue: Callable[[str], None]) -> None:
        def changed(change: Change) -> None:
            if self._current is not None:
                self._current.observe(change)
            enqueue(change.key)

        self.sources.subscribe(changed)

    def all_keys(self) -> Sequence[str]:
        return self.sources.caches.clusters.all_keys()

    async def wait_synced(self) -> None:
        """Nothing to wait for: the manager leads only once the sources have synced (they
        are its readiness too)."""

    @asynccontextmanager
    async def term(self, resync: Callable[[], None]) -> AsyncIterator[Reconciler]:
        reconciler = Reconciler(
            self.client,
            self.sources.caches,
            writer=self.writer,
            recorder=self.recorder,
            metrics=self.metrics,
            options=self.planning,
            expectations_timeout=self.options.expectations_timeout,
        )
        self._current = reconciler
        crd_watch = asyncio.create_task(
            follow_crd(self.client, reconciler.crd, resync), name="crd watch"
        )
        try:
            yield reconciler
        finally:
            self._current = None
            crd_watch.cancel()
            await asyncio.gather(crd_watch, return_exceptions=True)
