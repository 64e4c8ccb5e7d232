"""Lease-based leader election, so that of several replicas exactly one writes.

client-go's rules: a candidate takes the Lease when it is free or when its holder has not
renewed it for ``lease_duration`` as measured on the candidate's own clock (from when it last
saw the record change, so clock skew between machines does not matter); the leader renews
every ``retry_period`` and gives up leading if it cannot renew within ``renew_deadline``.
Updates are compare-and-swap on resourceVersion, so two candidates never both win. On a clean
stop the leader releases the Lease so a successor takes over at once. A term that ends by
itself (the leading task crashed) is logged with what crashed, not as a lost lease, and the
replica campaigns again after ``retry_period``, so a term that crashes at once does not spin.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubefacts.timestamps import micro_time
from raycluster_operator.api.objects import Lease
from raycluster_operator.kube import Conflict, KubeClient, KubeError, NotFound

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseTiming:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        timing: LeaseTiming = LeaseTiming(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timing = timing
        self._clock = clock
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None
        self.is_leader = False

    def _wall(self) -> str:
        return micro_time(datetime.now(UTC))

    async def try_acquire_or_renew(self) -> bool:
        now = self._wall()
        try:
            lease = await self.client.get_lease(self.namespace, self.name)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": max(1, round(self.timing.lease_duration)),
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": 0,
                },
            }
            try:
                self._lease = await self.client.create_lease(body)
            except Conflict:
                return False
            self._note(self._lease)
            return True
        current = Lease(lease)
        holder = current.holder
        self._note(lease)
        expired = self._clock() >= self._observed_at + (
            current.duration_seconds or self.timing.lease_duration
        )
        if holder and holder != self.identity and not expired:
            return False
        new_spec: dict[str, object] = dict(current.spec)
        new_spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, round(self.timing.lease_duration)),
            renewTime=now,
        )
        if holder != self.identity:
            new_spec["acquireTime"] = now
            new_spec["leaseTransitions"] = current.transitions + 1
        lease = {**lease, "spec": new_spec}
        try:
            self._lease = await self.client.replace_lease(lease)
        except Conflict:
            return False
        self._note(self._lease)
        return True

    def _note(self, lease: dict[str, Any]) -> None:
        view = Lease(lease)
        record = (view.holder, view.renew_time)
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock()

    async def release(self) -> None:
        """Hand the Lease back (holder cleared, 1 s duration) if we still hold it. A stop
        cancels the renewal loop, maybe after the server applied a renewal whose answer we never
        read: on that Conflict the Lease is read again, so a successor need not wait for it to
        expire."""
        lease, self._lease = self._lease, None
        for _ in range(3):
            if lease is None:
                return
            spec: dict[str, object] = dict(Lease(lease).spec)
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=self._wall())
            try:
                await self.client.replace_lease({**lease, "spec": spec})
                return
            except Conflict:
                pass
            except KubeError:
                return
            try:
                lease = await self.client.get_lease(self.namespace, self.name)
            except KubeError:
                return

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Campaign, lead while renewals succeed, campaign again after losing; release on
        cancellation. ``lead`` is cancelled when leadership is lost."""
        try:
            while True:
                await self._acquire()
                log.info(
                    "leader election: %s became the leader of %s/%s",
                    self.identity,
                    self.namespace,
                    self.name,
                )
                self.is_leader = True
                task = asyncio.create_task(lead(), name="leading")
                try:
                    await self._renew_until_lost(task)
                    by_itself = task.done()
                finally:
                    self.is_leader = False
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
                if not by_itself:
                    log.warning("leader election: %s lost the lease", self.identity)
                else:
                    self._ended(task)
                    await asyncio.sleep(self.timing.retry_period)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.release())

    def _ended(self, task: asyncio.Task[None]) -> None:
        """Say why a term that ended by itself ended: what crashed, with its traceback."""
        error = None if task.cancelled() else task.exception()
        if error is None:
            log.warning("leader election: %s stopped leading: the term ended", self.identity)
        else:
            log.error(
                "leader election: %s stopped leading: the leading task crashed: %r",
                self.identity,
                error,
                exc_info=error,
            )

    async def _acquire(self) -> None:
        while True:
            try:
                if await self.try_acquire_or_renew():
                    return
            except KubeError as exc:
                log.warning("leader election: %s", exc)
            await asyncio.sleep(self.timing.retry_period)

    async def _renew_until_lost(self, task: asyncio.Task[None]) -> None:
        last_renew = self._clock()
        while not task.done():
            done, _ = await asyncio.wait({task}, timeout=self.timing.retry_period)
            if done:
                return
            try:
                async with asyncio.timeout(self.timing.renew_deadline):
                    ok = await self.try_acquire_or_renew()
            except (KubeError, TimeoutError) as exc:
                log.warning("leader election: renew failed: %s", exc)
                ok = False
            if ok:
                last_renew = self._clock()
            elif self._clock() - last_renew >= self.timing.renew_deadline:
                return
