"""The RayJob reconciler: the second kind on the generic controller, under the same leader
lease (docs/design.md §7, §11).

It reads RayJobs and their submitter Jobs from its own informers, and RayClusters and their
pods from the RayCluster controller's caches (one watch each, shared); it asks the Jobs API
about a running job; the pure planner (``planning.rayjob``) decides; this module executes the
plan's writes, writes status, records Events and metrics. It creates RayCluster objects and
never their pods: the RayCluster controller beside it runs them.

Its caches sync apart from the RayCluster controller's: an API server without the RayJob CRD
leaves this controller waiting (and logging) while RayClusters are served as before. A write
the API refuses for good (Invalid, Forbidden) is recorded as a ``WriteRejected`` Warning Event
on the RayJob and stops the key as a ``TerminalError`` until the RayJob changes; a Conflict
(a pass from a stale RayJob) and any other failure are the runtime's to retry.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry

from kubefacts.names import SUFFIX_ALPHABET
from raycluster_operator.api.labels import (
    NODE_TYPE,
    NODE_TYPE_HEAD,
    NODE_TYPE_WORKER,
    ORIGINATED_FROM_CR_NAME,
    ORIGINATED_FROM_CRD,
)
from raycluster_operator.api.objects import Obj
from raycluster_operator.controller.raycluster.sources import BY_CLUSTER, Change, Sources
from raycluster_operator.controller.rayjob.jobs_api import (
    RESOLVERS,
    JobsApiClient,
    JobsApiError,
    JobsApiUnreachable,
    Resolver,
)
from raycluster_operator.controller.rayjob.metrics import RayJobMetrics
from raycluster_operator.controller.runtime.controller import LoopOptions
from raycluster_operator.controller.runtime.events import EventRecorder
from raycluster_operator.controller.runtime.informer import Informer
from raycluster_operator.controller.runtime.reconcile import Result, TerminalError
from raycluster_operator.controller.runtime.store import StoreView, split_key
from raycluster_operator.kube import (
    BATCH_JOBS,
    RAYCLUSTERS,
    RAYJOBS,
    AlreadyExists,
    KubeClient,
    KubeError,
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
    #: Seconds between enqueueing every RayJob again.
    rayjob_resync_period: float = 60.0

    def loop(self, drain_timeout: float) -> LoopOptions:
        """The runtime's knobs; a clean stop drains RayJob passes as long as RayCluster ones."""
        return LoopOptions(
            concurrency=self.rayjob_concurrency,
            resync_period=self.rayjob_resync_period,
            retry_base_delay=0.05,
            retry_max_delay=30.0,
            drain_timeout=drain_timeout,
        )


def _suffix() -> str:
    return "".join(secrets.choice(SUFFIX_ALPHABET) for _ in range(5))


#: The Event recorded on a RayJob when the API refused a write for good.
WRITE_REJECTED = "WriteRejected"


class RayJobReconciler:
    """Both the kind's ``Registration`` and its ``Reconciler``: it keeps no per-term records
    (a pass reads everything from the caches and the Jobs API), so every term uses it."""

    name = "rayjob"

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
        self._enqueue: Callable[[str], None] = lambda key: None
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

    # -- the registration ----------------------------------------------------------------

    def route(self, enqueue: Callable[[str], None]) -> None:
        self._enqueue = enqueue

    def all_keys(self) -> Sequence[str]:
        return self._rayjob_view.all_keys()

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self.informers))

    @asynccontextmanager
    async def term(self, resync: Callable[[], None]) -> AsyncIterator[RayJobReconciler]:
        try:
            yield self
        finally:
            await self.jobs_api.close()

    # -- event -> key --------------------------------------------------------------------

    def _add(self, key: str) -> None:
        self._enqueue(key)

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
            name = rayjob["metadata"]["name"]
            if isinstance(exc, JobsApiUnreachable) and not rayjob["status"].get("jobStatus"):
                # The head is Ready (its probes ask the dashboard agent) a moment before the
                # dashboard listens: until the job's status was ever read, nothing listening
                # is the dashboard starting; the pass waits for the next poll (docs/design.md §11).
                log.debug("jobs api of %s not answering yet: %s", name, exc)
                return JobsApi.UNREACHABLE, {}
            self.metrics.jobs_api_errors.inc()
            log.info("jobs api of %s: %s", name, exc)
            return JobsApi.UNREACHABLE, {}
        if not found.found:
            return JobsApi.NOT_FOUND, {}
        return JobsApi.FOUND, dict(found.details)

    async def reconcile(self, key: str) -> Result:
        rayjob = self._rayjob_view.get(key)
        if rayjob is None or (rayjob.get("metadata") or {}).get("deletionTimestamp"):
            return Result()
        managed_by = (rayjob.get("spec") or {}).get("managedBy")
        if managed_by not in (None, "", "ray.io/kuberay-operator"):
            return Result()
        observed = await self.observe(rayjob)
        ctx = Context(self.clock(), self.suffix(), self.options.rayjob_poll_interval)
        plan = plan_rayjob(observed, ctx)
        started = time.monotonic()
        try:
            for action in plan.actions:
                await self._act(rayjob, observed, action)
            await self._write_status(rayjob, plan)
        except KubeError as exc:
            if not exc.terminal:
                raise
            await self.recorder.emit(
                rayjob, "Warning", WRITE_REJECTED, str(exc), action="Reconcile"
            )
            raise TerminalError(str(exc)) from exc
        await self._record(rayjob, plan)
        log.debug(
            "rayjob %s pass (%.3fs): %s actions %s requeue %s",
            key,
            time.monotonic() - started,
            [m.target.value for m in plan.moves],
            [a.kind.value for a in plan.actions],
            plan.requeue_after,
        )
        return Result(requeue_after=plan.requeue_after)

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


__all__ = ["RayJobOptions", "RayJobReconciler"]
