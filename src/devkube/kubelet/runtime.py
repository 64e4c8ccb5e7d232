"""The seam between the kubelet and what actually "runs" a pod's containers.

The kubelet owns the pod lifecycle (IPs, status, restart policy, graceful deletion) and asks a
`Runtime` to start, kill and stop containers; the runtime reports back through `PodEvents`.
`SimulatedRuntime` starts every container after a delay and never exits one on its own, except
a container whose command exits at once (a bad command: `false`, or a shell line whose first
statement is `exit N`), which exits right after it starts, as it would for real; a
process runtime (containers as local processes) implements the same protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class RuntimeContext:
    """What a runtime may need to know about its cluster when it is created (after the API
    server is up): a process runtime mounts the token and CA where in-cluster clients look."""

    delay: float
    api_url: str
    token: str
    ca_pem: bytes
    # The process runtime's pod network (process.network.ClusterNetwork) when the cluster
    # made one; None means pods share the host's network.
    network: Any = None


class PodEvents(Protocol):
    """How a runtime tells the kubelet about containers (keyed by pod uid)."""

    def container_running(self, uid: str, container: str, *, ready: bool = True) -> None: ...

    def container_ready(self, uid: str, container: str, ready: bool) -> None: ...

    def container_exited(
        self, uid: str, container: str, exit_code: int, reason: str = ""
    ) -> None: ...

    def container_waiting(self, uid: str, container: str, reason: str, message: str) -> None:
        """The container cannot be created (CreateContainerConfigError and its message)."""


class Runtime(Protocol):
    """A runtime that has real output may also define `logs(request: server.LogRequest) ->
    AsyncIterator[bytes]`; the kubelet then serves `kubectl logs` from it."""

    def start_pod(self, pod: Mapping[str, Any], pod_ip: str, events: PodEvents) -> None:
        """Start every container of the pod (init containers have completed); returns at once."""

    def restart_container(self, pod: Mapping[str, Any], container: str, events: PodEvents) -> None:
        """Start an exited container again (restartPolicy Always/OnFailure)."""

    def kill_container(
        self, pod: Mapping[str, Any], container: str, exit_code: int, events: PodEvents
    ) -> None:
        """Make the container exit (fault injection); its exit is reported through events."""

    async def stop_pod(self, pod: Mapping[str, Any], grace: float) -> None:
        """Stop the pod's containers, within `grace` seconds; returns when they are gone."""

    async def close(self) -> None: ...


def _uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid", ""))


def _container(pod: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    containers = (pod.get("spec") or {}).get("containers") or []
    return next((c for c in containers if c.get("name") == name), {})


def _names(pod: Mapping[str, Any]) -> list[str]:
    return [str(c.get("name", "")) for c in (pod.get("spec") or {}).get("containers") or []]


#: The first statement of a shell line that ends the container at once.
_EXIT = re.compile(r"exit(?:\s+(\d+))?")
#: Commands that end at once with code 1.
_FALSE = frozenset({"false", "/bin/false", "/usr/bin/false"})
#: Shells whose `-c` argument is the line they run.
_SHELLS = frozenset({"sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/bash", "/usr/bin/sh"})


def exit_code_at_start(container: Mapping[str, Any]) -> int | None:
    """The exit code of a container whose command exits at once (None: it keeps running).

    A shell line (`bash -c LINE`) exits at once when its first statement is `exit [N]`
    (`exit 3 && ray start ...` exits with 3); any other command when it is `false`. The
    simulation runs no shell: it recognises the one mistake tests need, a command that ends
    before the program it was meant to start.
    """
    words = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
    if not words:
        return None
    if words[0] in _SHELLS and "-c" in words:
        rest = [w for w in words[words.index("-c") + 1 :] if w != "--"]
        first = re.split(r"&&|\|\||;|\n", rest[0] if rest else "", maxsplit=1)[0]
        match = _EXIT.fullmatch(first.strip())
        return int(match.group(1) or 0) if match else None
    return 1 if words[0] in _FALSE else None


def simulated_runtime(context: RuntimeContext) -> SimulatedRuntime:
    return SimulatedRuntime(context.delay)


class SimulatedRuntime:
    """Containers "start" `delay` seconds after they are asked to, become ready at once, and
    run until killed."""

    def __init__(self, delay: float = 0.2) -> None:
        self.delay = delay
        self._tasks: dict[str, set[asyncio.Task[None]]] = {}

    def _later(self, uid: str, action: Any, delay: float | None = None) -> None:
        async def run() -> None:
            await asyncio.sleep(self.delay if delay is None else delay)
            action()

        task = asyncio.create_task(run())
        tasks = self._tasks.setdefault(uid, set())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def start_pod(self, pod: Mapping[str, Any], pod_ip: str, events: PodEvents) -> None:
        uid = _uid(pod)

        def started() -> None:
            for name in _names(pod):
                self._run(pod, name, events)

        self._later(uid, started)

    def restart_container(self, pod: Mapping[str, Any], container: str, events: PodEvents) -> None:
        uid = _uid(pod)
        # A container that exits at once is restarted no faster than once a second (the real
        # kubelet's CrashLoopBackOff starts at 10 s), so a bad command does not spin.
        exits = exit_code_at_start(_container(pod, container)) is not None
        delay = max(self.delay, 1.0) if exits else None
        self._later(uid, lambda: self._run(pod, container, events), delay)

    def _run(self, pod: Mapping[str, Any], name: str, events: PodEvents) -> None:
        uid = _uid(pod)
        code = exit_code_at_start(_container(pod, name))
        events.container_running(uid, name, ready=code is None)
        if code is not None:
            events.container_exited(uid, name, code, "Error" if code else "Completed")

    def kill_container(
        self, pod: Mapping[str, Any], container: str, exit_code: int, events: PodEvents
    ) -> None:
        events.container_exited(_uid(pod), container, exit_code, "Error" if exit_code else "")

    async def stop_pod(self, pod: Mapping[str, Any], grace: float) -> None:
        for task in self._tasks.pop(_uid(pod), set()):
            task.cancel()

    async def close(self) -> None:
        tasks = [t for group in self._tasks.values() for t in group]
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
