"""KubeRay's own operator and ours, one after the other, on one real control plane.

Run: ``PYTHONPATH=$PWD/src .venv/bin/python benchmarks/versus_kuberay.py [--quick] [--rows 1,3]``

One `DevCluster(control_plane="kubernetes")` (kube-apiserver, etcd, kube-controller-manager
and kube-scheduler as built by `make kube`; simulated TPU v6e nodes), KubeRay's CRDs as its
own kustomize base has them (ours runs under KubeRay's CRD, docs/design.md §3.7). Each
operator runs alone in turn, as a process of its own with its default flags and no leader
election (one replica each; KubeRay's lease renewals would otherwise be counted as writes):
KubeRay v1.6.2 as `make kube` built it (its `RayMultiHostIndexing` gate is Beta and on by
default there, so its multi-host path is the one measured), then ours (`raycluster-operator
run`, its ServiceAccount and deploy/'s RBAC). Each row runs in a namespace of its own and
cleans up after itself, so both operators meet the same empty nodes. The rows:

1. create -> all Ready: one RayCluster of ``--slices`` slices x 4 hosts + head, until every
   pod is Ready and the RayCluster's status says ready; API writes per pod;
2. one host deleted (a `kubectl delete pod`): until its group has every slice whole and
   Ready again; which pods the operator deleted;
3. scale 4 -> 2 slices: which replica indices remain, pods deleted, time;
4. `kubectl drain` of one host's node with its slice running: how long the group had fewer
   whole Ready slices than it wants, whether the drain completes, in how long;
5. ``--clusters`` RayClusters of 2 slices x 4 hosts + head: converge time, writes over a
   ``--window`` of steady state, operator CPU-seconds and RSS per cluster;
6. a node going NotReady under a slice (its kubelet stops: a partitioned or dead VM): until
   the group has every slice whole and Ready on other nodes, or ``--give-up``.

Nodes are NotReady after ``--node-grace`` seconds without a heartbeat (40, kube's default:
a shorter grace lets the simulated kubelets' heartbeats fall behind on a loaded machine, and
ours, which acts on NotReady nodes, then replaces healthy slices); the run prints how many
nodes went NotReady while each operator ran, other than row 6's.

A pod watch over the whole cluster (`Sampler`) records, for every slice (a
``ray.io/worker-group-replica-name``), when it was whole and when it was partial (some of its
hosts gone or terminating, others not) after having been whole: each row reports the longest
such window. Writes: KubeRay's from client-go's `rest_client_requests_total` (POST, PUT,
PATCH, DELETE), ours from `raycluster_operator_api_requests`; CPU and RSS from /proc of each
operator's process. The closing table has both operators' figures and the ratio ours/KubeRay.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from convergence import free_port, raycluster, rss_mib
from devkube import DevCluster, KubeRayOperator
from devkube.addons.kuberay import manifests
from devkube.machinery.client import WatchEvent
from devkube.machinery.informer import Informer
from raycluster_operator.devcluster.attach import operator_kubeconfig
from raycluster_operator.kube import NODES, PODS, RAYCLUSTERS, KubeClient
from scale import counters, cpu_seconds, metrics

HOSTS = 4
REPLICA_NAME = "ray.io/worker-group-replica-name"
REPLICA_INDEX = "ray.io/worker-group-replica-index"
HOST_INDEX = "ray.io/replica-host-index"
KUBELET = "dev.raycluster-operator.io/kubelet"
#: client-go's request counter in KubeRay's /metrics.
KUBERAY_REQUESTS = re.compile(r"^rest_client_requests_total\{([^}]*)\} (\S+)$", re.M)
KUBERAY_WRITES = ('method="POST"', 'method="PUT"', 'method="PATCH"', 'method="DELETE"')
OUR_WRITES = ("create", "update", "patch", "delete")

Obj = dict[str, Any]


# --- the pod sampler ---------------------------------------------------------------------


@dataclass
class Slice:
    """One slice's life as the watch saw it: live = exists and not terminating."""

    namespace: str
    index: str
    live: int = 0
    ready: int = 0
    whole_at: float | None = None  # the first moment all its hosts were live
    partial_since: float | None = None
    partials: list[tuple[float, float]] = field(default_factory=list)  # (start, seconds)


