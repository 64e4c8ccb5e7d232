"""`pods/{name}/log`: container output, when a kubelet runtime keeps some.

[process runtime integration] The server stores objects, not logs; a runtime that runs real
processes hands the server a `LogSource`, and `kubectl logs [-f]` reads through it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from .errors import ApiError, bad_request, not_found
from .handlers import error_response

# (namespace, pod name, container or None for the first) -> output so far, None if unknown.
LogSource = Callable[[str, str, str | None], bytes | None]

_FOLLOW_POLL = 0.2


def _tail(data: bytes, lines: int | None, limit: int | None) -> bytes:
    if lines is not None:
        parts = data.splitlines(keepends=True)
        data = b"".join(parts[-lines:]) if lines > 0 else b""
    if limit is not None:
        data = data[:limit]
    return data


def _int(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise bad_request(f"{name} must be an integer") from None


def pod_log_handler(
    source: Callable[[], LogSource | None],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        namespace = request.match_info["namespace"]
        name = request.match_info["name"]
        container = request.query.get("container") or None
        read = source()
        try:
            lines, limit = _int(request, "tailLines"), _int(request, "limitBytes")
            data = read(namespace, name, container) if read is not None else None
            if data is None:
                raise not_found("pods", "", name)
        except ApiError as error:
            return error_response(error)
        data = _tail(data, lines, limit)
        if request.query.get("follow") not in ("true", "1"):
            return web.Response(body=data, content_type="text/plain")
        response = web.StreamResponse()
        response.content_type = "text/plain"
        await response.prepare(request)
        await response.write(data)
        seen = len(read(namespace, name, container) or b"") if read is not None else 0
        while read is not None:
            await asyncio.sleep(_FOLLOW_POLL)
            current = read(namespace, name, container)
            if current is None:
                break
            if len(current) > seen:
                await response.write(current[seen:])
                seen = len(current)
        await response.write_eof()
        return response

    return handle
