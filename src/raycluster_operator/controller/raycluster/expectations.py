"""Writes the operator made but has not yet seen in its cache.

The informer lags the API server. Planning from a cache that does not yet show the pods we
just created would create them again (and a delete not yet seen would be repeated), so a
cluster is not re-planned until every expected name has been observed: a created name present
in the cache, a deleted name absent or terminating. Names, not counts: the event handler
reports every sighting (``observe``), and the caller registers only names the cache does not
already show, so an event seen before the write returned still counts. A deadline makes
sure a lost watch event can only delay a cluster, never wedge it.

Objects other than pods (services, the autoscaler's RBAC objects) do not hold a cluster back:
a create the cache does not show yet is only *vouched for* (planning treats it as present,
so it is not created twice), until the cache shows it, a watch reports it gone, or the
deadline passes. An ``AlreadyExists`` answer is vouched for the same way, so a same-named
object the caches cannot see (one without the operator's label) is asked for again only once
per deadline. A status written is remembered with the resourceVersion it was computed from:
until the cache moves past that version, planning reads the written status, so the same
status is not written twice. This object is the one owner of all of it: the reconciler
registers writes, the sources report sightings through the reconciler, nothing else reads or
writes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

Clock = Callable[[], float]
#: Looks a pod name up in the cache: None when absent, else whether it is terminating.
Lookup = Callable[[str], "bool | None"]


#: (kind, name) of an object in a cluster's namespace.
ObjectId = tuple[str, str]


@dataclass
class _Pending:
    creates: set[str] = field(default_factory=set)
    deletes: set[str] = field(default_factory=set)
    deadline: float = 0.0


class Expectations:
    def __init__(self, *, timeout: float = 120.0, clock: Clock = time.monotonic) -> None:
        self.timeout = timeout
        self._clock = clock
        self._pending: dict[str, _Pending] = {}
        #: Per cluster, objects created (or found existing) but not yet seen, with deadlines.
        self._vouched: dict[str, dict[ObjectId, float]] = {}
        #: Per cluster, the status last written and the resourceVersion it was computed from.
        self._statuses: dict[str, tuple[str, dict[str, Any]]] = {}

    def expect(self, key: str, *, creates: Iterable[str] = (), deletes: Iterable[str] = ()) -> None:
        entry = self._pending.setdefault(key, _Pending())
        entry.creates.update(creates)
        entry.deletes.update(deletes)
        entry.deadline = self._clock() + self.timeout

    def observe(self, key: str, name: str, *, terminating_or_gone: bool) -> None:
        """The informer saw pod ``name`` of cluster ``key``: any sighting proves a create, a
        deletion timestamp or a DELETED event proves a delete. Called from the event handler,
        so a pod created and removed between two reconciles still counts."""
        entry = self._pending.get(key)
        if entry is None:
            return
        entry.creates.discard(name)
        if terminating_or_gone:
            entry.deletes.discard(name)

    def satisfied(self, key: str, lookup: Lookup) -> bool:
        """Drop what the cache already shows; True when nothing is outstanding (or expired)."""
        entry = self._pending.get(key)
        if entry is None:
            return True
        entry.creates = {name for name in entry.creates if lookup(name) is None}
        entry.deletes = {name for name in entry.deletes if lookup(name) is False}
        if not entry.creates and not entry.deletes:
            del self._pending[key]
            return True
        if self._clock() >= entry.deadline:
            del self._pending[key]
            return True
        return False

    def remaining(self, key: str) -> float:
        """Seconds until the expectations of ``key`` expire (0 when there are none)."""
        entry = self._pending.get(key)
        return 0.0 if entry is None else max(0.0, entry.deadline - self._clock())

    def vouch(self, key: str, objects: Iterable[ObjectId]) -> None:
        """Objects of cluster ``key`` known to exist though the cache may not show them."""
        deadline = self._clock() + self.timeout
        entry = self._vouched.setdefault(key, {})
        for ident in objects:
            entry[ident] = deadline

    def observe_object(self, key: str, ident: ObjectId) -> None:
        """The cache saw ``ident`` appear or go: from now on the cache is the truth."""
        entry = self._vouched.get(key)
        if entry is not None:
            entry.pop(ident, None)

    def vouched(self, key: str) -> frozenset[ObjectId]:
        entry = self._vouched.get(key)
        if not entry:
            return frozenset()
        now = self._clock()
        for ident in [i for i, deadline in entry.items() if now >= deadline]:
            del entry[ident]
        return frozenset(entry)

    def wrote_status(self, key: str, version: str, status: dict[str, Any]) -> None:
        self._statuses[key] = (version, status)

    def written_status(self, key: str, version: str) -> dict[str, Any] | None:
        """The status written over ``version`` while the cache still shows that version."""
        written = self._statuses.get(key)
        if written is None:
            return None
        if written[0] != version:
            del self._statuses[key]
            return None
        return written[1]

    def forget_names(
        self, key: str, *, creates: Iterable[str] = (), deletes: Iterable[str] = ()
    ) -> None:
        """Stop waiting for writes that failed: they will never show up."""
        entry = self._pending.get(key)
        if entry is not None:
            entry.creates.difference_update(creates)
            entry.deletes.difference_update(deletes)

    def forget(self, key: str) -> None:
        self._pending.pop(key, None)
        self._vouched.pop(key, None)
        self._statuses.pop(key, None)
