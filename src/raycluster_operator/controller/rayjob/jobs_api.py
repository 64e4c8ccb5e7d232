"""Ray's Jobs REST API on the head's dashboard (``/api/jobs/``), as the RayJob controller uses
it: read a job by submission id, submit one (HTTPMode), stop one (docs/design.md §11).

Where the API is reached is a resolver's choice: by default the head service's DNS name from
``status.dashboardURL`` (what works inside a real cluster); the dev cluster's process runtime
reaches the head pod's IP from the host (``head-pod-ip``); tests answer with a stand-in server
on 127.0.0.1 by setting the controller's resolver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from raycluster_operator.builders.rayjob import DASHBOARD_PORT, dashboard_port

#: (RayJob, its RayCluster or None) -> the dashboard's base URL ("" when not known yet).
Resolver = Callable[[Mapping[str, Any], Mapping[str, Any] | None], str]


def via_service(rayjob: Mapping[str, Any], cluster: Mapping[str, Any] | None) -> str:
    url = str((rayjob.get("status") or {}).get("dashboardURL") or "")
    if not url:
        return ""
    return url if url.startswith("http") else f"http://{url}"


def via_head_pod_ip(rayjob: Mapping[str, Any], cluster: Mapping[str, Any] | None) -> str:
    ip = ((cluster or {}).get("status") or {}).get("head", {}).get("podIP")
    if not ip:
        return ""
    port = dashboard_port((cluster or {}).get("spec") or {}) if cluster else DASHBOARD_PORT
    return f"http://{ip}:{port}"


RESOLVERS: dict[str, Resolver] = {"service": via_service, "head-pod-ip": via_head_pod_ip}


class JobsApiError(Exception):
    """The Jobs API could not be reached, or refused a request."""


class JobsApiUnreachable(JobsApiError):
    """Nothing listens where the dashboard should (connection refused, a name not resolved
    yet): before it ever answered, the dashboard is starting, not failing."""


@dataclass(frozen=True)
class JobInfo:
    found: bool
    details: Mapping[str, Any]


class JobsApiClient:
    def __init__(self, timeout: float = 5.0) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def get(self, base: str, job_id: str) -> JobInfo:
        try:
            async with self._http().get(f"{base}/api/jobs/{job_id}") as resp:
                if resp.status == 404:
                    return JobInfo(False, {})
                if resp.status >= 400:
                    raise JobsApiError(f"GET job {job_id}: HTTP {resp.status}")
                body = await resp.json(content_type=None)
        except aiohttp.ClientConnectorError as exc:
            raise JobsApiUnreachable(f"GET job {job_id} at {base}: {exc!r}") from exc
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise JobsApiError(f"GET job {job_id} at {base}: {exc!r}") from exc
        return JobInfo(True, dict(body) if isinstance(body, dict) else {})

    async def submit(self, base: str, request: Mapping[str, Any]) -> None:
        await self._post(f"{base}/api/jobs/", dict(request), ok_conflict=True)

    async def stop(self, base: str, job_id: str) -> None:
        await self._post(f"{base}/api/jobs/{job_id}/stop", None, ok_conflict=True)

    async def _post(self, url: str, body: dict[str, Any] | None, *, ok_conflict: bool) -> None:
        try:
            async with self._http().post(url, json=body) as resp:
                text = await resp.text()
                # A submission id already taken means an earlier pass submitted it.
                taken = resp.status in (400, 409) and "already exists" in text
                if resp.status >= 400 and not (ok_conflict and taken):
                    raise JobsApiError(f"POST {url}: HTTP {resp.status}: {text[:200]}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise JobsApiError(f"POST {url}: {exc!r}") from exc
