"""The controller: a work queue of RayCluster keys, workers, and what a result means.

One leadership term (``lead``) gets a fresh queue and a fresh reconciler (so fresh
expectations) and starts by enqueueing every cached cluster, so nothing missed while standing
by is lost; a periodic resync enqueues them all again. The requeue policy, after a pass:

- success: the key's backoff is reset; ``Result.requeue_after`` queues it again later;
- ``TerminalError`` (the API refused a write for good): logged and counted, the backoff is
  reset, and the key waits for the next change or resync instead of retrying hot;
- any other error: retried with per-key exponential backoff (``retry_base_delay`` doubling up
  to ``retry_max_delay``) under an overall retry rate limit.

A clean stop lets in-flight passes finish for ``drain_timeout``; a lost Lease stops them at
once, because a successor may already be leading.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from raycluster_operator.controller.crdwatch import follow_crd
from raycluster_operator.controller.events import EventRecorder
from raycluster_operator.controller.metrics import Metrics
from raycluster_operator.controller.reconciler import ReconcileError, Reconciler, TerminalError
from raycluster_operator.controller.sources import Change, Sources
from raycluster_operator.controller.workqueue import ShutDown, WorkQueue
from raycluster_operator.controller.writer import Writer
from raycluster_operator.kube import KubeClient, KubeError
from raycluster_operator.planning import PlanOptions

log = logging.getLogger(__name__)

_EXPECTED = (ReconcileError, KubeError)


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
    drain_timeout: float = 10.0


class Controller:
    def __init__(
        self,
        client: KubeClient,
        sources: Sources,
        options: ControllerOptions,
        planning: PlanOptions,
        *,
        metrics: Metrics,
        recorder: EventRecorder,
    ) -> None:
        self.client = client
        self.sources = sources
        self.options = options
        self.planning = planning
        self.metrics = metrics
        self.recorder = recorder
        self.writer = Writer(options.write_concurrency)
        self.queue: WorkQueue | None = None
        self.reconciler: Reconciler | None = None
        #: Passes run, across terms.
        self.reconciles = 0
        #: Passes of each key begun and ended, across terms (passes of one key never overlap:
        #: the queue hands a key to one worker at a time). A pass numbered past what had begun
        #: when a change was in the caches has seen it (the tests' barrier, tests/harness).
        self.passes_begun: Counter[str] = Counter()
        self.passes_ended: Counter[str] = Counter()
        metrics.track_queue(lambda: len(self.queue) if self.queue is not None else 0)
        sources.subscribe(self._changed)

    def _changed(self, change: Change) -> None:
        if self.reconciler is not None:
            self.reconciler.observe(change)
        if self.queue is not None:
            self.queue.add(change.key)

    def _resync(self) -> None:
        """Every cluster passes again (the installed CRD changed: crdwatch)."""
        if self.queue is not None:
            for key in self.sources.caches.clusters.all_keys():
                self.queue.add(key)

    async def lead(self, *, stopping: Callable[[], bool]) -> None:
        """One leadership term: workers plus a periodic resync, until cancelled.

        ``stopping`` tells a clean stop (drain in-flight passes) from a lost Lease (do not)."""
        opts = self.options
        queue = WorkQueue(base_delay=opts.retry_base_delay, max_delay=opts.retry_max_delay)
        self.reconciler = Reconciler(
            self.client,
            self.sources.caches,
            writer=self.writer,
            recorder=self.recorder,
            metrics=self.metrics,
            options=self.planning,
            expectations_timeout=opts.expectations_timeout,
        )
        self.queue = queue
        self.metrics.is_leader.set(1)
        workers = [
            asyncio.create_task(self._worker(queue, self.reconciler), name=f"worker {i}")
            for i in range(max(1, opts.reconcile_concurrency))
        ]
        crd_watch = asyncio.create_task(
            follow_crd(self.client, self.reconciler.crd, self._resync), name="crd watch"
        )
        try:
            while True:
                for key in self.sources.caches.clusters.all_keys():
                    queue.add(key)
                await asyncio.sleep(opts.resync_period)
        finally:
            crd_watch.cancel()
            await asyncio.gather(crd_watch, return_exceptions=True)
            self.metrics.is_leader.set(0)
            self.queue = None
            self.reconciler = None
            queue.shutdown()
            await self._drain(workers, opts.drain_timeout if stopping() else 0.0)

    @staticmethod
    async def _drain(workers: list[asyncio.Task[None]], grace: float) -> None:
        pending: set[asyncio.Task[None]] = set(workers)
        if grace > 0:
            _, pending = await asyncio.wait(workers, timeout=grace)
        for task in pending:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self, queue: WorkQueue, reconciler: Reconciler) -> None:
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            started = time.monotonic()
            self.passes_begun[key] += 1
            try:
                await self._pass(queue, reconciler, key)
            finally:
                self.passes_ended[key] += 1
                self.reconciles += 1
                self.metrics.reconcile_seconds.observe(time.monotonic() - started)
                queue.done(key)
            for verb, n in self.client.counts.items():
                self.metrics.api_requests.labels(verb).set(n)

    async def _pass(self, queue: WorkQueue, reconciler: Reconciler, key: str) -> None:
        """One reconcile of ``key`` and the requeue policy for its result."""
        try:
            result = await reconciler.reconcile(key)
        except TerminalError as exc:
            queue.forget(key)
            self.metrics.reconcile_errors.inc()
            self.metrics.reconciles.labels("terminal").inc()
            log.warning("reconcile %s refused; waiting for a change: %s", key, exc)
        except Exception as exc:
            self.metrics.reconcile_errors.inc()
            self.metrics.reconciles.labels("error").inc()
            delay = queue.add_rate_limited(key)
            log.warning(
                "reconcile %s failed (retry in %.2fs): %s",
                key,
                delay,
                exc,
                exc_info=not isinstance(exc, _EXPECTED),
            )
        else:
            queue.forget(key)
            if result.requeue_after is not None:
                queue.add_after(key, max(result.requeue_after, 0.01))
                self.metrics.reconciles.labels("requeue").inc()
            else:
                self.metrics.reconciles.labels("success").inc()