def is_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def is_live(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp")


class Sampler:
    """Every pod of the cluster from one list-and-watch, and every slice's partial windows;
    the RayClusters' statuses from a second watch."""

    def __init__(self, cluster: DevCluster) -> None:
        self.pods = Informer(cluster.client, "/api/v1/pods")
        self.rayclusters = Informer(cluster.client, "/apis/ray.io/v1/rayclusters")
        self.nodes = Informer(cluster.client, "/api/v1/nodes")
        #: Nodes seen not Ready at some moment (a starved heartbeat, or row 6's).
        self.unready_nodes: set[str] = set()
        self.slices: dict[tuple[str, str], Slice] = {}
        self.members: dict[tuple[str, str], set[tuple[str, str]]] = {}
        #: (time, namespace, pod, replica index, host index) of every pod whose deletion began.
        self.deletions: list[tuple[float, str, str, str, str]] = []
        self._deleting: set[tuple[str, str]] = set()
        #: namespace -> [slices wanted, last change, short then, seconds short so far]
        self._shortages: dict[str, list[Any]] = {}
        self.changed = asyncio.Event()
        self.pods.subscribe(self._on_pod)
        self.rayclusters.subscribe(lambda _: self.changed.set())
        self.nodes.subscribe(self._on_node)

    async def start(self) -> None:
        self.pods.start()
        self.rayclusters.start()
        self.nodes.start()
        await self.nodes.synced.wait()
        await self.pods.synced.wait()
        await self.rayclusters.synced.wait()

    async def stop(self) -> None:
        await self.pods.stop()
        await self.rayclusters.stop()
        await self.nodes.stop()

    def _on_node(self, event: WatchEvent) -> None:
        nodes = [event.object] if event.type in ("ADDED", "MODIFIED") else []
        for node in nodes:
            conditions = (node.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") != "True" for c in conditions):
                self.unready_nodes.add(str(node["metadata"]["name"]))

    def _on_pod(self, event: WatchEvent) -> None:
        now = time.monotonic()
        if event.type == "SYNC":
            for key in list(self.members):
                self._recount(key, now)
            for pod in self.pods.cache.values():
                self._track(pod, now, gone=False)
        elif event.type in ("ADDED", "MODIFIED", "DELETED"):
            self._track(event.object, now, gone=event.type == "DELETED")
        for ns, entry in self._shortages.items():
            want, last, short, total = entry
            entry[1:] = [
                now,
                len(self.whole_ready(ns)) < want,
                total + (now - last if short else 0),
            ]
        self.changed.set()

    def _track(self, pod: Obj, now: float, *, gone: bool) -> None:
        meta = pod["metadata"]
        key = (str(meta.get("namespace")), str(meta.get("name")))
        labels = meta.get("labels") or {}
        if (gone or not is_live(pod)) and key not in self._deleting:
            self._deleting.add(key)
            index, host = labels.get(REPLICA_INDEX, "-"), labels.get(HOST_INDEX, "-")
            self.deletions.append((now, key[0], key[1], index, host))
        replica = labels.get(REPLICA_NAME)
        if not replica:
            return
        slice_key = (key[0], replica)
        if slice_key not in self.slices:
            self.slices[slice_key] = Slice(key[0], labels.get(REPLICA_INDEX, "?"))
        self.members.setdefault(slice_key, set()).add(key)
        self._recount(slice_key, now)

    def _recount(self, slice_key: tuple[str, str], now: float) -> None:
        state = self.slices[slice_key]
        pods = [self.pods.cache[k] for k in self.members[slice_key] if k in self.pods.cache]
        state.live = sum(1 for p in pods if is_live(p))
        state.ready = sum(1 for p in pods if is_live(p) and is_ready(p))
        if state.live >= HOSTS and state.whole_at is None:
            state.whole_at = now
        partial = state.whole_at is not None and 0 < state.live < HOSTS
        if partial and state.partial_since is None:
            state.partial_since = now
        elif not partial and state.partial_since is not None:
            state.partials.append((state.partial_since, now - state.partial_since))
            state.partial_since = None

    # --- what the rows read --------------------------------------------------------------

    def in_namespace(self, namespace: str) -> list[Obj]:
        return [p for (ns, _), p in self.pods.cache.items() if ns == namespace]

    def whole_ready(self, namespace: str, avoid_node: str = "") -> list[Obj]:
        """The namespace's slices whose every host is live and Ready (none on ``avoid_node``):
        one pod of each."""
        by_slice: dict[str, list[Obj]] = {}
        for pod in self.in_namespace(namespace):
            replica = (pod["metadata"].get("labels") or {}).get(REPLICA_NAME)
            if replica and is_live(pod):
                by_slice.setdefault(replica, []).append(pod)
        return [
            pods[0]
            for pods in by_slice.values()
            if len(pods) >= HOSTS
            and all(is_ready(p) for p in pods)
            and all((p.get("spec") or {}).get("nodeName") != avoid_node for p in pods)
        ]

    def longest_partial(self, namespace: str, since: float) -> float:
        """Seconds of the longest partial window of a slice of ``namespace`` since ``since``
        (one still open counts until now)."""
        now, longest = time.monotonic(), 0.0
        for state in self.slices.values():
            if state.namespace != namespace:
                continue
            windows = [*state.partials]
            if state.partial_since is not None:
                windows.append((state.partial_since, now - state.partial_since))
            longest = max([longest, *(s for start, s in windows if start >= since)])
        return longest

    def deleted_since(self, namespace: str, since: float, but: str = "") -> list[str]:
        """``index/host`` of each pod of ``namespace`` whose deletion began since ``since``,
        but ``but`` (the one the row deleted itself)."""
        return [
            f"{index}/{host}"
            for t, ns, name, index, host in self.deletions
            if ns == namespace and t >= since and name != but
        ]

    def track_shortage(self, namespace: str, want: int) -> None:
        """From now on, add up the time ``namespace`` has fewer than ``want`` whole Ready
        slices (re-judged at every pod event)."""
        now = time.monotonic()
        short = len(self.whole_ready(namespace)) < want
        self._shortages[namespace] = [want, now, short, 0.0]

    def shortage(self, namespace: str) -> float:
        """Seconds short so far (`track_shortage`), and stop tracking."""
        _want, last, short, total = self._shortages.pop(namespace)
        return float(total + (time.monotonic() - last if short else 0.0))

    def state_ready(self, namespace: str) -> int:
        return sum(
            1
            for (ns, _), obj in self.rayclusters.cache.items()
            if ns == namespace and (obj.get("status") or {}).get("state") == "ready"
        )

    async def until(self, check: Callable[[], bool], within: float) -> float | None:
        """Seconds until ``check()`` holds (re-checked after every event and every 0.5 s),
        or None after ``within`` seconds."""
        start = time.monotonic()
        while not check():
            left = within - (time.monotonic() - start)
            if left <= 0:
                return None
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 0.5))
        return time.monotonic() - start


