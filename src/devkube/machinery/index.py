"""An informer's objects grouped by keys, kept current from its events (client-go's Indexer).

A controller that scans the whole watch cache on every change costs O(all objects) per event,
so convergence of N objects costs O(N^2) (issue #26). With an `Index` it reads only the bucket
the change concerns (the pods of one node, the pods that carry one label) and each event costs
O(the object's keys), whatever else is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from devkube.machinery.client import WatchEvent
from devkube.machinery.informer import Informer, Key, key_of

#: The keys an object is filed under (none: it is not in the index).
KeyFunction = Callable[[Mapping[str, Any]], Iterable[Hashable]]


class Index:
    """`bucket(k)`: the objects `keys` files under `k`, by informer key. Subscribes to the
    informer (before it starts, to see the first list; or after, and it reads the cache)."""

    def __init__(self, informer: Informer, keys: KeyFunction) -> None:
        self._keys = keys
        self._buckets: dict[Hashable, dict[Key, Mapping[str, Any]]] = {}
        self._filed: dict[Key, tuple[Hashable, ...]] = {}
        #: Objects filed or unfiled so far: what keeping the index has cost (tests count it).
        self.touched = 0
        for obj in list(informer.cache.values()):
            self._add(obj)
        informer.subscribe(self.on_event)

    def bucket(self, key: Hashable) -> Mapping[Key, Mapping[str, Any]]:
        return self._buckets.get(key) or {}

    def filed_keys(self) -> Iterable[Hashable]:
        return self._buckets.keys()

    def filed_under(self, key: Key) -> tuple[Hashable, ...]:
        """The keys the object stored under informer key `key` is filed under now."""
        return self._filed.get(key, ())

    def on_event(self, event: WatchEvent) -> None:
        if event.type == "SYNC":
            self._buckets.clear()
            self._filed.clear()
            for item in event.object.get("items") or []:
                self._add(item)
        elif event.type == "DELETED":
            self._remove(key_of(event.object))
        elif event.type in ("ADDED", "MODIFIED"):
            self._remove(key_of(event.object))
            self._add(event.object)

    def _add(self, obj: Mapping[str, Any]) -> None:
        self.touched += 1
        key = key_of(obj)
        filed = tuple(dict.fromkeys(self._keys(obj)))
        if filed:
            self._filed[key] = filed
        for k in filed:
            self._buckets.setdefault(k, {})[key] = obj

    def _remove(self, key: Key) -> None:
        for k in self._filed.pop(key, ()):
            bucket = self._buckets.get(k)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self._buckets[k]
