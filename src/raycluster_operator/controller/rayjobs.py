"""The RayJob controller: a second reconciler in the operator process, under the same leader
lease (docs/design.md §11).

It reads RayJobs and their submitter Jobs from its own informers, and RayClusters and their
pods from the RayCluster controller's caches (one watch each, shared); it asks the Jobs API
about a running job; the pure planner (``planning.rayjob``) decides; this module executes the
plan's writes, writes status, records Events and metrics. It creates RayCluster objects and
never their pods: the RayCluster controller beside it runs them.

Its caches sync apart from the RayCluster controller's: an API server without the RayJob CRD
leaves this controller waiting (and logging) while RayClusters are served as before.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from kubefacts.names import SUFFIX_ALPHABET
from raycluster_operator.api.labels import (
    NODE_TYPE,
    NODE_TYPE_HEAD,
    NODE_TYPE_WORKER,
    ORIGINATED_FROM_CR_NAME,
    ORIGINATED_FROM_CRD,
)
from raycluster_operator.api.objects import Obj
from raycluster_operator.controller.events import EventRecorder
from raycluster_operator.controller.informer import Informer
from raycluster_operator.controller.jobs_api import (
    RESOLVERS,
    JobsApiClient,
    JobsApiError,
    Resolver,
)
from raycluster_operator.controller.sources import BY_CLUSTER, Change, Sources
from raycluster_operator.controller.store import StoreView, split_key
from raycluster_operator.controller.workqueue import ShutDown, WorkQueue
from raycluster_operator.kube import (
    BATCH_JOBS,
    RAYCLUSTERS,
    RAYJOBS,
    AlreadyExists,
    Conflict,
    KubeClient,
    NotFound,
)
from raycluster_operator.planning.rayjob import (
    Action,
    ActionKind,
    Context,
    JobsApi,
    Observed,
    Plan,
    needs_jobs_api,
    plan_rayjob,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RayJobOptions:
    #: Run the RayJob controller at all.
    rayjobs: bool = True
    #: Seconds between passes while a RayJob waits on its cluster or its Ray job.
    rayjob_poll_interval: float = 3.0
    #: How the operator reaches a head's Jobs API: "service" (the head service's DNS name,
    #: inside a cluster) or "head-pod-ip" (the head pod's IP: the dev cluster's process
    #: runtime, where the operator runs on the host).
    jobs_api_via: str = "service"
    rayjob_concurrency: int = 4


class RayJobMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.transitions = Counter(
            "raycluster_operator_rayjob_transitions",
            "RayJob jobDeploymentStatus moves, by source, target and cause.",
            ["source", "target", "cause"],
            registry=registry,
        )
        self.slice_failures = Counter(
            "raycluster_operator_rayjob_slice_failures",
            "Worker slices that broke while a RayJob ran, by the policy's action.",
            ["action"],
            registry=registry,
        )
        self.jobs_api_errors = Counter(
            "raycluster_operator_rayjob_jobs_api_errors",
            "Requests to a head's Jobs API that failed.",
            registry=registry,
        )


def _suffix() -> str:
    return "".join(secrets.choice(SUFFIX_ALPHABET) for _ in range(5))


class RayJobController:
    def __init__(
        self,
        client: KubeClient,
        sources: Sources,
        options: RayJobOptions,
        *,
        registry: CollectorRegistry,
        recorder: EventRecorder,
        namespaces: tuple[str, ...] = (),
        watch_timeout: int = 300,
    ) -> None:
        self.client = client
        self.sources = sources
        self.options = options
        self.recorder = recorder
        self.metrics = RayJobMetrics(registry)
        self.jobs_api = JobsApiClient()
        #: Where the Jobs API of a RayJob's cluster is (tests point it at a stand-in).
        self.resolve: Resolver = RESOLVERS[options.jobs_api_via]
        self.suffix: Callable[[], str] = _suffix
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self.queue: WorkQueue | None = None
        self.reconciles = 0
        spaces: list[str | None] = list(namespaces) or [None]
        self.rayjobs = [
            Informer(client, RAYJOBS, namespace=ns, watch_timeout=watch_timeout) for ns in spaces
        ]
        self.submitters = [
            Informer(
                client,
                BATCH_JOBS,
                namespace=ns,
                label_selector=f"{ORIGINATED_FROM_CRD}=RayJob",
                watch_timeout=watch_timeout,
            )
            for ns in spaces
        ]
        for informer in self.rayjobs:
            informer.add_handler(self._on_rayjob)
        for informer in self.submitters:
            informer.add_handler(self._on_submitter)
        self._rayjob_view = StoreView([i.store for i in self.rayjobs])
        self._submitter_view = StoreView([i.store for i in self.submitters])
        sources.subscribe(self._on_cluster_change)

    @property
    def informers(self) -> list[Informer]:
        return self.rayjobs + self.submitters if self.options.rayjobs else []

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    # -- event -> key --------------------------------------------------------------------

    def _add(self, key: str) -> None:
        if self.queue is not None:
            self.queue.add(key)

    def _on_rayjob(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is not None:
            meta = obj.get("metadata") or {}
            self._add(f"{meta.get('namespace', '')}/{meta.get('name')}")

    def _on_submitter(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is not None:
            owner = _labels(obj).get(ORIGINATED_FROM_CR_NAME)
            if owner:
                self._add(f"{(obj.get('metadata') or {}).get('namespace', '')}/{owner}")

    def _on_cluster_change(self, change: Change) -> None:
        """A RayCluster (or a pod of it) changed: the RayJobs whose attempt runs on it."""
        namespace, cluster = split_key(change.key)
        for key in self._rayjob_view.all_keys():
            job = self._rayjob_view.get(key)
            if job is None or split_key(key)[0] != namespace:
                continue
            if (job.get("status") or {}).get("rayClusterName") == cluster:
                self._add(key)

    # -- leading -------------------------------------------------------------------------

    async def lead(self, *, stopping: Callable[[], bool]) -> None:
        """One leadership term: wait for the caches, then workers and a periodic resync."""
        if not self.options.rayjobs:
            return
        await asyncio.gather(*(i.synced.wait() for i in self.informers))
        queue = WorkQueue(base_delay=0.05, max_delay=30.0)
        self.queue = queue
        workers = [
            asyncio.create_task(self._worker(queue), name=f"rayjob worker {i}")
            for i in range(max(1, self.options.rayjob_concurrency))
        ]
        try:
            while True:
                for key in self._rayjob_view.all_keys():
                    queue.add(key)
                await asyncio.sleep(60.0)
        finally:
            self.queue = None
            queue.shutdown()
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await self.jobs_api.close()

    async def _worker(self, queue: WorkQueue) -> None:
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            try:
                requeue = await self.reconcile(key)
            except Conflict as exc:
                # The pass read a stale RayJob: planned again from the newer one.
                delay = queue.add_rate_limited(key)
                log.debug("rayjob %s: stale (retry in %.2fs): %s", key, delay, exc)
            except Exception as exc:
                delay = queue.add_rate_limited(key)
                log.warning("rayjob %s failed (retry in %.2fs): %s", key, delay, exc)
            else:
                queue.forget(key)
                if requeue is not None:
                    queue.add_after(key, max(requeue, 0.01))
            finally:
                self.reconciles += 1
                queue.done(key)

    # -- one pass ------------------------------------------------------------------------

    async def observe(self, rayjob: Obj) -> Observed:
        namespace = str(rayjob["metadata"].get("namespace"))
        status = rayjob.get("status") or {}
        cluster_name = status.get("rayClusterName")
        cluster = None
        pods: list[Obj] = []
        heads: list[Obj] = []
        if cluster_name:
            cluster = self.sources.caches.clusters.get(f"{namespace}/{cluster_name}")
            members = self.sources.caches.pods.by_index(BY_CLUSTER, f"{namespace}/{cluster_name}")
            pods = [p for p in members if _labels(p).get(NODE_TYPE) == NODE_TYPE_WORKER]
            heads = [p for p in members if _labels(p).get(NODE_TYPE) == NODE_TYPE_HEAD]
        submitter = self._submitter_view.get(f"{namespace}/{rayjob['metadata']['name']}")
        api: JobsApi = JobsApi.NOT_ASKED
        info: dict[str, Any] = {}
        if needs_jobs_api(rayjob):
            api, info = await self._ask(rayjob, cluster)
        return Observed(rayjob, cluster, pods, submitter, api, info, heads)

    async def _ask(self, rayjob: Obj, cluster: Obj | None) -> tuple[JobsApi, dict[str, Any]]:
        base = self.resolve(rayjob, cluster)
        if not base:
            return JobsApi.UNREACHABLE, {}
        try:
            found = await self.jobs_api.get(base, str(rayjob["status"]["jobId"]))
        except JobsApiError as exc:
            self.metrics.jobs_api_errors.inc()
            log.info("jobs api of %s: %s", rayjob["metadata"]["name"], exc)
            return JobsApi.UNREACHABLE, {}
        if not found.found:
            return JobsApi.NOT_FOUND, {}
        return JobsApi.FOUND, dict(found.details)

    async def reconcile(self, key: str) -> float | None:
        rayjob = self._rayjob_view.get(key)
        if rayjob is None or (rayjob.get("metadata") or {}).get("deletionTimestamp"):
            return None
        managed_by = (rayjob.get("spec") or {}).get("managedBy")
        if managed_by not in (None, "", "ray.io/kuberay-operator"):
            return None
        observed = await self.observe(rayjob)
        ctx = Context(self.clock(), self.suffix(), self.options.rayjob_poll_interval)
        plan = plan_rayjob(observed, ctx)
        started = time.monotonic()
        for action in plan.actions:
            await self._act(rayjob, observed, action)
        await self._write_status(rayjob, plan)
        await self._record(rayjob, plan)
        log.debug(
            "rayjob %s pass (%.3fs): %s actions %s requeue %s",
            key,
            time.monotonic() - started,
            [m.target.value for m in plan.moves],
            [a.kind.value for a in plan.actions],
            plan.requeue_after,
        )
        return plan.requeue_after

    async def _act(self, rayjob: Obj, observed: Observed, action: Action) -> None:
        namespace = str(rayjob["metadata"].get("namespace"))
        kind = action.kind
        try:
            if kind == ActionKind.CREATE_CLUSTER:
                await self.client.create(RAYCLUSTERS, action.body, namespace)
            elif kind == ActionKind.CREATE_SUBMITTER:
                await self.client.create(BATCH_JOBS, action.body, namespace)
            elif kind == ActionKind.DELETE_CLUSTER:
                await self.client.delete(
                    RAYCLUSTERS, namespace, action.name, propagation="Background"
                )
            elif kind == ActionKind.DELETE_SUBMITTER:
                await self.client.delete(
                    BATCH_JOBS, namespace, action.name, propagation="Background"
                )
            elif kind == ActionKind.DELETE_SELF:
                await self.client.delete(RAYJOBS, namespace, action.name, propagation="Background")
            elif kind == ActionKind.DELETE_WORKERS:
                await self._suspend_workers(namespace, observed.cluster)
            else:
                await self._jobs_api_action(rayjob, observed, action)
        except (AlreadyExists, NotFound):
            pass

    async def _suspend_workers(self, namespace: str, cluster: Obj | None) -> None:
        """DeleteWorkers: every worker group suspended (KubeRay's suspendWorkerGroups)."""
        if cluster is None:
            return
        groups = [
            dict(g, suspend=True) for g in (cluster.get("spec") or {}).get("workerGroupSpecs") or []
        ]
        patch = {"spec": {"workerGroupSpecs": groups}}
        await self.client.patch(RAYCLUSTERS, namespace, cluster["metadata"]["name"], patch)

    async def _jobs_api_action(self, rayjob: Obj, observed: Observed, action: Action) -> None:
        base = self.resolve(rayjob, observed.cluster)
        if not base:
            return
        try:
            if action.kind == ActionKind.SUBMIT:
                await self.jobs_api.submit(base, action.body)
            elif action.kind == ActionKind.STOP_JOB:
                await self.jobs_api.stop(base, action.name)
        except JobsApiError as exc:
            self.metrics.jobs_api_errors.inc()
            log.warning("jobs api %s for %s: %s", action.kind, rayjob["metadata"]["name"], exc)

    async def _write_status(self, rayjob: Obj, plan: Plan) -> None:
        old = rayjob.get("status") or {}
        if plan.status == old:
            return
        patch: dict[str, Any] = {k: None for k in old if k not in plan.status}
        patch.update(plan.status)
        meta = rayjob["metadata"]
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": patch}
        await self.client.patch(
            RAYJOBS, meta.get("namespace"), meta["name"], body, subresource="status"
        )

    async def _record(self, rayjob: Obj, plan: Plan) -> None:
        for move in plan.moves:
            self.metrics.transitions.labels(
                move.source.value or "New", move.target.value or "New", move.cause.value
            ).inc()
        if plan.breaks:
            action = (plan.status.get("sliceFailures") or [{}])[-1].get("action", "")
            self.metrics.slice_failures.labels(action).inc(len(plan.breaks))
        for event in plan.events:
            await self.recorder.emit(
                rayjob, event.type, event.reason, event.note, action="Reconcile"
            )


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    value: Mapping[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    return value


__all__ = ["RayJobController", "RayJobOptions"]
