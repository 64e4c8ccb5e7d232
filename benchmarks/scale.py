"""The operator at scale: N RayClusters of 2 TPU slices x 4 hosts plus a head each.

Run: ``.venv/bin/python benchmarks/scale.py [--clusters 1000]``   (simulated runtime)

With the default 1,000 clusters that is 9,000 pods on 8,000 simulated TPU nodes. The operator
runs as ``raycluster-operator run`` in its own process, as it is deployed. Measured:

1. *converge*: from empty, all clusters applied at once, until every pod is Running and Ready
   and every RayCluster's status says so (state ready, every slice ready);
2. *steady state*: over several resyncs, the API writes (must be 0) and reconcile latency
   p50/p99 (from the operator's own histogram);
3. *RSS*: the operator process's resident memory at steady state;
4. *resync after restart*: the operator is stopped and started again; the time until it has
   reconciled every cluster once, and the writes that took (must be 0: nothing changed).

Budgets (README): RSS < 300 MB, resync < 15 s, 0 writes at steady state and on restart.

``--sizes 100,200,400,800`` runs each size back to back (a fresh dev cluster each) and ends
with the growth table: converge time and its ratio to the first size's, reconcile p50/p99,
CPU seconds per pod while converging for the dev server (this process: the dev cluster runs
in it, beside the benchmark's one pod watch) and for the operator (its process), RSS per
cluster and steady-state writes. A future regression in either side shows as a ratio.

``--baseline-src DIR`` also starts, at steady state, a second operator from another source tree
(``DIR/src``: say, ``git archive`` of an earlier commit) beside the first, waits until it has
reconciled every cluster and resynced once, and prints both RSS figures from the same moment:
a before/after ratio from one run, on the same cluster, under the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from convergence import free_port, raycluster, rss_mib, spawn_operator, writes
from devkube import DevCluster
from devkube.machinery.informer import Informer
from raycluster_operator.controller.crds import crd_manifest

RSS_BUDGET_MB = 300.0
RESYNC_BUDGET_S = 15.0
SLICES = 2
HOSTS = 4
HEADS_PER_CPU_NODE = 50


async def metrics(port: int) -> str:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics") as resp,
    ):
        return await resp.text()


def counters(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for match in re.finditer(
        r'^raycluster_operator_api_requests\{verb="(\w+)"\} (\S+)$', text, re.M
    ):
        out[match.group(1)] = float(match.group(2))
    reconciles = re.findall(r"^raycluster_operator_reconcile_total\{[^}]*\} (\S+)$", text, re.M)
    out["reconciles"] = sum(float(v) for v in reconciles)
    return out


def buckets(text: str) -> list[tuple[float, float]]:
    """The reconcile-duration histogram: (upper bound, cumulative count)."""
    pattern = r'^raycluster_operator_reconcile_duration_seconds_bucket\{le="([^"]+)"\} (\S+)$'
    return [(float(le), float(n)) for le, n in re.findall(pattern, text, re.M)]


def quantile(
    before: list[tuple[float, float]], after: list[tuple[float, float]], q: float
) -> float:
    """The q-quantile of the reconciles between two scrapes, interpolated inside its bucket."""
    delta = [(le, a - b) for (le, a), (_, b) in zip(after, before, strict=True)]
    total = delta[-1][1] if delta else 0.0
    if total <= 0:
        return math.nan
    rank, lower, below = q * total, 0.0, 0.0
    for le, cumulative in delta:
        if cumulative >= rank:
            if math.isinf(le):
                return lower
            inside = cumulative - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = le, cumulative
    return lower


async def start_operator(
    kubeconfig: Path,
    port: int,
    resync: float,
    source: Path | None = None,
    log: Path | None = None,
) -> asyncio.subprocess.Process:
    """``log``: where the operator's log goes (every write it makes is a line there)."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source / "src")
    process = await spawn_operator(kubeconfig, port, resync=resync, env=env, log=log)
    for _ in range(600):
        try:
            await metrics(port)
            return process
        except aiohttp.ClientError:
            await asyncio.sleep(0.05)
    raise RuntimeError("the operator did not start")


