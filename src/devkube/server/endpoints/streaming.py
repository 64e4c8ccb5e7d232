"""pods/exec, pods/attach and pods/portforward over WebSocket, as kubectl 1.30+ speaks them.

The API server only frames bytes; what runs the command or opens the port is a `StreamBackend`
the kubelet plugs in (as it plugs in a log source). Exec and attach use the channel protocol
(`v5.channel.k8s.io`, and `v4` without the stdin-close signal): every binary message starts with
a channel byte (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize; 255 in v5 half-closes the channel
named by the next byte), and the command's end is a `Status` on the error channel, which kubectl
turns into its own exit code. Port-forward is a SPDY/3.1 session tunnelled through the
WebSocket (`SPDY/3.1+portforward.k8s.io`), one pair of SPDY streams (error, data) per connection.

Refusals happen before the upgrade, as a `Status`: kubectl then retries over SPDY, which this
server does not speak, and so prints "unable to upgrade connection: <the message>".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import WSMsgType, web

from devkube.server.endpoints import spdy
from devkube.server.errors import ApiError

log = logging.getLogger(__name__)

SUBRESOURCES = frozenset({"exec", "attach", "portforward"})
CHANNEL_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
PORTFORWARD_PROTOCOLS = ("SPDY/3.1+portforward.k8s.io",)
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
_CHUNK = 32 * 1024
_MAX_MESSAGE = 16 * 1024 * 1024


def verb(method: str) -> str:
    """The authorization verb of a streaming request: kubectl opens exec, attach and
    port-forward with GET (WebSocket) or POST (SPDY); both are `create` on the subresource,
    as in Kubernetes RBAC."""
    del method
    return "create"


@dataclass(frozen=True)
class ExecRequest:
    """What `kubectl exec`/`attach` asked for (query parameters of pods/<name>/exec)."""

    namespace: str
    pod: str
    container: str
    command: tuple[str, ...]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool
    attach: bool = False


class ExecIO(Protocol):
    """The client's end of a running exec, as the backend sees it."""

    async def read_stdin(self) -> bytes:
        """The next bytes the client typed or piped; b"" once stdin is closed."""
        ...

    async def write(self, channel: int, data: bytes) -> None: ...

    async def next_resize(self) -> tuple[int, int]:
        """The terminal's next (width, height) as the client reports it."""
        ...


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class StreamBackend(Protocol):
    """What runs the commands and opens the ports: raise `StreamRefused` (before the upgrade)
    when it cannot, with a message that says why."""

    def check_exec(self, request: ExecRequest, pod: dict[str, Any]) -> None: ...

    async def exec(self, request: ExecRequest, io: ExecIO) -> int:
        """Run it to its end; the exit code."""
        ...

    def check_portforward(self, namespace: str, pod: dict[str, Any]) -> None: ...

    async def open_port(self, namespace: str, pod: dict[str, Any], port: int) -> Connection: ...


class StreamRefused(ApiError):
    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(code, "BadRequest", message)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("1", "true", "yes")


