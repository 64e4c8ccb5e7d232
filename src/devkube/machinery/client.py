"""A small async JSON client for the fake controllers.

They reach the dev API server exactly as real controllers reach a real one: HTTPS verified
against the cluster CA, a bearer token, list+watch with resume. It is deliberately not the
operator's client library, so a bug in one cannot hide a bug in the other.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import aiohttp

log = logging.getLogger(__name__)

PatchType = Literal["merge", "json", "strategic"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


class ApiError(Exception):
    """A non-2xx answer, with the Status object the server sent when it sent one."""

    def __init__(self, status: int, body: Mapping[str, Any]) -> None:
        self.status = status
        self.reason = str(body.get("reason", ""))
        self.body = dict(body)
        super().__init__(f"{status} {self.reason}: {body.get('message', '')}")


@dataclass(frozen=True)
class WatchEvent:
    """ADDED | MODIFIED | DELETED | BOOKMARK, or SYNC: a fresh list (object = the List)."""

    type: str
    object: dict[str, Any]


def resource_path(
    api_version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """`/api/v1/namespaces/ns/pods/name/status` and the /apis/<group>/... equivalents."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=""))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


def ssl_context(ca_pem: bytes | None) -> ssl.SSLContext:
    if ca_pem is None:
        return ssl.create_default_context()
    return ssl.create_default_context(cadata=ca_pem.decode())


class ApiClient:
    """One aiohttp session to one API server. Use as an async context manager or call close()."""

    def __init__(
        self,
        url: str,
        token: str | None,
        ca_pem: bytes | None,
        *,
        timeout: float = 30.0,
        connections: int = 100,
        user_agent: str = "devcluster-controllers",
    ) -> None:
        self.url = url.rstrip("/")
        # The user agent lets the server tell its own fake controllers from the clients
        # under test (e.g. to keep injected faults away from them).
        self._headers = {"Accept": "application/json", "User-Agent": user_agent}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._ssl = ssl_context(ca_pem)
        self._timeout = timeout
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=self._connections)
            self._session = aiohttp.ClientSession(headers=self._headers, connector=connector)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if data is not None else None
        async with self.session.request(
            method,
            self.url + path,
            params=params,
            data=data,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=self._timeout),
        ) as response:
            raw = await response.read()
        try:
            answer: Any = json.loads(raw) if raw else {}
        except ValueError:
            answer = {"message": raw.decode(errors="replace")}
        if not isinstance(answer, dict):
            answer = {"message": str(answer)}
        if response.status >= 400:
            raise ApiError(response.status, answer)
        result: dict[str, Any] = answer
        return result

    async def get(self, path: str, **params: str) -> dict[str, Any]:
        return await self.request("GET", path, params=params or None)

    async def list(self, path: str, **params: str) -> dict[str, Any]:
        return await self.request("GET", path, params=params or None)

    async def create(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, body=obj)

    async def replace(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("PUT", path, body=obj)

    async def patch(self, path: str, patch: Any, *, kind: PatchType = "merge") -> dict[str, Any]:
        return await self.request(
            "PATCH", path, body=patch, content_type=_PATCH_CONTENT_TYPES[kind]
        )

    async def delete(
        self,
        path: str,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        return await self.request("DELETE", path, body=options)

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        timeout_seconds: int | None = None,
        params: Mapping[str, str] | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """One watch request from `resource_version`; ends when the server closes it. An
        expired version surfaces as an ERROR event (the server's 410 Status) or ApiError 410."""
        query = {"watch": "true", "resourceVersion": resource_version, **(params or {})}
        query["allowWatchBookmarks"] = "true"
        if timeout_seconds is not None:
            query["timeoutSeconds"] = str(timeout_seconds)
        async with self.session.get(
            self.url + path,
            params=query,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._timeout),
        ) as response:
            if response.status >= 400:
                raw = await response.read()
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"message": raw.decode(errors="replace")}
                raise ApiError(response.status, body if isinstance(body, dict) else {})
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        event = json.loads(line)
                        yield WatchEvent(str(event.get("type")), event.get("object") or {})
            if buffer.strip():
                event = json.loads(buffer)
                yield WatchEvent(str(event.get("type")), event.get("object") or {})

    async def list_and_watch(
        self, path: str, params: Mapping[str, str] | None = None, *, retry_delay: float = 0.2
    ) -> AsyncIterator[WatchEvent]:
        """List, then watch from the list's resourceVersion forever: resume after a dropped
        connection from the last version seen, and re-list (a SYNC event) when the server says
        that version is gone (410)."""
        resource_version: str | None = None
        while True:
            try:
                if resource_version is None:
                    listed = await self.list(path, **(params or {}))
                    resource_version = str((listed.get("metadata") or {}).get("resourceVersion"))
                    yield WatchEvent("SYNC", listed)
                async for event in self.watch(
                    path, resource_version=resource_version, params=params
                ):
                    if event.type == "ERROR":
                        if event.object.get("code") == 410:
                            resource_version = None
                            break
                        raise ApiError(int(event.object.get("code") or 500), event.object)
                    version = (event.object.get("metadata") or {}).get("resourceVersion")
                    if version:
                        resource_version = str(version)
                    if event.type != "BOOKMARK":
                        yield event
            except ApiError as error:
                if error.status == 410:
                    resource_version = None
                    continue
                log.debug("watch %s failed: %s; retrying", path, error)
                await asyncio.sleep(retry_delay)
            except (TimeoutError, aiohttp.ClientError, ValueError) as error:
                log.debug("watch %s interrupted: %s; resuming", path, error)
                await asyncio.sleep(retry_delay)
