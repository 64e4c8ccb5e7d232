"""Ray's slice reservations scaling TPU slices on the dev cluster's process runtime.

Run (as root, Linux): .venv/bin/python benchmarks/slice_reservations.py [--rounds N]

One RayCluster (a head and a group of 2-host TPU v5p 2x2x2 slices, `replicas: 0`, autoscaler
v2 with the sidecar's slice-scaling correction, idleTimeoutSeconds 10) and the operator
attached. Each round, from drivers in the head pod, through Ray's public API only:
1. `slice_placement_group("2x2x2", "v5p", num_slices=1)`: seconds until its placement group
   is ready (0 -> 1 slice); then, holding it, a second one (1 -> 2 slices);
2. both removed and the driver gone: seconds until no worker pod is left (2 -> 0; includes
   the 10 s idle timeout);
3. `num_slices=2` in one reservation (0 -> 2), then released again (2 -> 0).
Prints every sample and the medians. Real Ray on a shared, loaded machine: noisy; say so.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time

from devkube import DevCluster
from devkube.process import process_runtime_available
from ray_e2e import MARK, Bench, raycluster, until
from raycluster_operator.controller.crds import crd_manifest
from raycluster_operator.controller.manager import Manager, ManagerOptions
from raycluster_operator.kube import KubeClient

NODES = ["tpu:v5p:2x2x2:2", "cpu:1"]

ONE_THEN_TWO = f"""
import json, time, ray
from ray.util.tpu import slice_placement_group
ray.init(address="auto", logging_level="ERROR")
start = time.monotonic()
first = slice_placement_group("2x2x2", "v5p", num_slices=1, head_reservation_timeout_s=900)
ray.get(first.placement_group.ready(), timeout=900)
one = time.monotonic() - start
start = time.monotonic()
second = slice_placement_group("2x2x2", "v5p", num_slices=1, head_reservation_timeout_s=900)
ray.get(second.placement_group.ready(), timeout=900)
two = time.monotonic() - start
first.shutdown()
second.shutdown()
print("{MARK}" + json.dumps({{"0->1": one, "1->2": two}}))
"""

TWO = f"""
import json, time, ray
from ray.util.tpu import slice_placement_group
ray.init(address="auto", logging_level="ERROR")
start = time.monotonic()
both = slice_placement_group("2x2x2", "v5p", num_slices=2, head_reservation_timeout_s=900)
ray.get(both.placement_group.ready(), timeout=900)
two = time.monotonic() - start
both.shutdown()
print("{MARK}" + json.dumps({{"0->2": two}}))
"""


async def released(bench: Bench, name: str) -> float:
    """Seconds from now (the driver has exited) until the group has no worker pod."""
    start = time.monotonic()

    async def gone() -> bool:
        return not await bench.role(name, "worker")

    await until(gone, within=900)
    return time.monotonic() - start


async def rounds(bench: Bench, count: int) -> dict[str, list[float]]:
    name = "reserve"
    await bench.cluster.apply(raycluster(name, replicas=0, autoscaling=True))
    await bench.alive(name, 1)
    head = (await bench.role(name, "head"))[0]["metadata"]["name"]
    samples: dict[str, list[float]] = {"0->1": [], "1->2": [], "0->2": [], "2->0": []}
    for i in range(count):
        for code in (ONE_THEN_TWO, TWO):
            result = await bench.driver(head, code)
            for key, value in result.items():
                samples[key].append(value)
            samples["2->0"].append(await released(bench, name))
        print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in samples.items()))
    await bench.delete_and_wait(name)
    return samples


async def run(count: int) -> None:
    async with DevCluster(nodes=NODES, runtime="process", kubelet_delay=0.05) as cluster:
        await cluster.apply(crd_manifest())
        kube = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
        op_client = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
        options = ManagerOptions.from_flat(
            metrics_addr=None, health_addr=None, leader_elect=False, identity="b"
        )
        manager = Manager(op_client, options)
        task = asyncio.create_task(manager.run())
        try:

            async def synced() -> bool:
                return manager.synced()

            await until(synced, within=30)
            samples = await rounds(Bench(cluster, kube), count)
        finally:
            manager.stop()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(task, 15)
            await kube.close()
            await op_client.close()
    print(
        "medians (s): " + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in samples.items())
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    ok, why = process_runtime_available()
    if not ok:
        raise SystemExit(why)
    asyncio.run(run(args.rounds))


if __name__ == "__main__":
    main()
