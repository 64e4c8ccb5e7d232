"""The manager: sources, the controller and serving, composed and run together.

Every replica keeps warm caches (every watched namespace); only the leader runs the
controller's workers. ``run()`` serves metrics and probes, starts the informers, waits for the
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
from typing import Any

from raycluster_operator.controller.controller import Controller, ControllerOptions
from raycluster_operator.controller.events import EventRecorder
from raycluster_operator.controller.informer import Informer
from raycluster_operator.controller.metrics import Metrics
from raycluster_operator.controller.probes import HttpServer
from raycluster_operator.controller.rayjobs import RayJobController, RayJobOptions
from raycluster_operator.controller.serving import Serving, ServingOptions
from raycluster_operator.controller.sources import SourceOptions, Sources
from raycluster_operator.kube import KubeClient
from raycluster_operator.planning import PlanOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ManagerOptions:
    sources: SourceOptions = field(default_factory=SourceOptions)
    controller: ControllerOptions = field(default_factory=ControllerOptions)
    serving: ServingOptions = field(default_factory=ServingOptions)
    planning: PlanOptions = field(default_factory=PlanOptions)
    rayjobs: RayJobOptions = field(default_factory=RayJobOptions)

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
        self.sources = Sources(
            client,
            self.options.sources,
            # Host-loss failover reads Nodes; with it off the operator needs no node grant.
            watch_nodes=self.options.planning.unready_slice_timeout > 0,
        )
        self.serving = Serving(
            client, self.options.serving, self.metrics, ready=self.sources.synced
        )
        self.controller = Controller(
            client,
            self.sources,
            self.options.controller,
            self.options.planning,
            metrics=self.metrics,
            recorder=EventRecorder(client, instance=self.options.serving.identity),
        )
        # The second reconciler (docs/design.md §11): RayJobs, under the same lease.
        self.rayjobs = RayJobController(
            client,
            self.sources,
            self.options.rayjobs,
            registry=self.metrics.registry,
            recorder=self.controller.recorder,
            namespaces=self.options.sources.namespaces,
            watch_timeout=self.options.sources.watch_timeout,
        )
        self._stop = asyncio.Event()

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
            tasks = [
                asyncio.create_task(inf.run(), name=f"informer {inf.name}")
                for inf in [*self.informers, *self.rayjobs.informers]
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
        await asyncio.gather(
            self.controller.lead(stopping=self._stop.is_set),
            self.rayjobs.lead(stopping=self._stop.is_set),
        )

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
