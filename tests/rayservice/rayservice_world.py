"""A dev cluster (simulated runtime) with the operator's CRDs, the operator acting as its
ServiceAccount, and a stand-in Serve API on 127.0.0.1 that the operator's resolvers point at
(no Ray runs on the simulated runtime). One world per module; each test uses its own namespace
and deletes its RayService at the end."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml
from serve_api_standin import ServeApiStandIn

from raycluster_operator.controller.crds import rayservice_crd_manifest
from raycluster_operator.controller.rayservice.reconciler import RayServiceReconciler
from raycluster_operator.kube import PODS, RAYCLUSTERS, RAYSERVICES, SERVICES, NotFound
from tests.harness import manifests as m
from tests.harness.kubectl import Run, runner
from tests.harness.objects import Obj
from tests.harness.operator import RunningOperator
from tests.harness.waiting import eventually
from tests.harness.world import DevWorld

NODES = ["tpu:v5p:2x2x2:4", "cpu:4"]
SMALL = {"cpu": "100m", "memory": "128Mi"}
TIMINGS: dict[str, Any] = dict(
    watch_timeout=30,
    retry_base_delay=0.02,
    retry_max_delay=1.0,
    resync_period=30.0,
    identity="rayservice-test-operator",
    rayservice_poll_interval=0.2,
)
SERVE_CONFIG = """\
applications:
  - name: llm
    import_path: serve_app:app
    route_prefix: /
    deployments:
      - name: Model
        ray_actor_options: {num_cpus: 0}
