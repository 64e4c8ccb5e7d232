"""Bounded-concurrency writes: a slice's hosts go out together, the server is not flooded.

All hosts of a new slice are sent concurrently so they come up as one unit; a semaphore
shared by every reconcile caps requests in flight across the whole operator (the token bucket
then paces them). Each write's outcome is returned, never raised, so one failed create does
not abandon its siblings; the caller decides what a failure means.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")


class Writer:
    def __init__(self, concurrency: int = 32) -> None:
        self._sem = asyncio.Semaphore(max(1, concurrency))

    async def _one(self, write: Awaitable[T]) -> T | BaseException:
        async with self._sem:
            try:
                return await write
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                return exc

    async def run_all(self, writes: Iterable[Awaitable[T]]) -> list[T | BaseException]:
        pending = list(writes)
        try:
            return list(await asyncio.gather(*(self._one(w) for w in pending)))
        except asyncio.CancelledError:
            # Writes that never started are closed, not leaked as never-awaited coroutines.
            for write in pending:
                if (
                    inspect.iscoroutine(write)
                    and inspect.getcoroutinestate(write) == "CORO_CREATED"
                ):
                    write.close()
            raise