def ready_pods(pods: Informer, verbose: bool = False) -> tuple[int, int]:
    """(live, ready) from a watch cache: listing 9,000 pods every second would load the very
    server being measured."""
    live = [p for p in pods.cache.values() if not p["metadata"].get("deletionTimestamp")]
    if verbose:
        bound = sum(1 for p in live if (p.get("spec") or {}).get("nodeName"))
        running = sum(1 for p in live if (p.get("status") or {}).get("phase") == "Running")
        print(f"    {len(live)} pods, {bound} bound, {running} running", flush=True)
    ready = sum(
        1
        for p in live
        if any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (p.get("status") or {}).get("conditions") or []
        )
    )
    return len(live), ready


def reported_ready(clusters: Informer) -> int:
    """RayClusters whose status says every slice is ready: the operator has caught up with its
    pods (at 1,000 clusters it still wrote budgets and statuses seconds after the last pod was
    Ready, and those writes fell into the steady-state window)."""
    return sum(
        1
        for c in clusters.cache.values()
        if (c.get("status") or {}).get("state") == "ready"
        and (c.get("status") or {}).get("readyWorkerSlices") == SLICES
    )


async def baseline_rss(
    kubeconfig: Path,
    operator: asyncio.subprocess.Process,
    clusters: int,
    resync: float,
    source: Path,
) -> None:
    """Both operators' RSS at one moment, the baseline once it has caught up and resynced."""
    port = free_port()
    baseline = await start_operator(kubeconfig, port, resync, source)
    try:
        while True:
            if counters(await metrics(port))["reconciles"] >= clusters:
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(resync + 1)
        text = await metrics(port)
        ours, theirs = rss_mib(operator.pid) * 1.048576, rss_mib(baseline.pid) * 1.048576
        print(
            f"  RSS side by side: this tree {ours:.1f} MB, {source} {theirs:.1f} MB"
            f" (ratio {ours / theirs:.2f}); baseline writes {writes(counters(text)):.0f}"
        )
    finally:
        baseline.terminate()
        await baseline.wait()


def cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU of a process so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Figures:
    clusters: int
    pods: int
    converged: float
    p50: float
    p99: float
    steady_writes: float
    rss: float
    server_cpu: float
    operator_cpu: float
    ok: bool


async def main(
    clusters: int, resync: float, verbose: bool = False, baseline: Path | None = None
) -> int:
    return 0 if (await measure(clusters, resync, verbose, baseline)).ok else 1


