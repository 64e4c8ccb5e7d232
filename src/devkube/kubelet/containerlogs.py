"""What `kubectl logs` shows for simulated containers: their lifecycle, line by line.

Simulated containers print nothing, but a newcomer running `kubectl logs` should see that the
pod started, where, and why it stopped, rather than an error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from kubefacts.timestamps import rfc3339


@dataclass(frozen=True)
class _Line:
    at: datetime
    text: str

    def render(self, timestamps: bool) -> bytes:
        """As the kubelet prints it: `--timestamps` puts the RFC 3339 time (nanoseconds)
        before the line."""
        if not timestamps:
            return self.text.encode()
        stamp = self.at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
        return f"{stamp} {self.text}".encode()


class ContainerLogs:
    def __init__(self, limit: int = 1000) -> None:
        self._limit = limit
        self._lines: dict[tuple[str, str], list[_Line]] = {}
        self._written = asyncio.Event()
        #: When each container last restarted: `--previous` reads the lines before it.
        self._restarts: dict[tuple[str, str], datetime] = {}

    def restarted(self, uid: str, container: str) -> None:
        self._restarts[(uid, container)] = datetime.now(UTC)

    def write(self, uid: str, container: str, text: str) -> None:
        lines = self._lines.setdefault((uid, container), [])
        at = datetime.now(UTC)
        lines.append(_Line(at, f"{rfc3339(at)} [devcluster] {text}\n"))
        del lines[: -self._limit]
        self._written.set()
        self._written = asyncio.Event()

    def forget(self, uid: str) -> None:
        for key in [k for k in self._lines if k[0] == uid]:
            del self._lines[key]
        for key in [k for k in self._restarts if k[0] == uid]:
            del self._restarts[key]

    async def stream(
        self,
        uid: str,
        container: str,
        *,
        follow: bool,
        tail_lines: int | None,
        alive: Callable[[], bool],
        timestamps: bool = False,
        since_seconds: int | None = None,
        previous: bool = False,
    ) -> AsyncIterator[bytes]:
        """The lines so far (those of the last `since_seconds`, then the last `tail_lines` of
        them), then new ones while following and the pod lives. `previous`: the lines written
        before the container last restarted, and no following (that run is over)."""
        lines = self._lines.get((uid, container), [])
        end = len(lines)
        if previous:
            restart = self._restarts.get((uid, container))
            end = sum(1 for line in lines if restart is not None and line.at < restart)
            follow = False
        sent = 0
        if since_seconds is not None:
            since = datetime.now(UTC) - timedelta(seconds=since_seconds)
            sent = next((i for i, line in enumerate(lines) if line.at >= since), len(lines))
        if tail_lines is not None:
            sent = max(sent, end - tail_lines)
        if previous:
            for line in lines[sent:end]:
                yield line.render(timestamps)
            return
        while True:
            lines = self._lines.get((uid, container), [])
            for line in lines[sent:]:
                yield line.render(timestamps)
            sent = len(lines)
            if not follow or not alive():
                return
            written = self._written
            try:
                async with asyncio.timeout(1.0):
                    await written.wait()
            except TimeoutError:
                continue
