"""In-memory object storage with one global resourceVersion, per-resource history and fan-out.

Stored objects are never mutated after they are written: writers build a new dict and readers
(lists, watch streams) may share the stored one. That lets a list of 10k pods serialize
straight from the store, and lets the JSON encoding of each object be cached once.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from devkube.server.registry.selectors import Selection
from kubefacts.objects import Obj


def encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


class Stored:
    """An immutable stored object with its JSON encoding computed on first need."""

    __slots__ = ("_raw", "obj", "rv")

    def __init__(self, obj: Obj, rv: int) -> None:
        self.obj = obj
        self.rv = rv
        self._raw: bytes | None = None

    @property
    def raw(self) -> bytes:
        if self._raw is None:
            self._raw = encode(self.obj)
        return self._raw


class Reshaped(Stored):
    """An object served reshaped by a CRD's schema, beside the object as it was persisted:
    etcd keeps what was written, and a later schema (say, one that declares a field again)
    decodes it afresh, so a pruned field comes back as a real server serves it."""

    __slots__ = ("persisted",)

    def __init__(self, obj: Obj, rv: int, persisted: Obj) -> None:
        super().__init__(obj, rv)
        self.persisted = persisted


@dataclass(frozen=True)
class Change:
    """One write as watchers see it. `old` lets a selector notice an object leaving its set."""

    type: str  # ADDED | MODIFIED | DELETED
    new: Stored
    old: Stored | None


class Watcher:
    """One open watch: a bounded queue of changes that never blocks the writer.

    When the queue is full the watcher is marked overflowed and emptied; its stream then ends
    with a 410 so the client re-lists, which is what a real apiserver does to slow watchers.
    """

    def __init__(self, key: str, selection: Selection, max_queue: int) -> None:
        self.key = key
        self.selection = selection
        self.max_queue = max_queue
        self.items: deque[tuple[str, Any]] = deque()
        self.wakeup = asyncio.Event()
        self.overflowed = False
        self.dropped = False
        self.graceful = False
        self.limit = max_queue

    def push(self, kind: str, payload: Any, *, force: bool = False) -> None:
        """Queue one event; `force` bypasses the bound (initial state and replay)."""
        if self.overflowed or self.dropped:
            return
        if force:
            self.limit += 1  # initial state and replay do not count against the backlog bound
        elif len(self.items) >= self.limit:
            self.items.clear()
            self.overflowed = True
            self.wakeup.set()
            return
        self.items.append((kind, payload))
        self.wakeup.set()

    def offer(self, change: Change, *, force: bool = False) -> None:
        """Translate a change through this watcher's selector (transitions become ADDED/DELETED)."""
        sel = self.selection
        new_ok = sel.matches(change.new.obj)
        if change.type == "DELETED":
            if new_ok:
                self.push("DELETED", change.new, force=force)
            return
        old_ok = change.old is not None and sel.matches(change.old.obj)
        if new_ok and old_ok:
            self.push("MODIFIED", change.new, force=force)
        elif new_ok:
            self.push("ADDED", change.new, force=force)
        elif old_ok and change.old is not None:
            # The real cacher sends the previous content stamped with the new resourceVersion.
            gone = dict(change.old.obj)
            gone["metadata"] = {**gone["metadata"], "resourceVersion": str(change.new.rv)}
            self.push("DELETED", Stored(gone, change.new.rv), force=force)

    def drop(self, *, graceful: bool = False) -> None:
        """End the stream: abruptly like a broken connection, or cleanly like a server timeout."""
        self.dropped = True
        self.graceful = graceful
        self.wakeup.set()

    async def next_batch(self) -> list[tuple[str, Any]]:
        while not self.items and not self.overflowed and not self.dropped:
            self.wakeup.clear()
            await self.wakeup.wait()
        batch = list(self.items)
        self.items.clear()
        self.limit = self.max_queue
        return batch


@dataclass
class _Table:
    by_ns: dict[str, dict[str, Stored]] = field(default_factory=dict)
    history: deque[tuple[int, Change]] = field(default_factory=deque)
    # Changes at or below this resourceVersion may be missing from `history`.
    floor: int = 0
    watchers: set[Watcher] = field(default_factory=set)
    count: int = 0


class TooOld(Exception):
    """A watch asked to resume from before the retained history."""


