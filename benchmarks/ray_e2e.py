"""Real Ray end to end on the dev cluster's process runtime, with the operator attached.

Run (as root, Linux): .venv/bin/python benchmarks/ray_e2e.py

Two RayClusters, one after the other (Ray's GCS binds *:6379, so one at a time), each with a
head and a group of 2-host TPU v5p 2x2x2 slices, object stores of 100 MB:
1. static, 2 slices: seconds from `apply` until Ray (asked through its GCS from here) has
   every node alive; RSS of the whole dev cluster with 1 head + 2 slices (the pods' processes,
   and this process: API server, scheduler, kubelet, operator); after one host's raylet is
   killed, seconds until Ray has two new nodes under the same slice name.
2. autoscaled (Ray's own `ray kuberay-autoscaler`, v2, idleTimeoutSeconds 10), no slice at
   first: seconds from a driver's demand (placement group of 2 x {"TPU": 4}, STRICT_SPREAD) to
   the placement group being ready; seconds from the driver's exit to the slice's pods gone.
Prints figures; not a test (needs ~3 GB and ~2 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from devkube import DevCluster
from devkube.process import process_runtime_available
from devkube.process.runtime import ProcessRuntime
from raycluster_operator.controller.crds import crd_manifest
from raycluster_operator.controller.manager import Manager, ManagerOptions
from raycluster_operator.kube import PODS, KubeClient

T = TypeVar("T")
Obj = dict[str, Any]
NODES = ["tpu:v5p:2x2x2:2", "cpu:1"]
SMALL = {"object-store-memory": "100000000", "num-cpus": "1"}
MARK = "BENCH "

DEMAND = f"""
import json, time, ray
from ray.util.placement_group import placement_group
ray.init(address="auto", logging_level="ERROR")
start = time.monotonic()
pg = placement_group([{{"TPU": 4}}, {{"TPU": 4}}], strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=600)
print("{MARK}" + json.dumps({{"ready_s": time.monotonic() - start}}))
"""


def raycluster(name: str, *, replicas: int, autoscaling: bool) -> Obj:
    head = {
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
        "headGroupSpec": {
            "rayStartParams": dict(SMALL),
            "template": {"spec": {"containers": [head]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "tpu",
                "replicas": replicas,
                "minReplicas": 0,
                "maxReplicas": 2,
                "numOfHosts": 2,
                "rayStartParams": dict(SMALL),
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": {
                            "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
                            "cloud.google.com/gke-tpu-topology": "2x2x2",
                        },
                        "containers": [worker],
                    }
                },
            }
        ],
    }
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
        spec["autoscalerOptions"] = {"version": "v2", "idleTimeoutSeconds": 10}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": spec,
    }


async def until(check: Callable[[], Awaitable[T | None]], within: float = 600) -> T:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.1)
    raise TimeoutError("gave up waiting")


def rss_kb(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


class Bench:
    def __init__(self, cluster: DevCluster, kube: KubeClient) -> None:
        self.cluster = cluster
        self.kube = kube

    @property
    def runtime(self) -> ProcessRuntime:
        runtime = self.cluster.kubelet.runtime
        assert isinstance(runtime, ProcessRuntime)
        return runtime

    async def pods(self, name: str) -> list[Obj]:
        items: list[Obj] = (
            await self.kube.list(PODS, "default", label_selector=f"ray.io/cluster={name}")
        ).items
        return items

    async def role(self, name: str, node_type: str) -> list[Obj]:
        return [
            p
            for p in await self.pods(name)
            if p["metadata"]["labels"].get("ray.io/node-type") == node_type
        ]

    async def head_ip(self, name: str) -> str | None:
        heads = await self.role(name, "head")
        return (heads[0].get("status") or {}).get("podIP") if heads else None

    async def ray_nodes(self, head_ip: str) -> list[dict[str, Any]]:
        """Alive Ray nodes, from the head's GCS (no driver needed)."""

        def ask() -> list[dict[str, Any]]:
            from ray._raylet import GcsClient
            from ray.core.generated.gcs_pb2 import GcsNodeInfo

            client = GcsClient(address=f"{head_ip}:6379")
            infos = client.get_all_node_info(
                timeout=10, state_filter=GcsNodeInfo.GcsNodeState.ALIVE
            )
            return [
                {"id": i.node_id.hex(), "ip": i.node_manager_address, "labels": dict(i.labels)}
                for i in infos.values()
            ]

        try:
            return await asyncio.to_thread(ask)
        except Exception:
            return []

    async def alive(self, name: str, count: int) -> list[dict[str, Any]]:
        """Wait until Ray has at least `count` nodes alive; return them."""

        async def check() -> list[dict[str, Any]] | None:
            ip = await self.head_ip(name)
            nodes = await self.ray_nodes(ip) if ip else []
            return nodes if len(nodes) >= count else None

        return await until(check)

    def rss_mb(self) -> dict[str, float]:
        """RSS per pod (MB) and of this process (API server, scheduler, kubelet, operator)."""
        out = {p.name: rss_kb(p.sandbox.pids()) / 1024 for p in self.runtime.pods.values()}
        out["<dev cluster + operator>"] = rss_kb([os.getpid()]) / 1024
        return out

    async def driver(self, pod_name: str, code: str) -> Obj:
        pod = self.runtime.find("default", pod_name)
        assert pod is not None
        env = dict(pod.runners["ray-head"].launch.env)
        _, out = await pod.sandbox.exec(["python", "-c", code], env, "/", 900)
        for line in reversed(out.decode(errors="replace").splitlines()):
            if line.startswith(MARK):
                result: Obj = json.loads(line[len(MARK) :])
                return result
        raise RuntimeError(out.decode(errors="replace")[-3000:])

    def kill(self, pod_name: str, program: str) -> None:
        pod = self.runtime.find("default", pod_name)
        assert pod is not None
        for pid in pod.sandbox.pids():
            with contextlib.suppress(OSError):
                argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
                if os.path.basename(argv0) == program:
                    os.kill(pid, signal.SIGKILL)
                    return
        raise RuntimeError(f"no {program} in {pod_name}")

    async def delete_and_wait(self, name: str) -> None:
        await self.cluster.client.delete(f"/apis/ray.io/v1/namespaces/default/rayclusters/{name}")

        async def gone() -> bool:
            return not await self.pods(name) and not self.runtime.pods

        await until(gone)