# --- the two operators -------------------------------------------------------------------


class Operator:
    """One operator's process: started, measured (writes, CPU, RSS) and stopped."""

    name = ""
    key = ""

    async def start(self, cluster: DevCluster, namespaces: Sequence[str]) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    @property
    def pid(self) -> int:
        raise NotImplementedError

    async def writes(self) -> float:
        raise NotImplementedError

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def rss_mb(self) -> float:
        return rss_mib(self.pid) * 1.048576


class KubeRay(Operator):
    name, key = "KubeRay", "kuberay"

    def __init__(self) -> None:
        self.operator: KubeRayOperator | None = None

    async def start(self, cluster: DevCluster, namespaces: Sequence[str]) -> None:
        self.operator = KubeRayOperator(namespaces, args=("--enable-leader-election=false",))
        await self.operator.start(cluster)
        print(f"  KubeRay {self.operator.version}'s operator log: {self.operator.log_path}")

    async def stop(self) -> None:
        if self.operator is not None:
            await self.operator.stop()

    @property
    def pid(self) -> int:
        assert self.operator is not None and self.operator.pid is not None
        return self.operator.pid

    async def writes(self) -> float:
        assert self.operator is not None
        text = await self.operator.metrics()
        return sum(
            float(count)
            for labels, count in KUBERAY_REQUESTS.findall(text)
            if any(verb in labels for verb in KUBERAY_WRITES)
        )


