"""Taint-based eviction, as kube-controller-manager's taint eviction controller does it.

A pod bound to a node with NoExecute taints is deleted (gracefully, with its own grace
period) when some taint is not tolerated (at once), or when the shortest `tolerationSeconds`
among the tolerations it uses runs out, counted from when this controller first saw it
needing eviction; a pod that tolerates every such taint without `tolerationSeconds` stays.
When the taints go before the time is up, the eviction is cancelled. Before deleting, the pod
gets the DisruptionTarget condition (reason DeletionByTaintManager) and an Event, as in kube.
A pod evicted from a node whose kubelet is stopped stays Terminating until the kubelet is
back or the pod is force-deleted, as on a real partitioned node.

A pass costs O(the pods on tainted nodes), not O(all nodes + all pods) (issue #26): nodes with
NoExecute taints and pods by node are indexed as their events come.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from devkube.machinery.client import ApiClient, ApiError, WatchEvent, resource_path
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.index import Index
from devkube.machinery.informer import Informer
from devkube.machinery.nodes import toleration_matches
from kubefacts.timestamps import now_rfc3339

log = logging.getLogger(__name__)

COMPONENT = "taint-eviction-controller"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def no_execute_taints(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    taints: list[Mapping[str, Any]] = (node.get("spec") or {}).get("taints") or []
    return [t for t in taints if t.get("effect") == "NoExecute"]


def tolerated_for(pod: Mapping[str, Any], taints: Sequence[Mapping[str, Any]]) -> float | None:
    """Seconds the pod may stay on a node with these NoExecute taints: math.inf for ever,
    None when some taint is not tolerated at all (evict now)."""
    tolerations = [
        t
        for t in (pod.get("spec") or {}).get("tolerations") or []
        if t.get("effect") in (None, "", "NoExecute")
    ]
    shortest = math.inf
    for taint in taints:
        used = [t for t in tolerations if toleration_matches(t, taint)]
        if not used:
            return None
        for toleration in used:
            seconds = toleration.get("tolerationSeconds")
            if seconds is not None:
                shortest = min(shortest, max(float(seconds), 0.0))
    return shortest


class TaintEvictionController:
    def __init__(
        self,
        client: ApiClient,
        *,
        nodes: Informer,
        pods: Informer,
        debounce: float = 0.05,
    ) -> None:
        self._client = client
        self.nodes = nodes
        self.pods = pods
        # pod uid -> (loop time first seen needing eviction, tolerated seconds)
        self._scheduled: dict[str, tuple[float, float]] = {}
        self._evicted: set[str] = set()
        self._wake_at = math.inf
        self._loop = ControlLoop(
            "devcluster taint eviction",
            self.sweep,
            period=self._until_due,
            debounce=debounce,
            failure="taint eviction pass failed",
        )
        self._tainted = Index(nodes, lambda n: ("tainted",) if no_execute_taints(n) else ())
        self._on_node = Index(
            pods, lambda p: (str(node),) if (node := (p.get("spec") or {}).get("nodeName")) else ()
        )
        nodes.subscribe(self._loop.changed)
        pods.subscribe(self._pod_changed)

    def _pod_changed(self, event: WatchEvent) -> None:
        if event.type == "DELETED":
            self._evicted.discard(str(_meta(event.object).get("uid")))
        elif event.type == "SYNC":
            self._evicted &= {str(_meta(p).get("uid")) for p in event.object.get("items") or []}
        self._loop.changed(event)

    def _until_due(self) -> float:
        """Until the next toleration runs out, and a minute at most."""
        wait = max(self._wake_at - asyncio.get_running_loop().time(), 0.0)
        return min(wait, 60.0)

    async def start(self) -> None:
        self._loop.start()
        self._loop.poke()

    async def stop(self) -> None:
        await self._loop.stop()

    async def sweep(self) -> None:
        """One pass: schedule, cancel or carry out evictions."""
        now = asyncio.get_running_loop().time()
        tainted = {
            str(_meta(n).get("name")): no_execute_taints(n)
            for n in list(self._tainted.bucket("tainted").values())
        }
        if not tainted and not self._scheduled:
            self._wake_at = math.inf
            return
        live: set[str] = set()
        due = []
        wake = math.inf
        on_tainted = [p for node in tainted for p in list(self._on_node.bucket(node).values())]
        for pod in on_tainted:
            meta = _meta(pod)
            uid = str(meta.get("uid"))
            node = str((pod.get("spec") or {}).get("nodeName"))
            if meta.get("deletionTimestamp") or uid in self._evicted:
                continue
            seconds = tolerated_for(pod, tainted[node])
            if seconds == math.inf:
                continue
            live.add(uid)
            seconds = seconds or 0.0
            since, _ = self._scheduled.get(uid, (now, seconds))
            self._scheduled[uid] = (since, seconds)
            if now >= since + seconds:
                due.append(pod)
            else:
                wake = min(wake, since + seconds)
        for uid in [u for u in self._scheduled if u not in live]:
            del self._scheduled[uid]  # taint gone, tolerated for ever now, or pod gone
        self._wake_at = wake
        await asyncio.gather(*(self._evict(pod) for pod in due))

    async def _evict(self, pod: Mapping[str, Any]) -> None:
        meta = _meta(pod)
        namespace, name, uid = str(meta.get("namespace")), str(meta.get("name")), meta.get("uid")
        self._evicted.add(str(uid))
        self._scheduled.pop(str(uid), None)
        path = resource_path("v1", "pods", namespace, name)
        now = now_rfc3339()
        conditions = [
            c
            for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") != "DisruptionTarget"
        ]
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
                "lastTransitionTime": now,
            }
        )
        log.info("evicting %s/%s from tainted node %s", namespace, name, pod["spec"]["nodeName"])
        try:
            await self._client.patch(f"{path}/status", {"status": {"conditions": conditions}})
            await self._event(pod, now)
            await self._client.delete(path, uid=str(uid))
        except ApiError as error:
            if error.status not in (404, 409):
                log.warning("evicting %s/%s: %s", namespace, name, error)
                self._evicted.discard(str(uid))
                self._loop.poke()

    async def _event(self, pod: Mapping[str, Any], now: str) -> None:
        meta = _meta(pod)
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{meta.get('name')}.",
                "namespace": meta.get("namespace"),
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": meta.get("namespace"),
                "name": meta.get("name"),
                "uid": meta.get("uid"),
            },
            "type": "Normal",
            "reason": "TaintManagerEviction",
            "message": f"Marking for deletion Pod {meta.get('namespace')}/{meta.get('name')}",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        with contextlib.suppress(ApiError):
            await self._client.create(
                resource_path("v1", "events", str(meta.get("namespace"))), event
            )
