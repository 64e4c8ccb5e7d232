"""The kubelet API that kube-apiserver proxies `kubectl logs`, `exec`, `attach` and
`port-forward` to, on Kubernetes' control plane (docs/design.md §8.2).

One HTTPS server serves every node of the dev cluster (the apiserver names the pod in the
path, and one `Kubelet` runs them all); each node's Node says where it is (its InternalIP and
`status.daemonEndpoints.kubeletEndpoint.Port`). Its certificate is from the cluster CA, which
kube-apiserver checks (--kubelet-certificate-authority), and a caller must present a client
certificate from the same CA (kube-apiserver's --kubelet-client-certificate): without one it
gets a 401, as a real kubelet's authentication gives.

Exec, attach and port-forward arrive as the client sent them: each Node declares
`ExtendWebSocketsToKubelet` (as a v1.37 kubelet does), so kube-apiserver proxies the WebSocket
upgrade unchanged instead of translating it to SPDY (pkg/registry/core/pod/rest/
subresources.go), and the sessions are those the dev API server speaks
(`devkube.streaming.sessions`).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from typing import Any

from aiohttp import web

from devkube.kubelet.agent import Kubelet
from devkube.kubelet.streams import stream_backend
from devkube.streaming.logs import LogUnavailable, limited, log_request
from devkube.streaming.sessions import (
    ExecRequest,
    StreamRefused,
    flag,
    serve_exec,
    serve_portforward,
)

log = logging.getLogger(__name__)

#: What the Node's status declares so that kube-apiserver proxies WebSockets unchanged.
DECLARED_FEATURES = ("ExtendWebSocketsToKubelet",)


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n")


@web.middleware
async def _authenticated(
    request: web.Request, handler: Callable[[web.Request], Any]
) -> web.StreamResponse:
    """Only a caller whose client certificate the cluster CA signed (the TLS layer has
    verified any certificate presented; CERT_OPTIONAL lets one without through to here)."""
    transport = request.transport
    peer = transport.get_extra_info("peercert") if transport is not None else None
    if not peer:
        return _text(401, "Unauthorized")
    answer: web.StreamResponse = await handler(request)
    return answer


class KubeletApi:
    """Started before the nodes register (they carry its port); `kubelet` is set once the
    kubelet runs, and requests before that are answered 503."""

    def __init__(self, tls: ssl.SSLContext, hosts: tuple[str, ...] = ("127.0.0.1",)) -> None:
        self.tls = tls
        self.hosts = hosts
        self.port = 0
        self.kubelet: Kubelet | None = None
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[_authenticated])
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        for verb in ("exec", "attach"):
            path = f"/{verb}/{{namespace}}/{{pod}}/{{container}}"
            app.router.add_route("GET", path, self._exec)
            app.router.add_route("POST", path, self._exec)
        app.router.add_route("GET", "/portForward/{namespace}/{pod}", self._portforward)
        app.router.add_route("POST", "/portForward/{namespace}/{pod}", self._portforward)
        app.router.add_get("/healthz", self._healthz)
        return app

    async def start(self) -> None:
        # handler_cancellation: a follow or a session whose caller hung up ends at once.
        self._runner = web.AppRunner(
            self.app(), handle_signals=False, access_log=None, handler_cancellation=True
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, self.hosts[0], 0, ssl_context=self.tls).start()
        self.port = int(self._runner.addresses[0][1])
        for host in self.hosts[1:]:
            await web.TCPSite(self._runner, host, self.port, ssl_context=self.tls).start()
        log.info("kubelet API on %s port %d", ",".join(self.hosts), self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def node_status(self) -> dict[str, Any]:
        """What each Node's status carries so that kube-apiserver finds this server."""
        return {
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
            "declaredFeatures": list(DECLARED_FEATURES),
        }

    # --- handlers ------------------------------------------------------------------------

    def _running(self) -> Kubelet:
        if self.kubelet is None:
            raise web.HTTPServiceUnavailable(text="the kubelet is starting\n")
        return self.kubelet

    def _pod(self, kubelet: Kubelet, request: web.Request) -> dict[str, Any]:
        namespace, name = request.match_info["namespace"], request.match_info["pod"]
        pod = kubelet.pods.cache.get((namespace, name))
        if pod is None:
            raise web.HTTPNotFound(text=f'pod "{namespace}/{name}" not found on this node\n')
        return pod

    async def _healthz(self, request: web.Request) -> web.Response:
        return _text(200, "ok")

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        kubelet = self._running()
        self._pod(kubelet, request)
        info = request.match_info
        try:
            wanted = log_request(request.query, info["namespace"], info["pod"], info["container"])
        except ValueError as error:
            return _text(400, f"invalid log options: {error}")
        try:
            chunks = kubelet.log_source(wanted)
        except LogUnavailable as missing:
            return _text(400, str(missing))
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        async for chunk in limited(chunks, wanted.limit_bytes):
            await response.write(chunk)
        await response.write_eof()
        return response

    async def _exec(self, request: web.Request) -> web.StreamResponse:
        kubelet = self._running()
        pod = self._pod(kubelet, request)
        attach = request.path.startswith("/attach/")
        command = tuple(request.query.getall("command", []))
        exe = ExecRequest(
            namespace=request.match_info["namespace"],
            pod=request.match_info["pod"],
            container=request.match_info["container"],
            command=command,
            # kube-apiserver renames kubectl's stdin/stdout/stderr for the kubelet
            # (pkg/registry/core/pod/strategy.go, streamParams).
            stdin=flag(request, "input"),
            stdout=flag(request, "output"),
            stderr=flag(request, "error"),
            tty=flag(request, "tty"),
            attach=attach,
        )
        backend = stream_backend(kubelet.runtime)
        try:
            if not attach and not command:
                raise StreamRefused("you must specify at least 1 command")
            backend.check_exec(exe, pod)
            return await serve_exec(request, exe, backend)
        except StreamRefused as refused:
            return _text(refused.code, refused.message)

    async def _portforward(self, request: web.Request) -> web.StreamResponse:
        kubelet = self._running()
        pod = self._pod(kubelet, request)
        namespace = request.match_info["namespace"]
        backend = stream_backend(kubelet.runtime)
        try:
            backend.check_portforward(namespace, pod)
            return await serve_portforward(
                request, lambda port: backend.open_port(namespace, pod, port)
            )
        except StreamRefused as refused:
            return _text(refused.code, refused.message)