class Store:
    """All objects by storage key, namespace ("" for cluster scope) and name."""

    def __init__(self, history_size: int = 10000, watch_queue_size: int = 10000) -> None:
        self._tables: dict[str, _Table] = {}
        self._dropped_at: dict[str, int] = {}
        self._listeners: dict[str, list[Callable[[Change], None]]] = {}
        self.rv = 0
        self.history_size = history_size
        self.watch_queue_size = watch_queue_size

    def _table(self, key: str) -> _Table:
        table = self._tables.get(key)
        if table is None:
            # A resource never written before has no missing history, unless it was dropped.
            table = self._tables[key] = _Table(floor=self._dropped_at.get(key, 0))
        return table

    def on_change(self, key: str, listener: Callable[[Change], None]) -> None:
        """Call `listener` synchronously on every write of resource `key`, so in-process
        caches derived from it (RBAC's) are never stale for the next request."""
        self._listeners.setdefault(key, []).append(listener)

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    # reads -----------------------------------------------------------------------------------
    def get(self, key: str, namespace: str, name: str) -> Stored | None:
        table = self._tables.get(key)
        if table is None:
            return None
        return table.by_ns.get(namespace, {}).get(name)

    def iter(self, key: str, namespace: str | None) -> Iterator[Stored]:
        """Objects ordered by namespace then name, the order the real server lists in."""
        table = self._tables.get(key)
        if table is None:
            return
        namespaces = [namespace] if namespace is not None else sorted(table.by_ns)
        for ns in namespaces:
            bucket = table.by_ns.get(ns)
            if bucket:
                for name in sorted(bucket):
                    yield bucket[name]

    def count(self, key: str) -> int:
        table = self._tables.get(key)
        return 0 if table is None else table.count

    # writes ----------------------------------------------------------------------------------
    def put(self, key: str, obj: Obj) -> Stored:
        """Store `obj` (already stamped with a fresh resourceVersion by the caller)."""
        meta = obj["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        table = self._table(key)
        bucket = table.by_ns.setdefault(ns, {})
        old = bucket.get(name)
        stored = Stored(obj, int(meta["resourceVersion"]))
        bucket[name] = stored
        if old is None:
            table.count += 1
        self._publish(key, table, Change("ADDED" if old is None else "MODIFIED", stored, old))
        return stored

    def reshape(self, key: str, shape: Callable[[Obj], Obj]) -> None:
        """Rewrite every stored object of ``key`` in place, keeping its resourceVersion and
        telling no watcher: what a real server does when it decodes from storage (a CRD's new
        defaults and pruning apply to old objects on read, without a write)."""
        table = self._tables.get(key)
        if table is None:
            return
        for bucket in table.by_ns.values():
            for name, stored in list(bucket.items()):
                persisted = stored.persisted if isinstance(stored, Reshaped) else stored.obj
                new = shape(persisted)
                if new != stored.obj:
                    bucket[name] = Reshaped(new, stored.rv, persisted)

    def remove(self, key: str, namespace: str, name: str, rv: int) -> Stored | None:
        table = self._tables.get(key)
        if table is None:
            return None
        bucket = table.by_ns.get(namespace, {})
        old = bucket.pop(name, None)
        if old is None:
            return None
        table.count -= 1
        if not bucket:
            table.by_ns.pop(namespace, None)
        final = dict(old.obj)
        final["metadata"] = {**final["metadata"], "resourceVersion": str(rv)}
        gone = Stored(final, rv)
        self._publish(key, table, Change("DELETED", gone, old))
        return gone

    def drop_key(self, key: str) -> list[Stored]:
        """Forget a whole resource (its CRD was deleted); watchers are closed."""
        table = self._tables.pop(key, None)
        self._dropped_at[key] = self.rv
        if table is None:
            return []
        for watcher in table.watchers:
            watcher.drop(graceful=True)
        return [s for bucket in table.by_ns.values() for s in bucket.values()]

    def _publish(self, key: str, table: _Table, change: Change) -> None:
        table.history.append((change.new.rv, change))
        while len(table.history) > self.history_size:
            rv, _ = table.history.popleft()
            table.floor = rv
        for watcher in list(table.watchers):
            watcher.offer(change)
        for listener in self._listeners.get(key, ()):
            listener(change)

    # watch -----------------------------------------------------------------------------------
    def watch(self, key: str, selection: Selection, since: int | None) -> Watcher:
        """Open a watcher; with `since`, first replay retained changes after that version."""
        table = self._table(key)
        watcher = Watcher(key, selection, self.watch_queue_size)
        if since is not None:
            if since < table.floor:
                raise TooOld(f"too old resource version: {since} ({table.floor + 1})")
            replay: list[Change] = []
            for rv, change in reversed(table.history):
                if rv <= since:
                    break
                replay.append(change)
            for change in reversed(replay):
                watcher.offer(change, force=True)
        table.watchers.add(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        table = self._tables.get(watcher.key)
        if table is not None:
            table.watchers.discard(watcher)

    def expire_history(self, key: str | None = None) -> None:
        """Forget retained changes of one resource (or all) so that resuming a watch from any
        resourceVersion handed out before now answers 410, as after a real server's compaction.

        The expiry takes a resourceVersion of its own (as kube-apiserver's compactor writes its
        mark to etcd, a new revision): without it a client that had seen the newest version
        resumed from exactly the floor and got no 410, so on a quiet cluster the expiry proved
        nothing (issue #36). A list after it answers the new version, which resumes cleanly."""
        keys = [key] if key is not None else list(self._tables)
        mark = self.next_rv()
        for name in keys:
            table = self._table(name)
            table.history.clear()
            table.floor = mark
