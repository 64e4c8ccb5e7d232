"""A stand-in for Ray Serve's REST API and proxies, for RayService tests on the simulated
runtime, where no Ray runs: an aiohttp server on 127.0.0.1 that the test drives, as KubeRay's
tests drive a fake dashboard client's status.

Per RayCluster (the operator's resolvers point at ``/clusters/<name>`` and, for each pod's
proxy, ``/proxies/<name>/<host>``, a slice host by its hostname, another pod by its name):
``GET /api/serve/applications/`` answers the applications as the test set them; ``PUT``
records the config and starts every application it names ``DEPLOYING``, as Serve does; a
pod's ``/-/healthz`` answers 200 unless its cluster or its host is in ``unhealthy_proxies``
(Serve runs a proxy only where a replica is: a test takes a slice's host out by hostname).
The test plays Serve: ``set_status(cluster, "RUNNING")``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class ServeApiStandIn:
    #: cluster -> application name -> {status, message, deployments}
    apps: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: cluster -> every config PUT to it, in order.
    deployed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Clusters and hosts (hostname, else pod name) whose proxies do not answer.
    unhealthy_proxies: set[str] = field(default_factory=set)
    #: Every host whose proxy was asked, by cluster.
    proxies_asked: dict[str, set[str]] = field(default_factory=dict)
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> ServeApiStandIn:
        app = web.Application()
        app.router.add_get("/clusters/{cluster}/api/serve/applications/", self._get)
        app.router.add_put("/clusters/{cluster}/api/serve/applications/", self._put)
        app.router.add_get("/proxies/{cluster}/{host}/-/healthz", self._healthz)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- Serve's part ---------------------------------------------------------------------

    def set_status(self, cluster: str, status: str, message: str = "") -> None:
        """Every application of the cluster (and its deployments) moves to ``status``."""
        deployment = {"RUNNING": "HEALTHY", "DEPLOYING": "UPDATING"}.get(status, "UNHEALTHY")
        for app in self.apps.get(cluster, {}).values():
            app["status"] = status
            app["message"] = message
            for dep in app["deployments"].values():
                dep["status"] = deployment
                dep["message"] = message

    # -- the API ------------------------------------------------------------------------

    async def _get(self, request: web.Request) -> web.Response:
        found = self.apps.get(request.match_info["cluster"], {})
        return web.json_response({"deploy_mode": "MULTI_APP", "applications": found})

    async def _put(self, request: web.Request) -> web.Response:
        cluster = request.match_info["cluster"]
        config = await request.json()
        self.deployed.setdefault(cluster, []).append(config)
        apps = self.apps.setdefault(cluster, {})
        for application in config.get("applications") or []:
            name = str(application.get("name") or "default")
            deployments = {
                str(d["name"]): {"status": "UPDATING", "message": ""}
                for d in application.get("deployments") or [{"name": "Model"}]
            }
            apps[name] = {"status": "DEPLOYING", "message": "", "deployments": deployments}
        return web.Response(status=200)

    async def _healthz(self, request: web.Request) -> web.Response:
        cluster, host = request.match_info["cluster"], request.match_info["host"]
        self.proxies_asked.setdefault(cluster, set()).add(host)
        if cluster in self.unhealthy_proxies or host in self.unhealthy_proxies:
            return web.Response(status=503, text="unhealthy")
        return web.Response(status=200, text="success")