def _containers(pod: dict[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    return [
        str(c.get("name"))
        for key in ("containers", "initContainers", "ephemeralContainers")
        for c in spec.get(key) or []
    ]


def _check_pod(pod: dict[str, Any], what: str) -> None:
    name = pod["metadata"]["name"]
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise StreamRefused(
            f"cannot {what} a container in a completed pod; current phase is {phase}"
        )
    if not (pod.get("spec") or {}).get("nodeName"):
        raise StreamRefused(f"pod {name} does not have a host assigned")


def _wants_websocket(request: web.Request, offered: tuple[str, ...]) -> bool:
    if request.headers.get("Upgrade", "").lower() != "websocket":
        return False
    asked = {
        p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()
    }
    return bool(asked & set(offered))


def _websocket_only(offered: tuple[str, ...]) -> StreamRefused:
    return StreamRefused(
        "this dev API server streams over WebSocket only (subprotocols "
        f"{', '.join(offered)}); SPDY upgrades are not supported: use kubectl 1.31 or newer "
        "without KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false / KUBECTL_PORT_FORWARD_WEBSOCKETS=false"
    )


def exec_request(request: web.Request, namespace: str, pod: dict[str, Any]) -> ExecRequest:
    attach = request.path.rstrip("/").endswith("/attach")
    names = _containers(pod)
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
        stdin=_flag(request, "stdin"),
        stdout=_flag(request, "stdout"),
        stderr=_flag(request, "stderr"),
        tty=_flag(request, "tty"),
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
        if not _wants_websocket(request, PORTFORWARD_PROTOCOLS):
            raise _websocket_only(PORTFORWARD_PROTOCOLS)
        ws = web.WebSocketResponse(protocols=PORTFORWARD_PROTOCOLS, max_msg_size=_MAX_MESSAGE)
        await ws.prepare(request)
        await PortForward(ws, lambda port: backend.open_port(namespace, pod, port)).run()
        return ws
    exe = exec_request(request, namespace, pod)
    _check_pod(pod, "attach to" if exe.attach else "exec into")
    backend.check_exec(exe, pod)
    if not _wants_websocket(request, CHANNEL_PROTOCOLS):
        raise _websocket_only(CHANNEL_PROTOCOLS)
    ws = web.WebSocketResponse(protocols=CHANNEL_PROTOCOLS, max_msg_size=_MAX_MESSAGE)
    await ws.prepare(request)
    await ChannelSession(ws, exe).run(backend)
    return ws


def exit_status(code: int) -> dict[str, Any]:
    """The error channel's last word: kubectl exits with `code` when it is not 0."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: exit status {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def failure_status(message: str) -> dict[str, Any]:
    return {"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError"}


class ChannelSession:
    """One exec/attach over the channel protocol."""

    def __init__(self, ws: web.WebSocketResponse, request: ExecRequest) -> None:
        self.ws = ws
        self.request = request
        self.v5 = ws.ws_protocol == CHANNEL_PROTOCOLS[0]
        self._stdin: asyncio.Queue[bytes] = asyncio.Queue()
        self._resizes: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        self._send_lock = asyncio.Lock()
        self._closed = False

    async def read_stdin(self) -> bytes:
        return await self._stdin.get()

    async def next_resize(self) -> tuple[int, int]:
        return await self._resizes.get()

    async def write(self, channel: int, data: bytes) -> None:
        if self._closed or not data:
            return
        async with self._send_lock:
            for at in range(0, len(data), _CHUNK):
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await self.ws.send_bytes(bytes([channel]) + data[at : at + _CHUNK])

    async def _read_loop(self) -> None:
        async for message in self.ws:
            if message.type != WSMsgType.BINARY or not message.data:
                continue
            raw: bytes = message.data
            channel, payload = raw[0], raw[1:]
            if channel == STDIN and payload:
                self._stdin.put_nowait(payload)
            elif channel == RESIZE and payload:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    size = json.loads(payload)
                    self._resizes.put_nowait((int(size["Width"]), int(size["Height"])))
            elif channel == CLOSE and self.v5 and payload[:1] == bytes([STDIN]):
                self._stdin.put_nowait(b"")
        # The client went away: whatever reads stdin sees it closed.
        self._stdin.put_nowait(b"")

    async def run(self, backend: StreamBackend) -> None:
        reader = asyncio.create_task(self._read_loop())
        work = asyncio.create_task(backend.exec(self.request, self))
        try:
            done, _ = await asyncio.wait({reader, work}, return_when=asyncio.FIRST_COMPLETED)
            if work in done:
                try:
                    status = exit_status(work.result())
                except ApiError as refused:
                    status = failure_status(refused.message)
                except Exception as error:  # the command could not run: say so, not hang up
                    log.exception("exec in pod %s failed", self.request.pod)
                    status = failure_status(f"command could not run: {error}")
                await self.write(ERROR, json.dumps(status).encode())
            else:
                # The client is gone: the command goes too.
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await work
        finally:
            self._closed = True
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.ws.close()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader


Opener = Callable[[int], Awaitable[Connection]]


@dataclass
class _Pair:
    port: int
    error_id: int = 0
    data_id: int = 0
    writer: asyncio.StreamWriter | None = None
    task: asyncio.Task[None] | None = None
    inbound: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)


class PortForward:
    """One `kubectl port-forward` session: every local connection is a pair of SPDY streams
    with the same requestID, and becomes one TCP connection to the pod's port."""

    def __init__(self, ws: web.WebSocketResponse, opener: Opener) -> None:
        self.ws = ws
        self.opener = opener
        self.codec = spdy.Codec()
        self._pairs: dict[str, _Pair] = {}
        self._by_stream: dict[int, _Pair] = {}
        self._send_lock = asyncio.Lock()

    async def _send(self, frame: bytes) -> None:
        async with self._send_lock:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.ws.send_bytes(frame)

    async def run(self) -> None:
        try:
            async for message in self.ws:
                if message.type != WSMsgType.BINARY:
                    continue
                try:
                    frames = self.codec.feed(message.data)
                except (spdy.ProtocolError, ValueError, IndexError) as error:
                    log.info("port-forward: bad SPDY from the client: %s", error)
                    break
                for frame in frames:
                    await self._on_frame(frame)
        finally:
            for pair in list(self._pairs.values()):
                if pair.task is not None:
                    pair.task.cancel()
                if pair.writer is not None:
                    pair.writer.close()
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.ws.close()

    async def _on_frame(self, frame: spdy.Frame) -> None:
        if frame.kind == spdy.SYN_STREAM:
            await self._on_stream(frame)
        elif frame.kind == 0:
            pair = self._by_stream.get(frame.stream_id)
            if pair is None or frame.stream_id != pair.data_id:
                return
            # Bytes may come before the pod's port is connected: they wait in order.
            if frame.data:
                pair.inbound.put_nowait(frame.data)
            if frame.fin:
                pair.inbound.put_nowait(None)
        elif frame.kind == spdy.RST_STREAM:
            pair = self._by_stream.get(frame.stream_id)
            if pair is not None and frame.stream_id == pair.data_id:
                pair.inbound.put_nowait(None)
                if pair.writer is not None:
                    pair.writer.close()
        elif frame.kind == spdy.PING:
            await self._send(spdy.ping(frame.data))

    async def _on_stream(self, frame: spdy.Frame) -> None:
        headers = frame.headers
        request_id = headers.get("requestid", str(frame.stream_id))
        try:
            port = int(headers.get("port", ""))
        except ValueError:
            await self._send(spdy.rst_stream(frame.stream_id, 1))
            return
        pair = self._pairs.setdefault(request_id, _Pair(port))
        self._by_stream[frame.stream_id] = pair
        kind = headers.get("streamtype", "")
        await self._send(self.codec.syn_reply(frame.stream_id))
        if kind == "error":
            pair.error_id = frame.stream_id
        elif kind == "data":
            pair.data_id = frame.stream_id
        if pair.error_id and pair.data_id and pair.task is None:
            pair.task = asyncio.create_task(self._forward(request_id, pair))

    async def _forward(self, request_id: str, pair: _Pair) -> None:
        try:
            reader, pair.writer = await self.opener(pair.port)
        except (OSError, ApiError) as error:
            why = error.message if isinstance(error, ApiError) else str(error)
            message = f"error forwarding port {pair.port}: {why}"
            await self._send(spdy.data(pair.error_id, message.encode(), fin=True))
            await self._send(spdy.data(pair.data_id, b"", fin=True))
            self._forget(request_id, pair)
            return
        upstream = asyncio.create_task(self._upstream(pair, pair.writer))
        try:
            while True:
                chunk = await reader.read(_CHUNK)
                if not chunk:
                    break
                await self._send(spdy.data(pair.data_id, chunk))
        except (ConnectionError, OSError):
            pass
        finally:
            upstream.cancel()
            await self._send(spdy.data(pair.data_id, b"", fin=True))
            await self._send(spdy.data(pair.error_id, b"", fin=True))
            pair.writer.close()
            self._forget(request_id, pair)

    async def _upstream(self, pair: _Pair, writer: asyncio.StreamWriter) -> None:
        """The client's bytes to the pod; its FIN half-closes the connection."""
        while (chunk := await pair.inbound.get()) is not None:
            writer.write(chunk)
            try:
                await writer.drain()
            except (ConnectionError, OSError):
                return
        if writer.can_write_eof():
            with contextlib.suppress(OSError):
                writer.write_eof()

    def _forget(self, request_id: str, pair: _Pair) -> None:
        self._pairs.pop(request_id, None)
        self._by_stream.pop(pair.error_id, None)
        self._by_stream.pop(pair.data_id, None)
