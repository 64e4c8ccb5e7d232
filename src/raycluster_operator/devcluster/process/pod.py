"""A pod as a group of local processes: its sandbox, its containers, its status."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raycluster_operator.devcluster.process.container import (
    Backoff,
    ContainerRunner,
    LaunchSpec,
    now_iso,
)
from raycluster_operator.devcluster.process.downward import DownwardContext
from raycluster_operator.devcluster.process.envvars import KeyLookup, container_env, expand_all
from raycluster_operator.devcluster.process.hosts import pod_record
from raycluster_operator.devcluster.process.sandbox import PodSandbox, SandboxFiles, write_in_place
from raycluster_operator.devcluster.process.status import ContainerView, PodFacts, pod_status


def host_environment() -> dict[str, str]:
    """The host's environment with this interpreter's bin directory first on PATH, so pods
    find the tools installed beside the dev cluster (e.g. `ray` in its virtualenv)."""
    env = dict(os.environ)
    bin_dir = os.path.dirname(sys.executable)
    rest = [p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p != bin_dir]
    env["PATH"] = os.pathsep.join([bin_dir, *rest])
    return env


@dataclass(frozen=True)
class PodSettings:
    """Cluster-wide inputs every pod gets."""

    host_ip: str = "127.0.0.1"
    service_env: Mapping[str, str] = field(default_factory=dict)
    token: str = ""
    ca_pem: bytes = b""
    allocatable: Mapping[str, str] = field(default_factory=dict)
    backoff: Backoff = field(default_factory=Backoff)
    base_env: Mapping[str, str] = field(default_factory=host_environment)


class ProcessPod:
    """Runs one pod's containers in its sandbox and reports every change through `on_change`."""

    def __init__(
        self,
        pod: Mapping[str, Any],
        root: Path,
        pod_ip: str,
        settings: PodSettings,
        *,
        on_change: Callable[[], None],
        lookup: KeyLookup | None = None,
    ) -> None:
        self.pod = pod
        self.pod_ip = pod_ip
        self.settings = settings
        self.on_change = on_change
        self.lookup = lookup
        record = pod_record(pod, ip=pod_ip)
        self.namespace = record.namespace
        self.name = record.name
        self.sandbox = PodSandbox(SandboxFiles(root), record.host)
        spec = pod.get("spec") or {}
        self.policy = str(spec.get("restartPolicy") or "Always")
        grace = spec.get("terminationGracePeriodSeconds")
        self.grace = float(30 if grace is None else grace)
        self.start_time = now_iso()
        # Containers whose env or command could not be resolved: the pod does not start.
        self.config_errors: dict[str, str] = {}
        self.init_runners = [self._runner(c, init=True) for c in spec.get("initContainers") or []]
        self.runners = [self._runner(c, init=False) for c in spec.get("containers") or []]
        self._task: asyncio.Task[None] | None = None

    @property
    def files(self) -> SandboxFiles:
        return self.sandbox.files

    def _runner(self, container: Mapping[str, Any], *, init: bool) -> ContainerRunner:
        name = str(container["name"])
        ctx = DownwardContext(
            pod_ip=self.pod_ip, host_ip=self.settings.host_ip, allocatable=self.settings.allocatable
        )
        argv: tuple[str, ...] = ()
        try:
            env = container_env(
                self.pod, container, ctx, service_env=self.settings.service_env, lookup=self.lookup
            )
            args = [str(a) for a in (container.get("command") or [])]
            args += [str(a) for a in (container.get("args") or [])]
            argv = tuple(expand_all(args, env))
        except ValueError as err:
            env = {}
            self.config_errors[name] = str(err)
        full_env = {**self.settings.base_env, "HOSTNAME": self.sandbox.hostname, **env}
        launch = LaunchSpec(
            argv=argv,
            env=full_env,
            workdir=str(container.get("workingDir") or "/"),
            log=self.files.logs / f"{name}.log",
        )
        # An init container never restarts on its own under Always: it is re-run on failure.
        policy = "OnFailure" if init and self.policy == "Always" else self.policy
        return ContainerRunner(
            self.sandbox,
            container,
            launch,
            pod_ip=self.pod_ip,
            policy=policy,
            grace=self.grace,
            on_change=self.on_change,
            backoff=self.settings.backoff,
        )

    def write_service_account(self) -> None:
        spec = self.pod.get("spec") or {}
        if spec.get("automountServiceAccountToken") is False:
            return
        sa = self.files.service_account
        sa.mkdir(parents=True, exist_ok=True)
        write_in_place(sa / "token", self.settings.token)
        write_in_place(sa / "ca.crt", self.settings.ca_pem)
        write_in_place(sa / "namespace", self.namespace)

    def write_hosts(self, content: str) -> bool:
        return write_in_place(self.files.hosts, content)

    async def start(self) -> None:
        """Create the sandbox and start running containers (returns without waiting for them)."""
        self.sandbox.prepare()
        self.write_service_account()
        await self.sandbox.start()
        self._task = asyncio.create_task(self._run(), name=f"pod {self.namespace}/{self.name}")

    async def _run(self) -> None:
        if self.config_errors:
            return
        for runner in self.init_runners:
            view = await runner.run()
            if view.exit_code != 0:
                return
        await asyncio.gather(*(r.run() for r in self.runners))

    def views(self) -> tuple[list[ContainerView], list[ContainerView]]:
        init = [r.view for r in self.init_runners]
        containers = [
            _config_error(r.view, self.config_errors[r.view.name])
            if r.view.name in self.config_errors
            else r.view
            for r in self.runners
        ]
        return init, containers

    def status(self, previous_conditions: list[Mapping[str, Any]]) -> dict[str, Any]:
        init, containers = self.views()
        facts = PodFacts(
            pod_ip=self.pod_ip,
            host_ip=self.settings.host_ip,
            start_time=self.start_time,
            previous_conditions=previous_conditions,
        )
        return pod_status(facts, init, containers, now=now_iso())

    async def stop(self, grace: float | None = None) -> None:
        """SIGTERM every process of the pod, wait up to the grace period, then kill the PID
        namespace (and with it anything still alive)."""
        wait = self.grace if grace is None else grace
        for runner in self.init_runners + self.runners:
            runner.stop()
        self.sandbox.signal_all(signal.SIGTERM)
        if self._task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._task), wait)
        await self.sandbox.kill()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def remove_files(self) -> None:
        shutil.rmtree(self.files.root, ignore_errors=True)

    def read_log(self, container: str, *, previous: bool = False) -> bytes:
        """A container's output so far (or of its previous run)."""
        path = self.files.logs / (f"{container}.previous.log" if previous else f"{container}.log")
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return b""


def _config_error(view: ContainerView, message: str) -> ContainerView:
    return ContainerView(
        name=view.name,
        image=view.image,
        state="waiting",
        reason="CreateContainerConfigError",
        message=message,
    )
