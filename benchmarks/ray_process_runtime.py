"""Real Ray on the dev cluster's process runtime: a head and one TPU-like slice of workers.

Run (as root, Linux): .venv/bin/python benchmarks/ray_process_runtime.py [--hosts 2]

Creates plain pods (no operator): a head behind a ClusterIP service and `--hosts` workers with
hostname/subdomain under a headless service and the TPU env our builders set (TPU_NAME,
TPU_WORKER_ID, TPU_WORKER_HOSTNAMES), each `ray start --block` on its own loopback pod IP.
Prints: seconds to a live head, seconds until every worker joined, RSS per pod, Ray's view of
the nodes (TPU labels), a task per worker, pods' listening sockets on the wildcard address (a
shared-network hazard) and how long deletion takes. Not a test: it needs ~1.5 GB and ~30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

from devkube.cluster import DevCluster
from devkube.process import process_runtime_available
from devkube.process.pod import ProcessPod
from devkube.process.runtime import ProcessRuntime

T = TypeVar("T")
PODS = "/api/v1/namespaces/default/pods"
SERVICES = "/api/v1/namespaces/default/services"
POD_IP = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
# KubeRay's fixed ports: every pod would bind them if they were not per pod IP.
PORTS = "--metrics-export-port=8080 --dashboard-agent-listen-port=52365"

NODES = """
import json, ray
ray.init(address="auto", logging_level="ERROR")
print(json.dumps([{"ip": n["NodeManagerAddress"], "alive": n["Alive"],
                   "tpu": n["Resources"].get("TPU", 0),
                   "labels": {k: v for k, v in n.get("Labels", {}).items() if "tpu" in k}}
                  for n in ray.nodes()]))
"""

TASKS = """
import ray, socket, os
ray.init(address="auto", logging_level="ERROR")
@ray.remote(resources={"TPU": 4})
def where():
    import time; time.sleep(0.5)
    return socket.gethostname(), os.environ["TPU_WORKER_ID"]
print(sorted(ray.get([where.remote() for _ in range(%d)], timeout=120)))
"""


def pod(name: str, command: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    env = POD_IP + spec.pop("env", [])
    container = {"name": "ray", "image": "ignored", "command": ["sh", "-c", command], "env": env}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [container], "restartPolicy": "Never", **spec},
    }


def rss_mb(process_pod: ProcessPod) -> float:
    total = 0
    for pid in process_pod.sandbox.pids():
        try:
            with open(f"/proc/{pid}/status") as status:
                total += sum(int(x.split()[1]) for x in status if x.startswith("VmRSS:"))
        except OSError:
            pass
    return total / 1024


def _listeners() -> list[tuple[str, str]]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=False).stdout
    rows = []
    for line in out.splitlines():
        fields = line.split()
        rows.append((fields[3], fields[5] if len(fields) > 5 else ""))
    return rows


def wildcard_listeners() -> list[str]:
    """Sockets bound to every address: two pods binding the same such port would collide."""
    wild = ("0.0.0.0:", "*:", "[::]:")
    found = []
    for addr, proc in _listeners():
        if addr.startswith(wild):
            program = proc.split('"')[1] if '"' in proc else ""
            found.append(f"{addr} {program}")
    return sorted(found)


def fixed_port_listeners() -> list[str]:
    return sorted(addr for addr, _ in _listeners() if addr.endswith((":8080", ":52365")))


async def until(check: Callable[[], T | None]) -> T:
    for _ in itertools.count():
        value = check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("unreachable")


async def wait_pod(runtime: ProcessRuntime, name: str) -> ProcessPod:
    return await until(lambda: runtime.find("default", name))


async def wait_log(runtime: ProcessRuntime, name: str, text: bytes) -> None:
    await until(lambda: text in (runtime.read_log("default", name) or b""))


async def run(hosts: int) -> None:
    async with DevCluster(runtime="process") as cluster:
        runtime = cluster.kubelet.runtime
        assert isinstance(runtime, ProcessRuntime)
        for name, spec in (
            ("rc-head-svc", {"selector": {"role": "head"}, "ports": [{"port": 6379}]}),
            (
                "rc-headless",
                {
                    "selector": {"role": "worker"},
                    "clusterIP": "None",
                    "publishNotReadyAddresses": True,
                },
            ),
        ):
            body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}}
            await cluster.client.create(SERVICES, {**body, "spec": spec})
        start = time.monotonic()
        head_cmd = f"ray start --head --node-ip-address=$POD_IP --num-cpus=1 {PORTS} --block"
        await cluster.client.create(PODS, pod("head", head_cmd, {"role": "head"}))
        head = await wait_pod(runtime, "head")
        await wait_log(runtime, "head", b"Ray runtime started")
        print(f"head: Ray up {time.monotonic() - start:.1f} s after the pod was created")
        names = [f"tpu-0-{h}" for h in range(hosts)]
        hostnames = ",".join(f"{n}.rc-headless" for n in names)
        start = time.monotonic()
        for h, name in enumerate(names):
            tpu_env = [
                {"name": "TPU_NAME", "value": "tpu-0"},
                {"name": "TPU_WORKER_ID", "value": str(h)},
                {"name": "TPU_WORKER_HOSTNAMES", "value": hostnames},
                {"name": "TPU_ACCELERATOR_TYPE", "value": f"v6e-{4 * hosts}"},
                {"name": "TPU_TOPOLOGY", "value": "2x2" if hosts == 1 else f"2x{2 * hosts}"},
            ]
            command = (
                "ray start --address=rc-head-svc:6379 --node-ip-address=$POD_IP --num-cpus=1 "
                f"""--resources='{{"TPU": 4}}' {PORTS} --block"""
            )
            manifest = pod(name, command, {"role": "worker"}, env=tpu_env)
            manifest["spec"].update(hostname=name, subdomain="rc-headless")
            await cluster.client.create(PODS, manifest)
        workers = [await wait_pod(runtime, n) for n in names]
        await asyncio.gather(*(wait_log(runtime, n, b"Ray runtime started") for n in names))
        print(f"workers: all {hosts} joined {time.monotonic() - start:.1f} s after creation")
        print(f"RSS: head {rss_mb(head):.0f} MB, workers {[round(rss_mb(w)) for w in workers]} MB")
        env = dict(head.runners["ray"].launch.env)
        _, out = await head.sandbox.exec(["python", "-c", NODES], env, "/", 120)
        for node in json.loads(out.decode().strip().splitlines()[-1]):
            print("  node", node)
        _, out = await head.sandbox.exec(["python", "-c", TASKS % hosts], env, "/", 180)
        print("tasks ran on", out.decode().strip().splitlines()[-1])
        _, out = await workers[0].sandbox.exec(
            ["getent", "hosts", names[-1] + ".rc-headless"], env, "/", 10
        )
        print("worker 0 resolves", out.decode().strip())
        print("listening on the wildcard address:", wildcard_listeners())
        print("KubeRay's fixed ports bound at:", fixed_port_listeners())
        start = time.monotonic()
        for name in ["head", *names]:
            await cluster.client.delete(f"{PODS}/{name}")
        gone = [p.sandbox for p in [head, *workers]]
        await until(lambda: not runtime.pods and not any(s.pids() for s in gone))
        print(f"delete: every process of every pod gone after {time.monotonic() - start:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=2)
    args = parser.parse_args()
    ok, why = process_runtime_available()
    if not ok:
        raise SystemExit(why)
    asyncio.run(run(args.hosts))


if __name__ == "__main__":
    main()
