"""The operator world (harness/world.py with the operator's test timings) and its manifests.

Every test here starts a DevCluster (its own API server, scheduler, kubelet, GC) and a
``Manager`` exactly as ``raycluster-operator run`` builds it, with short timings, acting as
its ServiceAccount with the RBAC of deploy/ (the test's own client is the cluster admin).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, ClassVar

from raycluster_operator.controller.manager import ManagerOptions
from raycluster_operator.kube import RAYCLUSTERS

from . import manifests as m
from .cluster import stop_dev_cluster
from .objects import Obj
from .operator import FAST, FAST_LEASE, RunningOperator, operator_options
from .pods import is_ready as ready
from .pods import labels as labels_of
from .pods import of_type, replica_names
from .pods import slice_hosts as slices
from .waiting import eventually, holds
from .world import DevWorld, open_world

__all__ = [
    "FAST_LEASE",
    "NODES",
    "RunningOperator",
    "SharedWorld",
    "World",
    "cpu_group",
    "eventually",
    "fast_options",
    "labels_of",
    "raycluster",
    "ready",
    "replica_names",
    "running_world",
    "slices",
    "stop_dev_cluster",
    "tpu_group",
]

NODES = ["tpu:v6e:4x4:4", "cpu:6"]
TIMINGS: dict[str, Any] = dict(
    FAST,
    resync_period=30.0,
    expectations_timeout=10.0,
    retry_max_delay=1.0,
    identity="test-operator",
)
_check = holds


def fast_options(**overrides: Any) -> ManagerOptions:
    return operator_options(**{**TIMINGS, **overrides})


@dataclass
class World(DevWorld):
    """A dev cluster with the RayCluster CRD, and a client for the test's own reads/writes."""

    operator_defaults: ClassVar[dict[str, Any]] = TIMINGS

    async def operator_config(self) -> Obj:
        return await self.operator_kubeconfig()

    async def apply(self, obj: Obj) -> Obj:
        result: Obj = await self.cluster.apply(obj)
        return result

    async def get_cluster(self, name: str, ns: str = "default") -> Obj:
        return await self.kube.get(RAYCLUSTERS, ns, name)

    async def patch_spec(self, name: str, patch: Obj, ns: str = "default") -> Obj:
        return await self.kube.patch(RAYCLUSTERS, ns, name, {"spec": patch})

    async def workers(self, cluster: str, group: str | None = None) -> list[Obj]:
        return of_type(await self.pods(cluster), "worker", group)


@dataclass
class SharedWorld(World):
    """One cluster and one operator (this world's defaults) for every test of a module, each
    test with RayClusters of its own names, every RayCluster and pod deleted after each
    (``clean``). ``start_operator()`` hands out the running operator; a test that needs other
    operator options, faults, crashes or restarts of its own takes the private ``world``."""

    async def start_operator(self, *, wait: bool = True, **overrides: Any) -> RunningOperator:
        if overrides:
            raise AssertionError(
                f"operator options {sorted(overrides)} need a private world: use `world`"
            )
        running = [op for op in self.operators if not op.task.done()]
        if running:
            return running[-1]
        return await super().start_operator(wait=wait)


@contextlib.asynccontextmanager
async def running_world(
    nodes: list[str] = NODES,
    *,
    crd: Obj | None = None,
    world_class: type[World] = World,
    **cluster_options: Any,
) -> AsyncIterator[World]:
    """A started dev cluster (fast kubelets, the RayCluster CRD applied: ours, or ``crd``) and
    a World on it; on the way out the world's operators are stopped, then the cluster."""
    async with open_world(world_class, nodes, crd=crd, **cluster_options) as world:
        yield world


SMALL = {"cpu": "100m", "memory": "128Mi"}


def raycluster(name: str, groups: list[Obj], *, autoscaling: bool = False) -> Obj:
    head = m.head_group(m.container("ray-head", requests=SMALL))
    extra = {"enableInTreeAutoscaling": True} if autoscaling else {}
    return m.raycluster(name, head, groups, **extra)


def cpu_group(name: str, *, replicas: int, hosts: int = 1, **extra: Any) -> Obj:
    pod = m.template(m.container("ray-worker", requests=SMALL))
    return m.worker_group(name, pod, replicas=replicas, hosts=hosts, **extra)


def tpu_group(name: str, *, replicas: int, **extra: Any) -> Obj:
    tpu = {**SMALL, "google.com/tpu": "4"}
    pod = m.template(
        m.container("ray-worker", requests=tpu, limits=tpu), nodeSelector=dict(m.V6E_4X4)
    )
    return m.worker_group(
        name, pod, replicas=replicas, min_replicas=0, max_replicas=4, hosts=4, **extra
    )
