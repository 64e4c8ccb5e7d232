"""Client-side request throttling: a token bucket of ``qps`` tokens a second, ``burst`` deep.

Like client-go's (KubeRay's defaults are 100 QPS, burst 200), it keeps a busy operator from
flooding the API server: a large scale-up spends the burst at once, then proceeds at the
steady rate. Reservations may go negative so that concurrent callers queue fairly instead of
all waking at the same instant.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

Clock = Callable[[], float]


class TokenBucket:
    def __init__(self, qps: float, burst: int, *, clock: Clock = time.monotonic) -> None:
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0

    def reserve(self) -> float:
        """Take one token now; returns how long the caller must wait before using it."""
        if self.unlimited:
            return 0.0
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)

    __call__ = acquire
