"""One container's life in a pod: start, probe, exit, restart with back-off.

The kubelet's per-container loop, reduced to what a dev cluster needs: restart policy with a
small doubling back-off, readiness/liveness/startup probes, the previous run's log kept
beside the current one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from raycluster_operator.devcluster.process.probespec import (
    ProbeSpec,
    ProbeState,
    parse_probe,
    record,
)
from raycluster_operator.devcluster.process.probing import probe_once
from raycluster_operator.devcluster.process.sandbox import ContainerProcess, PodSandbox
from raycluster_operator.devcluster.process.status import (
    ContainerView,
    restarts,
    terminated_reason,
    terminated_state,
)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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


class ContainerRunner:
    """Runs one container until it stops for good or the pod goes away."""

    def __init__(
        self,
        sandbox: PodSandbox,
        spec: Mapping[str, Any],
        launch: LaunchSpec,
        *,
        pod_ip: str,
        policy: str,
        grace: float,
        on_change: Callable[[], None],
        backoff: Backoff,
    ) -> None:
        self.sandbox = sandbox
        self.spec = spec
        self.launch = launch
        self.pod_ip = pod_ip
        self.policy = policy
        self.grace = grace
        self.on_change = on_change
        self.backoff = backoff
        self.view = ContainerView(name=str(spec["name"]), image=str(spec.get("image") or ""))
        self.readiness = parse_probe(spec.get("readinessProbe"), spec)
        self.liveness = parse_probe(spec.get("livenessProbe"), spec)
        self.startup = parse_probe(spec.get("startupProbe"), spec)
        self._process: ContainerProcess | None = None
        self._stopping = False
        self._liveness_kill = False

    def _set(self, **changes: Any) -> None:
        new = dataclasses.replace(self.view, **changes)
        if new != self.view:
            self.view = new
            self.on_change()

    async def run(self) -> ContainerView:
        """Run (and re-run) the container; returns its final view."""
        attempt = 0
        while not self._stopping:
            began = time.monotonic()
            code = await self._run_once()
            if self._stopping or not restarts(self.policy, code):
                self._set(final=True)
                return self.view
            attempt = 1 if time.monotonic() - began > self.backoff.reset else attempt + 1
            last = terminated_state(self.view)
            self._set(
                state="waiting",
                reason="CrashLoopBackOff",
                message=f"back-off restarting failed container {self.view.name}",
                last_terminated=last,
                ready=False,
            )
            await asyncio.sleep(self.backoff.delay(attempt))
            self._set(restart_count=self.view.restart_count + 1, message="")
            previous = self.launch.log.with_suffix(".previous.log")
            with contextlib.suppress(FileNotFoundError):
                self.launch.log.replace(previous)
        return self.view

    async def _run_once(self) -> int:
        missing = self._missing_executable()
        if missing:
            stamp = now_iso()
            self._set(
                state="terminated",
                reason="StartError",
                message=missing,
                exit_code=128,
                started_at=stamp,
                finished_at=stamp,
                ready=False,
            )
            return 128
        self._liveness_kill = False
        self._process = await self.sandbox.spawn(
            self.launch.argv, self.launch.env, self.launch.workdir, self.launch.log
        )
        self._set(
            state="running",
            reason="",
            message="",
            exit_code=0,
            signal=0,
            started_at=now_iso(),
            finished_at="",
            started=self.startup is None,
            ready=self.readiness is None and self.startup is None,
            container_id=f"process://{self._process.inner_pid() or self._process.proc.pid}",
        )
        probes = asyncio.create_task(self._probe())
        try:
            code = await self._process.wait()
        finally:
            probes.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probes
        self._set(
            state="terminated",
            exit_code=code,
            signal=code - 128 if code > 128 else 0,
            reason=terminated_reason(code),
            message="killed: liveness probe failed" if self._liveness_kill else "",
            finished_at=now_iso(),
            ready=False,
        )
        return code

    def _missing_executable(self) -> str:
        if not self.launch.argv:
            return "the process runtime needs an explicit command (images are not run)"
        exe = self.launch.argv[0]
        if "/" in exe:
            return ""
        if shutil.which(exe, path=self.launch.env.get("PATH")) is None:
            return f'exec: "{exe}": executable file not found in $PATH'
        return ""

    async def _exec(self, argv: Sequence[str], seconds: float) -> int:
        code, _ = await self.sandbox.exec(argv, self.launch.env, self.launch.workdir, seconds)
        return code

    async def _probe(self) -> None:
        if self.startup is not None:
            await self._until_passing(self.startup)
            self._set(started=True, ready=self.readiness is None)
        tasks = []
        if self.readiness is not None:
            tasks.append(asyncio.create_task(self._readiness(self.readiness)))
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

    async def _readiness(self, spec: ProbeSpec) -> None:
        await asyncio.sleep(spec.initial_delay)
        state = ProbeState(passing=False)
        while True:
            state = record(spec, state, await probe_once(spec, self.pod_ip, self._exec))
            self._set(ready=state.passing)
            await asyncio.sleep(spec.period)

    async def _liveness(self, spec: ProbeSpec) -> None:
        await asyncio.sleep(spec.initial_delay)
        state = ProbeState(passing=True)
        while state.passing:
            await asyncio.sleep(spec.period)
            state = record(spec, state, await probe_once(spec, self.pod_ip, self._exec))
        self._liveness_kill = True
        await self.terminate(self.grace)

    async def terminate(self, grace: float) -> None:
        """SIGTERM the container's processes, SIGKILL them after `grace` seconds."""
        process = self._process
        if process is None or process.proc.returncode is not None:
            return
        process.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(process.proc.wait()), grace)
        except TimeoutError:
            process.signal(signal.SIGKILL)

    def stop(self) -> None:
        """No more restarts: the pod is going away."""
        self._stopping = True
