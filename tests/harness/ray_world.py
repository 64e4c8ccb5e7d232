"""Real Ray on the dev cluster: the process runtime, the operator attached, a driver in a pod.

Every pod is real local processes (devcluster.process), so a RayCluster here is a real Ray
cluster: `ray start` in each pod, the real `ray kuberay-autoscaler` sidecar when autoscaling is
on. Drivers run inside the head pod (as `kubectl exec` would), because a Ray driver must sit on
a Ray node: it finds its raylet through the process table and the node's /tmp/ray.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from devkube.process.pod import ProcessPod
from devkube.process.runtime import ProcessRuntime
from raycluster_operator.controller.manager import Manager

from . import manifests as m
from . import waiting
from .pods import labels as labels_of
from .pods import of_type
from .world import DevWorld

__all__ = ["labels_of"]

Obj = dict[str, Any]
#: One head on a CPU node, two pools of one 2-host TPU v5p 2x2x2 slice each (4 chips a host).
NODES = ["tpu:v5p:2x2x2:2", "cpu:1"]
TPU_SELECTOR = m.V5P_2X2X2
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
    head = m.container(
        "ray-head",
        ports=[{"name": "gcs-server", "containerPort": 6379}],
        limits={"cpu": "1", "memory": "2Gi"},
    )
    worker = m.container("ray-worker", limits={"cpu": "1", "memory": "1Gi", "google.com/tpu": "4"})
    pod = m.template(worker, restartPolicy="Never", nodeSelector=dict(TPU_SELECTOR))
    group = m.worker_group(
        "tpu",
        pod,
        replicas=replicas,
        min_replicas=min_replicas,
        max_replicas=2,
        hosts=2,
        params=SMALL,
    )
    spec: Obj = {}
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
        spec["autoscalerOptions"] = {
            "version": "v2",
            "idleTimeoutSeconds": idle_timeout,
            "upscalingMode": "Default",
            "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}},
        }
    return m.raycluster(name, m.head_group(head, SMALL), [group], **spec)


async def eventually(check: Callable[[], Any], within: float) -> Any:
    """Real Ray is slow to change: poll it gently."""
    return await waiting.eventually(check, within, interval=0.25)


@dataclass
class RayWorld(DevWorld):
    """The process runtime (real Ray in every pod) with one operator attached."""

    logs: list[str] = field(default_factory=list)

    operator_defaults: ClassVar[dict[str, Any]] = dict(
        resync_period=30.0, retry_base_delay=0.05, retry_max_delay=2.0, identity="e2e-operator"
    )
    sync_within: ClassVar[float] = 30.0
    sync_interval: ClassVar[float] = 0.25
    drain_may_hang: ClassVar[bool] = True
    stop_patience: ClassVar[float] = 30.0

    @property
    def manager(self) -> Manager:
        return self.operators[0].manager

    @property
    def operator(self) -> Any:
        return self.operators[0].task

    @property
    def runtime(self) -> ProcessRuntime:
        runtime = self.cluster.kubelet.runtime
        assert isinstance(runtime, ProcessRuntime)
        return runtime

    async def head(self, cluster: str) -> Obj:
        heads = of_type(await self.pods(cluster), "head")
        assert len(heads) == 1, heads
        return heads[0]

    async def workers(self, cluster: str) -> list[Obj]:
        return of_type(await self.pods(cluster), "worker")

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


async def start_world(nodes: list[str] | None = None, **cluster_options: Any) -> RayWorld:
    """``cluster_options`` are DevCluster's (``addons=...``)."""
    world = await RayWorld.start(nodes or NODES, runtime="process", **cluster_options)
    try:
        # The operator acts as its ServiceAccount with deploy/'s RBAC, as in production.
        await world.start_operator()
    except BaseException:
        await world.close()
        raise
    return world


async def stop_world(world: RayWorld) -> None:
    await world.close()
