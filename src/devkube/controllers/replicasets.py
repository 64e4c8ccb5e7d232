"""The ReplicaSet controller: keeps `spec.replicas` pods from the template, owned by the set.

As kube-controller-manager's: pods carry a controller ownerReference to their ReplicaSet (so
the garbage collector deletes them with it); orphans that match the selector are adopted;
pods that are finished or being deleted do not count; surplus pods go unscheduled, pending,
not ready, then newest first. A pod just created or deleted counts as such until the watch
shows it (expectations), so a lagging cache never makes it create or delete twice. Status
(replicas, fullyLabeledReplicas, readyReplicas, availableReplicas, observedGeneration) is
written through the status subresource only when it changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from devkube.controllers.workloads import (
    APPS,
    EXPECTATION_TTL,
    PassLoop,
    controller_uid,
    meta,
    owner_reference,
    pod_is_active,
    pod_is_ready,
    replicas_of,
    uid,
)
from devkube.machinery.client import ApiClient, ApiError, resource_path
from devkube.machinery.informer import Informer
from devkube.machinery.selectors import label_selector_matches
from kubefacts.objects import Obj

log = logging.getLogger(__name__)

PATH = resource_path(APPS, "replicasets")


@dataclass
class _Expectations:
    """Pods this controller created (by name) or deleted (by uid) that the cache may not show."""

    created: dict[str, float] = field(default_factory=dict)
    deleted: dict[str, float] = field(default_factory=dict)

    def settle(self, owned: Mapping[str, Obj], now: float) -> None:
        """Forget what the cache now shows, and what is too old to wait for."""
        names = {str(meta(p).get("name")) for p in owned.values()}
        self.created = {n: t for n, t in self.created.items() if n not in names and t > now}
        self.deleted = {
            u: t
            for u, t in self.deleted.items()
            if u in owned and not meta(owned[u]).get("deletionTimestamp") and t > now
        }


def _available(pod: Obj, min_ready: int, now: datetime) -> bool:
    if not pod_is_ready(pod):
        return False
    if min_ready <= 0:
        return True
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            since = str(condition.get("lastTransitionTime") or "")
            try:
                then = datetime.strptime(since[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
            except ValueError:
                return False
            return (now - then).total_seconds() >= min_ready
    return False


def _deletion_order(pod: Obj) -> tuple[int, int, int, str]:
    """Cheapest to lose first: unscheduled, then pending, then not ready, then newest."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    created = str(meta(pod).get("creationTimestamp", ""))
    newest_first = "".join(chr(0x10FFFF - ord(c)) for c in created)
    return (
        0 if not spec.get("nodeName") else 1,
        0 if status.get("phase") == "Pending" else 1,
        0 if not pod_is_ready(pod) else 1,
        newest_first,
    )


