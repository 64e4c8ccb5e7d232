"""Who answers `kubectl exec`, `attach` and `port-forward`: the kubelet's runtime when its
containers are real processes, otherwise a refusal that says why (not a 404 that looks like a
broken server)."""

from __future__ import annotations

from typing import Any

from devkube.server import ExecIO, ExecRequest, StreamBackend, StreamRefused
from devkube.server.endpoints.streaming import Connection

_METHODS = ("check_exec", "exec", "check_portforward", "open_port")
_SIMULATED = (
    "the dev cluster runs it on the simulated runtime, where containers are not processes "
    "(there is nothing to run a command in or connect to); start the dev cluster with "
    "`--runtime process` (Linux, root) for exec, attach, cp and port-forward"
)


class Refusing:
    """The stream backend of a runtime without processes."""

    def __init__(self, why: str = _SIMULATED) -> None:
        self.why = why

    def check_exec(self, request: ExecRequest, pod: dict[str, Any]) -> None:
        verb = "attach to" if request.attach else "exec into"
        raise StreamRefused(f'cannot {verb} pod "{request.pod}": {self.why}')

    async def exec(self, request: ExecRequest, io: ExecIO) -> int:
        self.check_exec(request, {})
        return 1

    def check_portforward(self, namespace: str, pod: dict[str, Any]) -> None:
        raise StreamRefused(f'cannot port-forward to pod "{pod["metadata"]["name"]}": {self.why}')

    async def open_port(self, namespace: str, pod: dict[str, Any], port: int) -> Connection:
        self.check_portforward(namespace, pod)
        raise AssertionError("unreachable")


def stream_backend(runtime: object) -> StreamBackend:
    """The runtime itself when it can exec and open ports, else a `Refusing` backend."""
    if all(callable(getattr(runtime, name, None)) for name in _METHODS):
        backend: StreamBackend = runtime  # type: ignore[assignment]
        return backend
    return Refusing()
