"""How fast the operator brings up 64 TPU slices x 4 hosts, against a plain client.

Run: ``.venv/bin/python benchmarks/convergence.py [--slices 64]``

One dev cluster, one run, two measurements of the same 256 worker pods (+ the head):

1. *baseline*: a plain client POSTs the pod manifests the operator would build (all at once,
   32 in flight) and waits until every pod is Running and Ready; then they are deleted.
2. *operator*: ``raycluster-operator run`` in its own process (default QPS 100 / burst 200);
   the RayCluster is applied and the clock runs until every pod is Running and Ready.

Budget (README): operator time / baseline time <= 1.5. Also printed: API writes per pod during
convergence (pods, services, events, status), writes at steady state over many resyncs (must be
0), and the operator process's resident memory.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from devkube import DevCluster
from raycluster_operator.api.models import load_cluster
from raycluster_operator.controller.crds import crd_manifest
from raycluster_operator.kube import PODS, KubeClient
from raycluster_operator.planning import ClusterState, PlanContext, plan_cluster

RATIO_BUDGET = 1.5
HOSTS = 4


def raycluster(name: str, slices: int) -> dict[str, Any]:
    tpu = {"cpu": "100m", "memory": "128Mi", "google.com/tpu": "4"}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
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
            "workerGroupSpecs": [
                {
                    "groupName": "tpu",
                    "replicas": slices,
                    "maxReplicas": slices,
                    "numOfHosts": HOSTS,
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
                }
            ],
        },
    }


def is_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


async def wait_ready(kube: KubeClient, selector: str, count: int) -> None:
    """Until ``count`` live pods matching ``selector`` are Running and Ready (list + watch)."""
    while True:
        listing = await kube.list(PODS, "default", label_selector=selector)
        pods = {p["metadata"]["name"]: p for p in listing.items}
        version = listing.resource_version
        try:
            while True:
                live = [p for p in pods.values() if not p["metadata"].get("deletionTimestamp")]
                if len(live) >= count and sum(map(is_ready, live)) >= count:
                    return
                async for etype, obj in kube.watch(
                    PODS, "default", resource_version=version, label_selector=selector
                ):
                    if etype == "BOOKMARK":
                        continue
                    version = obj["metadata"]["resourceVersion"]
                    if etype == "DELETED":
                        pods.pop(obj["metadata"]["name"], None)
                    else:
                        pods[obj["metadata"]["name"]] = obj
                    live = [p for p in pods.values() if not p["metadata"].get("deletionTimestamp")]
                    if len(live) >= count and sum(map(is_ready, live)) >= count:
                        return
        except Exception:  # a dropped watch: list again
            continue


async def wait_gone(kube: KubeClient, selector: str) -> None:
    for _ in range(600):
        if not (await kube.list(PODS, "default", label_selector=selector)).items:
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"pods {selector} still exist")


async def baseline(kube: KubeClient, slices: int) -> float:
    """The same pod manifests, created by a plain client: the floor for the operator."""
    obj = raycluster("base", slices)
    obj["metadata"]["uid"] = "baseline"
    context = PlanContext(ClusterState(obj), datetime.now(UTC), _suffixes())
    plan = plan_cluster(load_cluster(obj), context)
    manifests = []
    for create in plan.creates:
        pod = dict(create.manifest)
        meta = dict(pod["metadata"])
        meta.pop("ownerReferences", None)  # no owner: the GC must not collect them
        meta["namespace"] = "default"
        pod["metadata"] = meta
        manifests.append(pod)
    sem = asyncio.Semaphore(32)

    async def create(pod: dict[str, Any]) -> None:
        async with sem:
            await kube.create(PODS, pod, namespace="default")

    start = time.perf_counter()
    await asyncio.gather(*(create(p) for p in manifests))
    await wait_ready(kube, "ray.io/cluster=base", len(manifests))
    elapsed = time.perf_counter() - start
    for pod in (await kube.list(PODS, "default", label_selector="ray.io/cluster=base")).items:
        await kube.delete(PODS, "default", pod["metadata"]["name"], grace_period=0)
    await wait_gone(kube, "ray.io/cluster=base")
    return elapsed


def _suffixes() -> Callable[[], str]:
    counter = iter(range(10**6))
    alphabet = "bcdfghjklmnpqrstvwxz2456789"

    def next_suffix() -> str:
        n = next(counter)
        out = ""
        for _ in range(5):
            n, r = divmod(n, len(alphabet))
            out += alphabet[r]
        return out

    return next_suffix


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def scrape(port: int) -> dict[str, float]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics") as resp,
    ):
        text = await resp.text()
    out: dict[str, float] = {}
    requests = r'^raycluster_operator_api_requests\{verb="(\w+)"\} (\S+)$'
    for match in re.finditer(requests, text, re.M):
        out[match.group(1)] = float(match.group(2))
    reconciles = re.findall(r"^raycluster_operator_reconcile_total\{[^}]*\} (\S+)$", text, re.M)
    out["reconciles"] = sum(float(v) for v in reconciles)
    return out


async def spawn_operator(
    kubeconfig: Path,
    metrics_port: int,
    *,
    resync: float,
    env: dict[str, str] | None = None,
    log: Path | None = None,
) -> asyncio.subprocess.Process:
    """``raycluster-operator run`` in its own process, as a deployment runs it but without
    leader election: metrics on ``metrics_port``, its log to ``log`` (else discarded)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "raycluster_operator",
        "run",
        f"--kubeconfig={kubeconfig}",
        "--no-leader-elect",
        f"--metrics-addr=127.0.0.1:{metrics_port}",
        "--health-addr=",
        f"--resync-period={resync}",
        stderr=log.open("ab") if log is not None else asyncio.subprocess.DEVNULL,
        env=env,
    )