class Ours(Operator):
    name, key = "ours", "ours"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.process: asyncio.subprocess.Process | None = None
        self.port = 0

    async def start(self, cluster: DevCluster, namespaces: Sequence[str]) -> None:
        kubeconfig = self.workdir / "ours.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(await operator_kubeconfig(cluster)))
        self.port, health = free_port(), free_port()
        log = self.workdir / "ours.log"
        print(f"  our operator's log: {log}")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "raycluster_operator",
            "run",
            f"--kubeconfig={kubeconfig}",
            f"--namespace={','.join(namespaces)}",
            "--no-leader-elect",
            f"--metrics-addr=127.0.0.1:{self.port}",
            f"--health-addr=127.0.0.1:{health}",
            stderr=log.open("ab"),
        )
        # Started once its caches have synced (/readyz), as KubeRay's once its workers run.
        async with aiohttp.ClientSession() as http:
            for _ in range(1200):
                try:
                    async with http.get(f"http://127.0.0.1:{health}/readyz") as answer:
                        if answer.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError(f"our operator did not become ready; see {log}")

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await self.process.wait()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def writes(self) -> float:
        found = counters(await metrics(self.port))
        return sum(found.get(verb, 0.0) for verb in OUR_WRITES)


# --- the rows ----------------------------------------------------------------------------


@dataclass
class World:
    cluster: DevCluster
    admin: KubeClient
    sampler: Sampler
    args: argparse.Namespace
    kubeconfig: Path
    stopped: list[str] = field(default_factory=list)  # nodes row 6 stopped


Figures = dict[str, Any]


def namespace(op: Operator, row: int) -> str:
    return f"{op.key}-r{row}"


def cluster_in(name: str, ns: str, slices: int) -> Obj:
    obj = raycluster(name, slices)
    obj["metadata"]["namespace"] = ns
    return obj


async def running(world: World, op: Operator, ns: str, slices: int, clusters: int = 1) -> float:
    """Seconds until every slice of ``ns`` is whole and Ready, its heads Ready and no other
    worker live, and every RayCluster's status says ready."""

    def check() -> bool:
        pods = [p for p in world.sampler.in_namespace(ns) if is_live(p)]
        heads = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
        return (
            len(world.sampler.whole_ready(ns)) == slices
            and len(pods) == slices * HOSTS + clusters
            and sum(map(is_ready, heads)) == clusters
            and world.sampler.state_ready(ns) == clusters
        )

    took = await world.sampler.until(check, world.args.converge_within)
    if took is None:
        pods = [p for p in world.sampler.in_namespace(ns) if is_live(p)]
        unbound = sum(1 for p in pods if not (p.get("spec") or {}).get("nodeName"))
        raise TimeoutError(
            f"not ready within {world.args.converge_within:.0f} s: "
            f"{len(world.sampler.whole_ready(ns))} of {slices} slices whole and Ready, "
            f"{unbound} pods unscheduled, {world.sampler.state_ready(ns)} of {clusters} "
            "RayClusters ready"
        )
    return took


def pool_of(node: str) -> str:
    """A simulated TPU node's pool (one slice's worth of hosts): `tpu-v6e-4x4-3-h1` is in
    `tpu-v6e-4x4-3`."""
    return node.rsplit("-h", 1)[0]


def split_slices(world: World, ns: str) -> int:
    """Slices of ``ns`` whose hosts run on more than one node pool: on TPU hardware, hosts
    of one slice must share its pool (its ICI links)."""
    pools: dict[str, set[str]] = {}
    for pod in world.sampler.in_namespace(ns):
        replica = (pod["metadata"].get("labels") or {}).get(REPLICA_NAME)
        node = (pod.get("spec") or {}).get("nodeName")
        if replica and node and is_live(pod):
            pools.setdefault(replica, set()).add(pool_of(node))
    return sum(1 for found in pools.values() if len(found) > 1)


