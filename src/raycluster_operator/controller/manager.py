"""Wires the runtime together and owns its lifetime.

Every replica keeps warm caches (informers for RayClusters, and for pods and services of the
watched namespaces); only the leader runs workers. Each leadership term gets a fresh queue and
fresh expectations, and starts by enqueueing every cluster, so nothing missed while standing by
is lost. ``stop()`` drains in-flight reconciles briefly, releases the Lease and closes the
servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from raycluster_operator.api.objects import Obj, Resource
from raycluster_operator.controller.events import EventRecorder
from raycluster_operator.controller.expectations import Expectations
from raycluster_operator.controller.informer import Informer
from raycluster_operator.controller.leader import LeaderElector, LeaseTiming
from raycluster_operator.controller.metrics import Metrics
from raycluster_operator.controller.probes import HttpServer, probes_app
from raycluster_operator.controller.reconciler import (
    DEFAULT_CONTROLLER_NAMES,
    ReconcileError,
    Reconciler,
    ReconcilerOptions,
)
from raycluster_operator.controller.store import StoreView, by_label, by_owner, object_key
from raycluster_operator.controller.workqueue import ShutDown, WorkQueue
from raycluster_operator.controller.writer import Writer
from raycluster_operator.kube import (
    PODS,
    RAYCLUSTERS,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
    KubeClient,
    KubeError,
)

log = logging.getLogger(__name__)

CLUSTER_LABEL = "ray.io/cluster"


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ManagerOptions:
    #: Namespaces to watch; empty means all namespaces.
    namespaces: tuple[str, ...] = ()
    reconcile_concurrency: int = 4
    write_concurrency: int = 32
    metrics_addr: str | None = ":8080"
    health_addr: str | None = ":8082"
    leader_elect: bool = True
    lease_namespace: str = "default"
    lease_name: str = "raycluster-operator-leader"
    lease_timing: LeaseTiming = field(default_factory=LeaseTiming)
    identity: str = field(default_factory=default_identity)
    resync_period: float = 300.0
    watch_timeout: int = 300
    expectations_timeout: float = 120.0
    multi_host_indexing: bool = True
    random_pod_delete: bool = False
    controller_names: frozenset[str] = DEFAULT_CONTROLLER_NAMES
    #: Per-key retry backoff after a failed reconcile.
    retry_base_delay: float = 0.05
    retry_max_delay: float = 60.0
    drain_timeout: float = 10.0


class Manager:
    def __init__(self, client: KubeClient, options: ManagerOptions | None = None) -> None:
        self.client = client
        self.options = options or ManagerOptions()
        opts = self.options
        self.metrics = Metrics()
        self.metrics.track_queue(lambda: len(self.queue) if self.queue is not None else 0)
        self.writer = Writer(opts.write_concurrency)
        self.recorder = EventRecorder(client, instance=opts.identity)
        namespaces: list[str | None] = list(opts.namespaces) or [None]
        self.cluster_informers = [
            Informer(client, RAYCLUSTERS, namespace=ns, watch_timeout=opts.watch_timeout)
            for ns in namespaces
        ]
        self.pod_informers = [
            Informer(
                client,
                PODS,
                namespace=ns,
                label_selector=CLUSTER_LABEL,
                indexers={"cluster": by_label(CLUSTER_LABEL)},
                watch_timeout=opts.watch_timeout,
            )
            for ns in namespaces
        ]
        self.service_informers = [
            Informer(
                client,
                SERVICES,
                namespace=ns,
                indexers={"owner": by_owner("RayCluster")},
                watch_timeout=opts.watch_timeout,
            )
            for ns in namespaces
        ]
        # The autoscaler's ServiceAccount/Role/RoleBinding, watched (by the cluster label the
        # operator puts on them) so that deleting one is healed by the next pass; the cache
        # answers "does it exist?" without a request, so a converged cluster costs nothing.
        self.extra_informers = {
            kind.kind: [
                Informer(
                    client,
                    kind,
                    namespace=ns,
                    label_selector=CLUSTER_LABEL,
                    watch_timeout=opts.watch_timeout,
                )
                for ns in namespaces
            ]
            for kind in (SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS)
        }
        self.extras = {
            kind: StoreView([i.store for i in infs]) for kind, infs in self.extra_informers.items()
        }
        self.clusters = StoreView([i.store for i in self.cluster_informers])
        self.pods = StoreView([i.store for i in self.pod_informers])
        self.services = StoreView([i.store for i in self.service_informers])
        for inf in self.cluster_informers:
            inf.add_handler(self._on_cluster)
        for inf in self.pod_informers:
            inf.add_handler(self._on_pod)
        for inf in self.service_informers:
            inf.add_handler(self._on_service)
        for kind_name, infs in self.extra_informers.items():
            for inf in infs:
                inf.add_handler(functools.partial(self._on_extra, kind_name))
        self.elector: LeaderElector | None = None
        if opts.leader_elect:
            self.elector = LeaderElector(
                client,
                namespace=opts.lease_namespace,
                name=opts.lease_name,
                identity=opts.identity,
                timing=opts.lease_timing,
            )
        self.queue: WorkQueue | None = None
        self.expectations: Expectations | None = None
        self.reconciler: Reconciler | None = None
        self.metrics_server: HttpServer | None = None
        self.health_server: HttpServer | None = None
        self._stop = asyncio.Event()
        self._started = time.monotonic()
        self.reconciles = 0

    # -- informer handlers -----------------------------------------------------------------

    def _enqueue(self, key: str) -> None:
        if self.queue is not None:
            self.queue.add(key)

    def _on_cluster(self, _etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is not None:
            self._enqueue(object_key(obj))

    def _on_pod(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        for obj in (old, new):
            if obj is None:
                continue
            pod = Resource(obj)
            cluster = pod.labels.get(CLUSTER_LABEL)
            if not cluster:
                continue
            key = f"{pod.namespace or ''}/{cluster}"
            if self.expectations is not None and obj is (new or old):
                self.expectations.observe(
                    key,
                    pod.name,
                    terminating_or_gone=etype == "DELETED" or pod.deleting,
                )
            self._enqueue(key)

    def _on_service(self, _etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is None:
            return
        service = Resource(obj)
        for owner in service.owner_names("RayCluster"):
            self._enqueue(f"{service.namespace or ''}/{owner}")

    def _on_extra(self, kind: str, etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is None:
            return
        extra = Resource(obj)
        cluster = extra.labels.get(CLUSTER_LABEL)
        if etype == "DELETED" and self.reconciler is not None:
            self.reconciler.extra_deleted(kind, extra.namespace or "", extra.name)
        if cluster:
            self._enqueue(f"{extra.namespace or ''}/{cluster}")

    # -- state -------------------------------------------------------------------------------

    @property
    def informers(self) -> list[Informer]:
        extras = [inf for infs in self.extra_informers.values() for inf in infs]
        return self.cluster_informers + self.pod_informers + self.service_informers + extras

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    @property
    def is_leader(self) -> bool:
        return self.elector.is_leader if self.elector is not None else self.queue is not None

    def stop(self) -> None:
        self._stop.set()

    # -- running -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until ``stop()`` is called or the task is cancelled."""
        opts = self.options
        tasks: list[asyncio.Task[None]] = []
        try:
            if opts.metrics_addr:
                self.metrics_server = HttpServer(self.metrics.app(), opts.metrics_addr)
                await self.metrics_server.start()
            if opts.health_addr:
                self.health_server = HttpServer(
                    probes_app(lambda: True, self.synced), opts.health_addr
                )
                await self.health_server.start()
            tasks = [
                asyncio.create_task(inf.run(), name=f"informer {inf.name}")
                for inf in self.informers
            ]
            # A stop before the caches sync (an unreachable or untrusted API server) must end
            # the run too, or SIGTERM is ignored until the kubelet's SIGKILL.
            if not await self._until_synced_or_stopped():
                return
            log.info(
                "caches synced (%d clusters, %d pods)",
                len(self.clusters.all_keys()),
                len(self.pods.all_keys()),
            )
            if self.elector is not None:
                tasks.append(asyncio.create_task(self.elector.run(self._lead), name="elector"))
            else:
                tasks.append(asyncio.create_task(self._lead(), name="leading"))
            await self._stop.wait()
        finally:
            for task in reversed(tasks):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            for server in (self.metrics_server, self.health_server):
                if server is not None:
                    await server.stop()

    async def _until_synced_or_stopped(self) -> bool:
        synced: asyncio.Future[Any] = asyncio.ensure_future(
            asyncio.gather(*(inf.synced.wait() for inf in self.informers))
        )
        stopped: asyncio.Future[Any] = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (synced, stopped):
                waiter.cancel()
            await asyncio.gather(synced, stopped, return_exceptions=True)
        return not self._stop.is_set()

    async def _lead(self) -> None:
        """One leadership term: workers plus a periodic resync, until cancelled."""
        opts = self.options
        queue = WorkQueue(base_delay=opts.retry_base_delay, max_delay=opts.retry_max_delay)
        self.expectations = Expectations(timeout=opts.expectations_timeout)
        self.reconciler = Reconciler(
            self.client,
            clusters=self.clusters,
            pods=self.pods,
            services=self.services,
            extras=self.extras,
            expectations=self.expectations,
            writer=self.writer,
            recorder=self.recorder,
            metrics=self.metrics,
            options=ReconcilerOptions(
                multi_host_indexing=opts.multi_host_indexing,
                random_pod_delete=opts.random_pod_delete,
                controller_names=opts.controller_names,
            ),
        )
        self.queue = queue
        self.metrics.is_leader.set(1)
        workers = [
            asyncio.create_task(self._worker(queue), name=f"worker {i}")
            for i in range(max(1, opts.reconcile_concurrency))
        ]
        try:
            while True:
                for key in self.clusters.all_keys():
                    queue.add(key)
                await asyncio.sleep(opts.resync_period)
        finally:
            self.metrics.is_leader.set(0)
            self.queue = None
            queue.shutdown()
            # A clean stop lets in-flight reconciles finish; a lost Lease must stop writing at
            # once, because a successor may already be leading.
            drain = opts.drain_timeout if self._stop.is_set() else 0.0
            pending: set[asyncio.Task[None]] = set(workers)
            if drain > 0:
                _, pending = await asyncio.wait(workers, timeout=drain)
            for task in pending:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self, queue: WorkQueue) -> None:
        assert self.reconciler is not None
        reconciler = self.reconciler
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            started = time.monotonic()
            try:
                outcome = await reconciler.reconcile(key)
            except asyncio.CancelledError:
                queue.done(key)
                raise
            except Exception as exc:
                self.metrics.reconcile_errors.inc()
                self.metrics.reconciles.labels("error").inc()
                delay = queue.add_rate_limited(key)
                log.warning(
                    "reconcile %s failed (retry in %.2fs): %s",
                    key,
                    delay,
                    exc,
                    exc_info=not isinstance(exc, _EXPECTED),
                )
            else:
                queue.forget(key)
                if outcome.requeue_after is not None:
                    queue.add_after(key, max(outcome.requeue_after, 0.01))
                    self.metrics.reconciles.labels("requeue").inc()
                else:
                    self.metrics.reconciles.labels("success").inc()
            finally:
                self.reconciles += 1
                self.metrics.reconcile_seconds.observe(time.monotonic() - started)
                queue.done(key)
            for verb, n in self.client.counts.items():
                self.metrics.api_requests.labels(verb).set(n)


def in_cluster_namespace(default: str = "default") -> str:
    path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip() or default
    return default


_EXPECTED = (ReconcileError, KubeError)
