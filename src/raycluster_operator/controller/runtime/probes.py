"""/healthz and /readyz for the kubelet, and the small aiohttp server helper both ports use.

Live while the event loop answers; ready once the caches have synced (a replica that is not
the leader is still ready: it is a warm standby).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web


def probes_app(live: Callable[[], bool], ready: Callable[[], bool]) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok") if live() else web.Response(status=500, text="unhealthy")

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(text="ok") if ready() else web.Response(status=503, text="not ready")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def parse_addr(addr: str) -> tuple[str, int]:
    """``:8080`` -> all interfaces; ``127.0.0.1:0`` -> any free port on loopback."""
    host, _, port = addr.rpartition(":")
    return (host or "0.0.0.0"), int(port)


class HttpServer:
    """An aiohttp app on one address, started and stopped with the manager."""

    def __init__(self, app: web.Application, addr: str) -> None:
        self.app = app
        self.addr = addr
        self._runner = web.AppRunner(app, access_log=None)
        self.port = 0

    async def start(self) -> None:
        host, port = parse_addr(self.addr)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        addresses = self._runner.addresses
        self.port = int(addresses[0][1]) if addresses else port

    async def stop(self) -> None:
        await self._runner.cleanup()