async def clean(world: World, ns: str) -> None:
    """Delete the namespace's RayClusters and wait for all of its pods to be gone."""
    for key in [k for k in world.sampler.rayclusters.cache if k[0] == ns]:
        await world.admin.delete(RAYCLUSTERS, ns, key[1])
    if await world.sampler.until(lambda: not world.sampler.in_namespace(ns), 600) is None:
        print(f"  ! pods of {ns} still exist after 600 s")


async def one_host(world: World, ns: str, index: str = "0", host: str = "1") -> Obj:
    for pod in world.sampler.in_namespace(ns):
        labels = pod["metadata"].get("labels") or {}
        if labels.get(REPLICA_INDEX) == index and labels.get(HOST_INDEX) == host and is_live(pod):
            return pod
    raise LookupError(f"no live host {host} of slice {index} in {ns}")


async def row_create(world: World, op: Operator) -> Figures:
    ns, slices = namespace(op, 1), world.args.slices
    pods = slices * HOSTS + 1
    writes = await op.writes()
    await world.cluster.apply(cluster_in("big", ns, slices), ns)
    took = await running(world, op, ns, slices)
    split = split_slices(world, ns)
    await asyncio.sleep(2.0)  # the last status writes land
    per_pod = (await op.writes() - writes) / pods
    await clean(world, ns)
    return {"create_s": took, "writes_per_pod": per_pod, "create_split": split}


async def row_host_deleted(world: World, op: Operator) -> Figures:
    ns, slices = namespace(op, 2), 4 if not world.args.quick else 2
    await world.cluster.apply(cluster_in("hostloss", ns, slices), ns)
    await running(world, op, ns, slices)
    victim = await one_host(world, ns)
    name = victim["metadata"]["name"]
    mark = time.monotonic()
    await world.admin.delete(PODS, ns, name)
    await world.sampler.until(lambda: len(world.sampler.whole_ready(ns)) < slices, 30)
    took = await running(world, op, ns, slices)
    deleted = world.sampler.deleted_since(ns, mark, but=name)
    partial = world.sampler.longest_partial(ns, mark)
    await clean(world, ns)
    return {"host_whole_s": took, "host_deleted": describe(deleted), "host_partial_s": partial}


def describe(deleted: Iterable[str]) -> str:
    """``index/host`` pairs as ``slice 0: hosts 0,2,3``."""
    by_index: dict[str, list[str]] = {}
    for pair in deleted:
        index, host = pair.split("/")
        by_index.setdefault(index, []).append(host)
    if not by_index:
        return "none"
    return "; ".join(f"slice {i}: hosts {','.join(sorted(h))}" for i, h in sorted(by_index.items()))


async def row_scale_down(world: World, op: Operator) -> Figures:
    ns = namespace(op, 3)
    obj = cluster_in("scaling", ns, 4)
    await world.cluster.apply(obj, ns)
    await running(world, op, ns, 4)
    group = dict(obj["spec"]["workerGroupSpecs"][0], replicas=2)
    mark = time.monotonic()
    await world.admin.patch(RAYCLUSTERS, ns, "scaling", {"spec": {"workerGroupSpecs": [group]}})
    took = await running(world, op, ns, 2)
    remaining = sorted(
        {
            p["metadata"]["labels"].get(REPLICA_INDEX, "")
            for p in world.sampler.in_namespace(ns)
            if is_live(p) and p["metadata"]["labels"].get("ray.io/node-type") == "worker"
        }
    )
    deleted = world.sampler.deleted_since(ns, mark)
    partial = world.sampler.longest_partial(ns, mark)
    await clean(world, ns)
    return {
        "scale_s": took,
        "scale_remaining": ",".join(remaining),
        "scale_deleted": len(deleted),
        "scale_partial_s": partial,
    }


async def kubectl(world: World, *argv: str) -> tuple[int, float]:
    """Run kubectl with the admin's kubeconfig: (exit code, seconds)."""
    start = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        manifests.kubectl(),
        f"--kubeconfig={world.kubeconfig}",
        *argv,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return await process.wait(), time.monotonic() - start


