"""The pod garbage collector, as kube-controller-manager's PodGC applies two of its rules.

- Orphans: a pod bound to a node that no longer exists is marked Failed with the
  DisruptionTarget condition (reason DeletionByPodGC) and force-deleted (grace period 0): no
  kubelet will ever finish it. A node missing from the watch cache is confirmed gone by a
  live GET first, so a lagging watch never deletes the pods of a live node (kube waits out a
  40 s quarantine for the same reason).
- Out of service: a terminating pod on a node that is not Ready and carries the
  `node.kubernetes.io/out-of-service` taint (an admin's word that the node is down for good)
  is force-deleted the same way, so its replacement need not wait for a kubelet that will
  not come back.

A pass costs O(the nodes in question), not O(all pods) (issue #26): pods are indexed by node
as their events come; a pass looks at the nodes a pod was seen bound to while missing from the
node cache, the nodes deleted since the last pass, and the out-of-service nodes (indexed too).
After a re-list of either watch, every node with pods is looked at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from devkube.machinery.client import ApiClient, ApiError, WatchEvent, resource_path
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.index import Index
from devkube.machinery.informer import Informer
from devkube.machinery.nodes import ready_condition_of
from devkube.machinery.pods import TERMINAL_PHASES
from kubefacts.timestamps import now_rfc3339

log = logging.getLogger(__name__)

OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


class PodGarbageCollector:
    def __init__(
        self,
        client: ApiClient,
        *,
        nodes: Informer,
        pods: Informer,
        every: float = 2.0,
    ) -> None:
        self._client = client
        self.nodes = nodes
        self.pods = pods
        self.every = every
        self._loop = ControlLoop(
            "devcluster pod gc",
            self.collect,
            period=every,
            failure="pod garbage collection failed",
        )
        self._on_node = Index(pods, _node_of)
        self._out_of_service = Index(nodes, lambda n: ("oos",) if _out_of_service(n) else ())
        # Nodes whose pods may be orphans; None: every node with pods.
        self._suspects: set[str] | None = None
        pods.subscribe(self._pod_changed)
        nodes.subscribe(self._node_changed)

    def _pod_changed(self, event: WatchEvent) -> None:
        if event.type == "SYNC":
            self._suspects = None
        elif event.type != "DELETED" and self._suspects is not None:
            node = (event.object.get("spec") or {}).get("nodeName")
            if node and ("", node) not in self.nodes.cache:
                self._suspects.add(str(node))

    def _node_changed(self, event: WatchEvent) -> None:
        if event.type == "SYNC":
            self._suspects = None
        elif event.type == "DELETED" and self._suspects is not None:
            self._suspects.add(str(_meta(event.object).get("name")))
        self._loop.changed(event)

    async def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def collect(self) -> None:
        suspects, self._suspects = self._suspects, set()
        if suspects is None:
            suspects = {str(node) for node in self._on_node.filed_keys()}
        orphans: dict[str, list[Mapping[str, Any]]] = {}
        for node in suspects:
            if ("", node) not in self.nodes.cache:
                pods = list(self._on_node.bucket(node).values())
                if pods:
                    orphans[node] = pods
        stranded = [
            self._delete(pod, name, "node is out of service")
            for _, name in list(self._out_of_service.bucket("oos"))
            for pod in list(self._on_node.bucket(name).values())
            if _meta(pod).get("deletionTimestamp")
        ]
        try:
            await self._collect_orphans(orphans)
        except BaseException:
            for coroutine in stranded:
                coroutine.close()
            if self._suspects is not None:  # a failed pass is not a look: again next time
                self._suspects |= set(orphans)
            raise
        await asyncio.gather(*stranded)

    async def _collect_orphans(self, orphans: Mapping[str, list[Mapping[str, Any]]]) -> None:
        for node, pods in orphans.items():
            exists = await self._node_exists(node)
            if exists is None and self._suspects is not None:
                self._suspects.add(node)  # not known (an error): asked again next pass
            if exists is not False:
                continue
            await asyncio.gather(*(self._delete(pod, node) for pod in pods))
            if self._suspects is not None:
                self._suspects.add(node)  # looked at again until its pods are gone

    async def _node_exists(self, name: str) -> bool | None:
        """None when the server did not say (an error): never guess a node is gone."""
        try:
            await self._client.get(resource_path("v1", "nodes", name=name))
        except ApiError as error:
            return False if error.status == 404 else None
        return True

    async def _delete(
        self, pod: Mapping[str, Any], node: str, why: str = "node no longer exists"
    ) -> None:
        meta = _meta(pod)
        path = resource_path("v1", "pods", str(meta.get("namespace")), str(meta.get("name")))
        status = pod.get("status") or {}
        log.info("pod gc: deleting %s on %s: %s", path, node, why)
        try:
            if status.get("phase") not in TERMINAL_PHASES:
                conditions = [
                    c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"
                ]
                conditions.append(
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "DeletionByPodGC",
                        "message": f"PodGC: {why}",
                        "lastTransitionTime": now_rfc3339(),
                    }
                )
                await self._client.patch(
                    f"{path}/status", {"status": {"phase": "Failed", "conditions": conditions}}
                )
            await self._client.delete(path, grace_period_seconds=0, uid=str(meta.get("uid")))
        except ApiError as error:
            if error.status not in (404, 409):
                log.warning("pod gc: %s: %s", path, error)


def _node_of(pod: Mapping[str, Any]) -> tuple[str, ...]:
    node = (pod.get("spec") or {}).get("nodeName")
    return (str(node),) if node else ()


def _out_of_service(node: Mapping[str, Any]) -> bool:
    ready = ready_condition_of(node)
    taints = (node.get("spec") or {}).get("taints") or []
    return (ready is None or ready.get("status") != "True") and any(
        t.get("key") == OUT_OF_SERVICE_TAINT for t in taints
    )