def pod_from_template(rs: Obj) -> dict[str, Any]:
    template = (rs.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    pod_meta: dict[str, Any] = {
        "generateName": f"{meta(rs)['name']}-",
        "namespace": meta(rs).get("namespace"),
        "labels": dict(tmeta.get("labels") or {}),
        "ownerReferences": [owner_reference(rs, "ReplicaSet")],
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": dict(template.get("spec") or {}),
    }


class ReplicaSetController:
    def __init__(
        self,
        client: ApiClient,
        *,
        pods: Informer,
        replicasets: Informer | None = None,
        concurrency: int = 16,
    ) -> None:
        self._client = client
        self.pods = pods
        self.replicasets = replicasets or Informer(client, PATH)
        self._writes = asyncio.Semaphore(concurrency)
        self._expect: dict[str, _Expectations] = {}
        self._loop = PassLoop("devcluster replicasets", [self.replicasets, pods], self.sync)

    async def start(self) -> None:
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def sync(self) -> None:
        """One pass over every ReplicaSet."""
        sets = list(self.replicasets.cache.values())
        if not sets and not self._expect:
            return  # nothing to do for a cluster of bare pods, however many there are
        loop_now = asyncio.get_running_loop().time()
        owned: dict[str, dict[str, Obj]] = {}
        orphans: dict[str, list[Obj]] = {}
        for pod in list(self.pods.cache.values()):
            owner = controller_uid(pod)
            if owner is not None:
                owned.setdefault(owner, {})[uid(pod)] = pod
            elif pod_is_active(pod):
                orphans.setdefault(str(meta(pod).get("namespace")), []).append(pod)
        live = {uid(rs) for rs in sets}
        self._expect = {k: v for k, v in self._expect.items() if k in live}
        await asyncio.gather(
            *(self._sync_one(rs, owned.get(uid(rs), {}), orphans, loop_now) for rs in sets)
        )

    async def _sync_one(
        self,
        rs: Obj,
        owned: dict[str, Obj],
        orphans: dict[str, list[Obj]],
        loop_now: float,
    ) -> None:
        if meta(rs).get("deletionTimestamp"):
            return
        spec = rs.get("spec") or {}
        selector = spec.get("selector")
        namespace = str(meta(rs).get("namespace"))
        for pod in orphans.get(namespace, []):
            labels = meta(pod).get("labels") or {}
            matches = bool(selector) and label_selector_matches(selector, labels)
            if matches and await self._adopt(rs, pod):
                owned[uid(pod)] = pod
        expect = self._expect.setdefault(uid(rs), _Expectations())
        expect.settle(owned, loop_now)
        active = [p for p in owned.values() if pod_is_active(p) and uid(p) not in expect.deleted]
        count = len(active) + len(expect.created)
        wanted = replicas_of(rs)
        if count < wanted:
            await asyncio.gather(
                *(self._create(rs, expect, loop_now) for _ in range(wanted - count))
            )
        elif count > wanted and not expect.created:
            surplus = sorted(active, key=_deletion_order)[: count - wanted]
            await asyncio.gather(*(self._delete(pod, expect, loop_now) for pod in surplus))
        await self._write_status(rs, active)

    async def _adopt(self, rs: Obj, pod: Obj) -> bool:
        refs = [*(meta(pod).get("ownerReferences") or []), owner_reference(rs, "ReplicaSet")]
        path = resource_path("v1", "pods", meta(pod).get("namespace"), meta(pod)["name"])
        patch = {
            "metadata": {
                "ownerReferences": refs,
                "resourceVersion": meta(pod).get("resourceVersion"),
            }
        }
        try:
            async with self._writes:
                await self._client.patch(path, patch)
        except ApiError as error:
            log.debug("adopting %s: %s", path, error)
            return False
        return True

    async def _create(self, rs: Obj, expect: _Expectations, loop_now: float) -> None:
        namespace = str(meta(rs).get("namespace"))
        try:
            async with self._writes:
                created = await self._client.create(
                    resource_path("v1", "pods", namespace), pod_from_template(rs)
                )
        except ApiError as error:
            log.warning("replicaset %s/%s: creating a pod: %s", namespace, meta(rs)["name"], error)
            if error.status not in (403, 422):
                self._loop.poke()
            # An admission refusal (quota, PodSecurity, LimitRange) waits for the resync, as
            # kube's rate-limited requeue does, instead of retrying hot.
            return
        expect.created[str(meta(created)["name"])] = loop_now + EXPECTATION_TTL

    async def _delete(self, pod: Obj, expect: _Expectations, loop_now: float) -> None:
        path = resource_path("v1", "pods", meta(pod).get("namespace"), meta(pod)["name"])
        expect.deleted[uid(pod)] = loop_now + EXPECTATION_TTL
        try:
            async with self._writes:
                await self._client.delete(path, uid=uid(pod))
        except ApiError as error:
            if error.status not in (404, 409):
                expect.deleted.pop(uid(pod), None)
                log.warning("deleting %s: %s", path, error)

    async def _write_status(self, rs: Obj, active: list[Obj]) -> None:
        spec = rs.get("spec") or {}
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        now = datetime.now(UTC)
        min_ready = int(spec.get("minReadySeconds") or 0)
        counts = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(
                1
                for p in active
                if all(
                    (meta(p).get("labels") or {}).get(k) == v for k, v in template_labels.items()
                )
            ),
            "readyReplicas": sum(1 for p in active if pod_is_ready(p)),
            "availableReplicas": sum(1 for p in active if _available(p, min_ready, now)),
        }
        status: dict[str, Any] = {k: (v or None) for k, v in counts.items()}
        status["replicas"] = len(active)  # always present, even 0
        status["observedGeneration"] = meta(rs).get("generation", 1)
        current = rs.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()):
            return
        path = resource_path(
            APPS, "replicasets", meta(rs).get("namespace"), meta(rs)["name"], "status"
        )
        try:
            async with self._writes:
                await self._client.patch(path, {"status": status})
        except ApiError as error:
            if error.status != 404:
                log.warning("status of %s: %s", path, error)
