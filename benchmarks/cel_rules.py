"""CEL rules' cost in the dev cluster: RayCluster creates/s and watch fan-out, side by side,
with our CRD as shipped (KubeRay's CEL rules on) and the same CRD without its rules (off).

Run: .venv/bin/python benchmarks/cel_rules.py [--clusters 1500 --rounds 3]

Each round starts a fresh API server per mode, in alternating order, and drives it over HTTPS
from this process. Printed: the median of each mode and the ratio on/off (budget >= 0.85).
The machine is shared: figures are noisy, the ratio within one run is what counts.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import statistics
import time
from typing import Any

from devkube.machinery.client import ApiClient
from devkube.server import ApiServer
from raycluster_operator.controller.crds import crd_manifest

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
RAYCLUSTERS = "/apis/ray.io/v1/namespaces/{ns}/rayclusters"
BUDGET = 0.85


def without_rules(node: Any) -> Any:
    if isinstance(node, list):
        return [without_rules(n) for n in node]
    if not isinstance(node, dict):
        return node
    return {k: without_rules(v) for k, v in node.items() if k != "x-kubernetes-validations"}


def cluster(i: int) -> dict[str, Any]:
    """A RayCluster as users write them: a head and one multi-host TPU group, managedBy set
    (so both of KubeRay's managedBy rules run on every create)."""
    pod = {
        "containers": [
            {
                "name": "ray",
                "image": "rayproject/ray:2.60.0",
                "resources": {"limits": {"google.com/tpu": "4"}, "requests": {"cpu": "8"}},
            }
        ],
        "nodeSelector": {"cloud.google.com/gke-tpu-topology": "4x4"},
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": f"rc-{i}"},
        "spec": {
            "managedBy": "ray.io/kuberay-operator",
            "rayVersion": "2.60.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": copy.deepcopy(pod)}},
            "workerGroupSpecs": [
                {
                    "groupName": "tpu",
                    "replicas": 2,
                    "minReplicas": 0,
                    "maxReplicas": 4,
                    "numOfHosts": 4,
                    "template": {"spec": copy.deepcopy(pod)},
                }
            ],
        },
    }


async def creates(client: ApiClient, ns: str, start: int, count: int, concurrency: int) -> float:
    path = RAYCLUSTERS.format(ns=ns)
    queue = iter(range(start, start + count))

    async def worker() -> None:
        for i in queue:
            await client.create(path, cluster(i))

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - began


async def fan_out(server: ApiServer, client: ApiClient, watchers: int, count: int) -> float:
    path = RAYCLUSTERS.format(ns="watched")
    version = str((await client.list(path))["metadata"]["resourceVersion"])
    done = asyncio.Event()
    finished = 0

    async def watch(own: ApiClient) -> None:
        nonlocal finished
        seen = 0
        async for event in own.watch(path, resource_version=version):
            seen += event.type == "ADDED"
            if seen == count:
                finished += 1
                if finished == watchers:
                    done.set()
                return

    clients = [ApiClient(server.url, server.token, server.ca_pem) for _ in range(watchers)]
    tasks = [asyncio.create_task(watch(c)) for c in clients]
    await asyncio.sleep(0.3)
    began = time.perf_counter()
    await creates(client, "watched", 10**6, count, 16)
    await asyncio.wait_for(done.wait(), 120)
    elapsed = time.perf_counter() - began
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for c in clients:
        await c.close()
    return watchers * count / elapsed


async def one(rules: bool, clusters: int, watchers: int, watched: int) -> tuple[float, float]:
    crd = crd_manifest() if rules else without_rules(crd_manifest())
    async with ApiServer(history_size=4 * (clusters + watched)) as server:
        client = ApiClient(server.url, server.token, server.ca_pem, connections=40)
        try:
            await client.create(CRDS, crd)
            for ns in ("bench", "watched"):
                await client.create(
                    "/api/v1/namespaces",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                )
            rate = clusters / await creates(client, "bench", 0, clusters, 16)
            events = await fan_out(server, client, watchers, watched)
        finally:
            await client.close()
    return rate, events


async def main(args: argparse.Namespace) -> None:
    figures: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for r in range(args.rounds):
        for rules in (False, True) if r % 2 == 0 else (True, False):
            figures[rules].append(await one(rules, args.clusters, args.watchers, args.watched))
    creates_on = statistics.median(f[0] for f in figures[True])
    creates_off = statistics.median(f[0] for f in figures[False])
    fan_on = statistics.median(f[1] for f in figures[True])
    fan_off = statistics.median(f[1] for f in figures[False])
    print(
        f"RayCluster creates/s, concurrency 16, {args.clusters} per round, median of {args.rounds}:"
    )
    print(
        f"   CEL off {creates_off:7.0f}/s   on {creates_on:7.0f}/s   "
        f"ratio {creates_on / creates_off:.3f}"
        f"   {'OK' if creates_on / creates_off >= BUDGET else 'OVER BUDGET'}"
    )
    print(
        f"watch fan-out, {args.watchers} watchers x {args.watched} creates (create time included):"
    )
    print(
        f"   CEL off {fan_off:7.0f} ev/s on {fan_on:7.0f} ev/s ratio {fan_on / fan_off:.3f}"
        f"   {'OK' if fan_on / fan_off >= BUDGET else 'OVER BUDGET'}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--watched", type=int, default=500)
    asyncio.run(main(parser.parse_args()))