async def static_phase(bench: Bench) -> None:
    name = "static"
    start = time.monotonic()
    await bench.cluster.apply(raycluster(name, replicas=2, autoscaling=False))
    nodes = await bench.alive(name, 5)
    print(f"apply -> 1 head + 2 slices (5 Ray nodes) alive: {time.monotonic() - start:.1f} s")
    rss = bench.rss_mb()
    print(f"RSS with 1 head + 2 slices: {sum(rss.values()):.0f} MB in all")
    for part, mb in sorted(rss.items()):
        print(f"  {part}: {mb:.0f} MB")
    workers = await bench.role(name, "worker")
    victim = next(
        p
        for p in workers
        if p["metadata"]["labels"]["ray.io/worker-group-replica-index"] == "0"
        and p["metadata"]["labels"]["ray.io/replica-host-index"] == "1"
    )
    old = {n["id"] for n in nodes}
    start = time.monotonic()
    bench.kill(victim["metadata"]["name"], "raylet")

    async def replaced() -> list[dict[str, Any]] | None:
        ip = await bench.head_ip(name)
        fresh = [n for n in await bench.ray_nodes(ip or "") if n["id"] not in old] if ip else []
        names = {n["labels"].get("ray.io/tpu-slice-name") for n in fresh}
        return fresh if len(fresh) == 2 and names == {"tpu-0"} else None

    await until(replaced)
    print(
        f"host failure (raylet killed) -> replacement slice tpu-0 alive in Ray: "
        f"{time.monotonic() - start:.1f} s"
    )
    await bench.delete_and_wait(name)


async def autoscaled_phase(bench: Bench) -> None:
    name = "scaled"
    await bench.cluster.apply(raycluster(name, replicas=0, autoscaling=True))
    await bench.alive(name, 1)
    head = (await bench.role(name, "head"))[0]["metadata"]["name"]

    async def autoscaler_up() -> bool:
        log = bench.runtime.read_log("default", head, "autoscaler") or b""
        return b"Starting the autoscaler" in log

    await until(autoscaler_up)
    result = await bench.driver(head, DEMAND)
    print(f"demand (placement group of one slice) -> ready: {result['ready_s']:.1f} s")
    exited = time.monotonic()

    async def slice_gone() -> bool:
        return not await bench.role(name, "worker")

    await until(slice_gone)
    idle = time.monotonic() - exited
    print(f"driver exit -> slice pods gone: {idle:.1f} s (idleTimeoutSeconds 10 included)")
    await bench.delete_and_wait(name)


async def run() -> None:
    async with DevCluster(nodes=NODES, runtime="process", kubelet_delay=0.05) as cluster:
        await cluster.apply(crd_manifest())
        kube = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
        op_client = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
        manager = Manager(
            op_client,
            ManagerOptions.from_flat(
                metrics_addr=None, health_addr=None, leader_elect=False, identity="b"
            ),
        )
        task = asyncio.create_task(manager.run())
        try:

            async def synced() -> bool:
                return manager.synced()

            await until(synced, within=30)
            bench = Bench(cluster, kube)
            await static_phase(bench)
            await autoscaled_phase(bench)
        finally:
            manager.stop()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(task, 15)
            await kube.close()
            await op_client.close()


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    ok, why = process_runtime_available()
    if not ok:
        raise SystemExit(why)
    asyncio.run(run())


if __name__ == "__main__":
    main()