async def row_drain(world: World, op: Operator) -> Figures:
    ns = namespace(op, 4)
    await world.cluster.apply(cluster_in("drained", ns, 2), ns)
    await running(world, op, ns, 2)
    node = (await one_host(world, ns))["spec"]["nodeName"]
    world.sampler.track_shortage(ns, 2)
    mark = time.monotonic()
    timeout = int(world.args.give_up)
    drain = kubectl(
        world,
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        f"--timeout={timeout}s",
    )
    elsewhere = world.sampler.until(
        lambda: len(world.sampler.whole_ready(ns, avoid_node=node)) == 2, world.args.give_up
    )
    (code, drained), whole = await asyncio.gather(drain, elsewhere)
    short = world.sampler.shortage(ns)
    partial = world.sampler.longest_partial(ns, mark)
    await kubectl(world, "uncordon", node)
    await clean(world, ns)
    return {
        "drain_s": drained,
        "drain_completed": code == 0,
        "drain_short_s": short,
        "drain_whole_s": whole if whole is not None else math.inf,
        "drain_partial_s": partial,
    }


async def row_many(world: World, op: Operator) -> Figures:
    ns, n = namespace(op, 5), world.args.clusters
    gate = asyncio.Semaphore(16)

    async def apply(i: int) -> None:
        async with gate:
            await world.cluster.apply(cluster_in(f"c{i:03d}", ns, 2), ns)

    cpu, writes = op.cpu(), await op.writes()
    start = time.monotonic()
    await asyncio.gather(*(apply(i) for i in range(n)))
    stuck = ""
    try:
        await running(world, op, ns, 2 * n, clusters=n)
        converged = time.monotonic() - start
    except TimeoutError as error:  # measured all the same: what it costs while stuck
        converged, stuck = math.inf, str(error)
    split = split_slices(world, ns)
    converge_cpu = op.cpu() - cpu
    converge_writes = await op.writes() - writes
    await asyncio.sleep(3.0)  # the last status writes land
    cpu, writes = op.cpu(), await op.writes()
    await asyncio.sleep(world.args.window)
    steady_cpu, steady_writes = op.cpu() - cpu, await op.writes() - writes
    rss = op.rss_mb()
    await clean(world, ns)
    pods = n * (2 * HOSTS + 1)
    return {
        "many_s": converged,
        "many_split": split,
        "many_stuck": stuck or "no",
        "many_writes_per_pod": converge_writes / pods,
        "many_steady_writes": steady_writes,
        "many_cpu_per_cluster": converge_cpu / n,
        "many_cpu_ms_per_pod": converge_cpu / pods * 1000,
        "many_steady_cpu": steady_cpu,
        "many_rss_mb": rss,
        "many_rss_kb_per_cluster": rss * 1000 / n,
    }


async def row_not_ready(world: World, op: Operator) -> Figures:
    ns = namespace(op, 6)
    await world.cluster.apply(cluster_in("lost", ns, 2), ns)
    await running(world, op, ns, 2)
    node = (await one_host(world, ns))["spec"]["nodeName"]
    world.stopped.append(node)
    mark = time.monotonic()
    await world.admin.patch(NODES, None, node, {"metadata": {"annotations": {KUBELET: "stopped"}}})
    await world.sampler.until(lambda: len(world.sampler.whole_ready(ns, avoid_node=node)) < 2, 30)
    whole = await world.sampler.until(
        lambda: len(world.sampler.whole_ready(ns, avoid_node=node)) == 2, world.args.give_up
    )
    took = time.monotonic() - mark if whole is not None else math.inf
    partial = world.sampler.longest_partial(ns, mark)
    deleted = world.sampler.deleted_since(ns, mark)
    await world.admin.patch(NODES, None, node, {"metadata": {"annotations": {KUBELET: None}}})
    await clean(world, ns)
    return {"lost_whole_s": took, "lost_partial_s": partial, "lost_deleted": describe(deleted)}


