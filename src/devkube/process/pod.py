"""A pod as a group of local processes: its sandbox, its containers, their files."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkube.kubelet.dra import ContainerEdits
from devkube.process.container import (
    Backoff,
    ContainerEvents,
    ContainerRunner,
    LaunchSpec,
)
from devkube.process.downward import DownwardContext
from devkube.process.envvars import KeyLookup, container_env, expand_all
from devkube.process.hosts import pod_record
from devkube.process.sandbox import PodSandbox, SandboxFiles, write_in_place
from devkube.process.security import CONFIG_ERROR, non_root_error, run_as


def host_environment() -> dict[str, str]:
    """The host's environment with this interpreter's bin directory first on PATH, so pods
    find the tools installed beside the dev cluster (e.g. `ray` in its virtualenv)."""
    env = dict(os.environ)
    bin_dir = os.path.dirname(sys.executable)
    rest = [p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p and p != bin_dir]
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
    """Runs one pod's containers in its sandbox, reporting to the kubelet's events."""

    def __init__(
        self,
        pod: Mapping[str, Any],
        root: Path,
        pod_ip: str,
        settings: PodSettings,
        *,
        lookup: KeyLookup | None = None,
        netns: str | None = None,
        devices: Mapping[str, ContainerEdits] | None = None,
    ) -> None:
        self.pod = pod
        # DRA devices by container (kubelet/dra.py): one mount namespace per pod, so the
        # device nodes of every container are in it; the env is each container's own.
        self.devices = dict(devices or {})
        self.pod_ip = pod_ip
        self.settings = settings
        self.lookup = lookup
        record = pod_record(pod, ip=pod_ip)
        self.uid = str((pod.get("metadata") or {}).get("uid") or "")
        self.namespace = record.namespace
        self.name = record.name
        nodes = sorted({n for e in self.devices.values() for n in e.device_nodes})
        self.sandbox = PodSandbox(SandboxFiles(root), record.host, netns, device_nodes=nodes)
        spec = pod.get("spec") or {}
        self.policy = str(spec.get("restartPolicy") or "Always")
        grace = spec.get("terminationGracePeriodSeconds")
        self.grace = float(30 if grace is None else grace)
        # Containers whose env or command could not be resolved: they are never started.
        self.config_errors: dict[str, str] = {}
        self.init_runners = [self._runner(c) for c in spec.get("initContainers") or []]
        self.runners = {r.name: r for r in (self._runner(c) for c in spec.get("containers") or [])}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped = False

    @property
    def files(self) -> SandboxFiles:
        return self.sandbox.files

    def _runner(self, container: Mapping[str, Any]) -> ContainerRunner:
        name = str(container["name"])
        ctx = DownwardContext(
            pod_ip=self.pod_ip, host_ip=self.settings.host_ip, allocatable=self.settings.allocatable
        )
        argv: tuple[str, ...] = ()
        env: dict[str, str] = {}
        try:
            env = container_env(
                self.pod, container, ctx, service_env=self.settings.service_env, lookup=self.lookup
            )
            args = [str(a) for a in (container.get("command") or [])]
            args += [str(a) for a in (container.get("args") or [])]
            argv = tuple(expand_all(args, env))
        except ValueError as err:
            self.config_errors[name] = str(err)
        refused = non_root_error(self.pod, container)
        if refused:
            self.config_errors[name] = refused
        launch = LaunchSpec(
            argv=argv,
            env={
                **self.settings.base_env,
                "HOSTNAME": self.sandbox.hostname,
                **env,
                **(self.devices[name].env if name in self.devices else {}),
            },
            workdir=str(container.get("workingDir") or "/"),
            log=self.files.logs / f"{name}.log",
            user=run_as(self.pod.get("spec") or {}, container),
        )
        return ContainerRunner(
            self.sandbox,
            self.uid,
            container,
            launch,
            pod_ip=self.pod_ip,
            grace=self.grace,
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

    def _spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def start(self, events: ContainerEvents | None) -> None:
        """Create the sandbox, run init containers in order, then start every container."""
        self.sandbox.prepare()
        self.write_service_account()
        await self.sandbox.start()
        self._spawn(self._start(events))

    async def _start(self, events: ContainerEvents | None) -> None:
        if self.config_errors:
            # The kubelet's CreateContainerConfigError: nothing of the pod starts.
            if events is not None:
                for name, message in self.config_errors.items():
                    events.container_waiting(self.uid, name, CONFIG_ERROR, message)
            return
        for runner in self.init_runners:
            code = await runner.run_once(None)
            while code != 0 and self.policy != "Never" and not self._stopped:
                code = await runner.restart(None)
            if code != 0:
                for main in self.runners.values():
                    if events is not None and not self._stopped:
                        events.container_exited(self.uid, main.name, code, "InitError")
                return
        for runner in self.runners.values():
            self._spawn(runner.run_once(events))

    @property
    def ready(self) -> bool:
        """Every container is running and passes its readiness probe."""
        return bool(self.runners) and all(r.running and r.ready for r in self.runners.values())

    def restart(self, container: str, events: ContainerEvents | None) -> None:
        runner = self.runners.get(container)
        if runner is not None and not self._stopped:
            self._spawn(runner.restart(events))

    def kill(self, container: str, exit_code: int) -> None:
        runner = self.runners.get(container)
        if runner is not None:
            runner.kill(exit_code)

    async def stop(self, grace: float | None = None) -> None:
        """SIGTERM every process of the pod, wait up to the grace period, then kill the PID
        namespace (and with it anything still alive)."""
        if self._stopped:
            return
        self._stopped = True
        wait = self.grace if grace is None else grace
        for runner in [*self.init_runners, *self.runners.values()]:
            runner.stop()
        self.sandbox.signal_all(signal.SIGTERM)
        for _ in range(int(wait / 0.05) + 1):
            if not self.sandbox.pids():
                break
            await asyncio.sleep(0.05)
        await self.sandbox.kill()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def remove_files(self) -> None:
        shutil.rmtree(self.files.root, ignore_errors=True)

    def read_log(self, container: str) -> bytes:
        """A container's output so far, across its restarts."""
        try:
            return (self.files.logs / f"{container}.log").read_bytes()
        except FileNotFoundError:
            return b""
