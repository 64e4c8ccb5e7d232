"""Watch streams: JSON lines over a chunked response, fed by a store `Watcher`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from devkube.server.errors import ApiError, gone
from devkube.server.registry.resources import ResourceType
from devkube.server.registry.selectors import Selection
from devkube.server.registry.store import Store, Stored, TooOld, Watcher, encode

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True)
class WatchParams:
    resource_version: str | None
    bookmarks: bool
    timeout: float
    send_initial_events: bool


class WatchHub:
    """Open watch streams, so faults can cut them all at once."""

    def __init__(self, store: Store, bookmark_interval: float) -> None:
        self.store = store
        self.bookmark_interval = bookmark_interval
        self.open: set[Watcher] = set()

    def drop_all(self, graceful: bool = False) -> int:
        watchers = list(self.open)
        for watcher in watchers:
            watcher.drop(graceful=graceful)
        return len(watchers)

    async def serve(
        self,
        request: web.Request,
        rt: ResourceType,
        selection: Selection,
        params: WatchParams,
        initial: Callable[[], list[Stored]] | None,
        render: Callable[[Stored], bytes],
    ) -> web.StreamResponse:
        """Stream changes. `initial` lists the current matching objects, sent first as ADDED
        (called in the same step that registers the watcher, so no write falls between);
        `render` replaces the object encoding (kubectl asks for one-row Tables)."""
        since: int | None = None
        if initial is None and params.resource_version not in (None, "", "0"):
            try:
                since = int(str(params.resource_version))
            except ValueError as exc:
                raise ApiError(
                    400, "BadRequest", f"invalid resourceVersion {params.resource_version!r}"
                ) from exc
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            watcher = self.store.watch(rt.storage_key, selection, since)
        except TooOld as exc:
            await response.write(_event("ERROR", gone(str(exc)).status()))
            return response
        start_rv = self.store.rv
        for stored in initial() if initial is not None else []:
            watcher.push("ADDED", stored, force=True)
        if params.bookmarks and (params.send_initial_events or since is not None):
            annotations = {INITIAL_EVENTS_END: "true"} if params.send_initial_events else None
            watcher.push("BOOKMARK", (start_rv, annotations), force=True)
        self.open.add(watcher)
        deadline = time.monotonic() + params.timeout
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                wait = min(remaining, self.bookmark_interval) if params.bookmarks else remaining
                try:
                    async with asyncio.timeout(wait):
                        batch = await watcher.next_batch()
                except TimeoutError:
                    # The queue was empty, so every change up to store.rv has been sent; a cut
                    # stream sends nothing more (a bookmark after an expiry would skip its 410).
                    if params.bookmarks and deadline > time.monotonic() and not watcher.dropped:
                        await response.write(_bookmark(rt, self.store.rv, None))
                    continue
                chunks = []
                for kind, payload in batch:
                    if kind == "BOOKMARK":
                        rv, annotations = payload
                        chunks.append(_bookmark(rt, rv, annotations))
                    else:
                        chunks.append(_object_event(kind, rt, payload, render))
                if chunks:
                    await response.write(b"".join(chunks))
                if watcher.overflowed:
                    error = gone("watch queue overflowed: the client was too slow; re-list")
                    await response.write(_event("ERROR", error.status()))
                    break
                if watcher.dropped:
                    if watcher.graceful:
                        break
                    if request.transport is not None:
                        request.transport.abort()  # like a broken connection, no clean end
                    return response
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        finally:
            self.open.discard(watcher)
            self.store.unwatch(watcher)
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response


def _event(kind: str, obj: Any) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + encode(obj) + b"}\n"


def _object_event(
    kind: str, rt: ResourceType, stored: Stored, render: Callable[[Stored], bytes]
) -> bytes:
    raw = render(stored)
    return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"


def _bookmark(rt: ResourceType, rv: int, annotations: dict[str, str] | None) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if annotations:
        meta["annotations"] = annotations
    return _event("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})
