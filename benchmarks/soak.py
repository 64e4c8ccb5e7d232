"""A bounded soak: random autoscaler-like actions and host failures on several clusters.

Run: ``.venv/bin/python benchmarks/soak.py [--minutes 2] [--clusters 3] [--seed 1]``
(minutes, not CI). One dev cluster in this process and ``raycluster-operator run`` in its own
process (so its memory is measured apart). Every ~0.6 s a random action hits a random
cluster: a replicas change, a workersToDelete naming one host of a slice (with replicas
lowered by one, as the autoscaler does), a failed host, or a lost node that comes back. Every
few actions all clusters must converge exactly (tests/hardening's ``World.converged``), while
the hardening checker watches every pod snapshot and every RayCluster event the whole time.
Prints the operations done, the invariants checked and both processes' resident memory at
start and end; exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from raycluster_operator.kube import RAYCLUSTERS

# The hardening world of the test harness (tests/harness/hardening_world.py).
sys.path.insert(0, str(Path(__file__).parents[1]))

from tests.harness.hardening_world import (
    GROUP,
    INDEX,
    World,
    cpu_group,
    eventually,
    labels,
    raycluster,
    tpu_group,
    world,
)

NODES = ["tpu:v6e:4x4:8", "cpu:12"]


def rss_mb(pid: int | None = None) -> float:
    with open(f"/proc/{pid or 'self'}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


async def soak(minutes: float, clusters: int, seed: int) -> int:
    rng = random.Random(seed)
    ops: collections.Counter[str] = collections.Counter()
    convergences = 0
    async with world(NODES) as w:
        kubeconfig = w.cluster.write_kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig")
        operator = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "raycluster-operator"),
            "run",
            f"--kubeconfig={kubeconfig}",
            "--no-leader-elect",
            "--metrics-addr=",
            "--health-addr=",
            "--resync-period=10",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        names = [f"soak-{i}" for i in range(clusters)]
        for name in names:
            await w.create(raycluster(name, [tpu_group("tpu", 1), cpu_group("mh", 2, hosts=2)]))
        await _all_converged(w, names)
        gc.collect()
        start_rss, start_op = rss_mb(), rss_mb(operator.pid)
        started = time.monotonic()
        deadline = started + minutes * 60
        while time.monotonic() < deadline:
            name = rng.choice(names)
            action = rng.choice(["replicas", "replicas", "workers-to-delete", "host", "node"])
            try:
                done = await ACTIONS[action](w, name, rng)
            except AssertionError:
                done = False
            if done:
                ops[action] += 1
            await asyncio.sleep(rng.uniform(0.2, 1.0))
            if sum(ops.values()) % 8 == 7:
                await _all_converged(w, names)
                convergences += 1
        await _all_converged(w, names)
        convergences += 1
        gc.collect()
        end_rss, end_op = rss_mb(), rss_mb(operator.pid)
        operator.terminate()
        await operator.wait()
        violations = w.checker.violations + w.checker.spec_violations()
        orphans = await w.orphans()
        elapsed = time.monotonic() - started
        print(f"soak: {elapsed:.0f}s, {clusters} clusters, seed {seed}")
        print(f"operations: {sum(ops.values())} ({', '.join(f'{k} {v}' for k, v in ops.items())})")
        print(
            f"invariants: {w.checker.snapshots} pod snapshots and {w.checker.events} RayCluster "
            f"events checked continuously; {convergences} exact convergences of all clusters"
        )
        print(f"violations: {len(violations)}, orphan pods: {len(orphans)}")
        for v in violations[:20]:
            print(f"  {v}")
        print(f"operator process RSS: {start_op:.0f} MB -> {end_op:.0f} MB")
        print(
            f"dev cluster process RSS: {start_rss:.0f} MB -> {end_rss:.0f} MB (its watch "
            "history fills up to a fixed bound)"
        )
        return 1 if violations or orphans else 0


async def _all_converged(w: World, names: list[str]) -> None:
    for name in names:
        await eventually(lambda n=name: w.converged(n), within=120)  # type: ignore[misc]


async def _replicas(w: World, name: str, rng: random.Random) -> bool:
    if rng.random() < 0.5:
        await w.set_group(name, "tpu", replicas=rng.randint(0, 2), scaleStrategy={})
    else:
        await w.set_group(name, "mh", replicas=rng.randint(0, 4))
    return True


async def _workers_to_delete(w: World, name: str, rng: random.Random) -> bool:
    victims = _live_workers(await w.pods(name))
    if not victims:
        return False
    victim = rng.choice(victims)
    group = labels(victim)[GROUP]
    current = {
        g["groupName"]: g
        for g in (await w.kube.get(RAYCLUSTERS, "default", name))["spec"]["workerGroupSpecs"]
    }
    replicas = max(int(current[group].get("replicas") or 0) - 1, 0)
    await w.set_group(
        name,
        group,
        replicas=replicas,
        scaleStrategy={"workersToDelete": [victim["metadata"]["name"]]},
    )
    return True


async def _fail_host(w: World, name: str, rng: random.Random) -> bool:
    victims = _live_workers(await w.pods(name))
    if not victims:
        return False
    victim = rng.choice(victims)
    await w.cluster.fail_pod("default", victim["metadata"]["name"])
    return True


async def _fail_node(w: World, name: str, rng: random.Random) -> bool:
    victims = [p for p in _live_workers(await w.pods(name)) if labels(p)[GROUP] == "mh"]
    if not victims:
        return False
    node = rng.choice(victims)["spec"]["nodeName"]
    await w.cluster.fail_node(node)
    await asyncio.sleep(1.0)  # lost long enough for its pods to fail
    await w.cluster.restore_node(node)
    return True


def _live_workers(pods: list[dict]) -> list[dict]:  # type: ignore[type-arg]
    return [
        p
        for p in pods
        if labels(p).get("ray.io/node-type") == "worker"
        and INDEX in labels(p)
        and not p["metadata"].get("deletionTimestamp")
        and p["spec"].get("nodeName")
    ]


ACTIONS = {
    "replicas": _replicas,
    "workers-to-delete": _workers_to_delete,
    "host": _fail_host,
    "node": _fail_node,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sys.exit(asyncio.run(soak(args.minutes, args.clusters, args.seed)))


if __name__ == "__main__":
    main()
