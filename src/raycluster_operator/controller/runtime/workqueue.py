"""A keyed work queue with controller-runtime's guarantees.

- a key waiting in the queue is never queued twice (events collapse into one reconcile);
- a key being processed is never handed to a second worker; if it changes meanwhile it is
  queued again when the first worker is done, so the last change is never lost;
- failures back off per key exponentially (``base * 2**failures``, capped), and ``forget``
  resets a key after a success; an overall token bucket (client-go's 10/s, burst 100) keeps
  many failing keys from retrying in a storm: a retry waits for the longer of the two.
"""

from __future__ import annotations

import asyncio
from collections import deque

from raycluster_operator.controller.runtime.ratelimit import TokenBucket


class ShutDown(Exception):
    """The queue was shut down; workers should exit."""


class WorkQueue:
    def __init__(
        self,
        *,
        base_delay: float = 0.005,
        max_delay: float = 300.0,
        retry_bucket: TokenBucket | None = None,
    ) -> None:
        self.base_delay = base_delay
        self._retry_bucket = retry_bucket if retry_bucket is not None else TokenBucket(10, 100)
        self.max_delay = max_delay
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._failures: dict[str, int] = {}
        self._timers: dict[str, tuple[float, asyncio.TimerHandle]] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shutdown = False

    def __len__(self) -> int:
        """Queue depth: keys waiting for a worker (not those in flight or delayed)."""
        return len(self._queue)

    def add(self, key: str) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._wake()

    def add_after(self, key: str, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds; an earlier pending schedule wins."""
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= when:
                return
            pending[1].cancel()
        self._timers[key] = (when, loop.call_at(when, self._fire, key))

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def backoff(self, key: str) -> float:
        """The delay the next failure of ``key`` would wait (pure, for inspection)."""
        return float(min(self.max_delay, self.base_delay * 2 ** self._failures.get(key, 0)))

    def add_rate_limited(self, key: str) -> float:
        delay = max(self.backoff(key), self._retry_bucket.reserve())
        self._failures[key] = self._failures.get(key, 0) + 1
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> str:
        """The next key to process; raises ShutDown when the queue is shut down."""
        while not self._queue:
            if self._shutdown:
                raise ShutDown
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            finally:
                if fut in self._waiters:
                    self._waiters.remove(fut)
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty and not self._shutdown:
            self._queue.append(key)
            self._wake()

    def shutdown(self) -> None:
        self._shutdown = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)

    def _wake(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
