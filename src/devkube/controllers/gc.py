"""Owner-reference garbage collection, as kube-controller-manager's collector does it.

- Background: a dependent whose every owner (matched by uid) is gone is deleted; owners that
  are gone are dropped from a dependent that still has a live owner.
- Foreground: an owner being deleted with the `foregroundDeletion` finalizer has its
  dependents deleted, and loses the finalizer once no dependent with blockOwnerDeletion is left.
- Orphan: an owner being deleted with the `orphan` finalizer has its ownerReferences removed
  from its dependents, then loses the finalizer.
An owner missing from the watched caches is confirmed gone by a live GET before anything is
deleted, so a lagging watch can never make the collector delete a live object's dependents.

A pass costs O(the change), not O(every watched object) (issue #26): objects and their
dependents are indexed by uid as their events come, and a pass looks only at the objects that
changed, the owners of those (a foreground deletion waits for its dependents), the dependents
of those deleted (their owner is gone), and the owners still being deleted with a finalizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devkube.machinery.client import ApiClient, ApiError, WatchEvent
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.discovery import Discovery, ResourceInfo
from devkube.machinery.informer import Informer

log = logging.getLogger(__name__)

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
# Kinds never worth watching for owner references (high volume, no dependents in practice).
SKIPPED = frozenset({"events", "bindings", "componentstatuses", "tokenreviews"})


@dataclass(frozen=True)
class _Object:
    info: ResourceInfo
    body: Mapping[str, Any]

    @property
    def meta(self) -> Mapping[str, Any]:
        meta: Mapping[str, Any] = self.body.get("metadata") or {}
        return meta

    @property
    def uid(self) -> str:
        return str(self.meta.get("uid", ""))

    @property
    def refs(self) -> list[Mapping[str, Any]]:
        refs: list[Mapping[str, Any]] = self.meta.get("ownerReferences") or []
        return refs

    def path(self) -> str:
        return self.info.path(self.meta.get("namespace"), str(self.meta.get("name")))


class GarbageCollector:
    def __init__(
        self,
        client: ApiClient,
        discovery: Discovery | None = None,
        *,
        rediscover_every: float = 1.0,
        debounce: float = 0.05,
        shared: Mapping[str, Informer] | None = None,
    ) -> None:
        self._client = client
        self._discovery = discovery or Discovery(client)
        self._rediscover_every = rediscover_every
        self._loop = ControlLoop(
            "devcluster gc",
            self._pass,
            period=rediscover_every,
            debounce=debounce,
            failure="garbage collection pass failed",
        )
        self._informers: dict[tuple[str, str], tuple[ResourceInfo, Informer]] = {}
        # Informers by path that someone else owns (started and stopped by them).
        self._shared = dict(shared or {})
        for informer in self._shared.values():
            informer.subscribe(self._changed)
        self._seen: dict[str, tuple[str, str, str]] = {}  # uid -> what the collector reads
        self._discovered_at = 0.0
        self.passes = 0
        # Every watched object by uid, its dependents by owner uid, and the uids to look at.
        self._objects: dict[str, _Object] = {}
        self._dependents: dict[str, set[str]] = {}
        self._dirty: set[str] = set()
        self._indexed: set[int] = set()  # the informers (by id) whose objects are indexed
        #: Objects looked at by passes so far (tests count them).
        self.looked_at = 0

    def _index(self, info: ResourceInfo, event: WatchEvent) -> None:
        """Keep the uid index of one informer's objects (its events, in order)."""
        if event.type == "SYNC":
            for uid in [u for u, o in self._objects.items() if o.info == info]:
                self._forget(uid)
            for body in event.object.get("items") or []:
                self._remember(_Object(info, body))
        elif event.type == "DELETED":
            self._forget(str((event.object.get("metadata") or {}).get("uid", "")))
        elif event.type in ("ADDED", "MODIFIED"):
            self._remember(_Object(info, event.object))

    def _remember(self, o: _Object) -> None:
        old = self._objects.get(o.uid)
        if old is not None:
            self._unlink(old)
        self._objects[o.uid] = o
        for ref in o.refs:
            owner = str(ref.get("uid"))
            self._dependents.setdefault(owner, set()).add(o.uid)
            self._dirty.add(owner)
        self._dirty.add(o.uid)

    def _forget(self, uid: str) -> None:
        o = self._objects.pop(uid, None)
        if o is None:
            return
        self._unlink(o)
        self._dirty |= self._dependents.get(uid, set())  # their owner is gone
        self._dirty.update(str(ref.get("uid")) for ref in o.refs)

    def _unlink(self, o: _Object) -> None:
        for ref in o.refs:
            owner = str(ref.get("uid"))
            dependents = self._dependents.get(owner)
            if dependents is not None:
                dependents.discard(o.uid)
                if not dependents:
                    del self._dependents[owner]

    def _changed(self, event: WatchEvent) -> None:
        # Only what the collector reads makes a pass worth it: a status write or a Lease
        # renewal (every node, every few seconds) changes none of it.
        meta = event.object.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if event.type == "DELETED":
            self._seen.pop(uid, None)
        elif event.type in ("ADDED", "MODIFIED"):
            signature = (
                repr(meta.get("ownerReferences")),
                str(meta.get("deletionTimestamp")),
                repr(meta.get("finalizers")),
            )
            unchanged = self._seen.get(uid) == signature
            self._seen[uid] = signature
            if unchanged and event.type == "MODIFIED":
                return
        self._loop.poke()

    async def start(self) -> None:
        await self._sync_informers()
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        for _, informer in self._informers.values():
            if informer not in self._shared.values():
                await informer.stop()
        self._informers.clear()

    async def _sync_informers(self) -> None:
        """Watch every listable, deletable resource the server serves now (CRDs come and go)."""
        self._discovered_at = asyncio.get_running_loop().time()
        resources = await self._discovery.refresh()
        wanted = {
            (r.api_version, r.plural): r
            for r in resources
            if r.plural not in SKIPPED and {"list", "watch", "delete"} <= r.verbs
        }
        for key in [k for k in self._informers if k not in wanted]:
            info, gone = self._informers.pop(key)
            self._indexed.discard(id(gone))
            for uid in [u for u, o in self._objects.items() if o.info == info]:
                self._forget(uid)
            if gone not in self._shared.values():
                await gone.stop()
        started = []
        for key, info in wanted.items():
            if key not in self._informers:
                informer = self._shared.get(info.path())
                if informer is None:
                    informer = Informer(self._client, info.path(), self._changed)
                if id(informer) not in self._indexed:
                    self._indexed.add(id(informer))
                    self._index(info, WatchEvent("SYNC", {"items": list(informer.cache.values())}))
                    informer.subscribe(functools.partial(self._index, info))
                informer.start()
                self._informers[key] = (info, informer)
                started.append(informer)
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
        # races with completion, and then stop() would wait for this loop forever.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._rediscover_every * 5):
                await asyncio.gather(*(i.synced.wait() for i in started))

    async def _pass(self) -> None:
        """Rediscover what to watch when that is due, then collect."""
        now = asyncio.get_running_loop().time()
        if now - self._discovered_at >= self._rediscover_every:
            await self._sync_informers()
        await self.collect()

    async def collect(self) -> None:
        """One pass over the objects in question (the class docstring)."""
        self.passes += 1
        dirty, self._dirty = self._dirty, set()
        work = []
        for uid in dirty:
            o = self._objects.get(uid)
            if o is None:
                continue
            self.looked_at += 1
            finalizers = o.meta.get("finalizers") or []
            children = [
                self._objects[d] for d in self._dependents.get(uid, ()) if d in self._objects
            ]
            if o.meta.get("deletionTimestamp") and ORPHAN in finalizers:
                work.append(self._orphan(o, children))
                self._dirty.add(uid)  # looked at again until its finalizer is gone
            elif o.meta.get("deletionTimestamp") and FOREGROUND in finalizers:
                work.append(self._foreground(o, children))
                self._dirty.add(uid)
            missing = [r for r in o.refs if str(r.get("uid")) not in self._objects]
            if missing and not o.meta.get("deletionTimestamp"):
                work.append(self._dangling(o, missing))
        try:
            await asyncio.gather(*work)
        except BaseException:
            self._dirty |= dirty  # a failed pass is not a look: all of it again next time
            raise

    async def _owner_gone(self, dependent: _Object, ref: Mapping[str, Any]) -> bool | None:
        """None: not known yet (a kind not discovered, an error): never guess it is gone."""
        info = self._discovery.lookup(str(ref.get("apiVersion")), str(ref.get("kind")))
        if info is None:
            return None
        try:
            owner = await self._client.get(info.path(dependent.meta.get("namespace"), ref["name"]))
        except ApiError as error:
            return True if error.status == 404 else None
        return str((owner.get("metadata") or {}).get("uid")) != str(ref.get("uid"))

    async def _dangling(self, o: _Object, missing: list[Mapping[str, Any]]) -> None:
        verdicts = [await self._owner_gone(o, r) for r in missing]
        if None in verdicts:
            # Passes look only at what changed: one undecided is asked again at the next
            # pass, as every pass asked before, or its dependent would leak for ever.
            self._dirty.add(o.uid)
        gone = [r for r, verdict in zip(missing, verdicts, strict=True) if verdict]
        if not gone:
            return
        gone_uids = {str(r.get("uid")) for r in gone}
        remaining = [r for r in o.refs if str(r.get("uid")) not in gone_uids]
        try:
            if remaining:
                await self._client.patch(
                    o.path(),
                    {"metadata": {"ownerReferences": remaining}},
                )
            else:
                log.info("gc: deleting %s (owner gone)", o.path())
                await self._client.delete(o.path(), propagation_policy="Background", uid=o.uid)
        except ApiError as error:
            if error.status not in (404, 409):
                self._dirty.add(o.uid)  # again next pass
                log.warning("gc: %s: %s", o.path(), error)

    async def _orphan(self, owner: _Object, children: list[_Object]) -> None:
        try:
            for child in children:
                remaining = [r for r in child.refs if str(r.get("uid")) != owner.uid]
                await self._client.patch(
                    child.path(), {"metadata": {"ownerReferences": remaining or None}}
                )
            await self._drop_finalizer(owner, ORPHAN)
        except ApiError as error:
            if error.status != 404:
                log.warning("gc: orphaning dependents of %s: %s", owner.path(), error)

    async def _foreground(self, owner: _Object, children: list[_Object]) -> None:
        for child in children:
            if not child.meta.get("deletionTimestamp"):
                with contextlib.suppress(ApiError):
                    await self._client.delete(child.path(), propagation_policy="Foreground")
        blocking = [
            c
            for c in children
            if any(str(r.get("uid")) == owner.uid and r.get("blockOwnerDeletion") for r in c.refs)
        ]
        if not blocking:
            try:
                await self._drop_finalizer(owner, FOREGROUND)
            except ApiError as error:
                if error.status != 404:
                    log.warning("gc: foreground deletion of %s: %s", owner.path(), error)

    async def _drop_finalizer(self, o: _Object, finalizer: str) -> None:
        finalizers = [f for f in o.meta.get("finalizers") or [] if f != finalizer]
        await self._client.patch(o.path(), {"metadata": {"finalizers": finalizers or None}})
