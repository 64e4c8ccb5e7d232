"""The generic controller: a work queue of one kind's keys, workers, and what a result means.

Every kind runs on this one loop (docs/design.md §7); the kind only plugs in a
``Registration``. One leadership term (``lead``) waits for the kind's caches, takes a fresh
queue and the term's reconciler, and starts by enqueueing every key, so nothing missed while
standing by is lost; a periodic resync enqueues them all again. The requeue policy, after a
pass:

- success: the key's backoff is reset; ``Result.requeue_after`` queues it again later;
- ``TerminalError`` (refused for good): logged and counted, the backoff is reset, and the key
  waits for the next change or resync instead of retrying hot;
- ``Conflict`` (the pass read a stale object): retried with backoff, logged quietly, counted
  apart from errors, since the next pass plans from the newer object;
- any other error: retried with per-key exponential backoff (``retry_base_delay`` doubling up
  to ``retry_max_delay``) under an overall retry rate limit, and logged with a traceback
  unless the kind or the API explained it (``ReconcileError``, ``KubeError``).

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
from typing import Generic, TypeVar

from raycluster_operator.controller.runtime.metrics import ControllerMetrics
from raycluster_operator.controller.runtime.reconcile import (
    ReconcileError,
    Reconciler,
    Registration,
    TerminalError,
)
from raycluster_operator.controller.runtime.workqueue import ShutDown, WorkQueue
from raycluster_operator.kube import Conflict, KubeError

log = logging.getLogger(__name__)

_EXPECTED = (ReconcileError, KubeError)

R = TypeVar("R", bound=Reconciler)


@dataclass(frozen=True)
class LoopOptions:
    """The runtime's knobs for one kind (each kind's own options section derives them)."""

    #: Keys reconciled at once (a key is never reconciled by two workers).
    concurrency: int = 4
    #: Seconds between enqueueing every key again.
    resync_period: float = 300.0
    #: Per-key retry backoff after a failed reconcile.
    retry_base_delay: float = 0.05
    retry_max_delay: float = 60.0
    drain_timeout: float = 10.0


class Controller(Generic[R]):
    def __init__(
        self, kind: Registration[R], options: LoopOptions, *, metrics: ControllerMetrics
    ) -> None:
        self.kind = kind
        self.name = kind.name
        self.options = options
        self.metrics = metrics
        self.queue: WorkQueue | None = None
        #: The reconciler of the current term (None while not leading).
        self.reconciler: R | None = None
        #: Passes run, across terms.
        self.reconciles = 0
        #: Passes of each key begun and ended, across terms (passes of one key never overlap:
        #: the queue hands a key to one worker at a time). A pass numbered past what had begun
        #: when a change was in the caches has seen it (the tests' barrier, tests/harness).
        self.passes_begun: Counter[str] = Counter()
        self.passes_ended: Counter[str] = Counter()
        metrics.track_queue(lambda: len(self.queue) if self.queue is not None else 0)
        kind.route(self.enqueue)

    def enqueue(self, key: str) -> None:
        """A change concerns ``key``: queued while leading, dropped otherwise (a term starts
        by enqueueing every key)."""
        if self.queue is not None:
            self.queue.add(key)

    def resync(self) -> None:
        """Every key passes again."""
        if self.queue is not None:
            for key in self.kind.all_keys():
                self.queue.add(key)

    async def lead(self, *, stopping: Callable[[], bool]) -> None:
        """One leadership term: workers plus a periodic resync, until cancelled.

        ``stopping`` tells a clean stop (drain in-flight passes) from a lost Lease (do not)."""
        opts = self.options
        await self.kind.wait_synced()
        queue = WorkQueue(base_delay=opts.retry_base_delay, max_delay=opts.retry_max_delay)
        async with self.kind.term(self.resync) as reconciler:
            self.reconciler = reconciler
            self.queue = queue
            workers = [
                asyncio.create_task(self._worker(queue, reconciler), name=f"{self.name} worker {i}")
                for i in range(max(1, opts.concurrency))
            ]
            try:
                while True:
                    for key in self.kind.all_keys():
                        queue.add(key)
                    await asyncio.sleep(opts.resync_period)
            finally:
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

    async def _worker(self, queue: WorkQueue, reconciler: R) -> None:
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

    async def _pass(self, queue: WorkQueue, reconciler: R, key: str) -> None:
        """One reconcile of ``key`` and the requeue policy for its result."""
        try:
            result = await reconciler.reconcile(key)
        except TerminalError as exc:
            queue.forget(key)
            self.metrics.reconcile_errors.inc()
            self.metrics.reconciles.labels("terminal").inc()
            log.warning("%s %s refused; waiting for a change: %s", self.name, key, exc)
        except Conflict as exc:
            self.metrics.reconciles.labels("conflict").inc()
            delay = queue.add_rate_limited(key)
            log.debug("%s %s: stale (retry in %.2fs): %s", self.name, key, delay, exc)
        except Exception as exc:
            self.metrics.reconcile_errors.inc()
            self.metrics.reconciles.labels("error").inc()
            delay = queue.add_rate_limited(key)
            log.warning(
                "%s %s failed (retry in %.2fs): %s",
                self.name,
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
