"""Bearer-token authentication, the one scheme every client we serve can speak."""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from .errors import ApiError

ANONYMOUS_PATHS = frozenset({"/healthz", "/readyz", "/livez", "/version"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def token_middleware(token: str) -> Middleware:
    expected = token.encode()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in ANONYMOUS_PATHS:
            # [process runtime integration] the auth scheme is case-insensitive (RFC 7235): the
            # official client's in-cluster config sends "bearer <token>".
            scheme, _, credentials = request.headers.get("Authorization", "").strip().partition(" ")
            given = credentials.strip().encode()
            if scheme.lower() != "bearer" or not hmac.compare_digest(given, expected):
                error = unauthorized()
                return web.Response(
                    body=json.dumps(error.status()).encode(),
                    status=401,
                    content_type="application/json",
                )
        return await handler(request)

    return check
