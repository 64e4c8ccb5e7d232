"""The informer's cache: objects by ``namespace/name`` with secondary indices.

The reconciler reads only from here, never from the API, so a reconcile costs no requests.
An index maps a value (such as the ``ray.io/cluster`` label, or the name of the RayCluster
that owns a service) to the keys of the objects that carry it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from raycluster_operator.api.objects import Obj, Resource

IndexFunc = Callable[[Obj], Iterable[str]]


class Change(NamedTuple):
    """One difference between the cache and a fresh listing, as the handlers receive it."""

    #: ADDED, MODIFIED or DELETED.
    type: str
    #: The cached object (None when ADDED).
    old: Obj | None
    #: The listed object (None when DELETED).
    new: Obj | None


def object_key(obj: Obj) -> str:
    return Resource(obj).key


def split_key(key: str) -> tuple[str, str]:
    ns, _, name = key.partition("/")
    return ns, name


def by_label(label: str) -> IndexFunc:
    """Index by a label's value, qualified by namespace (``ns/value``)."""

    def index(obj: Obj) -> Iterable[str]:
        view = Resource(obj)
        value = view.labels.get(label)
        return [f"{view.namespace or ''}/{value}"] if value else []

    return index


def by_owner(kind: str) -> IndexFunc:
    """Index by the names of owners of ``kind`` (``ns/owner``)."""

    def index(obj: Obj) -> Iterable[str]:
        view = Resource(obj)
        ns = view.namespace or ""
        return [f"{ns}/{owner}" for owner in view.owner_names(kind)]

    return index


def by_namespace(obj: Obj) -> Iterable[str]:
    """Index by namespace: everything of a kind next to a cluster."""
    return [Resource(obj).namespace or ""]


class Store:
    def __init__(self, indexers: dict[str, IndexFunc] | None = None) -> None:
        self._objects: dict[str, Obj] = {}
        self._indexers = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}

    def __len__(self) -> int:
        return len(self._objects)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._objects))

    def __contains__(self, key: str) -> bool:
        return key in self._objects

    def get(self, key: str) -> Obj | None:
        return self._objects.get(key)

    def keys(self) -> list[str]:
        return list(self._objects)

    def values(self) -> list[Obj]:
        return list(self._objects.values())

    def by_index(self, index: str, value: str) -> list[Obj]:
        keys = self._indices[index].get(value, ())
        return [self._objects[k] for k in sorted(keys)]

    def upsert(self, obj: Obj) -> Obj | None:
        key = object_key(obj)
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key, old)
        self._objects[key] = obj
        self._index(key, obj)
        return old

    def remove(self, key: str) -> Obj | None:
        old = self._objects.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def replace(self, objs: Iterable[Obj]) -> list[Change]:
        """Swap in a fresh listing; returns the changes for the handlers."""
        fresh = {object_key(o): o for o in objs}
        changes: list[Change] = []
        for key in list(self._objects):
            if key not in fresh:
                changes.append(Change("DELETED", self.remove(key), None))
        for obj in fresh.values():
            old = self.upsert(obj)
            if old is None:
                changes.append(Change("ADDED", None, obj))
            elif _rv(old) != _rv(obj):
                changes.append(Change("MODIFIED", old, obj))
        return changes

    def _index(self, key: str, obj: Obj) -> None:
        for name, func in self._indexers.items():
            for value in func(obj):
                self._indices[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: Obj) -> None:
        for name, func in self._indexers.items():
            for value in func(obj):
                keys = self._indices[name].get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._indices[name][value]


def _rv(obj: Obj) -> str:
    return Resource(obj).resource_version


class StoreView:
    """Several stores (one per watched namespace) read as one."""

    def __init__(self, stores: list[Store]) -> None:
        self._stores = stores

    def get(self, key: str) -> Obj | None:
        for store in self._stores:
            obj = store.get(key)
            if obj is not None:
                return obj
        return None

    def by_index(self, index: str, value: str) -> list[Obj]:
        out: list[Obj] = []
        for store in self._stores:
            out.extend(store.by_index(index, value))
        return out

    def all_keys(self) -> list[str]:
        return [k for store in self._stores for k in store]
