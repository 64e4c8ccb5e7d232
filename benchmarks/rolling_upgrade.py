"""How long a RollingUpdate of 16 TPU slices x 4 hosts takes, and what it costs the API server.

Run: ``.venv/bin/python benchmarks/rolling_upgrade.py [--slices 16] [--max-unavailable 1]
[--max-surge 0]``

One dev cluster (simulated runtime), ``raycluster-operator run`` in its own process. The
RayCluster (``upgradeStrategy: RollingUpdate``) is applied and brought up; then its worker
image is patched and the clock runs until every worker pod is Running and Ready from the new
template and no old pod is left. Printed: the rollout's duration, API writes per worker pod
during it (pods, events, status), and writes at steady state afterwards (must be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from typing import Any

from convergence import HOSTS, is_ready, raycluster, run_operator, scrape, wait_ready, writes
from devkube import DevCluster
from raycluster_operator.controller.crds import crd_manifest
from raycluster_operator.kube import PODS, RAYCLUSTERS, KubeClient

HASH = "ray.io/pod-template-hash"
NEW_IMAGE = "rayproject/ray:2.61.0"


async def rolled(kube: KubeClient, old: set[str], pods: int) -> bool:
    listing = await kube.list(PODS, "default", label_selector="ray.io/cluster=bench")
    workers = [
        p for p in listing.items if p["metadata"]["labels"].get("ray.io/node-type") == "worker"
    ]
    hashes = {(p["metadata"].get("annotations") or {}).get(HASH) for p in workers}
    return (
        len(workers) == pods
        and not hashes & old
        and all(is_ready(p) and not p["metadata"].get("deletionTimestamp") for p in workers)
    )


async def worker_hashes(kube: KubeClient) -> set[str]:
    listing = await kube.list(
        PODS, "default", label_selector="ray.io/cluster=bench,ray.io/node-type=worker"
    )
    return {(p["metadata"].get("annotations") or {}).get(HASH, "") for p in listing.items}


async def main(slices: int, max_unavailable: str, max_surge: str) -> int:
    pods = slices * HOSTS
    bounds: dict[str, Any] = {
        "maxUnavailable": _int_or_string(max_unavailable),
        "maxSurge": _int_or_string(max_surge),
    }
    print(f"rolling upgrade: {slices} slices x {HOSTS} hosts = {pods} worker pods, {bounds}")
    surge = slices if max_surge.endswith("%") else int(max_surge)
    nodes = [f"tpu:v6e:4x4:{slices + max(surge, 0)}", "cpu:2"]
    async with DevCluster(nodes=nodes, kubelet_delay=0.2) as cluster:
        await cluster.apply(crd_manifest())
        kube = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
        operator, metrics_port, _ = await run_operator(cluster, "rolling-upgrade-")
        try:
            obj = raycluster("bench", slices)
            obj["spec"]["upgradeStrategy"] = {"type": "RollingUpdate", "rollingUpdate": bounds}
            await cluster.apply(obj)
            await wait_ready(kube, "ray.io/cluster=bench,ray.io/node-type=worker", pods)
            await asyncio.sleep(1.0)  # the last status patch of the bring-up
            old = await worker_hashes(kube)
            before = await scrape(metrics_port)
            start = time.perf_counter()
            groups = obj["spec"]["workerGroupSpecs"]
            groups[0]["template"]["spec"]["containers"][0]["image"] = NEW_IMAGE
            patch = {"spec": {"workerGroupSpecs": groups}}
            await kube.patch(RAYCLUSTERS, "default", "bench", patch)
            for _ in range(20 * 600):  # polled every 50 ms, for at most 10 minutes
                if await rolled(kube, old, pods):
                    break
                await asyncio.sleep(0.05)
            else:
                raise TimeoutError("the rollout did not finish in 10 minutes")
            elapsed = time.perf_counter() - start
            await asyncio.sleep(1.0)  # let the last status patch land
            after = await scrape(metrics_port)
            await asyncio.sleep(3.0)
            steady = await scrape(metrics_port)
        finally:
            operator.terminate()
            await operator.wait()
        await kube.close()

    per_pod = (writes(after) - writes(before)) / pods
    steady_writes = writes(steady) - writes(after)
    print(f"  rollout (patch -> every worker new and Ready): {elapsed:6.2f} s")
    print(f"  per slice:                                     {elapsed / slices:6.2f} s")
    print(f"  API writes per worker pod during the rollout:  {per_pod:6.2f}")
    print(f"  writes at steady state afterwards:             {steady_writes:.0f}")
    return 0 if steady_writes == 0 else 1


def _int_or_string(value: str) -> int | str:
    return value if value.endswith("%") else int(value)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=16)
    parser.add_argument("--max-unavailable", default="1")
    parser.add_argument("--max-surge", default="0")
    args = parser.parse_args()
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    sys.exit(asyncio.run(main(args.slices, args.max_unavailable, args.max_surge)))
