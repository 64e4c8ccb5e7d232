"""List, then watch from the list's resourceVersion, forever: the level-triggered cache.

The loop is the one every controller needs and gets subtly wrong: resume a dropped watch from
the last version seen (bookmarks advance it while nothing changes), list again when the server
says that version is gone (410), back off on errors, and hand every change to the handlers
so they can enqueue the cluster it concerns. A re-list is diffed against the cache, so a
change missed while disconnected still produces an event. Every object passes through the
informer's transform before it is stored or handed on (docs/design.md §7): the cache holds
only what the operator reads.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

from raycluster_operator.api.objects import Obj, Resource
from raycluster_operator.controller.runtime.store import IndexFunc, Store, object_key
from raycluster_operator.kube import Gone, Kind, KubeClient, KubeError

log = logging.getLogger(__name__)

#: One object in, the copy the cache keeps out (a kind's own, beside its reconciler). Never
#: mutates its argument.
Transform = Callable[[Obj], Obj]

#: (event type, old object or None, new object or None); DELETED carries the old one.
Handler = Callable[[str, Obj | None, Obj | None], None]


class Informer:
    def __init__(
        self,
        client: KubeClient,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        indexers: dict[str, IndexFunc] | None = None,
        transform: Transform | None = None,
        watch_timeout: int = 300,
        backoff_base: float = 0.2,
        backoff_max: float = 30.0,
    ) -> None:
        self.client = client
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.store = Store(indexers)
        self.transform = transform
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.watch_timeout = watch_timeout
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.relists = 0
        self._handlers: list[Handler] = []

    @property
    def name(self) -> str:
        return f"{self.kind.plural}@{self.namespace or '*'}"

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def _dispatch(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        for handler in self._handlers:
            try:
                handler(etype, old, new)
            except Exception:  # a broken handler must not stop the cache
                log.exception("informer %s: handler failed", self.name)

    async def relist(self) -> None:
        listing = await self.client.list(
            self.kind,
            self.namespace,
            label_selector=self.label_selector,
            transform=self.transform,
        )
        self.relists += 1
        for change in self.store.replace(listing.items):
            self._dispatch(*change)
        self.resource_version = listing.resource_version
        self.synced.set()

    def apply(self, etype: str, obj: Obj) -> None:
        """One watch event into the cache and out to the handlers."""
        version = Resource(obj).resource_version
        if etype == "BOOKMARK":
            if version:
                self.resource_version = str(version)
            return
        if self.transform is not None and etype in ("ADDED", "MODIFIED", "DELETED"):
            obj = self.transform(obj)
        if etype == "DELETED":
            old = self.store.remove(object_key(obj))
            self._dispatch("DELETED", old or obj, None)
        elif etype in ("ADDED", "MODIFIED"):
            old = self.store.upsert(obj)
            self._dispatch("ADDED" if old is None else "MODIFIED", old, obj)
        if version:
            self.resource_version = str(version)

    async def run(self) -> None:
        failures = 0
        need_list = True
        while True:
            try:
                if need_list:
                    await self.relist()
                    need_list = False
                async for etype, obj in self.client.watch(
                    self.kind,
                    self.namespace,
                    resource_version=self.resource_version,
                    label_selector=self.label_selector,
                    timeout_seconds=self.watch_timeout,
                ):
                    self.apply(etype, obj)
                    failures = 0
                # The server closed the stream normally (its timeout): resume where we were.
                failures = 0
            except asyncio.CancelledError:
                raise
            except Gone:
                log.info(
                    "informer %s: resourceVersion %s gone, listing again",
                    self.name,
                    self.resource_version,
                )
                need_list = True
            except (KubeError, ValueError) as exc:
                failures += 1
                delay = min(self.backoff_max, self.backoff_base * 2 ** min(failures, 16))
                delay *= 0.5 + random.random() / 2
                log.warning("informer %s: %s; retrying in %.1fs", self.name, exc, delay)
                await asyncio.sleep(delay)
