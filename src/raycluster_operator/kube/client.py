"""The operator's only door to the Kubernetes API: plain dicts in, plain dicts out.

lightkube supplies the connection (kubeconfig or service account, exec plugins, client
certificates, CA verification) as a configured httpx2 client; the calls themselves are spoken
as REST here because the controller needs three things lightkube's typed methods do not
expose: watch bookmarks, delete preconditions and the Retry-After of a 429. Every request
passes a client-side throttle (the QPS/burst bucket) and is counted by verb, which is how the
benchmarks and tests count writes.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from lightkube.config.client_adapter import AsyncClient as _adapter_client
from lightkube.config.client_adapter import ConnectionParams

from raycluster_operator.api.objects import Obj, ObjectList, Resource
from raycluster_operator.kube.config import SingleConfig, load_config
from raycluster_operator.kube.errors import (
    Gone,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
    error_for,
)
from raycluster_operator.kube.resources import CORE_EVENTS, LEASES, Kind

Throttle = Callable[[], Awaitable[None]]

WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})
_MERGE = "application/merge-patch+json"
_JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True)
class ListResult:
    items: list[Obj]
    #: The collection's resourceVersion: where a watch resumes without missing a change.
    resource_version: str


class KubeClient:
    """Async Kubernetes REST client over a lightkube-configured connection."""

    def __init__(
        self,
        config: SingleConfig,
        *,
        throttle: Throttle | None = None,
        timeout: float = 30.0,
        field_manager: str = "raycluster-operator",
        max_throttled_retries: int = 5,
    ) -> None:
        self.config = config
        self._http = _adapter_client(
            config, ConnectionParams(timeout=httpx2.Timeout(timeout), trust_env=False)
        )
        self._http.headers["User-Agent"] = f"{field_manager}/python"
        self._throttle = throttle
        self._field_manager = field_manager
        self._max_throttled_retries = max_throttled_retries
        self._timeout = timeout
        #: Requests sent, by verb (get, list, watch, create, update, patch, delete).
        self.counts: Counter[str] = Counter()

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | Path | dict[str, Any] | None = None,
        *,
        context: str | None = None,
        insecure: bool = False,
        throttle: Throttle | None = None,
    ) -> KubeClient:
        return cls(load_config(kubeconfig, context=context, insecure=insecure), throttle=throttle)

    @property
    def default_namespace(self) -> str:
        return self.config.namespace

    @property
    def writes(self) -> int:
        return sum(n for verb, n in self.counts.items() if verb in WRITE_VERBS)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing -------------------------------------------------------------------------

    async def _request(
        self,
        verb: str,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
    ) -> Any:
        content = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": content_type} if content is not None else None
        if verb in WRITE_VERBS and verb != "delete":
            params = {**(params or {}), "fieldManager": self._field_manager}
        attempt = 0
        while True:
            if self._throttle is not None:
                await self._throttle()
            self.counts[verb] += 1
            try:
                resp = await self._http.request(
                    method, path, params=params, content=content, headers=headers
                )
            except httpx2.TransportError as exc:
                raise ServerError(f"{method} {path}: {exc!r}") from exc
            if resp.status_code < 400:
                return resp.json() if resp.content else {}
            err = error_for(
                resp.status_code,
                _json_or_none(resp),
                retry_after_header=resp.headers.get("Retry-After"),
            )
            if isinstance(err, TooManyRequests) and attempt < self._max_throttled_retries:
                attempt += 1
                await asyncio.sleep(err.retry_after)
                continue
            raise err

    # -- reads ----------------------------------------------------------------------------

    async def serves_group(self, group: str) -> bool:
        """Whether the API server serves an API group (its discovery document, readable by
        every authenticated user): a feature that needs another project's kind asks first."""
        try:
            await self._request("get", "GET", f"/apis/{group}")
        except NotFound:
            return False
        return True

    async def get(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        result: Obj = await self._request("get", "GET", kind.object_path(namespace, name))
        return result

    async def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> ListResult:
        """All pages of a collection, and the resourceVersion to watch from.

        ``transform`` is applied to each item page by page, so a caller that keeps only part
        of each object (an informer's cache) never holds every whole object at once.
        """
        params: dict[str, str] = {"limit": str(page_size)}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        items: list[Obj] = []
        while True:
            page = await self._request(
                "list", "GET", kind.collection_path(namespace), params=params
            )
            listing = ObjectList(page)
            page_items = listing.items
            items.extend(page_items if transform is None else map(transform, page_items))
            del page, page_items
            token = listing.continue_token
            if not token:
                return ListResult(items, listing.resource_version)
            params["continue"] = token

    async def watch(
        self,
        kind: Kind,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        field_selector: str | None = None,
    ) -> AsyncIterator[tuple[str, Obj]]:
        """Change events after ``resource_version`` until the server ends the stream.

        Yields (type, object) with type ADDED, MODIFIED, DELETED or BOOKMARK; an ERROR event
        raises (Gone for 410, so the caller lists again). The stream ends normally when the
        server's timeout expires; the caller resumes from the last version it saw.
        """
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if self._throttle is not None:
            await self._throttle()
        self.counts["watch"] += 1
        timeout = httpx2.Timeout(self._timeout, read=timeout_seconds + self._timeout)
        try:
            async with self._http.stream(
                "GET", kind.collection_path(namespace), params=params, timeout=timeout
            ) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    raise error_for(resp.status_code, _json_or_none(resp))
                async for line in resp.aiter_lines():
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    etype = str(event.get("type", ""))
                    obj = event.get("object") or {}
                    if etype == "ERROR":
                        code = int(obj.get("code") or 500)
                        raise (
                            error_for(code, obj)
                            if code != 410
                            else Gone(
                                str(obj.get("message") or "too old resource version"), code=410
                            )
                        )
                    yield etype, obj
        except httpx2.TransportError as exc:
            raise ServerError(f"watch {kind.plural}: {exc!r}") from exc

    # -- writes ---------------------------------------------------------------------------

    async def create(self, kind: Kind, obj: Obj, namespace: str | None = None) -> Obj:
        ns = namespace or Resource(obj).namespace or self.default_namespace
        result: Obj = await self._request(
            "create", "POST", kind.collection_path(ns if kind.namespaced else None), body=obj
        )
        return result

    async def replace(self, kind: Kind, obj: Obj) -> Obj:
        """PUT the whole object; its metadata.resourceVersion makes this a compare-and-swap."""
        target = Resource(obj)
        path = kind.object_path(target.namespace if kind.namespaced else None, target.name)
        result: Obj = await self._request("update", "PUT", path, body=obj)
        return result

    async def patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        patch: Obj,
        *,
        subresource: str = "",
    ) -> Obj:
        """A JSON merge patch (RFC 7386)."""
        result: Obj = await self._request(
            "patch",
            "PATCH",
            kind.object_path(namespace, name, subresource),
            body=patch,
            content_type=_MERGE,
        )
        return result

    async def json_patch(
        self, kind: Kind, namespace: str | None, name: str, ops: Sequence[Obj]
    ) -> Obj:
        """A JSON patch (RFC 6902): for list edits a merge patch cannot guard, such as
        removing one finalizer behind a ``test`` of its position."""
        result: Obj = await self._request(
            "patch",
            "PATCH",
            kind.object_path(namespace, name),
            body=list(ops),
            content_type=_JSON_PATCH,
        )
        return result

    async def patch_status(self, kind: Kind, namespace: str, name: str, status: Obj) -> Obj:
        """Merge-patch ``.status`` through the status subresource (never touches spec)."""
        return await self.patch(kind, namespace, name, {"status": status}, subresource="status")

    async def delete(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        *,
        grace_period: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: str | None = None,
    ) -> None:
        """Delete one object; ``uid``/``resource_version`` are preconditions (Conflict if the
        object was replaced meanwhile)."""
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        pre: dict[str, str] = {}
        if uid:
            pre["uid"] = uid
        if resource_version:
            pre["resourceVersion"] = resource_version
        if pre:
            body["preconditions"] = pre
        if grace_period is not None:
            body["gracePeriodSeconds"] = grace_period
        if propagation:
            body["propagationPolicy"] = propagation
        await self._request("delete", "DELETE", kind.object_path(namespace, name), body=body)

    # -- events and leases ----------------------------------------------------------------

    async def create_event(self, event: Obj) -> Obj:
        return await self.create(CORE_EVENTS, event)

    async def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
        return await self.patch(CORE_EVENTS, namespace, name, patch)

    async def get_lease(self, namespace: str, name: str) -> Obj:
        return await self.get(LEASES, namespace, name)

    async def create_lease(self, lease: Obj) -> Obj:
        return await self.create(LEASES, lease)

    async def replace_lease(self, lease: Obj) -> Obj:
        return await self.replace(LEASES, lease)


def _json_or_none(resp: httpx2.Response) -> object:
    try:
        return resp.json()
    except ValueError:
        return None


__all__ = ["KubeClient", "KubeError", "ListResult", "Obj"]
