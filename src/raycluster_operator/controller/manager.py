"""The manager: sources, one generic controller per kind, and serving, composed and run
together.

Every kind is a ``Registration`` on the runtime's ``Controller`` (docs/design.md §7): adding
one is a package beside ``raycluster/`` and ``rayjob/`` and one ``_register`` line here.
Every replica keeps warm caches (every watched namespace); only the leader runs the
controllers' workers. ``run()`` serves metrics and probes, starts the informers, waits for the
caches to sync (or for a stop: an unreachable API server must not make SIGTERM wait for the
kubelet's SIGKILL), then leads whenever serving says so. ``stop()`` drains in-flight
reconciles briefly, releases the Lease and closes the servers.

Options come in one section per piece (``ManagerOptions``), each defined beside the piece it
configures and handed to it whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from raycluster_operator.controller.raycluster.metrics import ClusterMetrics
from raycluster_operator.controller.raycluster.reconciler import Reconciler
from raycluster_operator.controller.raycluster.registration import ControllerOptions, RayClusters
from raycluster_operator.controller.raycluster.sources import SourceOptions, Sources
from raycluster_operator.controller.rayjob.reconciler import RayJobOptions, RayJobReconciler
from raycluster_operator.controller.rayservice.reconciler import (
    RayServiceOptions,
    RayServiceReconciler,
)
from raycluster_operator.controller.runtime.controller import Controller, LoopOptions
from raycluster_operator.controller.runtime.events import EventRecorder
from raycluster_operator.controller.runtime.informer import Informer
from raycluster_operator.controller.runtime.metrics import PREFIX, ControllerMetrics, Metrics
from raycluster_operator.controller.runtime.probes import HttpServer
from raycluster_operator.controller.runtime.reconcile import Reconciler as AnyReconciler
from raycluster_operator.controller.runtime.reconcile import Registration
from raycluster_operator.controller.runtime.serving import Serving, ServingOptions
from raycluster_operator.kube import KubeClient
from raycluster_operator.planning import PlanOptions

log = logging.getLogger(__name__)

R = TypeVar("R", bound=AnyReconciler)


@dataclass(frozen=True)
class ManagerOptions:
    sources: SourceOptions = field(default_factory=SourceOptions)
    controller: ControllerOptions = field(default_factory=ControllerOptions)
    serving: ServingOptions = field(default_factory=ServingOptions)
    planning: PlanOptions = field(default_factory=PlanOptions)
    rayjobs: RayJobOptions = field(default_factory=RayJobOptions)
    rayservices: RayServiceOptions = field(default_factory=RayServiceOptions)

    @classmethod
    def from_flat(cls, **settings: Any) -> ManagerOptions:
        """Options from flat names (``resync_period=5.0``): every option name is unique
        across the sections, so it says which section it belongs to."""
        default = cls()
        sections: dict[str, dict[str, Any]] = {}
        owner = {
            f.name: section.name
            for section in fields(cls)
            for f in fields(getattr(default, section.name))
        }
        for name, value in settings.items():
            if name not in owner:
                raise TypeError(f"unknown operator option {name!r}")
            sections.setdefault(owner[name], {})[name] = value
        return replace(
            default,
            **{
                name: replace(getattr(default, name), **values) for name, values in sections.items()
            },
        )


class Manager:
    def __init__(self, client: KubeClient, options: ManagerOptions | None = None) -> None:
        self.client = client
        self.options = options or ManagerOptions()
        self.metrics = Metrics()
        self.metrics.track_requests(lambda: client.counts)
        self.sources = Sources(
            client,
            self.options.sources,
            # Host-loss failover reads Nodes; with it off the operator needs no node grant.
            watch_nodes=self.options.planning.unready_slice_timeout > 0,
        )
        self.serving = Serving(
            client, self.options.serving, self.metrics, ready=self.sources.synced
        )
        self.recorder = EventRecorder(client, instance=self.options.serving.identity)
        #: Every kind's controller, by the kind's name.
        self.controllers: dict[str, Controller[Any]] = {}
        opts = self.options
        self.controller: Controller[Reconciler] = self._register(
            RayClusters(
                client,
                self.sources,
                opts.controller,
                opts.planning,
                metrics=ClusterMetrics(self.metrics.registry),
                recorder=self.recorder,
            ),
            opts.controller.loop(),
            prefix=PREFIX,
        )
        # The second kind (docs/design.md §11): RayJobs, under the same lease.
        self.rayjobs = RayJobReconciler(
            client,
            self.sources,
            opts.rayjobs,
            registry=self.metrics.registry,
            recorder=self.recorder,
            namespaces=opts.sources.namespaces,
            watch_timeout=opts.sources.watch_timeout,
        )
        if opts.rayjobs.rayjobs:
            self._register(
                self.rayjobs,
                opts.rayjobs.loop(opts.controller.drain_timeout),
                prefix=f"{PREFIX}_rayjob",
            )
        # The third kind (docs/design.md §12): RayServices, under the same lease.
        self.rayservices = RayServiceReconciler(
            client,
            self.sources,
            opts.rayservices,
            recorder=self.recorder,
            namespaces=opts.sources.namespaces,
            watch_timeout=opts.sources.watch_timeout,
        )
        if opts.rayservices.rayservices:
            self._register(
                self.rayservices,
                opts.rayservices.loop(opts.controller.drain_timeout),
                prefix=f"{PREFIX}_rayservice",
            )
        self._stop = asyncio.Event()

    def _register(self, kind: Registration[R], loop: LoopOptions, *, prefix: str) -> Controller[R]:
        metrics = ControllerMetrics(self.metrics.registry, prefix)
        controller = Controller(kind, loop, metrics=metrics)
        self.controllers[kind.name] = controller
        return controller

    # -- state -------------------------------------------------------------------------------

    @property
    def informers(self) -> list[Informer]:
        return self.sources.informers

    def synced(self) -> bool:
        return self.sources.synced()

    @property
    def is_leader(self) -> bool:
        elector = self.serving.elector
        return elector.is_leader if elector is not None else self.controller.queue is not None

    @property
    def reconciles(self) -> int:
        return self.controller.reconciles

    @property
    def metrics_server(self) -> HttpServer | None:
        return self.serving.metrics_server

    @property
    def health_server(self) -> HttpServer | None:
        return self.serving.health_server

    def stop(self) -> None:
        self._stop.set()

    # -- running -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until ``stop()`` is called or the task is cancelled."""
        tasks: list[asyncio.Task[None]] = []
        try:
            await self.serving.start()
            await self.sources.detect(self.client)
            await self.sources.quotas.probe()  # rule 13c: watched only with the grant
            informers = {id(i): i for c in self.controllers.values() for i in c.kind.informers}
            tasks = [
                asyncio.create_task(inf.run(), name=f"informer {inf.name}")
                for inf in informers.values()
            ]
            if not await self._until_synced_or_stopped():
                return
            log.info(
                "caches synced (%d clusters, %d pods)",
                len(self.sources.caches.clusters.all_keys()),
                len(self.sources.caches.pods.all_keys()),
            )
            tasks.append(asyncio.create_task(self.serving.lead(self._term), name="leading"))
            await self._stop.wait()
        finally:
            for task in reversed(tasks):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await self.serving.stop()

    async def _term(self) -> None:
        self.metrics.is_leader.set(1)
        try:
            await asyncio.gather(
                *(c.lead(stopping=self._stop.is_set) for c in self.controllers.values())
            )
        finally:
            self.metrics.is_leader.set(0)

    async def _until_synced_or_stopped(self) -> bool:
        synced = asyncio.ensure_future(self.sources.wait_synced())
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (synced, stopped):
                waiter.cancel()
            await asyncio.gather(synced, stopped, return_exceptions=True)
        return not self._stop.is_set()