async def measure(
    clusters: int, resync: float, verbose: bool = False, baseline: Path | None = None
) -> Figures:
    pods = clusters * (SLICES * HOSTS + 1)
    cpu_nodes = max(1, math.ceil(clusters / HEADS_PER_CPU_NODE))
    nodes = [f"tpu:v6e:4x4:{clusters * SLICES}", f"cpu:{cpu_nodes}"]
    print(f"scale: {clusters} RayClusters x ({SLICES} slices x {HOSTS} hosts + head) = {pods} pods")
    async with DevCluster(nodes=nodes, kubelet_delay=0.2) as cluster:
        await cluster.apply(crd_manifest())
        workdir = Path(tempfile.mkdtemp(prefix="scale-"))
        kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig")
        port = free_port()
        oplog = workdir / "operator.log"
        print(f"  operator log (every write is a line): {oplog}")
        operator = await start_operator(kubeconfig, port, resync, log=oplog)
        watched = Informer(cluster.client, "/api/v1/pods")
        watched.start()
        reported = Informer(cluster.client, "/apis/ray.io/v1/rayclusters")
        reported.start()
        try:
            gate = asyncio.Semaphore(32)

            async def apply(index: int) -> None:
                async with gate:
                    await cluster.apply(raycluster(f"c{index:04d}", SLICES))

            start = time.perf_counter()
            server_cpu, operator_cpu = cpu_seconds(), cpu_seconds(operator.pid)
            await asyncio.gather(*(apply(i) for i in range(clusters)))
            applied = time.perf_counter() - start
            polls = 0
            while True:
                live, ready = ready_pods(watched, verbose and polls % 5 == 0)
                if live >= pods and ready >= pods and reported_ready(reported) >= clusters:
                    break
                polls += 1
                await asyncio.sleep(1.0)
            converged = time.perf_counter() - start
            server_cpu = cpu_seconds() - server_cpu
            operator_cpu = cpu_seconds(operator.pid) - operator_cpu
            print(f"  applied {clusters} RayClusters in        {applied:7.1f} s")
            print(f"  converged from empty ({pods} pods Ready): {converged:7.1f} s")

            await asyncio.sleep(max(3.0, resync))  # the last status patches land
            text = await metrics(port)
            before, hist_before = counters(text), buckets(text)
            window = time.strftime("%H:%M:%S")
            await asyncio.sleep(3 * resync + 1)
            text = await metrics(port)
            after, hist_after = counters(text), buckets(text)
            steady_writes = writes(after) - writes(before)
            rounds = after["reconciles"] - before["reconciles"]
            p50 = quantile(hist_before, hist_after, 0.5) * 1000
            p99 = quantile(hist_before, hist_after, 0.99) * 1000
            rss = rss_mib(operator.pid) * 1.048576  # MiB -> MB
            print(
                f"  steady state ({window} to {time.strftime('%H:%M:%S')}): {rounds:.0f} "
                f"reconciles, API writes: {steady_writes:.0f}"
            )
            print(f"  reconcile latency p50 / p99:        {p50:7.1f} / {p99:.1f} ms")
            print(
                f"  operator RSS at steady state:       {rss:7.1f} MB"
                f" (budget < {RSS_BUDGET_MB:.0f})"
            )
            if baseline is not None:
                await baseline_rss(kubeconfig, operator, clusters, resync, baseline)
        finally:
            await watched.stop()
            await reported.stop()
            operator.terminate()
            await operator.wait()

        # Restart: a fresh operator relists everything and reconciles each cluster once.
        start = time.perf_counter()
        operator = await start_operator(kubeconfig, port, resync, log=oplog)
        try:
            while True:
                now = counters(await metrics(port))
                if now["reconciles"] >= clusters:
                    break
                await asyncio.sleep(0.1)
            resynced = time.perf_counter() - start
            restart_writes = writes(now)
            print(
                f"  resync after restart:               {resynced:7.1f} s"
                f" (budget < {RESYNC_BUDGET_S:.0f})"
            )
            print(f"  API writes during that resync:      {restart_writes:7.0f}")
        finally:
            operator.terminate()
            await operator.wait()
    ok = (
        steady_writes == 0
        and restart_writes == 0
        and rss < RSS_BUDGET_MB
        and resynced < RESYNC_BUDGET_S
    )
    print("  PASS" if ok else "  OVER BUDGET")
    return Figures(
        clusters,
        pods,
        converged,
        p50,
        p99,
        steady_writes,
        rss,
        server_cpu / pods,
        operator_cpu / pods,
        ok,
    )


async def growth(sizes: list[int], resync: float, verbose: bool) -> int:
    """Each size back to back, then the table with the ratios to the first size."""
    rows = [await measure(n, resync, verbose) for n in sizes]
    first = rows[0]
    print()
    print(
        "| clusters (pods) | converge | x first | work x | p50 / p99 ms "
        "| CPU ms/pod server / operator | RSS KB/cluster | steady writes |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.clusters} ({r.pods}) | {r.converged:.1f} s | {r.converged / first.converged:.2f}"
            f" | {r.pods / first.pods:.1f} | {r.p50:.1f} / {r.p99:.1f}"
            f" | {r.server_cpu * 1000:.2f} / {r.operator_cpu * 1000:.2f}"
            f" | {r.rss * 1000 / r.clusters:.0f} | {r.steady_writes:.0f} |"
        )
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument(
        "--sizes", help="comma-separated cluster counts, run back to back: the growth table"
    )
    parser.add_argument("--resync-period", type=float, default=10.0)
    parser.add_argument("-v", "--verbose", action="store_true", help="progress while converging")
    parser.add_argument(
        "--baseline-src", type=Path, help="a source tree whose operator's RSS to show alongside"
    )
    args = parser.parse_args()
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    if args.sizes:
        sizes = [int(n) for n in args.sizes.split(",")]
        sys.exit(asyncio.run(growth(sizes, args.resync_period, args.verbose)))
    sys.exit(asyncio.run(main(args.clusters, args.resync_period, args.verbose, args.baseline_src)))
