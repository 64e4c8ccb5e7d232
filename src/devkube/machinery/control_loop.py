"""The loop every dev-cluster controller runs: a pass after a change, or after a while anyway.

Controllers read shared watch caches, so what wakes them is a flag set by informer events
(`changed`, `poke`), not the events themselves: a burst of changes costs one pass. The
periodic wake makes a pass even when nothing changed, which is how time-driven rules
(heartbeats, graces, toleration seconds) and writes lost to a conflict come round again.
A pass that raises is logged and the loop goes on, as a kube controller does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from devkube.machinery.client import WatchEvent

log = logging.getLogger(__name__)

#: The longest wait between passes: seconds, a callable asked before each wait, or None
#: (wait for a change, however long).
Period = float | Callable[[], float] | None


class ControlLoop:
    """Runs `run_pass` in a task named `name` after `poke`/`changed`, or every `period`.

    `debounce` lets a burst of changes arrive before the pass reads the caches; `retry_after`,
    when set, makes a failed pass run again that many seconds later instead of at the next
    change or period. `failure` names the pass in the log line when it raises."""

    def __init__(
        self,
        name: str,
        run_pass: Callable[[], Awaitable[None]],
        *,
        period: Period,
        debounce: float = 0.0,
        retry_after: float | None = None,
        failure: str | None = None,
    ) -> None:
        self.name = name
        self._run_pass = run_pass
        self._period = period
        self._debounce = debounce
        self._retry_after = retry_after
        self._failure = failure or f"{name} pass failed"
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def poke(self) -> None:
        """Ask for a pass soon."""
        self._dirty.set()

    def changed(self, _event: WatchEvent) -> None:
        """An informer subscription: any watched change asks for a pass."""
        self._dirty.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _wait_limit(self) -> float | None:
        return self._period() if callable(self._period) else self._period

    async def _loop(self) -> None:
        while True:
            # asyncio.timeout(None) waits for ever; a cancel from stop() is never swallowed.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._wait_limit()):
                    await self._dirty.wait()
            if self._debounce:
                await asyncio.sleep(self._debounce)
            self._dirty.clear()
            try:
                await self._run_pass()
            except Exception:
                log.exception(self._failure)
                if self._retry_after is not None:
                    await asyncio.sleep(self._retry_after)
                    self._dirty.set()