ROWS: dict[int, Callable[[World, Operator], Any]] = {
    1: row_create,
    2: row_host_deleted,
    3: row_scale_down,
    4: row_drain,
    5: row_many,
    6: row_not_ready,
}


# --- the run and its table ---------------------------------------------------------------

#: (row, what, figure key, unit): the closing table, in order.
TABLE: list[tuple[int, str, str, str]] = [
    (1, "create -> all Ready ({slices} slices x 4 hosts + head)", "create_s", "s"),
    (1, "API writes per pod while creating", "writes_per_pod", ""),
    (1, "slices whose hosts span node pools", "create_split", ""),
    (2, "one host deleted -> every slice whole and Ready", "host_whole_s", "s"),
    (2, "pods the operator deleted", "host_deleted", ""),
    (2, "longest partial slice", "host_partial_s", "s"),
    (3, "scale 4 -> 2 slices, until 2 remain Ready", "scale_s", "s"),
    (3, "replica indices that remain", "scale_remaining", ""),
    (3, "pods deleted", "scale_deleted", ""),
    (3, "longest partial slice", "scale_partial_s", "s"),
    (4, "kubectl drain of one host's node: drain duration", "drain_s", "s"),
    (4, "drain completed", "drain_completed", ""),
    (4, "time with fewer than 2 whole Ready slices", "drain_short_s", "s"),
    (4, "drain start -> 2 whole Ready slices off the node", "drain_whole_s", "s"),
    (4, "longest partial slice", "drain_partial_s", "s"),
    (5, "{clusters} RayClusters (2 slices x 4 hosts + head): converge", "many_s", "s"),
    (5, "not converged", "many_stuck", ""),
    (5, "slices whose hosts span node pools", "many_split", ""),
    (5, "API writes per pod while converging", "many_writes_per_pod", ""),
    (5, "API writes at steady state over {window:.0f} s", "many_steady_writes", ""),
    (5, "operator CPU-seconds per cluster while converging", "many_cpu_per_cluster", "s"),
    (5, "operator CPU per pod while converging", "many_cpu_ms_per_pod", "ms"),
    (5, "operator CPU-seconds over the steady window", "many_steady_cpu", "s"),
    (5, "operator RSS at steady state", "many_rss_mb", "MB"),
    (5, "operator RSS per cluster", "many_rss_kb_per_cluster", "KB"),
    (
        6,
        "node NotReady (kubelet stopped) -> every slice whole and Ready elsewhere",
        "lost_whole_s",
        "s",
    ),
    (6, "pods the operator deleted", "lost_deleted", ""),
    (6, "longest partial slice", "lost_partial_s", "s"),
]


def shown(value: Any, unit: str, give_up: float) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and math.isinf(value):
        return f"> {give_up:.0f} s (gave up)"
    if isinstance(value, float):
        return f"{value:.2f}{' ' + unit if unit else ''}"
    return f"{value}{' ' + unit if unit and isinstance(value, int) else ''}"


def ratio(ours: Any, theirs: Any) -> str:
    numbers = (int, float)
    if isinstance(ours, bool) or not isinstance(ours, numbers) or not isinstance(theirs, numbers):
        return ""
    if math.isinf(theirs) or math.isinf(ours):
        return (
            "-"
            if math.isinf(theirs) == math.isinf(ours)
            else ("< 1 (KubeRay gave up)" if math.isinf(theirs) else "> 1 (ours gave up)")
        )
    if theirs == 0:
        return "-" if ours == 0 else "(KubeRay 0)"
    return f"{ours / theirs:.2f}"


def table(results: dict[str, Figures], args: argparse.Namespace) -> None:
    theirs, ours = results.get("kuberay", {}), results.get("ours", {})
    print()
    print("| row | measured | KubeRay v1.6.2 | ours | ours / KubeRay |")
    print("|---|---|---|---|---|")
    for row, what, key, unit in TABLE:
        if row not in args.rows:
            continue
        failed = [side.get(f"failed{row}", "") for side in (theirs, ours)]
        if any(failed) and TABLE[[r for r, *_ in TABLE].index(row)][2] == key:
            print(f"| {row} | did not finish | {failed[0]} | {failed[1]} | |")
        label = what.format(slices=args.slices, clusters=args.clusters, window=args.window)
        a, b = theirs.get(key), ours.get(key)
        limit = args.give_up if row in (4, 6) else args.converge_within
        print(
            f"| {row} | {label} | {shown(a, unit, limit)} | {shown(b, unit, limit)}"
            f" | {ratio(b, a)} |"
        )


