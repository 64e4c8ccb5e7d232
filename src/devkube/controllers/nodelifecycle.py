"""The node lifecycle controller, as kube-controller-manager's: it watches the kubelets'
heartbeats and taints nodes by their Ready condition, acting only through the API.

- Health: a node whose Lease (kube-node-lease) and Ready heartbeat have not changed for
  `grace` seconds (kube: --node-monitor-grace-period, 40 s; dev default 10 s) gets its Ready
  condition set to Unknown, reason NodeStatusUnknown, "Kubelet stopped posting node status."
  Heartbeats are timed by when this controller saw them change, not by the timestamps they
  carry (clock skew), as kube does; a node first seen counts as heard from then, and so does
  every node after a pass that came late (the event loop was busy: this controller cannot
  have seen heartbeats it had no time to read, and must not call their nodes dead).
- Taints (TaintNodesByCondition and the NoExecute tainting pass): Ready=False ->
  node.kubernetes.io/not-ready NoSchedule and NoExecute; Ready=Unknown ->
  node.kubernetes.io/unreachable NoSchedule and NoExecute; Ready=True -> neither;
  spec.unschedulable (cordon) -> node.kubernetes.io/unschedulable NoSchedule. Other taints are
  kept. NoExecute taints carry timeAdded.
- Pods (MarkPodsNotReady): pods bound to a node whose Ready is not True get their Ready
  condition set to False, since no kubelet will say so for an unreachable node.
Taint-based eviction and pod garbage collection are their own controllers (`tainteviction`,
`podgc`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from devkube.machinery.client import ApiClient, ApiError, resource_path
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.informer import Informer
from devkube.machinery.nodes import lease_path, ready_condition_of
from devkube.machinery.pods import TERMINAL_PHASES
from kubefacts.timestamps import now_rfc3339

log = logging.getLogger(__name__)

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
LIFECYCLE_TAINTS = frozenset({NOT_READY_TAINT, UNREACHABLE_TAINT, UNSCHEDULABLE_TAINT})
UNKNOWN_REASON = "NodeStatusUnknown"
UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
NEVER_REASON = "NodeStatusNeverUpdated"
NEVER_MESSAGE = "Kubelet never posted node status."


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def wanted_taints(node: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, effect) of the lifecycle taints the node should carry now."""
    ready = ready_condition_of(node)
    status = ready.get("status") if ready is not None else "True"
    wanted: list[tuple[str, str]] = []
    if status == "False":
        wanted += [(NOT_READY_TAINT, "NoSchedule"), (NOT_READY_TAINT, "NoExecute")]
    elif status == "Unknown":
        wanted += [(UNREACHABLE_TAINT, "NoSchedule"), (UNREACHABLE_TAINT, "NoExecute")]
    if (node.get("spec") or {}).get("unschedulable"):
        wanted.append((UNSCHEDULABLE_TAINT, "NoSchedule"))
    return wanted


def retainted(node: Mapping[str, Any], now: str) -> list[dict[str, Any]] | None:
    """The node's taints with the lifecycle ones made right, or None when they already are."""
    taints: list[dict[str, Any]] = list((node.get("spec") or {}).get("taints") or [])
    wanted = wanted_taints(node)
    have = [(t.get("key"), t.get("effect")) for t in taints if t.get("key") in LIFECYCLE_TAINTS]
    if sorted(have) == sorted(wanted):
        return None
    kept = [t for t in taints if (t.get("key"), t.get("effect")) not in set(have) - set(wanted)]
    for key, effect in wanted:
        if (key, effect) not in have:
            taint: dict[str, Any] = {"key": key, "effect": effect}
            if effect == "NoExecute":
                taint["timeAdded"] = now
            kept.append(taint)
    return kept


