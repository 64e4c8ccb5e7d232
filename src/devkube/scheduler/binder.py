"""The fake scheduler: binds pending pods to simulated nodes through the API.

It watches pods and nodes, and after every burst of changes makes one pass over the pending
pods (oldest first) with `placement.Snapshot`, so the hosts of a slice created together are
placed together. It binds with the pods/binding subresource, and reports pods that fit
nowhere as PodScheduled=False/Unschedulable with the reason, as kube-scheduler does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from devkube.machinery.client import ApiClient, ApiError, resource_path
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.informer import Informer
from devkube.machinery.pods import TERMINAL_PHASES
from devkube.scheduler.dra import CANNOT_ALLOCATE, DraWorld
from devkube.scheduler.placement import Memo, Pending, Placement, Snapshot
from kubefacts.timestamps import now_rfc3339

log = logging.getLogger(__name__)

SCHEDULER_NAME = "default-scheduler"


def is_pending(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    return (
        not spec.get("nodeName")
        and not meta.get("deletionTimestamp")
        and spec.get("schedulerName", SCHEDULER_NAME) == SCHEDULER_NAME
        and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
    )


#: A pod's claims, and the allocations this pass made for them (by claim name).
Claims = tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]
#: The informers of ResourceClaims, ResourceSlices and DeviceClasses, in that order.
DraInformers = tuple[Informer, Informer, Informer]


def _has_claims(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("resourceClaims"))


def _claims_fit(
    world: DraWorld, claims: list[dict[str, Any]], nodes: Mapping[str, Mapping[str, Any]]
) -> Callable[[str], str | None]:
    def fit(node: str) -> str | None:
        return None if world.allocate(claims, nodes[node]) is not None else CANNOT_ALLOCATE

    return fit


def _order(pod: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = pod.get("metadata") or {}
    return (
        str(meta.get("creationTimestamp", "")),
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
    )


def unschedulable_condition(pod: Mapping[str, Any], message: str) -> list[dict[str, Any]] | None:
    """The pod's conditions with PodScheduled=False, or None when they already say so."""
    conditions = list((pod.get("status") or {}).get("conditions") or [])
    for condition in conditions:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
            and condition.get("message") == message
        ):
            return None
    kept = [c for c in conditions if c.get("type") != "PodScheduled"]
    kept.append(
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
        }
    )
    return kept


