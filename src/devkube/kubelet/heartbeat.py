"""The kubelets' heartbeats: a Lease per node, renewed often, and the node's Ready condition.

As a real kubelet (since NodeLease): it renews `kube-node-lease/<node>` every quarter of the
lease duration and posts node status only when the Ready condition it would report differs
from the stored one, or every `status_every` seconds otherwise (kube: 5 minutes). The lease
is owned by its Node, so deleting the node lets the garbage collector remove the lease.
Nodes whose kubelet is stopped (`readiness` answers None) send nothing; the node lifecycle
controller notices that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from devkube.machinery.client import ApiClient, ApiError, resource_path
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.informer import Informer
from devkube.machinery.nodes import LEASE_API, LEASE_NAMESPACE, lease_path
from devkube.nodes import PRESSURE_CONDITIONS
from kubefacts.timestamps import micro_time, rfc3339

log = logging.getLogger(__name__)

READY_MESSAGE = "kubelet is posting ready status"
NOT_READY_MESSAGE = "container runtime is down"

#: What a kubelet reports for a node: None (stopped: nothing), True (Ready) or False (NotReady).
Readiness = Callable[[str], bool | None]


class Heartbeats:
    def __init__(
        self,
        client_for: Callable[[str], ApiClient],
        nodes: Informer,
        readiness: Readiness,
        *,
        lease_duration: float = 10.0,
        status_every: float = 60.0,
        concurrency: int = 16,
    ) -> None:
        self._client_for = client_for
        self._nodes = nodes
        self._readiness = readiness
        self.lease_duration = lease_duration
        self.renew_every = lease_duration / 4
        self.status_every = status_every
        self._writes = asyncio.Semaphore(concurrency)
        self._posted: dict[str, float] = {}  # node -> loop time of the last status post
        self._loop = ControlLoop(
            "devcluster kubelet heartbeats", self.beat_all, period=self.renew_every
        )

    def start(self) -> None:
        self._loop.start()
        self._loop.poke()

    async def stop(self) -> None:
        await self._loop.stop()

    async def beat_all(self) -> None:
        """One heartbeat of every node's kubelet; one node's failure is not another's."""
        names = [name for _, name in list(self._nodes.cache)]
        await asyncio.gather(*(self.beat(name) for name in names), return_exceptions=True)

    async def beat(self, name: str) -> None:
        """One heartbeat of node `name`'s kubelet: lease renewed, status posted if due."""
        ready = self._readiness(name)
        node = self._nodes.cache.get(("", name))
        if ready is None or node is None:
            return
        async with self._writes:
            try:
                await self._renew(node)
                await self._post_status(node, ready)
            except ApiError as error:
                log.debug("heartbeat of %s: %s", name, error)

    async def _renew(self, node: Mapping[str, Any]) -> None:
        meta = node.get("metadata") or {}
        name = str(meta.get("name"))
        spec = {
            "holderIdentity": name,
            "leaseDurationSeconds": max(1, math.ceil(self.lease_duration)),
            "renewTime": micro_time(datetime.now(UTC)),
        }
        try:
            await self._client_for(name).patch(lease_path(name), {"spec": spec})
            return
        except ApiError as error:
            if error.status != 404:
                raise
        lease = {
            "apiVersion": LEASE_API,
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": LEASE_NAMESPACE,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": name, "uid": meta.get("uid")}
                ],
            },
            "spec": spec,
        }
        with contextlib.suppress(ApiError):  # 409: created meanwhile; the next beat renews
            await self._client_for(name).create(lease_path(), lease)

    async def _post_status(self, node: Mapping[str, Any], ready: bool) -> None:
        """Post the kubelet's conditions (the pressure ones False, Ready as given) when one
        differs from the stored node, or when the last post is `status_every` old."""
        name = str((node.get("metadata") or {}).get("name"))
        stored = {str(c.get("type")): c for c in (node.get("status") or {}).get("conditions") or []}
        wanted = {kind: ("False", reason, message) for kind, reason, message in PRESSURE_CONDITIONS}
        wanted["Ready"] = (
            ("True", "KubeletReady", READY_MESSAGE)
            if ready
            else ("False", "KubeletNotReady", NOT_READY_MESSAGE)
        )
        now = asyncio.get_running_loop().time()
        stale = now - self._posted.get(name, -math.inf) >= self.status_every
        differs = any(
            stored.get(kind, {}).get("status") != status for kind, (status, _, _) in wanted.items()
        )
        if not differs and not stale:
            return
        stamp = rfc3339(datetime.now(UTC))
        conditions = []
        for kind, (status, reason, message) in wanted.items():
            current = stored.get(kind) or {}
            changed = current.get("status") != status
            conditions.append(
                {
                    "type": kind,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp
                    if changed
                    else current.get("lastTransitionTime", stamp),
                }
            )
        others = [c for kind, c in stored.items() if kind not in wanted]
        await self._client_for(name).patch(
            resource_path("v1", "nodes", name=name, subresource="status"),
            {"status": {"conditions": [*conditions, *others]}},
        )
        self._posted[name] = now
