"""One container's runs inside a pod: start, probe, report, stop.

The kubelet owns the restart policy and counts restarts; a runner starts the container when
asked, reports it running, ready or exited through the kubelet's events, and waits a small
doubling back-off before a restart so a crashing command does not spin.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from devkube.process.probespec import (
    ProbeSpec,
    ProbeState,
    parse_probe,
    record,
)
from devkube.process.probing import probe_once
from devkube.process.sandbox import ContainerProcess, PodSandbox
from devkube.process.security import RunAs

log = logging.getLogger(__name__)

# Exit code a kubelet reports when the container's command could not be started.
START_ERROR = 128


class ContainerEvents(Protocol):
    """The kubelet's side (devcluster.runtime.PodEvents), keyed by pod uid."""

    def container_running(self, uid: str, container: str, *, ready: bool = True) -> None: ...

    def container_ready(self, uid: str, container: str, ready: bool) -> None: ...

    def container_exited(
        self, uid: str, container: str, exit_code: int, reason: str = ""
    ) -> None: ...

    def container_waiting(self, uid: str, container: str, reason: str, message: str) -> None: ...


@dataclass(frozen=True)
class Backoff:
    """Restart delays: `first` doubling up to `cap`; a run longer than `reset` starts over."""

    first: float = 0.5
    cap: float = 10.0
    reset: float = 60.0

    def delay(self, attempt: int) -> float:
        return float(min(self.first * (2 ** max(attempt - 1, 0)), self.cap))


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start the container, resolved by the pod."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    workdir: str
    log: Path
    #: Who the process runs as (securityContext); None: root.
    user: RunAs | None = None


def missing_executable(argv: Sequence[str], path: str | None) -> str:
    """Why the command cannot start (a kubelet's StartError message), or ""."""
    if not argv:
        return "the process runtime needs an explicit command (images are not run)"
    exe = argv[0]
    if "/" in exe or shutil.which(exe, path=path) is not None:
        return ""
    return f'exec: "{exe}": executable file not found in $PATH'


