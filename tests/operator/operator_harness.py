"""The operator against the dev cluster over HTTPS: the world a test runs in, and helpers.

Every test here starts a DevCluster (its own API server, scheduler, kubelet, GC) and a
``Manager`` exactly as ``raycluster-operator run`` builds it, with short timings, acting as
its ServiceAccount with the RBAC of deploy/ (the test's own client is the cluster admin).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from devkube import DevCluster
from devkube_testing import stop_dev_cluster
from pod_facts import labels as labels_of
from raycluster_operator.api.crd import crd_manifest
from raycluster_operator.cli.dev import operator_kubeconfig
from raycluster_operator.controller.leader import LeaseTiming
from raycluster_operator.controller.manager import Manager, ManagerOptions
from raycluster_operator.kube import PODS, RAYCLUSTERS, KubeClient
from waiting import eventually

Obj = dict[str, Any]
FAST_LEASE = LeaseTiming(lease_duration=1.0, renew_deadline=0.6, retry_period=0.1)
NODES = ["tpu:v6e:4x4:4", "cpu:6"]


def fast_options(**overrides: Any) -> ManagerOptions:
    base: dict[str, Any] = dict(
        metrics_addr=None,
        health_addr=None,
        leader_elect=False,
        lease_timing=FAST_LEASE,
        resync_period=30.0,
        watch_timeout=30,
        expectations_timeout=10.0,
        retry_base_delay=0.02,
        retry_max_delay=1.0,
        identity="test-operator",
    )
    base.update(overrides)
    return ManagerOptions.from_flat(**base)


@dataclass
class RunningOperator:
    manager: Manager
    client: KubeClient
    task: asyncio.Task[None]

    @property
    def writes(self) -> int:
        return self.client.writes

    async def stop(self) -> None:
        self.manager.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self.task, 15)
        await self.client.close()


@dataclass
class World:
    """A dev cluster with the RayCluster CRD, and a client for the test's own reads/writes."""

    cluster: Any
    kube: KubeClient
    operators: list[RunningOperator] = field(default_factory=list)
    _operator_config: Obj | None = None

    async def operator_config(self) -> Obj:
        """The operator's kubeconfig: its ServiceAccount with exactly deploy/'s RBAC, so the
        suite runs under RBAC enforcement as in production (installed once per world)."""
        if self._operator_config is None:
            self._operator_config = await operator_kubeconfig(self.cluster)
        return self._operator_config

    async def start_operator(self, **overrides: Any) -> RunningOperator:
        client = KubeClient.from_kubeconfig(await self.operator_config())
        manager = Manager(client, fast_options(**overrides))
        task = asyncio.create_task(manager.run())
        op = RunningOperator(manager, client, task)
        self.operators.append(op)
        await eventually(lambda: _check(manager.synced()), within=10)
        return op

    async def apply(self, obj: Obj) -> Obj:
        result: Obj = await self.cluster.apply(obj)
        return result

    async def get_cluster(self, name: str, ns: str = "default") -> Obj:
        return await self.kube.get(RAYCLUSTERS, ns, name)

    async def patch_spec(self, name: str, patch: Obj, ns: str = "default") -> Obj:
        return await self.kube.patch(RAYCLUSTERS, ns, name, {"spec": patch})

    async def pods(self, cluster: str, ns: str = "default", *, live: bool = True) -> list[Obj]:
        listing = await self.kube.list(PODS, ns, label_selector=f"ray.io/cluster={cluster}")
        items = listing.items
        if live:
            items = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return items

    async def workers(self, cluster: str, group: str | None = None) -> list[Obj]:
        return [
            p
            for p in await self.pods(cluster)
            if p["metadata"]["labels"].get("ray.io/node-type") == "worker"
            and (group is None or p["metadata"]["labels"].get("ray.io/group") == group)
        ]


@contextlib.asynccontextmanager
async def running_world(
    nodes: list[str] = NODES, *, crd: Obj | None = None, **cluster_options: Any
) -> AsyncIterator[World]:
    """A started dev cluster (fast kubelets, the RayCluster CRD applied: ours, or ``crd``) and
    a World on it; on the way out the world's operators are stopped, then the cluster."""
    cluster = DevCluster(nodes=nodes, kubelet_delay=0.05, **cluster_options)
    await cluster.start()
    await cluster.apply(crd if crd is not None else crd_manifest())
    kube = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
    world = World(cluster, kube)
    try:
        yield world
    finally:
        for op in world.operators:
            if not op.task.done():
                await op.stop()
        await kube.close()
        await stop_dev_cluster(cluster)


def _check(cond: bool) -> None:
    assert cond


def slices(pods: list[Obj]) -> dict[int, list[int]]:
    """replica index -> sorted host indices (multi-host workers)."""
    out: dict[int, list[int]] = {}
    for pod in pods:
        lbl = labels_of(pod)
        out.setdefault(int(lbl.get("ray.io/worker-group-replica-index", "-1")), []).append(
            int(lbl.get("ray.io/replica-host-index", "0"))
        )
    return {k: sorted(v) for k, v in sorted(out.items())}


def replica_names(pods: list[Obj]) -> set[str]:
    return {labels_of(p).get("ray.io/worker-group-replica-name", "") for p in pods}


def ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def raycluster(
    name: str,
    groups: list[Obj],
    *,
    autoscaling: bool = False,
) -> Obj:
    spec: Obj = {
        "rayVersion": "2.60.0",
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "ray-head",
                            "image": "rayproject/ray:2.60.0",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        }
                    ]
                }
            },
        },
        "workerGroupSpecs": groups,
    }
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def cpu_group(name: str, *, replicas: int, hosts: int = 1, **extra: Any) -> Obj:
    return {
        "groupName": name,
        "replicas": replicas,
        "numOfHosts": hosts,
        "rayStartParams": {},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": "rayproject/ray:2.60.0",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    }
                ]
            }
        },
        **extra,
    }


def tpu_group(name: str, *, replicas: int, **extra: Any) -> Obj:
    tpu = {"cpu": "100m", "memory": "128Mi", "google.com/tpu": "4"}
    return {
        "groupName": name,
        "replicas": replicas,
        "minReplicas": 0,
        "maxReplicas": 4,
        "numOfHosts": 4,
        "rayStartParams": {},
        "template": {
            "spec": {
                "nodeSelector": {
                    "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                    "cloud.google.com/gke-tpu-topology": "4x4",
                },
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": "rayproject/ray:2.60.0",
                        "resources": {"requests": tpu, "limits": tpu},
                    }
                ],
            }
        },
        **extra,
    }
