"""One control-plane binary as a child process: its log in a file, its death noticed, and a
stop that asks (SIGTERM) before it insists (SIGKILL)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path


class ProcessDied(RuntimeError):
    """A binary exited while it was meant to serve; the message ends with its log's tail."""


class Child:
    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env or {})
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                # The caller's environment (PATH, proxies), and what the child is given.
                env={**os.environ, **self.env},
            )

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def check(self) -> None:
        """Raise `ProcessDied` if the process has exited."""
        if self._process is not None and self._process.returncode is not None:
            raise ProcessDied(
                f"{self.name} exited with {self._process.returncode}; its log ends:\n{self.tail()}"
            )

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    async def stop(self, grace: float = 10.0) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(grace):
                await process.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
