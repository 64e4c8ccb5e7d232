"""The RayService reconciler: the third kind on the generic controller, under the same leader
lease (docs/design.md §7, §12).

It reads RayServices and their serve services from its own informers, and RayClusters and
their pods from the RayCluster controller's caches; it asks the Serve API and the head's
proxy of each cluster the service runs on (active and pending) whose head is ready, and the
proxy of each ready host of their multi-host slices (RS4); the pure
planner (``planning.rayservice``) decides; this module executes the plan's writes, writes
status, records Events. It creates RayCluster objects and never their pods, and changes one
thing on pods: the ``ray.io/serve`` label, which is the serve service's selector.

Two records live in memory, as in KubeRay: the serveConfigV2 last deployed to each cluster (a
restarted operator deploys it once more, a no-op for Serve) and since when a cluster traffic
left has been waiting for its deletion delay (a restart starts the delay over). A write the
API refuses for good is a ``WriteRejected`` Warning Event and a ``TerminalError``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubefacts.names import SUFFIX_ALPHABET
from raycluster_operator.api import labels
from raycluster_operator.api.objects import Obj
from raycluster_operator.builders.metadata import RAYSERVICE_CRD
from raycluster_operator.builders.rayservice import head_service_name
from raycluster_operator.controller.raycluster.mergepatch import merge_patch
from raycluster_operator.controller.raycluster.sources import BY_CLUSTER, Change, Sources
from raycluster_operator.controller.rayservice.serve_api import (
    RESOLVERS,
    Resolver,
    ServeApiClient,
    ServeApiError,
    proxy_at_pod_ip,
)
from raycluster_operator.controller.runtime.controller import LoopOptions
from raycluster_operator.controller.runtime.events import EventRecorder
from raycluster_operator.controller.runtime.informer import Informer
from raycluster_operator.controller.runtime.reconcile import Result, TerminalError
from raycluster_operator.controller.runtime.store import StoreView, split_key
from raycluster_operator.kube import (
    PODS,
    RAYCLUSTERS,
    RAYSERVICES,
    SERVICES,
    AlreadyExists,
    KubeClient,
    KubeError,
    NotFound,
)
from raycluster_operator.planning.rayservice import (
    Action,
    ActionKind,
    Context,
    Observed,
    Plan,
    ServeAnswer,
    plan_rayservice,
    slice_host,
)

log = logging.getLogger(__name__)

GATEWAY_API = "gateway.networking.k8s.io"
WRITE_REJECTED = "WriteRejected"


@dataclass(frozen=True)
class RayServiceOptions:
    #: Run the RayService controller at all.
    rayservices: bool = True
    #: Seconds between passes while a service runs (Serve's state is asked, not watched;
    #: KubeRay's requeue is 2 s).
    rayservice_poll_interval: float = 2.0
    #: How the operator reaches a head's Serve API: "service" or "head-pod-ip" (§11, 11k).
    serve_api_via: str = "service"
    rayservice_concurrency: int = 4
    rayservice_resync_period: float = 60.0

    def loop(self, drain_timeout: float) -> LoopOptions:
        return LoopOptions(
            concurrency=self.rayservice_concurrency,
            resync_period=self.rayservice_resync_period,
            retry_base_delay=0.05,
            retry_max_delay=30.0,
            drain_timeout=drain_timeout,
        )


def _suffix() -> str:
    return "".join(secrets.choice(SUFFIX_ALPHABET) for _ in range(5))


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value: Mapping[str, Any] = obj.get("metadata") or {}
    return value


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    value: Mapping[str, str] = _meta(obj).get("labels") or {}
    return value


def _owner(obj: Mapping[str, Any]) -> str | None:
    """The RayService a cluster or service was made for (its origin labels)."""
    found = _labels(obj)
    if found.get(labels.ORIGINATED_FROM_CRD) != RAYSERVICE_CRD:
        return None
    return found.get(labels.ORIGINATED_FROM_CR_NAME)


def _ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    conditions = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return status.get("phase") == "Running" and ready and not _meta(pod).get("deletionTimestamp")


def _ready_heads(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [
        p for p in pods if _labels(p).get(labels.NODE_TYPE) == labels.NODE_TYPE_HEAD and _ready(p)
    ]


def _names(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(_meta(p).get("name")) for p in pods]


class RayServiceReconciler:
    """Both the kind's ``Registration`` and its ``Reconciler``."""

    name = "rayservice"

    def __init__(
        self,
        client: KubeClient,
        sources: Sources,
        options: RayServiceOptions,
        *,
        recorder: EventRecorder,
        namespaces: tuple[str, ...] = (),
        watch_timeout: int = 300,
    ) -> None:
        self.client = client
        self.sources = sources
        self.options = options
        self.recorder = recorder
        self.serve_api = ServeApiClient()
        #: Where a cluster's Serve API and a pod's proxy are (tests point them at a stand-in).
        self.resolve: Resolver = RESOLVERS[options.serve_api_via]
        self.resolve_proxy: Resolver = proxy_at_pod_ip
        self.suffix: Callable[[], str] = _suffix
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self.gateway_api = False
        self._deployed: dict[str, dict[str, str]] = {}
        self._dangling: dict[str, dict[str, datetime]] = {}
        self._enqueue: Callable[[str], None] = lambda key: None
        spaces: list[str | None] = list(namespaces) or [None]
        self.rayservices = [
            Informer(client, RAYSERVICES, namespace=ns, watch_timeout=watch_timeout)
            for ns in spaces
        ]
        self.services = [
            Informer(
                client,
                SERVICES,
                namespace=ns,
                label_selector=f"{labels.ORIGINATED_FROM_CRD}={RAYSERVICE_CRD}",
                watch_timeout=watch_timeout,
            )
            for ns in spaces
        ]
        for informer in self.rayservices:
            informer.add_handler(self._on_rayservice)
        for informer in self.services:
            informer.add_handler(self._on_owned)
        self._view = StoreView([i.store for i in self.rayservices])
        self._service_view = StoreView([i.store for i in self.services])
        sources.subscribe(self._on_cluster_change)

    @property
    def informers(self) -> list[Informer]:
        return self.rayservices + self.services if self.options.rayservices else []

    # -- the registration ----------------------------------------------------------------

    def route(self, enqueue: Callable[[str], None]) -> None:
        self._enqueue = enqueue

    def all_keys(self) -> Sequence[str]:
        return self._view.all_keys()

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self.informers))

    @asynccontextmanager
    async def term(self, resync: Callable[[], None]) -> AsyncIterator[RayServiceReconciler]:
        try:
            self.gateway_api = await self.client.serves_group(GATEWAY_API)
        except KubeError as error:
            log.warning("could not tell whether the Gateway API is served: %s", error)
        try:
            yield self
        finally:
            await self.serve_api.close()

    # -- event -> key --------------------------------------------------------------------

    def _on_rayservice(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is not None:
            self._enqueue(f"{_meta(obj).get('namespace', '')}/{_meta(obj).get('name')}")

    def _on_owned(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        owner = _owner(obj) if obj is not None else None
        if obj is not None and owner:
            self._enqueue(f"{_meta(obj).get('namespace', '')}/{owner}")

    def _on_cluster_change(self, change: Change) -> None:
        """A RayCluster (or a pod of it) changed: its RayService, by the cluster's labels."""
        cluster = self.sources.caches.clusters.get(change.key)
        if cluster is not None:
            self._on_owned("", None, cluster)
            return
        namespace, _ = split_key(change.key)
        for key in self._view.all_keys():  # gone from the cache: whoever may have owned it
            if split_key(key)[0] == namespace:
                self._enqueue(key)

    # -- one pass ------------------------------------------------------------------------

    def _owned_clusters(self, namespace: str, name: str) -> dict[str, Obj]:
        out: dict[str, Obj] = {}
        caches = self.sources.caches.clusters
        for key in caches.all_keys():
            if split_key(key)[0] != namespace:
                continue
            cluster = caches.get(key)
            if cluster is not None and _owner(cluster) == name:
                out[str(_meta(cluster)["name"])] = cluster
        return out

    async def observe(self, key: str, rayservice: Obj) -> Observed:
        namespace, name = split_key(key)
        clusters = self._owned_clusters(namespace, name)
        pods = {
            c: list(self.sources.caches.pods.by_index(BY_CLUSTER, f"{namespace}/{c}"))
            for c in clusters
        }
        status = rayservice.get("status") or {}
        serving = {
            str((status.get(which) or {}).get("rayClusterName") or "")
            for which in ("activeServiceStatus", "pendingServiceStatus")
        }
        asked = sorted(serving & set(clusters))
        found = await asyncio.gather(*(self._ask(clusters[c], pods[c]) for c in asked))
        answers: dict[str, ServeAnswer] = dict(zip(asked, found, strict=True))
        now = self.clock()
        dangling = self._dangling.setdefault(key, {})
        for cluster_name in list(dangling):
            if cluster_name not in clusters or cluster_name in serving:
                del dangling[cluster_name]
        for cluster_name in clusters:
            if cluster_name not in serving:
                dangling.setdefault(cluster_name, now)
        service_name = f"{name}-serve-svc"
        custom = ((rayservice.get("spec") or {}).get("serveService") or {}).get("metadata") or {}
        service = self._service_view.get(f"{namespace}/{custom.get('name') or service_name}")
        head_service = self._service_view.get(f"{namespace}/{head_service_name(name)}")
        return Observed(
            rayservice,
            clusters,
            pods,
            answers,
            dict(self._deployed.get(key, {})),
            service,
            self.gateway_api,
            dict(dangling),
            head_service,
        )

    async def _ask(self, cluster: Obj, pods: Sequence[Obj]) -> ServeAnswer:
        """The head's Serve API and proxy, and the proxy of every running and ready host of
        a multi-host slice (RS4), all at once: a pass waits at most one timeout for them."""
        hosts = [p for p in pods if _ready(p) and slice_host(cluster, p)]
        asked = asyncio.gather(*(self._proxy(cluster, p) for p in hosts))
        heads = _ready_heads(pods)
        if not heads:
            proxies = dict(zip(_names(hosts), await asked, strict=True))
            return ServeAnswer(proxies=proxies)
        head = heads[0]
        base = self.resolve(cluster, head)
        healthy, apps, answers = await asyncio.gather(
            self._proxy(cluster, head), self._applications(cluster, base), asked
        )
        proxies = dict(zip(_names(hosts), answers, strict=True))
        if apps is None:
            return ServeAnswer(asked=True, proxy_healthy=healthy, proxies=proxies)
        return ServeAnswer(
            asked=True,
            reachable=True,
            applications=apps,
            proxy_healthy=healthy,
            proxies=proxies,
        )

    async def _proxy(self, cluster: Obj, pod: Mapping[str, Any]) -> bool:
        proxy = self.resolve_proxy(cluster, pod)
        return bool(proxy) and await self.serve_api.proxy_healthy(proxy)

    async def _applications(self, cluster: Obj, base: str) -> dict[str, Any] | None:
        if not base:
            return None
        try:
            return await self.serve_api.applications(base)
        except ServeApiError as error:
            log.info("serve api of %s: %s", _meta(cluster).get("name"), error)
            return None

    async def reconcile(self, key: str) -> Result:
        rayservice = self._view.get(key)
        if rayservice is None or _meta(rayservice).get("deletionTimestamp"):
            self._deployed.pop(key, None)
            self._dangling.pop(key, None)
            return Result()
        managed_by = (rayservice.get("spec") or {}).get("managedBy")
        if managed_by not in (None, "", "ray.io/kuberay-operator"):
            return Result()
        observed = await self.observe(key, rayservice)
        plan = plan_rayservice(observed, Context(self.clock(), self.suffix(), self._poll))
        try:
            for action in plan.actions:
                await self._act(key, rayservice, observed, action)
            # The writes are done: their Events are told before the status write, which a
            # stale RayService fails (Conflict) and the next pass, finding them done, would
            # not tell again.
            for event in plan.events:
                await self.recorder.emit(
                    rayservice, event.type, event.reason, event.note, action="Reconcile"
                )
            await self._write_status(rayservice, plan)
        except KubeError as exc:
            if not exc.terminal:
                raise
            await self.recorder.emit(
                rayservice, "Warning", WRITE_REJECTED, str(exc), action="Reconcile"
            )
            raise TerminalError(str(exc)) from exc
        return Result(requeue_after=plan.requeue_after)

    @property
    def _poll(self) -> float:
        return self.options.rayservice_poll_interval

    async def _act(self, key: str, rayservice: Obj, observed: Observed, action: Action) -> None:
        namespace = str(_meta(rayservice).get("namespace"))
        kind = action.kind
        try:
            if kind == ActionKind.CREATE_CLUSTER:
                await self.client.create(RAYCLUSTERS, action.body, namespace)
            elif kind == ActionKind.UPDATE_CLUSTER:
                await self.client.patch(RAYCLUSTERS, namespace, action.name, action.body)
            elif kind == ActionKind.DELETE_CLUSTER:
                await self.client.delete(
                    RAYCLUSTERS, namespace, action.name, propagation="Background"
                )
                self._deployed.get(key, {}).pop(action.name, None)
            elif kind == ActionKind.CREATE_SERVICE:
                await self.client.create(SERVICES, action.body, namespace)
            elif kind == ActionKind.PATCH_SERVICE:
                await self.client.patch(SERVICES, namespace, action.name, action.body)
            elif kind == ActionKind.LABEL_POD:
                patch = {"metadata": {"labels": {labels.SERVE: action.body["value"]}}}
                await self.client.patch(PODS, namespace, action.name, patch)
            elif kind == ActionKind.DEPLOY_SERVE:
                await self._deploy(key, rayservice, observed, action)
        except (AlreadyExists, NotFound):
            pass

    async def _deploy(self, key: str, rayservice: Obj, observed: Observed, action: Action) -> None:
        cluster = observed.clusters[action.name]
        heads = _ready_heads(observed.pods.get(action.name, ()))
        base = self.resolve(cluster, heads[0]) if heads else ""
        if not base:
            return
        try:
            await self.serve_api.deploy(base, action.body)
        except ServeApiError as error:
            note = f"Failed to update serve applications to the RayCluster {action.name}: {error}"
            await self.recorder.emit(
                rayservice, "Warning", "FailedToUpdateServeApplications", note, action="Update"
            )
            return
        config = str((rayservice.get("spec") or {}).get("serveConfigV2") or "")
        self._deployed.setdefault(key, {})[action.name] = config

    async def _write_status(self, rayservice: Obj, plan: Plan) -> None:
        old = rayservice.get("status") or {}
        if plan.status == old:
            return
        patch = merge_patch(old, plan.status)
        meta = _meta(rayservice)
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": patch}
        await self.client.patch(
            RAYSERVICES, meta.get("namespace"), meta["name"], body, subresource="status"
        )


__all__ = ["RayServiceOptions", "RayServiceReconciler"]
