"""A watched cache of one resource: the fake controllers' view of the cluster."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from devkube.machinery.client import ApiClient, WatchEvent

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace or "", name)


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Informer:
    """Keeps `cache` equal to the server's objects at `path`, calling `on_event` and every
    subscriber after each change is applied (SYNC after a re-list). The fake controllers share
    one informer per resource, as controllers in one manager do."""

    def __init__(
        self,
        client: ApiClient,
        path: str,
        on_event: Callable[[WatchEvent], None] | None = None,
        **params: str,
    ) -> None:
        self.path = path
        self.cache: dict[Key, dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self._client = client
        self._params = params
        self._listeners: list[Callable[[WatchEvent], None]] = [on_event] if on_event else []
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, listener: Callable[[WatchEvent], None]) -> None:
        """Also call `listener` for each event (subscribe before start to see the first SYNC)."""
        self._listeners.append(listener)

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"informer {self.path}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        async for event in self._client.list_and_watch(self.path, self._params):
            self.apply(event)

    def apply(self, event: WatchEvent) -> None:
        """Apply one event to the cache, then tell every listener (the watch does this; a
        test may too, to drive a controller without a server)."""
        if event.type == "SYNC":
            self.cache = {key_of(item): item for item in event.object.get("items") or []}
            self.synced.set()
        elif event.type == "DELETED":
            self.cache.pop(key_of(event.object), None)
        elif event.type in ("ADDED", "MODIFIED"):
            self.cache[key_of(event.object)] = event.object
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:  # a consumer bug must not stop the watch
                log.exception("informer %s handler failed", self.path)
