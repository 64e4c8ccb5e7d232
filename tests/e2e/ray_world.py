"""Real Ray on the dev cluster: the process runtime, the operator attached, a driver in a pod.

Every pod is real local processes (devcluster.process), so a RayCluster here is a real Ray
cluster: `ray start` in each pod, the real `ray kuberay-autoscaler` sidecar when autoscaling is
on. Drivers run inside the head pod (as `kubectl exec` would), because a Ray driver must sit on
a Ray node: it finds its raylet through the process table and the node's /tmp/ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import waiting
from devkube import DevCluster
from devkube.process.pod import ProcessPod
from devkube.process.runtime import ProcessRuntime
from devkube_testing import stop_dev_cluster
from pod_facts import labels as labels_of
from raycluster_operator.api.crd import crd_manifest
from raycluster_operator.cli.dev import operator_kubeconfig
from raycluster_operator.controller.manager import Manager, ManagerOptions
from raycluster_operator.kube import PODS, KubeClient

Obj = dict[str, Any]
#: One head on a CPU node, two pools of one 2-host TPU v5p 2x2x2 slice each (4 chips a host).
NODES = ["tpu:v5p:2x2x2:2", "cpu:1"]
TPU_SELECTOR = {
    "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
    "cloud.google.com/gke-tpu-topology": "2x2x2",
}
#: Ray's object store defaults to ~30% of the machine per node; tests need little.
SMALL = {"object-store-memory": "100000000", "num-cpus": "1"}
RESULT_MARK = "E2E-RESULT "


def raycluster(
    name: str,
    *,
    replicas: int = 1,
    autoscaling: bool = False,
    idle_timeout: int = 10,
    min_replicas: int = 0,
) -> Obj:
    """One head and one TPU group of 2-host slices (restartPolicy Never on workers: a host
    whose Ray exits fails, so its slice is replaced whole, as under autoscaler v2)."""
    container = {
        "name": "ray-head",
        "image": "rayproject/ray:2.60.0",
        "ports": [{"name": "gcs-server", "containerPort": 6379}],
        "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
    }
    worker = {
        "name": "ray-worker",
        "image": "rayproject/ray:2.60.0",
        "resources": {"limits": {"cpu": "1", "memory": "1Gi", "google.com/tpu": "4"}},
    }
    spec: Obj = {
        "rayVersion": "2.60.0",
        "headGroupSpec": {
            "rayStartParams": dict(SMALL),
            "template": {"spec": {"containers": [container]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "tpu",
                "replicas": replicas,
                "minReplicas": min_replicas,
                "maxReplicas": 2,
                "numOfHosts": 2,
                "rayStartParams": dict(SMALL),
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": dict(TPU_SELECTOR),
                        "containers": [worker],
                    }
                },
            }
        ],
    }
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
        spec["autoscalerOptions"] = {
            "version": "v2",
            "idleTimeoutSeconds": idle_timeout,
            "upscalingMode": "Default",
            "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}},
        }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


async def eventually(check: Callable[[], Any], within: float) -> Any:
    """Real Ray is slow to change: poll it gently."""
    return await waiting.eventually(check, within, interval=0.25)


@dataclass
class RayWorld:
    cluster: DevCluster
    kube: KubeClient
    manager: Manager
    operator: asyncio.Task[None]
    logs: list[str] = field(default_factory=list)

    @property
    def runtime(self) -> ProcessRuntime:
        runtime = self.cluster.kubelet.runtime
        assert isinstance(runtime, ProcessRuntime)
        return runtime

    async def pods(self, cluster: str, *, live: bool = True) -> list[Obj]:
        listing = await self.kube.list(PODS, "default", label_selector=f"ray.io/cluster={cluster}")
        items: list[Obj] = listing.items
        if live:
            items = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return items

    async def head(self, cluster: str) -> Obj:
        heads = [
            p for p in await self.pods(cluster) if labels_of(p).get("ray.io/node-type") == "head"
        ]
        assert len(heads) == 1, heads
        return heads[0]

    async def workers(self, cluster: str) -> list[Obj]:
        return [
            p for p in await self.pods(cluster) if labels_of(p).get("ray.io/node-type") == "worker"
        ]

    def process_pod(self, name: str) -> ProcessPod:
        found = self.runtime.find("default", name)
        assert found is not None, f"pod {name} runs no processes here"
        return found

    def log_of(self, name: str, container: str | None = None) -> str:
        return (self.runtime.read_log("default", name, container) or b"").decode(errors="replace")

    def ray_started(self, name: str) -> bool:
        return "Ray runtime started" in self.log_of(name)

    async def driver(self, head_pod: str, code: str, *, seconds: float = 240) -> Any:
        """Run a Python driver in the head pod with the Ray container's environment; it prints
        one line `E2E-RESULT <json>`, which is returned."""
        pod = self.process_pod(head_pod)
        env = dict(pod.runners["ray-head"].launch.env)
        script = "import json, ray\n" + code
        code_, out = await pod.sandbox.exec(["python", "-c", script], env, "/", seconds)
        text = out.decode(errors="replace")
        self.logs.append(text)
        for line in reversed(text.splitlines()):
            if line.startswith(RESULT_MARK):
                return json.loads(line[len(RESULT_MARK) :])
        raise AssertionError(f"driver exited {code_} without a result:\n{text[-4000:]}")

    def kill_process(self, pod_name: str, program: str) -> int:
        """SIGKILL the pod's process whose command line names `program` (e.g. raylet)."""
        for pid in self.process_pod(pod_name).sandbox.pids():
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if argv and os.path.basename(argv[0].decode()) == program:
                    os.kill(pid, signal.SIGKILL)
                    return pid
        raise AssertionError(f"no {program} process in pod {pod_name}")


async def start_world(nodes: list[str] | None = None) -> RayWorld:
    cluster = DevCluster(nodes=nodes or NODES, runtime="process", kubelet_delay=0.05)
    await cluster.start()
    try:
        await cluster.apply(crd_manifest())
        kube = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
        # The operator acts as its ServiceAccount with deploy/'s RBAC, as in production.
        manager = Manager(
            KubeClient.from_kubeconfig(await operator_kubeconfig(cluster)),
            ManagerOptions.from_flat(
                metrics_addr=None,
                health_addr=None,
                leader_elect=False,
                resync_period=30.0,
                retry_base_delay=0.05,
                retry_max_delay=2.0,
                identity="e2e-operator",
            ),
        )
        operator = asyncio.create_task(manager.run())
    except BaseException:
        await cluster.stop()
        raise
    world = RayWorld(cluster, kube, manager, operator)

    def synced() -> None:
        assert not operator.done(), operator
        assert manager.synced()

    await eventually(synced, within=30)
    return world


async def stop_world(world: RayWorld) -> None:
    world.manager.stop()
    with contextlib.suppress(asyncio.CancelledError, TimeoutError):
        await asyncio.wait_for(world.operator, 15)
    await world.kube.close()
    await world.manager.client.close()
    await stop_dev_cluster(world.cluster, patience=30)
