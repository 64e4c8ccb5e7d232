"""pods/log: the server holds no logs, a kubelet runtime may plug in a source of them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from aiohttp import web

from devkube.server.errors import ApiError


@dataclass(frozen=True)
class LogRequest:
    """What `kubectl logs` asked for (query parameters of GET pods/<name>/log)."""

    namespace: str
    pod: str
    container: str | None
    follow: bool
    tail_lines: int | None
    previous: bool


LogSource = Callable[[LogRequest], AsyncIterator[bytes]]


async def serve(
    request: web.Request, source: LogSource | None, log: LogRequest
) -> web.StreamResponse:
    if source is None:
        raise ApiError(
            400,
            "BadRequest",
            f'container logs of pod "{log.pod}" are not available: '
            "this dev cluster has no log source",
        )
    response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    async for chunk in source(log):
        await response.write(chunk)
    await response.write_eof()
    return response
