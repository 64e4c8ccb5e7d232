"""Dev cluster benchmark: API throughput, list latency, watch fan-out, memory per 10k pods.

Run: .venv/bin/python benchmarks/devcluster.py [--pods 10000]

Figures 1-4 are the pure API server (no scheduler, kubelet or GC attached), driven over HTTPS
by the fake controllers' own async client. The creating client runs in a separate process
(as an operator would), so the server's figures and RSS are its own; lists and watches are
read from this process. Figure 5 is end to end: a
full DevCluster (scheduler + simulated kubelet + GC) taking pods to Running/Ready.
Budgets: >= 500 creates/s, 10k-pod list < 1 s, < 200 MB per 10k pods.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from devkube.cluster import DevCluster
from devkube.machinery.client import ApiClient, WatchEvent, resource_path
from devkube.machinery.informer import Informer
from devkube.server import ApiServer

CREATES_PER_S_BUDGET = 500.0
LIST_10K_BUDGET_S = 1.0
MB_PER_10K_BUDGET = 200.0


def rss_bytes() -> int:
    """Current resident set size (Linux /proc), else the peak from getrusage."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def worker_pod(i: int) -> dict[str, Any]:
    """A pod shaped like a Ray TPU worker (labels, env, resources), about 1.5 kB of JSON."""
    group, replica, host = "tpu-group", i // 4, i % 4
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"bench-{i}",
            "labels": {
                "ray.io/cluster": "bench",
                "ray.io/group": group,
                "ray.io/node-type": "worker",
                "ray.io/worker-group-replica-index": str(replica),
                "ray.io/replica-host-index": str(host),
                "app.kubernetes.io/created-by": "raycluster-operator",
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "hostname": f"{group}-{replica}-{host}",
            "subdomain": "bench-headless",
            "containers": [
                {
                    "name": "ray-worker",
                    "image": "rayproject/ray:2.40.0",
                    "command": ["/bin/bash", "-lc", "--"],
                    "args": ["ulimit -n 65536; ray start --address=bench-head-svc:6379 --block"],
                    "env": [
                        {"name": "TPU_WORKER_ID", "value": str(host)},
                        {"name": "TPU_NAME", "value": f"{group}-{replica}"},
                        {"name": "RAY_CLUSTER_NAME", "value": "bench"},
                    ],
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


async def create_many(
    client: ApiClient,
    namespace: str,
    start: int,
    count: int,
    concurrency: int,
    *,
    requests: bool = True,
) -> float:
    path = resource_path("v1", "pods", namespace)
    queue = iter(range(start, start + count))

    async def worker() -> None:
        for i in queue:
            pod = worker_pod(i)
            if not requests:
                del pod["spec"]["containers"][0]["resources"]
            await client.create(path, pod)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - began


def create_in_process(url: str, token: str, ca_pem: bytes, count: int, concurrency: int) -> float:
    """Runs in a child process: create `count` pods in namespace bench, return the seconds."""

    async def run() -> float:
        async with ApiClient(url, token, ca_pem, connections=concurrency + 8) as client:
            return await create_many(client, "bench", 0, count, concurrency)

    return asyncio.run(run())


async def ensure_namespace(client: ApiClient, name: str) -> None:
    await client.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )


async def service_account_token(admin: ApiClient) -> str:
    """A ServiceAccount token allowed to create, read and watch pods everywhere, so that the
    figures include what RBAC costs (the admin, in system:masters, skips it)."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    await admin.create(
        resource_path("v1", "serviceaccounts", "default"), {"metadata": {"name": "bench"}}
    )
    await admin.create(
        f"{rbac}/clusterroles",
        {
            "metadata": {"name": "bench"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["pods"],
                    "verbs": ["create", "get", "list", "watch"],
                }
            ],
        },
    )
    await admin.create(
        f"{rbac}/clusterrolebindings",
        {
            "metadata": {"name": "bench"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "bench",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": "default"}],
        },
    )
    answer = await admin.create(
        resource_path("v1", "serviceaccounts", "default", "bench", "token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    return str(answer["status"]["token"])


async def api_figures(
    pods: int, concurrency: int, watchers: int, watch_pods: int, service_account: bool = False
) -> None:
    server = ApiServer(history_size=max(10000, watch_pods * 2), watch_queue_size=watch_pods * 2)
    await server.start()
    admin = ApiClient(server.url, server.token, server.ca_pem)
    token = await service_account_token(admin) if service_account else server.token
    await admin.close()
    print(f"as {'a ServiceAccount (RBAC evaluated)' if service_account else 'the admin'}:")
    client = ApiClient(server.url, server.token, server.ca_pem, connections=concurrency + 8)
    try:
        await ensure_namespace(client, "bench")
        await ensure_namespace(client, "watched")
        await client.close()
        client = ApiClient(server.url, token, server.ca_pem, connections=concurrency + 8)
        gc.collect()
        before = rss_bytes()
        loop = asyncio.get_running_loop()
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            elapsed = await loop.run_in_executor(
                pool, create_in_process, server.url, token, server.ca_pem, pods, concurrency
            )
        gc.collect()
        grown = rss_bytes() - before
        rate = pods / elapsed
        print(
            f"1. creates/s, 1 client (own process), concurrency {concurrency}, {pods} pods, "
            "API only:"
        )
        print(
            f"   {rate:8.0f}/s   budget >= {CREATES_PER_S_BUDGET:.0f}/s   "
            f"{'OK' if rate >= CREATES_PER_S_BUDGET else 'OVER BUDGET'}"
        )

        path = resource_path("v1", "pods", "bench")
        fetches, decodes = [], []
        for _ in range(3):
            began = time.perf_counter()
            async with client.session.get(server.url + path) as response:
                raw = await response.read()
            fetched = time.perf_counter()
            listed = json.loads(raw)
            fetches.append(fetched - began)
            decodes.append(time.perf_counter() - fetched)
        assert len(listed["items"]) == pods
        worst = max(fetches)
        print(f"2. list of {pods} pods ({len(raw) / 1e6:.1f} MB), worst of 3:")
        print(
            f"   {worst:8.3f}s until the last byte   budget < {LIST_10K_BUDGET_S:.1f}s   "
            f"{'OK' if worst < LIST_10K_BUDGET_S else 'OVER BUDGET'}"
        )
        print(f"   {max(decodes):8.3f}s more to json.loads it in the client (not budgeted)")

        mb_per_10k = grown / 2**20 * 10000 / pods
        print(
            f"3. memory: server process RSS grew {grown / 2**20:.1f} MB for {pods} pods "
            "(store + watch history):"
        )
        print(
            f"   {mb_per_10k:8.1f} MB per 10k pods   budget < {MB_PER_10K_BUDGET:.0f} MB   "
            f"{'OK' if mb_per_10k < MB_PER_10K_BUDGET else 'OVER BUDGET'}"
        )

        watched = resource_path("v1", "pods", "watched")
        version = str((await client.list(watched))["metadata"]["resourceVersion"])
        counts = [0] * watchers
        done = asyncio.Event()
        finished = 0

        async def watch(slot: int, own: ApiClient) -> None:
            nonlocal finished
            async for event in own.watch(watched, resource_version=version):
                if event.type == "ADDED":
                    counts[slot] += 1
                    if counts[slot] == watch_pods:
                        finished += 1
                        if finished == watchers:
                            done.set()
                        return

        clients = [ApiClient(server.url, token, server.ca_pem) for _ in range(watchers)]
        tasks = [asyncio.create_task(watch(i, c)) for i, c in enumerate(clients)]
        await asyncio.sleep(0.3)  # let every watch connect
        began = time.perf_counter()
        await create_many(client, "watched", pods, watch_pods, concurrency)
        await asyncio.wait_for(done.wait(), 60)
        elapsed = time.perf_counter() - began
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in clients:
            await c.close()
        delivered = watchers * watch_pods
        print(
            f"4. watch fan-out: {watchers} watchers x {watch_pods} creates (create time included):"
        )
        print(f"   {delivered / elapsed:8.0f} events/s delivered ({delivered} in {elapsed:.2f}s)")
    finally:
        await client.close()
        await server.stop()


def _is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def end_to_end(pods: int, concurrency: int) -> None:
    async with DevCluster(nodes=["cpu:10"], kubelet_delay=0.2) as cluster:
        ready: set[str] = set()
        all_ready = asyncio.Event()

        def seen(event: WatchEvent) -> None:
            items = event.object.get("items") or [] if event.type == "SYNC" else [event.object]
            for pod in items:
                if _is_ready(pod):
                    ready.add(pod["metadata"]["name"])
            if len(ready) == pods:
                all_ready.set()

        # Watching (not polling lists) keeps the observer's cost out of the figure.
        watcher = Informer(cluster.client, resource_path("v1", "pods", "default"), seen)
        watcher.start()
        await watcher.synced.wait()
        began = time.perf_counter()
        # No requests: the figure is about the controllers, not about packing 10 nodes.
        await create_many(cluster.client, "default", 0, pods, concurrency, requests=False)
        created = time.perf_counter() - began
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(all_ready.wait(), 90)
        elapsed = time.perf_counter() - began
        await watcher.stop()
        print(f"5. end to end (scheduler + simulated kubelet 0.2 s + GC, one process): {pods} pods")
        print(
            f"   created in {created:.2f}s, {len(ready)}/{pods} Running+Ready after "
            f"{elapsed:.2f}s ({len(ready) / elapsed:.0f} pods/s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--watch-pods", type=int, default=2000)
    parser.add_argument("--e2e-pods", type=int, default=1000)
    parser.add_argument(
        "--service-account",
        action="store_true",
        help="figures 1-4 with a ServiceAccount token (RBAC evaluated) instead of the admin's",
    )
    args = parser.parse_args()
    asyncio.run(
        api_figures(
            args.pods, args.concurrency, args.watchers, args.watch_pods, args.service_account
        )
    )
    asyncio.run(end_to_end(args.e2e_pods, args.concurrency))


if __name__ == "__main__":
    main()