class NodeLifecycleController:
    def __init__(
        self,
        client: ApiClient,
        *,
        nodes: Informer,
        pods: Informer,
        grace: float = 10.0,
        monitor_every: float = 0.5,
        debounce: float = 0.0,
    ) -> None:
        """`debounce`: how long a change waits for more before the pass (a pass reads every
        node: thousands of nodes renewing leases must not each cost one)."""
        self._client = client
        self.nodes = nodes
        self.pods = pods
        self._loop = ControlLoop(
            "devcluster node lifecycle",
            self.monitor,
            period=monitor_every,
            debounce=debounce,
            failure="node lifecycle pass failed",
        )
        self.leases = Informer(client, lease_path(), self._loop.changed)
        self.grace = grace
        self.monitor_every = monitor_every
        # node -> (last heartbeat seen: lease renewTime and Ready lastHeartbeatTime, loop time)
        self._heard: dict[str, tuple[tuple[str, str], float]] = {}
        self._last_pass: float | None = None
        self.nodes.subscribe(self._loop.changed)

    async def start(self) -> None:
        self.leases.start()
        await self.leases.synced.wait()
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        await self.leases.stop()

    def _heartbeat(self, node: Mapping[str, Any]) -> tuple[str, str]:
        name = str(_meta(node).get("name"))
        lease = self.leases.cache.get(("kube-node-lease", name)) or {}
        ready = ready_condition_of(node) or {}
        return (
            str((lease.get("spec") or {}).get("renewTime") or ""),
            str(ready.get("lastHeartbeatTime") or ""),
        )

    async def monitor(self) -> None:
        """One pass over every node: health, taints, pods."""
        now = asyncio.get_running_loop().time()
        if self._last_pass is not None and now - self._last_pass > self.grace / 2:
            self._heard = {name: (beat, now) for name, (beat, _) in self._heard.items()}
        self._last_pass = now
        nodes = list(self.nodes.cache.values())
        names = {str(_meta(n).get("name")) for n in nodes}
        for gone in [n for n in self._heard if n not in names]:
            del self._heard[gone]
        work = []
        not_ready: set[str] = set()
        for node in nodes:
            name = str(_meta(node).get("name"))
            beat = self._heartbeat(node)
            heard = self._heard.get(name)
            if heard is None or heard[0] != beat:
                self._heard[name] = heard = (beat, now)
            ready = ready_condition_of(node)
            if now - heard[1] > self.grace and (ready is None or ready.get("status") != "Unknown"):
                work.append(self._mark_unknown(node, never=not any(beat)))
                continue  # tainted on the pass that sees the Unknown
            taints = retainted(node, now_rfc3339())
            if taints is not None:
                work.append(self._taint(node, taints))
            if ready is not None and ready.get("status") != "True":
                not_ready.add(name)
        if not_ready:
            work.append(self._mark_pods_not_ready(not_ready))
        await asyncio.gather(*work)

    async def _mark_unknown(self, node: Mapping[str, Any], *, never: bool) -> None:
        name = str(_meta(node).get("name"))
        now = now_rfc3339()
        conditions = []
        for condition in (node.get("status") or {}).get("conditions") or []:
            condition = dict(condition)
            if condition.get("status") != "Unknown":
                condition.update(
                    status="Unknown",
                    reason=NEVER_REASON if never else UNKNOWN_REASON,
                    message=NEVER_MESSAGE if never else UNKNOWN_MESSAGE,
                    lastTransitionTime=now,
                )
            conditions.append(condition)
        if not any(c.get("type") == "Ready" for c in conditions):
            conditions.append(
                {
                    "type": "Ready",
                    "status": "Unknown",
                    "reason": NEVER_REASON,
                    "message": NEVER_MESSAGE,
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            )
        log.info("node %s: kubelet stopped posting node status, Ready=Unknown", name)
        try:
            await self._client.patch(
                resource_path("v1", "nodes", name=name, subresource="status"),
                {
                    "metadata": {"resourceVersion": _meta(node).get("resourceVersion")},
                    "status": {"conditions": conditions},
                },
            )
        except ApiError as error:
            if error.status not in (404, 409):
                log.warning("node %s: marking Unknown: %s", name, error)
            return
        await self._event(node, "NodeNotReady", f"Node {name} status is now: NodeNotReady")

    async def _taint(self, node: Mapping[str, Any], taints: list[dict[str, Any]]) -> None:
        name = str(_meta(node).get("name"))
        try:
            await self._client.patch(
                resource_path("v1", "nodes", name=name),
                {
                    "metadata": {"resourceVersion": _meta(node).get("resourceVersion")},
                    "spec": {"taints": taints or None},
                },
            )
        except ApiError as error:
            if error.status not in (404, 409):  # 409: changed meanwhile, next pass
                log.warning("node %s: tainting: %s", name, error)

    async def _mark_pods_not_ready(self, nodes: set[str]) -> None:
        """One look at every pod for all the not-Ready nodes of a pass (not one per node:
        thousands of nodes times thousands of pods)."""
        for pod in list(self.pods.cache.values()):
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            if spec.get("nodeName") not in nodes or status.get("phase") in TERMINAL_PHASES:
                continue
            conditions = [dict(c) for c in status.get("conditions") or []]
            changed = False
            for condition in conditions:
                if condition.get("type") == "Ready" and condition.get("status") != "False":
                    condition.update(status="False", lastTransitionTime=now_rfc3339())
                    changed = True
            if not changed:
                continue
            meta = _meta(pod)
            path = resource_path(
                "v1", "pods", str(meta.get("namespace")), str(meta.get("name")), "status"
            )
            try:
                await self._client.patch(
                    path,
                    {
                        "metadata": {"resourceVersion": meta.get("resourceVersion")},
                        "status": {"conditions": conditions},
                    },
                )
            except ApiError as error:
                if error.status not in (404, 409):
                    log.warning("marking %s not ready: %s", path, error)

    async def _event(self, node: Mapping[str, Any], reason: str, message: str) -> None:
        name = str(_meta(node).get("name"))
        now = now_rfc3339()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": "default"},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Node",
                "name": name,
                "uid": _meta(node).get("uid"),
            },
            "type": "Normal",
            "reason": reason,
            "message": message,
            "source": {"component": "node-controller"},
            "reportingComponent": "node-controller",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        with contextlib.suppress(ApiError):
            await self._client.create(resource_path("v1", "events", "default"), event)
