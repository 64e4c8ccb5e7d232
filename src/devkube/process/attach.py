"""`kubectl attach` on the process runtime: the container's output from now on, and with
`-i` the client's bytes into the container's stdin.

A container's output is one file per container (process/container.py), so attach follows that
file. Its stdin is a pipe only when the pod spec says `stdin: true` (as a kubelet keeps a
container's stdin open only then); with `stdinOnce: true` the first session that attached with
stdin closes it when that session ends (its client closed stdin or went away), and the
container then reads end of file (docs/design.md §8).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from devkube.process.container import ContainerRunner
from devkube.server import ExecIO

STDOUT = 1
# How often the container's output file is read for new bytes.
_POLL = 0.2


async def run_attach(
    runner: ContainerRunner, read_log: Callable[[], bytes], io: ExecIO, *, stdin: bool
) -> int:
    """Stream what the container writes until it exits (then 0), feeding stdin meanwhile."""
    seen = len(read_log())
    feeder = asyncio.create_task(_feed(runner, io)) if stdin else None
    try:
        while runner.running:
            await asyncio.sleep(_POLL)
            seen = await _forward(read_log, seen, io)
        # What it wrote last, just before it exited.
        await _forward(read_log, seen, io)
        return 0
    finally:
        if feeder is not None:
            feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feeder


async def _forward(read_log: Callable[[], bytes], seen: int, io: ExecIO) -> int:
    data = read_log()
    if len(data) > seen:
        await io.write(STDOUT, data[seen:])
    return max(seen, len(data))


async def _feed(runner: ContainerRunner, io: ExecIO) -> None:
    """The client's stdin into the container's, until the client closes it or goes away."""
    if not runner.claim_stdin():
        # stdinOnce and an earlier session had it: what this client types goes nowhere.
        while await io.read_stdin():
            pass
        return
    try:
        while data := await io.read_stdin():
            writer = runner.stdin_writer()
            if writer is None:
                continue  # the container exited or restarted: nothing reads this
            writer.write(data)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await writer.drain()
    finally:
        if runner.stdin_once:
            runner.close_stdin()
