"""pods/exec, pods/attach and pods/portforward on the dev API server: the sessions themselves
are `devkube.streaming.sessions` (the kubelet API speaks the same); this reads the API's query
parameters and checks the pod before the upgrade."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from devkube.streaming.sessions import (
    Connection,
    ExecIO,
    ExecRequest,
    StreamBackend,
    StreamRefused,
    containers,
    flag,
    serve_exec,
    serve_portforward,
)

__all__ = [
    "SUBRESOURCES",
    "Connection",
    "ExecIO",
    "ExecRequest",
    "StreamBackend",
    "StreamRefused",
    "exec_request",
    "serve",
    "verb",
]

SUBRESOURCES = frozenset({"exec", "attach", "portforward"})


def verb(method: str) -> str:
    """The authorization verb of a streaming request: kubectl opens exec, attach and
    port-forward with GET (WebSocket) or POST (SPDY); both are `create` on the subresource,
    as in Kubernetes RBAC."""
    del method
    return "create"


def _check_pod(pod: dict[str, Any], what: str) -> None:
    name = pod["metadata"]["name"]
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise StreamRefused(
            f"cannot {what} a container in a completed pod; current phase is {phase}"
        )
    if not (pod.get("spec") or {}).get("nodeName"):
        raise StreamRefused(f"pod {name} does not have a host assigned")


def exec_request(request: web.Request, namespace: str, pod: dict[str, Any]) -> ExecRequest:
    attach = request.path.rstrip("/").endswith("/attach")
    names = containers(pod)
    container = request.query.get("container") or (names[0] if names else "")
    if container not in names:
        raise StreamRefused(f"container {container} is not valid for pod {pod['metadata']['name']}")
    command = tuple(request.query.getall("command", []))
    if not attach and not command:
        raise StreamRefused("you must specify at least 1 command")
    return ExecRequest(
        namespace=namespace,
        pod=str(pod["metadata"]["name"]),
        container=container,
        command=command,
        stdin=flag(request, "stdin"),
        stdout=flag(request, "stdout"),
        stderr=flag(request, "stderr"),
        tty=flag(request, "tty"),
        attach=attach,
    )


async def serve(
    request: web.Request,
    backend: StreamBackend | None,
    subresource: str,
    namespace: str,
    pod: dict[str, Any],
) -> web.StreamResponse:
    if backend is None:
        raise StreamRefused(
            f'cannot {subresource} pod "{pod["metadata"]["name"]}": this dev cluster has no '
            "runtime that runs containers"
        )
    if subresource == "portforward":
        _check_pod(pod, "port-forward to")
        backend.check_portforward(namespace, pod)
        return await serve_portforward(
            request, lambda port: backend.open_port(namespace, pod, port)
        )
    exe = exec_request(request, namespace, pod)
    _check_pod(pod, "attach to" if exe.attach else "exec into")
    backend.check_exec(exe, pod)
    return await serve_exec(request, exe, backend)
