"""Ray Serve's REST API on the head's dashboard and its proxies' health, as the RayService
controller uses them (docs/design.md §12): read the applications
(``GET /api/serve/applications/``), deploy a config (``PUT /api/serve/applications/``, which
Serve applies declaratively: the same config twice is a no-op), and ask a proxy
``/-/healthz``.

Where they are reached is a resolver's choice, as for the Jobs API (§11, 11k): the head
service's DNS name inside a cluster (``service``), the head pod's IP from the host
(``head-pod-ip``, the dev cluster's process runtime); a proxy is always asked at its pod's IP,
as KubeRay does. Tests point both at a stand-in on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from raycluster_operator.api import names
from raycluster_operator.builders.rayjob import dashboard_port
from raycluster_operator.builders.rayservice import serving_port

#: (RayCluster, its head pod) -> the dashboard's base URL ("" when not known yet); for a
#: proxy, (RayCluster, the pod) -> the proxy's base URL.
Resolver = Callable[[Mapping[str, Any], Mapping[str, Any]], str]


def _spec(cluster: Mapping[str, Any]) -> Mapping[str, Any]:
    value: Mapping[str, Any] = cluster.get("spec") or {}
    return value


def via_service(cluster: Mapping[str, Any], head: Mapping[str, Any]) -> str:
    meta = cluster.get("metadata") or {}
    service = names.head_service_name(str(meta.get("name")))
    port = dashboard_port(_spec(cluster))
    return f"http://{service}.{meta.get('namespace')}.svc.cluster.local:{port}"


def via_head_pod_ip(cluster: Mapping[str, Any], head: Mapping[str, Any]) -> str:
    ip = (head.get("status") or {}).get("podIP")
    return f"http://{ip}:{dashboard_port(_spec(cluster))}" if ip else ""


def proxy_at_pod_ip(cluster: Mapping[str, Any], pod: Mapping[str, Any]) -> str:
    """A pod's Serve proxy (the head's, or a slice host's): Serve listens on one port on every
    node, the head container's ``serve`` port."""
    ip = (pod.get("status") or {}).get("podIP")
    return f"http://{ip}:{serving_port(_spec(cluster))}" if ip else ""


RESOLVERS: dict[str, Resolver] = {"service": via_service, "head-pod-ip": via_head_pod_ip}


class ServeApiError(Exception):
    """The Serve API could not be reached, or refused a request."""


class ServeApiClient:
    def __init__(self, timeout: float = 5.0, proxy_timeout: float = 2.0) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._proxy_timeout = aiohttp.ClientTimeout(total=proxy_timeout)
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def applications(self, base: str) -> dict[str, Any]:
        """Serve's applications by name (``{}`` when none is deployed)."""
        url = f"{base}/api/serve/applications/"
        try:
            async with self._http().get(url) as resp:
                if resp.status >= 400:
                    raise ServeApiError(f"GET {url}: HTTP {resp.status}")
                body = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise ServeApiError(f"GET {url}: {exc!r}") from exc
        apps = body.get("applications") if isinstance(body, dict) else None
        return dict(apps) if isinstance(apps, dict) else {}

    async def deploy(self, base: str, config: Mapping[str, Any]) -> None:
        url = f"{base}/api/serve/applications/"
        try:
            async with self._http().put(url, json=dict(config)) as resp:
                if resp.status >= 400:
                    text = await resp.text()
                    raise ServeApiError(f"PUT {url}: HTTP {resp.status}: {text[:300]}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ServeApiError(f"PUT {url}: {exc!r}") from exc

    async def proxy_healthy(self, base: str) -> bool:
        """KubeRay's CheckProxyActorHealth: ``/-/healthz`` answers 200."""
        try:
            async with self._http().get(f"{base}/-/healthz", timeout=self._proxy_timeout) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False