async def run_operator(world: World, op: Operator) -> Figures:
    """``op`` alone on the cluster: its namespaces made, it started, each row, it stopped."""
    namespaces = [namespace(op, row) for row in world.args.rows]
    for ns in namespaces:
        await world.cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
    print(f"{op.name}: starting", flush=True)
    await op.start(world.cluster, namespaces)
    figures: Figures = {}
    try:
        for row in world.args.rows:
            start = time.monotonic()
            try:
                found = await ROWS[row](world, op)
            except (TimeoutError, LookupError) as error:
                print(f"  ! row {row}: {error}", flush=True)
                figures[f"failed{row}"] = str(error)
                await clean(world, namespace(op, row))
                continue
            figures.update(found)
            print(f"  row {row} ({time.monotonic() - start:.0f} s): {found}", flush=True)
    finally:
        await op.stop()
    return figures


async def main(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="versus-kuberay-"))
    pools = max(args.slices, 2 * args.clusters if 5 in args.rows else 0, 4) + 2
    nodes = [f"tpu:v6e:4x4:{pools}", f"cpu:{2 + args.clusters // 50}"]
    operators: list[Operator] = [KubeRay(), Ours(workdir)]
    operators = [op for op in operators if op.key in args.operators]
    print(f"versus KubeRay: rows {args.rows}, nodes {nodes}, {os.cpu_count()} cores,")
    print(f"  load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    async with DevCluster(
        nodes=nodes, control_plane="kubernetes", node_grace=args.node_grace
    ) as cluster:
        await KubeRayOperator().install(cluster)  # KubeRay's CRDs, for both operators
        admin = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
        sampler = Sampler(cluster)
        await sampler.start()
        kubeconfig = cluster.write_kubeconfig(workdir / "admin.kubeconfig")
        world = World(cluster, admin, sampler, args, kubeconfig)
        results: dict[str, Figures] = {}
        try:
            for op in operators:
                before = set(sampler.unready_nodes)
                results[op.key] = await run_operator(world, op)
                flapped = sampler.unready_nodes - before - set(world.stopped)
                print(f"  nodes NotReady while {op.name} ran, not stopped by row 6: {len(flapped)}")
        finally:
            await sampler.stop()
            await admin.close()
    print(f"  load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    table(results, args)
    return 0


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1,2,3,4,5,6", help="comma-separated rows to run")
    parser.add_argument("--quick", action="store_true", help="small sizes (4 slices, 5 clusters)")
    parser.add_argument("--slices", type=int, help="row 1's slices (16; --quick 4)")
    parser.add_argument("--clusters", type=int, help="row 5's RayClusters (20; --quick 5)")
    parser.add_argument("--window", type=float, help="row 5's steady window, s (60; --quick 20)")
    parser.add_argument(
        "--give-up", type=float, help="seconds to wait for a slice to heal (120; --quick 60)"
    )
    parser.add_argument(
        "--converge-within", type=float, default=180.0, help="seconds a row may take to be Ready"
    )
    parser.add_argument(
        "--node-grace",
        type=float,
        default=40.0,
        help="seconds without a heartbeat before a node is NotReady (kube's default: 40)",
    )
    parser.add_argument("--operators", default="kuberay,ours", help="whom to run, in order")
    args = parser.parse_args(argv)
    args.rows = [int(r) for r in str(args.rows).split(",") if r]
    defaults = (4, 5, 20.0, 60.0) if args.quick else (16, 20, 60.0, 120.0)
    for name, default in zip(("slices", "clusters", "window", "give_up"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, default)
    args.operators = [o for o in str(args.operators).split(",") if o]
    return args


if __name__ == "__main__":
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    sys.exit(asyncio.run(main(parse())))