"""


@dataclass
class RayServiceWorld(DevWorld):
    operator_defaults: ClassVar[dict[str, Any]] = TIMINGS
    serve: ServeApiStandIn = field(default_factory=ServeApiStandIn)

    async def opened(self) -> None:
        await self.cluster.apply(rayservice_crd_manifest())
        await self.serve.start()
        op = await self.start_operator()
        controller: RayServiceReconciler = op.manager.rayservices
        url = self.serve.url
        controller.resolve = lambda c, head: f"{url}/clusters/{c['metadata']['name']}"
        controller.resolve_proxy = lambda c, pod: f"{url}/proxies/{_proxy_path(c, pod)}"

    async def close(self) -> None:
        await super().close()
        await self.serve.stop()

    @property
    def operator(self) -> RunningOperator:
        return next(o for o in reversed(self.operators) if not o.task.done())

    def kubectl(self, tmp: Path) -> Run:
        return runner(self.cluster.write_kubeconfig(tmp / "kubeconfig"))

    async def apply(self, tmp: Path, *objs: Mapping[str, Any]) -> None:
        done = await self.kubectl(tmp)("apply", "-f", "-", input=as_yaml(*objs))
        assert done.returncode == 0, done.stderr

    async def namespace(self, name: str) -> str:
        await self.cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        return name

    async def status(self, ns: str, name: str) -> Obj:
        return dict((await self.kube.get(RAYSERVICES, ns, name)).get("status") or {})

    async def until(self, ns: str, name: str, check: Any, within: float = 60) -> Obj:
        """The status once ``check(status)`` holds (it asserts)."""
        seen: Obj = {}

        async def reached() -> None:
            seen.clear()
            seen.update(await self.status(ns, name))
            check(seen)

        await eventually(reached, within)
        return seen

    async def clusters(self, ns: str) -> list[str]:
        listing = await self.kube.list(RAYCLUSTERS, ns)
        return sorted(c["metadata"]["name"] for c in listing.items)

    async def service(self, ns: str, name: str) -> Obj | None:
        try:
            found: Obj = await self.kube.get(SERVICES, ns, name)
        except NotFound:
            return None
        return found

    async def pods_of(self, ns: str, cluster: str) -> list[Obj]:
        listing = await self.kube.list(PODS, ns, label_selector=f"ray.io/cluster={cluster}")
        return [p for p in listing.items if not p["metadata"].get("deletionTimestamp")]

    async def events(self, ns: str, name: str) -> list[Obj]:
        listing = await self.cluster.client.list(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")
        return [e for e in listing.get("items") or [] if e["regarding"]["name"] == name]

    async def served(self, ns: str, name: str) -> None:
        """The barrier (docs/design.md §8.1) for a RayService: the operator's caches hold the
        RayService and its clusters' pods as the server has them, then a pass begun after
        that has ended. What a test asserts did not happen had its chance to happen."""
        op = self.operator
        controller = op.manager.controllers["rayservice"]
        reconciler: RayServiceReconciler = op.manager.rayservices
        key = f"{ns}/{name}"

        async def caught_up() -> None:
            server = await self.kube.get(RAYSERVICES, ns, name)
            cached = reconciler._view.get(key) or {}
            rv = int(cached.get("metadata", {}).get("resourceVersion") or 0)
            assert rv >= int(server["metadata"]["resourceVersion"]), key
            pods = await self.kube.list(PODS, ns)
            caches = op.manager.sources.caches.pods
            for pod in pods.items:
                meta = pod["metadata"]
                mine = caches.get(f"{ns}/{meta['name']}") or {}
                seen = int(mine.get("metadata", {}).get("resourceVersion") or 0)
                assert seen >= int(meta["resourceVersion"]), meta["name"]

        await eventually(caught_up, 30, interval=0.02)
        assert controller.queue is not None
        target = controller.passes_begun[key] + 1
        controller.queue.add(key)

        async def ended() -> None:
            assert controller.passes_ended[key] >= target

        await eventually(ended, 30, interval=0.02)

    async def delete(self, ns: str, name: str) -> None:
        """The RayService deleted, and every pod of its clusters gone (pools freed)."""
        await self.kube.delete(RAYSERVICES, ns, name, propagation="Foreground")

        async def gone() -> None:
            assert not (await self.kube.list(PODS, ns)).items

        await eventually(gone, 60)


def _proxy_path(cluster: Obj, pod: Obj) -> str:
    """``<cluster>/<host>``: a slice host as ``<group>-<index>-<host>`` (its hostname, known
    before the pod is made, so a test can take its proxy out from the start; read from its
    labels, which the operator's pod cache keeps), another pod by its name."""
    found = pod["metadata"].get("labels") or {}
    index, host = found.get("replicaIndex"), found.get("ray.io/replica-host-index")
    name = f"{index}-{host}" if index and host else pod["metadata"]["name"]
    return f"{cluster['metadata']['name']}/{name}"


def cluster_config(
    replicas: int = 1, image: str = "rayproject/ray:2.60.0", group: str = "tpu"
) -> Obj:
    """One head (with the serve port) and one group of 2-host v5p slices."""
    ports = [
        {"name": "dashboard", "containerPort": 8265},
        {"name": "serve", "containerPort": 8000},
    ]
    head = m.container("ray-head", requests=SMALL, ports=ports)
    head["image"] = image
    tpu = {**SMALL, "google.com/tpu": "4"}
    worker = m.container("ray-worker", requests=tpu, limits=tpu)
    worker["image"] = image
    pod = m.template(worker, nodeSelector=dict(m.V5P_2X2X2))
    workers = m.worker_group(group, pod, replicas=replicas, min_replicas=0, max_replicas=4, hosts=2)
    return {
        "rayVersion": m.RAY_VERSION,
        "headGroupSpec": m.head_group(head),
        "workerGroupSpecs": [workers],
    }


def rayservice(name: str, ns: str, **spec: Any) -> Obj:
    body: Obj = {
        "serveConfigV2": SERVE_CONFIG,
        "rayClusterConfig": cluster_config(),
        "rayClusterDeletionDelaySeconds": 0,
    }
    body.update(spec)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name, "namespace": ns},
        "spec": {k: v for k, v in body.items() if v is not None},
    }


def serve_labels(pods: list[Obj]) -> dict[str, str]:
    """Pod role (head, or ``<slice>/<host>``) -> its ray.io/serve label."""
    out = {}
    for pod in pods:
        found = pod["metadata"]["labels"]
        if found["ray.io/node-type"] == "head":
            role = "head"
        else:
            role = f"{found['replicaIndex']}/{found['ray.io/replica-host-index']}"
        out[role] = found.get("ray.io/serve", "")
    return out


def as_yaml(*objs: Mapping[str, Any]) -> str:
    return yaml.safe_dump_all([dict(o) for o in objs])
