"""The resource quota controller, as kube-controller-manager's keeps every ResourceQuota's
`status.hard` (a copy of `spec.hard`) and `status.used` (what the namespace's objects use,
one entry per hard name, zeros included) true.

Admission charges a create at once (`server/admission/quota.py`); this controller is what frees the
charge when a pod ends (Failed/Succeeded), is deleted, stays terminating past its grace (a
lost node's pods; the periodic pass notices the grace running out), or never got stored,
and what counts objects of other kinds (`count/services`, `count/deployments.apps`, ...),
listed from the API at each pass. A pass runs on any quota or pod change and every `every` seconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from devkube.machinery.client import ApiClient, ApiError
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.discovery import Discovery
from devkube.machinery.informer import Informer
from kubefacts import quota as q

log = logging.getLogger(__name__)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def pods_usage(quota: Mapping[str, Any], pods: list[Mapping[str, Any]], now: datetime) -> q.Usage:
    """The quota's pod-derived names summed over the pods its scopes cover; a pod stuck
    terminating past its grace at `now` counts only as an object, as in kube."""
    total: q.Usage = {}
    for pod in pods:
        if q.quota_covers_pod(quota, pod):
            total = q.add(total, q.pod_usage(pod, now))
    return total


class ResourceQuotaController:
    def __init__(
        self,
        client: ApiClient,
        discovery: Discovery,
        *,
        pods: Informer,
        quotas: Informer,
        every: float = 5.0,
    ) -> None:
        self._client = client
        self._discovery = discovery
        self.pods = pods
        self.quotas = quotas
        #: (uid, resourceVersion) of the quotas already logged as unreadable.
        self._unreadable: set[tuple[str, str]] = set()
        self._loop = ControlLoop(
            "devcluster resource quota",
            self.sync,
            period=every,
            failure="resource quota sync failed",
        )
        pods.subscribe(self._loop.changed)
        quotas.subscribe(self._loop.changed)

    async def start(self) -> None:
        self.quotas.start()
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        await self.quotas.stop()

    async def sync(self) -> None:
        by_ns: dict[str, list[Mapping[str, Any]]] = {}
        for quota in list(self.quotas.cache.values()):
            by_ns.setdefault(str(_meta(quota).get("namespace") or ""), []).append(quota)
        await asyncio.gather(*(self._sync_namespace(ns, quotas) for ns, quotas in by_ns.items()))

    async def _sync_namespace(self, ns: str, quotas: list[Mapping[str, Any]]) -> None:
        """The pods are listed live, after the quotas were read from the cache: every charge
        a cached quota carries is for a pod already stored (admission charges and stores in
        one step), so a lagging pod cache can never undo a charge; a charge made after the
        read makes the status write conflict, and the next pass counts again."""
        listing = await self._client.list(f"/api/v1/namespaces/{ns}/pods")
        pods = list(listing.get("items") or [])
        await asyncio.gather(*(self._sync_one(quota, pods) for quota in quotas))

    async def _sync_one(self, quota: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> None:
        meta = _meta(quota)
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        hard = self._hard(quota)
        if hard is None:
            return
        usage = pods_usage(quota, pods, datetime.now(UTC))
        used: dict[str, str] = {}
        for key in hard:
            if key in usage:
                used[key] = q.format_amount(usage[key])
            elif q.pod_resource(key) or q.quota_scopes(quota):
                used[key] = "0"
            else:
                used[key] = str(await self._count(ns, key))
        status = quota.get("status") or {}
        if status.get("hard") == hard and status.get("used") == used:
            return
        body = {**quota, "status": {**status, "hard": hard, "used": used}}
        try:
            await self._client.replace(
                f"/api/v1/namespaces/{ns}/resourcequotas/{name}/status", body
            )
        except ApiError as error:
            if error.status not in (404, 409):
                raise  # a conflict (admission charged meanwhile) is retried next pass

    def _hard(self, quota: Mapping[str, Any]) -> dict[str, str] | None:
        """`spec.hard` in canonical form; None for a quota stored with a quantity that does not
        parse (the API refuses one now; older or foreign data may still hold it): logged once
        per version of the quota, and skipped, as nothing it limits can be counted."""
        spec_hard = (quota.get("spec") or {}).get("hard") or {}
        try:
            return {str(k): q.format_amount(q.amount(v)) for k, v in spec_hard.items()}
        except ValueError as error:
            meta = _meta(quota)
            key = (str(meta.get("uid")), str(meta.get("resourceVersion")))
            if key not in self._unreadable:
                self._unreadable.add(key)
                log.warning(
                    "resource quota %s/%s skipped: spec.hard: %s",
                    meta.get("namespace"),
                    meta.get("name"),
                    error,
                )
            return None

    async def _count(self, ns: str, key: str) -> int:
        """How many objects an object-count name counts in `ns` (0 for an unknown kind)."""
        resource = key[len("count/") :] if key.startswith("count/") else q.LEGACY_COUNTS.get(key)
        if not resource:
            return 0
        plural, _, group = resource.partition(".")
        for info in self._discovery.resources:
            api_group = info.api_version.rpartition("/")[0]
            if info.plural == plural and api_group == group and info.namespaced:
                try:
                    listing = await self._client.list(info.path(ns))
                except ApiError:
                    return 0
                return len(listing.get("items") or [])
        return 0
