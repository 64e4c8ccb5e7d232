"""`kubectl exec` on the process runtime: a command inside a pod's namespaces, wired to the
client's channels.

The command gets the container's environment and working directory, joins the pod's mount,
PID, UTS (and network, when the pod has its own) namespaces, and runs with pipes or, for
`-t`, a pseudo-terminal whose size follows the client's. Daemons the command starts stay in the
pod, as they would in a container; the command itself goes when the client does.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import struct
import termios
from collections.abc import Awaitable, Callable, Mapping, Sequence

from devkube.process.sandbox import PodSandbox, container_limits
from devkube.process.security import RunAs
from devkube.server import ExecIO

STDOUT, STDERR = 1, 2
_READ = 64 * 1024
# After the command exits, output its leftover children still write is passed on this long.
_DRAIN = 0.3


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


async def run_exec(
    sandbox: PodSandbox,
    argv: Sequence[str],
    env: Mapping[str, str],
    workdir: str,
    io: ExecIO,
    *,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
    user: RunAs | None = None,
) -> int:
    """Run `argv` in the pod until it exits, as the container's user; its exit code as a
    kubelet reports it."""
    command = [*sandbox.exec_argv(workdir, tty=tty, user=user), *argv]
    if tty:
        return await _with_tty(command, {"TERM": "xterm", **env}, io, stdin=stdin)
    return await _with_pipes(command, env, io, stdin=stdin, stdout=stdout, stderr=stderr)


async def _with_pipes(
    command: list[str],
    env: Mapping[str, str],
    io: ExecIO,
    *,
    stdin: bool,
    stdout: bool,
    stderr: bool,
) -> int:
    pipe, null = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
    proc = await asyncio.create_subprocess_exec(
        *command,
        env=dict(env),
        stdin=pipe if stdin else null,
        stdout=pipe if stdout else null,
        stderr=pipe if stderr else null,
        start_new_session=True,
        preexec_fn=container_limits,
    )
    pumps = []
    if proc.stdout is not None:
        pumps.append(asyncio.create_task(_pump(proc.stdout.read, io, STDOUT)))
    if proc.stderr is not None:
        pumps.append(asyncio.create_task(_pump(proc.stderr.read, io, STDERR)))
    feeder = asyncio.create_task(_feed_pipe(proc, io)) if stdin else None
    try:
        code = await proc.wait()
        await _drain(pumps)
        return _exit_code(code)
    finally:
        _end(proc.pid, proc.returncode, [*pumps, *([feeder] if feeder else [])])


async def _pump(read: Callable[[int], Awaitable[bytes]], io: ExecIO, channel: int) -> None:
    while chunk := await read(_READ):
        await io.write(channel, chunk)


async def _feed_pipe(proc: asyncio.subprocess.Process, io: ExecIO) -> None:
    assert proc.stdin is not None
    while data := await io.read_stdin():
        proc.stdin.write(data)
        try:
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return
    proc.stdin.close()


async def _drain(pumps: list[asyncio.Task[None]]) -> None:
    if pumps:
        await asyncio.wait(pumps, timeout=_DRAIN)


def _end(pid: int, returncode: int | None, tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    if returncode is None:
        # The client went away before the command ended: the command goes with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


async def _with_tty(command: list[str], env: Mapping[str, str], io: ExecIO, *, stdin: bool) -> int:
    master, slave = os.openpty()
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            env=dict(env),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=container_limits,
        )
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    tasks = [
        asyncio.create_task(_pump(lambda n: _read_tty(master, n), io, STDOUT)),
        asyncio.create_task(_follow_resizes(master, io)),
    ]
    if stdin:
        tasks.append(asyncio.create_task(_feed_tty(master, io)))
    try:
        code = await proc.wait()
        await _drain(tasks[:1])
        return _exit_code(code)
    finally:
        _end(proc.pid, proc.returncode, tasks)
        os.close(master)


async def _read_tty(master: int, size: int) -> bytes:
    loop = asyncio.get_running_loop()
    while True:
        try:
            return os.read(master, size)
        except BlockingIOError:
            ready = loop.create_future()
            loop.add_reader(master, ready.set_result, None)
            try:
                await ready
            finally:
                loop.remove_reader(master)
        except OSError:
            return b""  # EIO: every process holding the terminal has closed it


async def _feed_tty(master: int, io: ExecIO) -> None:
    while data := await io.read_stdin():
        while data:
            try:
                written = os.write(master, data)
            except BlockingIOError:
                await asyncio.sleep(0.01)
                continue
            except OSError:
                return
            data = data[written:]


async def _follow_resizes(master: int, io: ExecIO) -> None:
    while True:
        width, height = await io.next_resize()
        with contextlib.suppress(OSError):
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
