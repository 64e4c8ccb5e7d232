"""pods/log: the server holds no logs, a kubelet runtime may plug in a source of them."""

from __future__ import annotations

from aiohttp import web

from devkube.server.errors import ApiError
from devkube.streaming.logs import LogRequest, LogSource, LogUnavailable, limited, log_request

__all__ = ["LogRequest", "LogSource", "log_request", "serve"]


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
    try:
        chunks = source(log)
    except LogUnavailable as missing:
        raise ApiError(400, "BadRequest", str(missing)) from None
    response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    async for chunk in limited(chunks, log.limit_bytes):
        await response.write(chunk)
    await response.write_eof()
    return response
