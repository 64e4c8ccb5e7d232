"""A world: one started dev cluster, the test's admin client, and the operators it attached.

Every integration world (operator, hardening, e2e) is this class with a few lines more: its
operator timings, its node list, its helpers. ``open_world`` starts and tears one down.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from devkube import DevCluster
from raycluster_operator.controller.crds import (
    crd_manifest,
    rayjob_crd_manifest,
    rayservice_crd_manifest,
)
from raycluster_operator.devcluster.attach import operator_kubeconfig
from raycluster_operator.kube import PODS, RAYCLUSTERS, KubeClient, NotFound

from .barrier import reconciled
from .cluster import start_dev_cluster, stop_dev_cluster
from .objects import Obj
from .operator import RunningOperator, launch_operator, operator_options
from .waiting import eventually

W = TypeVar("W", bound="DevWorld")


@dataclass
class DevWorld:
    cluster: DevCluster
    kube: KubeClient
    operators: list[RunningOperator] = field(default_factory=list)
    _service_account: Obj | None = field(default=None, repr=False)

    #: The operator's flat ManagerOptions in this world (a test's overrides go on top).
    operator_defaults: ClassVar[dict[str, Any]] = {}
    #: How long an attached operator may take to list everything, and how often to look.
    sync_within: ClassVar[float] = 10.0
    sync_interval: ClassVar[float] = 0.05
    #: Teardown: cancel operators (a crash) instead of draining them.
    crash_on_close: ClassVar[bool] = False
    #: Teardown: an operator still draining after 15 s is left (real Ray can be that slow).
    drain_may_hang: ClassVar[bool] = False
    #: Teardown: how long the cluster may take to stop before its GC task is cancelled again.
    stop_patience: ClassVar[float] = 5.0

    async def operator_kubeconfig(self) -> Obj:
        """The operator's kubeconfig: its ServiceAccount with exactly deploy/'s RBAC, so the
        suite runs under RBAC enforcement as in production (installed once per world)."""
        if self._service_account is None:
            self._service_account = await operator_kubeconfig(self.cluster)
        return self._service_account

    async def start_operator(self, *, wait: bool = True, **overrides: Any) -> RunningOperator:
        options = operator_options(**{**self.operator_defaults, **overrides})
        op = launch_operator(await self.operator_kubeconfig(), options)
        self.operators.append(op)
        if wait:
            await op.synced(self.sync_within, interval=self.sync_interval)
        return op

    async def reconciled(
        self,
        cluster: str,
        ns: str = "default",
        *,
        operator: RunningOperator | None = None,
        passes: int = 1,
        within: float = 60.0,
    ) -> None:
        """The barrier (barrier.py): the operator (the last one started and still running,
        unless named) has seen the RayCluster as it stands now and finished a pass since. What
        a test asserts did not happen after this had its chance to happen."""
        op = operator or next(o for o in reversed(self.operators) if not o.task.done())
        await reconciled(op, self.kube, cluster, ns, passes=passes, within=within)

    async def pods(self, cluster: str, ns: str = "default", *, live: bool = True) -> list[Obj]:
        listing = await self.kube.list(PODS, ns, label_selector=f"ray.io/cluster={cluster}")
        items: list[Obj] = listing.items
        if live:
            items = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return items

    async def clean(self, *, within: float = 60.0) -> None:
        """Every RayCluster deleted and its pods gone (a shared world between two tests)."""
        listing = await self.kube.list(RAYCLUSTERS)
        for obj in listing.items:
            meta = obj["metadata"]
            with contextlib.suppress(NotFound):
                await self.kube.delete(RAYCLUSTERS, meta["namespace"], meta["name"])
        # Their pods too: kube-controller-manager's garbage collector finds a new CRD's kind
        # by discovery every 30 s, so in a world's first half minute a RayCluster's pods
        # outlived it by up to 30 s (the embedded GC knows every kind at once).
        for pod in (await self.kube.list(PODS, label_selector="ray.io/cluster")).items:
            meta = pod["metadata"]
            with contextlib.suppress(NotFound):
                await self.kube.delete(PODS, meta["namespace"], meta["name"])

        async def gone() -> None:
            assert not (await self.kube.list(RAYCLUSTERS)).items
            assert not (await self.kube.list(PODS, label_selector="ray.io/cluster")).items

        await eventually(gone, within)

    async def opened(self) -> None:
        """Runs once the cluster is up (a world starts its watchers here)."""

    async def close(self) -> None:
        """Operators first (stopped or crashed), then the client, then the cluster."""
        for op in self.operators:
            if not op.task.done():
                await (op.crash() if self.crash_on_close else op.stop(hang_ok=self.drain_may_hang))
        await self.kube.close()
        await stop_dev_cluster(self.cluster, patience=self.stop_patience)

    @classmethod
    async def start(
        cls: type[W],
        nodes: Sequence[str] | None,
        *,
        crd: Obj | None = None,
        **cluster_options: Any,
    ) -> W:
        """A started dev cluster (fast kubelets; ``crd``, else the operator's RayCluster CRD,
        applied, and the RayJob CRD) and a world on it; ``cluster_options`` are DevCluster's."""
        # The CRDs the operator ships (each kind's controller syncs its caches on its kind).
        crds = [crd or crd_manifest(), rayjob_crd_manifest(), rayservice_crd_manifest()]
        cluster = await start_dev_cluster(nodes, crds=crds, **cluster_options)
        world = cls(cluster, KubeClient.from_kubeconfig(cluster.kubeconfig_dict()))
        try:
            await world.opened()
        except BaseException:
            await world.close()
            raise
        return world


@contextlib.asynccontextmanager
async def open_world(cls: type[W], nodes: Sequence[str] | None, **options: Any) -> AsyncIterator[W]:
    """``cls.start`` ... ``close``, as a block."""
    world = await cls.start(nodes, **options)
    try:
        yield world
    finally:
        await world.close()