class ContainerRunner:
    """Runs one container of one pod, once per `start()`."""

    def __init__(
        self,
        sandbox: PodSandbox,
        uid: str,
        spec: Mapping[str, Any],
        launch: LaunchSpec,
        *,
        pod_ip: str,
        grace: float,
        backoff: Backoff,
    ) -> None:
        self.sandbox = sandbox
        self.uid = uid
        self.name = str(spec["name"])
        self.launch = launch
        self.pod_ip = pod_ip
        self.grace = grace
        self.backoff = backoff
        self.readiness = parse_probe(spec.get("readinessProbe"), spec)
        self.liveness = parse_probe(spec.get("livenessProbe"), spec)
        self.startup = parse_probe(spec.get("startupProbe"), spec)
        self.attempt = 0
        self.ready = False
        # The spec's `stdin`: the container reads a pipe that attach sessions write to;
        # `stdinOnce`: the first session that writes closes it when it ends (per run).
        self.keeps_stdin = bool(spec.get("stdin"))
        self.stdin_once = bool(spec.get("stdinOnce"))
        self._stdin_claimed = False
        self._process: ContainerProcess | None = None
        self._forced_code: int | None = None
        self._stopping = False
        self._began = 0.0

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.proc.returncode is None

    async def run_once(self, events: ContainerEvents | None) -> int:
        """Start the container, report it, and return its exit code when it ends."""
        if self._stopping:
            return 0
        problem = missing_executable(self.launch.argv, self.launch.env.get("PATH"))
        if problem:
            log.warning("container %s cannot start: %s", self.name, problem)
            if events is not None:
                events.container_exited(self.uid, self.name, START_ERROR, "StartError")
            return START_ERROR
        self._forced_code = None
        self._stdin_claimed = False
        self._began = time.monotonic()
        try:
            self._process = await self.sandbox.spawn(
                self.launch.argv,
                self.launch.env,
                self.launch.workdir,
                self.launch.log,
                stdin=self.keeps_stdin,
                user=self.launch.user,
            )
        except (RuntimeError, OSError) as error:
            # The pod's sandbox is gone (its PID 1 died): the container cannot start again.
            log.warning("container %s cannot start: %s", self.name, error)
            if events is not None and not self._stopping:
                events.container_exited(self.uid, self.name, START_ERROR, "StartError")
            return START_ERROR
        self.ready = self.readiness is None and self.startup is None
        if events is not None:
            events.container_running(self.uid, self.name, ready=self.ready)
        probes = asyncio.create_task(self._probe(events))
        try:
            code = await self._process.wait()
        finally:
            # Its stdin pipe, if any, ends with it (a restart gets a fresh one).
            if self._process.proc.stdin is not None:
                self._process.proc.stdin.close()
            probes.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probes
        self.ready = False
        if self._forced_code is not None:
            code = self._forced_code
        if events is not None and not self._stopping:
            events.container_exited(self.uid, self.name, code)
        return code

    def stdin_writer(self) -> asyncio.StreamWriter | None:
        """The running process's stdin while it is still open."""
        process = self._process
        if process is None or process.proc.returncode is not None:
            return None
        writer = process.proc.stdin
        return None if writer is None or writer.is_closing() else writer

    def claim_stdin(self) -> bool:
        """Whether an attach session may write the container's stdin: any session with
        `stdin: true`, only the first one of this run with `stdinOnce` too (as a kubelet)."""
        if not self.keeps_stdin or self.stdin_writer() is None:
            return False
        if self.stdin_once:
            if self._stdin_claimed:
                return False
            self._stdin_claimed = True
        return True

    def close_stdin(self) -> None:
        """The container reads end of file from now on."""
        writer = self.stdin_writer()
        if writer is not None:
            writer.close()

    async def restart(self, events: ContainerEvents | None) -> int:
        """Run again after the back-off (the kubelet has decided that it restarts)."""
        ran = time.monotonic() - self._began
        self.attempt = 1 if ran > self.backoff.reset else self.attempt + 1
        await asyncio.sleep(self.backoff.delay(self.attempt))
        return await self.run_once(events)

    def _set_ready(self, ready: bool, events: ContainerEvents | None) -> None:
        if ready != self.ready:
            self.ready = ready
            if events is not None:
                events.container_ready(self.uid, self.name, ready)

    async def _exec(self, argv: Sequence[str], seconds: float) -> int:
        code, _ = await self.sandbox.exec(argv, self.launch.env, self.launch.workdir, seconds)
        return code

    async def _probe(self, events: ContainerEvents | None) -> None:
        if self.startup is not None:
            await self._until_passing(self.startup)
            self._set_ready(self.readiness is None, events)
        tasks = []
        if self.readiness is not None:
            tasks.append(asyncio.create_task(self._readiness(self.readiness, events)))
        if self.liveness is not None:
            tasks.append(asyncio.create_task(self._liveness(self.liveness)))
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()

    async def _until_passing(self, spec: ProbeSpec) -> None:
        await asyncio.sleep(spec.initial_delay)
        state = ProbeState(passing=False)
        while not state.passing:
            state = record(spec, state, await probe_once(spec, self.pod_ip, self._exec))
            if not state.passing:
                await asyncio.sleep(spec.period)

    async def _readiness(self, spec: ProbeSpec, events: ContainerEvents | None) -> None:
        await asyncio.sleep(spec.initial_delay)
        state = ProbeState(passing=False)
        while True:
            state = record(spec, state, await probe_once(spec, self.pod_ip, self._exec))
            self._set_ready(state.passing, events)
            await asyncio.sleep(spec.period)

    async def _liveness(self, spec: ProbeSpec) -> None:
        await asyncio.sleep(spec.initial_delay)
        state = ProbeState(passing=True)
        while state.passing:
            await asyncio.sleep(spec.period)
            state = record(spec, state, await probe_once(spec, self.pod_ip, self._exec))
        await self.terminate(self.grace)

    async def terminate(self, grace: float) -> None:
        """SIGTERM the container's processes, SIGKILL them after `grace` seconds."""
        process = self._process
        if process is None or process.proc.returncode is not None:
            return
        process.signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(grace):
                await asyncio.shield(process.proc.wait())
        except TimeoutError:
            process.signal(signal.SIGKILL)

    def kill(self, exit_code: int) -> None:
        """Make the container exit now, reported with `exit_code` (fault injection)."""
        if self._process is not None and self._process.proc.returncode is None:
            self._forced_code = exit_code
            self._process.signal(signal.SIGKILL)

    def stop(self) -> None:
        """The pod is going away: no more starts, no more reports."""
        self._stopping = True
