"""What `kubectl logs` shows for simulated containers: their lifecycle, line by line.

Simulated containers print nothing, but a newcomer running `kubectl logs` should see that the
pod started, where, and why it stopped, rather than an error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from kubefacts.timestamps import now_rfc3339


class ContainerLogs:
    def __init__(self, limit: int = 1000) -> None:
        self._limit = limit
        self._lines: dict[tuple[str, str], list[str]] = {}
        self._written = asyncio.Event()

    def write(self, uid: str, container: str, text: str) -> None:
        lines = self._lines.setdefault((uid, container), [])
        lines.append(f"{now_rfc3339()} [devcluster] {text}\n")
        del lines[: -self._limit]
        self._written.set()
        self._written = asyncio.Event()

    def forget(self, uid: str) -> None:
        for key in [k for k in self._lines if k[0] == uid]:
            del self._lines[key]

    async def stream(
        self,
        uid: str,
        container: str,
        *,
        follow: bool,
        tail_lines: int | None,
        alive: Callable[[], bool],
    ) -> AsyncIterator[bytes]:
        """The lines so far (the last `tail_lines`), then new ones while following and the
        pod lives."""
        lines = self._lines.get((uid, container), [])
        sent = max(0, len(lines) - tail_lines) if tail_lines is not None else 0
        while True:
            lines = self._lines.get((uid, container), [])
            for line in lines[sent:]:
                yield line.encode()
            sent = len(lines)
            if not follow or not alive():
                return
            written = self._written
            try:
                async with asyncio.timeout(1.0):
                    await written.wait()
            except TimeoutError:
                continue