async def run_operator(
    cluster: DevCluster, prefix: str
) -> tuple[asyncio.subprocess.Process, int, dict[str, float]]:
    """``raycluster-operator run`` in its own process against ``cluster`` (resync 0.2 s), once
    its metrics answer: the process, its metrics port and the first scrape."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig")
    metrics_port = free_port()
    operator = await spawn_operator(kubeconfig, metrics_port, resync=0.2)
    for _ in range(200):
        try:
            return operator, metrics_port, await scrape(metrics_port)
        except aiohttp.ClientError:
            await asyncio.sleep(0.05)
    operator.terminate()
    await operator.wait()
    raise TimeoutError("the operator's metrics never answered")


def writes(metrics: dict[str, float]) -> float:
    return sum(metrics.get(v, 0.0) for v in ("create", "update", "patch", "delete"))


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def main(slices: int) -> int:
    pods = slices * HOSTS
    print(f"convergence: {slices} slices x {HOSTS} hosts = {pods} worker pods (+1 head)")
    nodes = [f"tpu:v6e:4x4:{slices}", "cpu:2"]
    async with DevCluster(nodes=nodes, kubelet_delay=0.2) as cluster:
        await cluster.apply(crd_manifest())
        kube = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
        base = await baseline(kube, slices)
        print(f"  baseline (plain client, 32 in flight): {base:6.2f} s")

        operator, metrics_port, before = await run_operator(cluster, "convergence-")
        try:
            start = time.perf_counter()
            await cluster.apply(raycluster("bench", slices))
            await wait_ready(kube, "ray.io/cluster=bench,ray.io/node-type=worker", pods)
            elapsed = time.perf_counter() - start
            await asyncio.sleep(1.0)  # let the last status patch land
            converged = await scrape(metrics_port)
            await asyncio.sleep(3.0)
            steady = await scrape(metrics_port)
            rss = rss_mib(operator.pid)
        finally:
            operator.terminate()
            await operator.wait()
        await kube.close()

    ratio = elapsed / base
    per_pod = (writes(converged) - writes(before)) / pods
    steady_writes = writes(steady) - writes(converged)
    resyncs = steady["reconciles"] - converged["reconciles"]
    print(f"  operator (run, QPS 100 / burst 200):   {elapsed:6.2f} s")
    print(f"  ratio operator / baseline:             {ratio:6.2f}  (budget <= {RATIO_BUDGET})")
    print(f"  API writes per pod while converging:   {per_pod:6.2f}")
    print(f"  writes at steady state ({resyncs:.0f} reconciles): {steady_writes:.0f}")
    print(f"  operator resident memory:              {rss:6.1f} MiB")
    ok = ratio <= RATIO_BUDGET and steady_writes == 0
    print("  PASS" if ok else "  OVER BUDGET")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=64)
    args = parser.parse_args()
    # The dev server logs every watch a client abandons; the figures are what matters here.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    sys.exit(asyncio.run(main(args.slices)))