class Scheduler:
    """Start with `start()`, stop with `stop()`; `passes` counts scheduling passes (for tests)."""

    def __init__(
        self,
        client: ApiClient,
        *,
        pods: Informer | None = None,
        nodes: Informer | None = None,
        dra: DraInformers | None = None,
        debounce: float = 0.02,
        concurrency: int = 16,
    ) -> None:
        self._client = client
        self._writes = asyncio.Semaphore(concurrency)
        self._loop = ControlLoop(
            "devcluster scheduler",
            self.schedule_pass,
            period=None,
            debounce=debounce,  # let a burst of creates arrive together
            retry_after=0.2,
            failure="scheduling pass failed",
        )
        # Informers passed in are shared and started/stopped by their owner.
        self.pods = pods or Informer(client, "/api/v1/pods")
        self.nodes = nodes or Informer(client, "/api/v1/nodes")
        self._owned = [
            informer
            for informer, given in ((self.pods, pods), (self.nodes, nodes))
            if given is None
        ]
        self.pods.subscribe(self._loop.changed)
        self.nodes.subscribe(self._loop.changed)
        # DRA's kinds (shared, started by their owner); without them claims are not read.
        self.dra = dra
        if dra is not None:
            for informer in dra:
                informer.subscribe(self._loop.changed)
        # Pods bound by us whose binding the pod informer has not shown yet, by uid.
        self._assumed: dict[str, str] = {}
        self._memo = Memo()
        self.passes = 0

    async def start(self) -> None:
        for informer in self._owned:
            informer.start()
        await asyncio.gather(self.pods.synced.wait(), self.nodes.synced.wait())
        self._loop.start()
        self._loop.poke()

    async def stop(self) -> None:
        await self._loop.stop()
        for informer in self._owned:
            await informer.stop()

    async def schedule_pass(self) -> None:
        self.passes += 1
        pods = list(self.pods.cache.values())
        bound: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []
        live_uids: set[str] = set()
        for pod in pods:
            uid = str((pod.get("metadata") or {}).get("uid", ""))
            live_uids.add(uid)
            if (pod.get("spec") or {}).get("nodeName"):
                self._assumed.pop(uid, None)
                bound.append(pod)
            elif uid in self._assumed:
                bound.append({**pod, "spec": {**pod["spec"], "nodeName": self._assumed[uid]}})
            elif is_pending(pod):
                pending.append(pod)
        for uid in list(self._assumed):
            if uid not in live_uids:
                del self._assumed[uid]
        if not pending:
            return
        pending.sort(key=_order)
        nodes = {str(n["metadata"]["name"]): n for n in self.nodes.cache.values()}
        snapshot = Snapshot(list(nodes.values()), bound, self._memo)
        world = self._dra_world() if any(_has_claims(p) for p in pending) else None
        decisions: list[tuple[dict[str, Any], Placement, Claims]] = []
        queue = Pending(pending)
        for i, pod in enumerate(pending):
            claims: Claims = ([], {})
            fit = None
            if world is not None and _has_claims(pod):
                found, waiting = world.claims_of(pod)
                if waiting is not None:
                    # PreEnqueue: the pod is not tried until its claims exist.
                    log.debug("%s: %s", pod["metadata"].get("name"), waiting)
                    continue
                claims = (found, {})
                fit = _claims_fit(world, found, nodes)
            placement = snapshot.place(pod, queue.after(i), fit)
            if placement.node is not None:
                if world is not None and claims[0]:
                    allocated = world.allocate(claims[0], nodes[placement.node]) or {}
                    namespace = str(pod["metadata"].get("namespace", "default"))
                    for claim_name, allocation in allocated.items():
                        world.commit((namespace, claim_name), allocation)
                    claims = (claims[0], allocated)
                snapshot.assume(pod, placement.node)
                self._assumed[str(pod["metadata"].get("uid", ""))] = placement.node
            decisions.append((pod, placement, claims))
        await asyncio.gather(*(self._write(pod, p, claims) for pod, p, claims in decisions))

    def _dra_world(self) -> DraWorld | None:
        if self.dra is None:
            return None
        claims, slices, classes = self.dra
        return DraWorld(
            slices=list(slices.cache.values()),
            classes={name: c for (_, name), c in classes.cache.items()},
            claims={key: dict(c) for key, c in claims.cache.items()},
        )

    async def _reserve(self, pod: Mapping[str, Any], claims: Claims) -> None:
        """PreBind: write each claim's allocation (when this pass made it) and reserve it for
        the pod, before the binding; a conflict (someone else wrote the claim) fails the pod's
        binding for this pass."""
        meta = pod["metadata"]
        namespace = str(meta.get("namespace", "default"))
        consumer = {"resource": "pods", "name": meta["name"], "uid": meta.get("uid")}
        for claim in claims[0]:
            status = dict(claim.get("status") or {})
            reserved = list(status.get("reservedFor") or [])
            name = str(claim["metadata"]["name"])
            allocation = claims[1].get(name)
            if allocation is None and any(r.get("uid") == meta.get("uid") for r in reserved):
                continue
            patch: dict[str, Any] = {
                "metadata": {"resourceVersion": claim["metadata"].get("resourceVersion")},
                "status": {"reservedFor": [*reserved, consumer]},
            }
            if allocation is not None:
                patch["status"]["allocation"] = {**allocation, "allocationTimestamp": now_rfc3339()}
            path = resource_path("resource.k8s.io/v1", "resourceclaims", namespace, name, "status")
            await self._client.patch(path, patch)

    async def _write(self, pod: dict[str, Any], placement: Placement, claims: Claims) -> None:
        meta = pod["metadata"]
        namespace, name = str(meta.get("namespace", "default")), str(meta["name"])
        async with self._writes:
            try:
                if placement.node is not None:
                    if claims[0]:
                        await self._reserve(pod, claims)
                    await self._bind(namespace, name, placement.node)
                    log.info("bound %s/%s to %s", namespace, name, placement.node)
                    message = f"Successfully assigned {namespace}/{name} to {placement.node}"
                    await self._event(pod, "Normal", "Scheduled", message)
                    return
                conditions = unschedulable_condition(pod, placement.message)
                if conditions is not None:
                    await self._client.patch(
                        resource_path("v1", "pods", namespace, name, "status"),
                        {"status": {"conditions": conditions}},
                    )
                    log.info("%s/%s is unschedulable: %s", namespace, name, placement.message)
                    await self._event(pod, "Warning", "FailedScheduling", placement.message)
            except ApiError as error:
                # Gone, or bound meanwhile: the next pass sees the truth.
                self._assumed.pop(str(meta.get("uid", "")), None)
                if error.status not in (404, 409):
                    log.warning("scheduling %s/%s failed: %s", namespace, name, error)
                    self._loop.poke()
            except (TimeoutError, aiohttp.ClientError) as error:
                # No answer (a saturated server): whether the binding happened is unknown, so
                # the pod is not assumed bound any more; if it was, the watch shows it bound
                # and the next pass leaves it alone, else the next pass places it again. Kept
                # assumed, it would wait for ever: nothing else ever retries it.
                self._assumed.pop(str(meta.get("uid", "")), None)
                log.warning("scheduling %s/%s: no answer: %r", namespace, name, error)
                self._loop.poke()

    async def _event(self, pod: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        """Best effort, like the real scheduler's events: `kubectl describe pod` shows them."""
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace", "default"))
        now = now_rfc3339()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": namespace,
                "name": meta.get("name"),
                "uid": meta.get("uid"),
            },
            "type": kind,
            "reason": reason,
            "message": message,
            "source": {"component": SCHEDULER_NAME},
            "reportingComponent": SCHEDULER_NAME,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self._client.create(resource_path("v1", "events", namespace), event)
        except ApiError as error:
            log.debug("event for %s/%s not recorded: %s", namespace, meta.get("name"), error)

    async def _bind(self, namespace: str, name: str, node: str) -> None:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await self._client.create(resource_path("v1", "pods", namespace, name, "binding"), binding)
