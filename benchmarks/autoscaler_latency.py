"""How fast the operator acts on Ray's own autoscaler, measured on the dev cluster.

Ray's v2 `KubeRayProvider` (from the installed `ray` package, unmodified) scales a TPU v6e 4x4
group (4 hosts per slice) of a RayCluster run by the operator. Each round:

- terminate: Ray names one host of a slice; we time from the start of Ray's call to the moment
  every pod of that slice carries a deletionTimestamp (Ray refuses all scaling until then);
- launch: Ray asks for one more slice; we time from the start of Ray's call to every pod of the
  new slice Running (includes the simulated kubelet's start delay).

Times come from a watch on the pods, so polling adds nothing. Ray's call itself (GET cluster,
LIST pods, PATCH) is part of each figure; its own duration is printed too. Goal: a terminate
fully acted on within one reconcile, under 200 ms.

    .venv/bin/python benchmarks/autoscaler_latency.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import requests

from devkube.cluster import DevCluster
from raycluster_operator.controller.crds import crd_manifest
from raycluster_operator.controller.manager import Manager, ManagerOptions
from raycluster_operator.kube.client import KubeClient

T = TypeVar("T")
HOSTS = 4
KUBELET_DELAY = 0.02
GOAL_TERMINATE_S = 0.200
NAME = "bench"
NS = "default"
REPLICA_NAME = "ray.io/worker-group-replica-name"
REPLICA_INDEX = "ray.io/worker-group-replica-index"


class Loop:
    """The dev cluster and the operator live on this loop; Ray's blocking calls stay outside."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


class Watch:
    """A local copy of some objects fed by a watch; waits report the deciding event's time."""

    def __init__(self, url: str, token: str, ca: str, path: str, selector: str = "") -> None:
        self.state: dict[str, dict[str, Any]] = {}
        self.cond = threading.Condition()
        self.last_event = 0.0
        self._resp = requests.get(
            f"{url}{path}",
            params={"watch": "1", "labelSelector": selector},
            headers={"Authorization": f"Bearer {token}"},
            verify=ca,
            stream=True,
            timeout=(5, None),
        )
        self._resp.raise_for_status()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        with contextlib.suppress(Exception):
            for line in self._resp.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                pod = event["object"]
                with self.cond:
                    name = pod["metadata"]["name"]
                    if event["type"] == "DELETED":
                        self.state.pop(name, None)
                    else:
                        self.state[name] = pod
                    self.last_event = time.monotonic()
                    self.cond.notify_all()

    def wait(
        self, what: str, check: Callable[[list[dict[str, Any]]], bool], timeout: float = 30
    ) -> float:
        """Block until `check(pods)` holds; return the arrival time of the event that made it."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not check(list(self.state.values())):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(what)
                self.cond.wait(left)
            return self.last_event


def live(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if "deletionTimestamp" not in p["metadata"]]


def running(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and "running" in statuses[0].get("state", {})


def slices(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in live(pods):
        labels = pod["metadata"].get("labels") or {}
        if labels.get("ray.io/group") == "tpu" and REPLICA_NAME in labels:
            out.setdefault(labels[REPLICA_NAME], []).append(pod)
    return out


def running_slices(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {
        name: members
        for name, members in slices(pods).items()
        if len(members) == HOSTS and all(running(p) for p in members)
    }


def raycluster() -> dict[str, Any]:
    def container(name: str, limits: dict[str, str]) -> dict[str, Any]:
        return {
            "name": name,
            "image": "rayproject/ray:2.60.0",
            "resources": {"limits": limits, "requests": limits},
        }

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "enableInTreeAutoscaling": True,
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-head", {"cpu": "1"})]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "tpu",
                    "replicas": 2,
                    "minReplicas": 0,
                    "maxReplicas": 3,
                    "numOfHosts": HOSTS,
                    "rayStartParams": {},
                    "template": {
                        "spec": {
                            "nodeSelector": {
                                "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                "cloud.google.com/gke-tpu-topology": "4x4",
                            },
                            "containers": [
                                container("ray-worker", {"cpu": "1", "google.com/tpu": "4"})
                            ],
                        }
                    },
                }
            ],
        },
    }


def summary(label: str, values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))]
    return (
        f"{label:<34} median {statistics.median(ms):7.1f} ms   p90 {p90:7.1f} ms"
        f"   max {ms[-1]:7.1f} ms   (n={len(ms)})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    loop = Loop()
    cluster = DevCluster(
        port=port,
        nodes=["tpu:v6e:4x4:4", "cpu:2"],
        kubelet_delay=KUBELET_DELAY,
        termination_cap=0.1,
    )
    loop.run(cluster.start())
    tmp = Path(tempfile.mkdtemp(prefix="autoscaler-latency-"))
    ca, token = tmp / "ca.crt", tmp / "token"
    ca.write_bytes(cluster.ca_pem)
    token.write_text(cluster.token)

    # Ray's in-cluster configuration, set before its module is imported (it is read then).
    os.environ.update(
        KUBERNETES_SERVICE_HOST="127.0.0.1",
        KUBERNETES_SERVICE_PORT_HTTPS=str(port),
        RAY_KUBERAY_CA_CERT_PATH=str(ca),
    )
    node_provider = importlib.import_module("ray.autoscaler._private.kuberay.node_provider")
    node_provider.IN_CLUSTER_TOKEN_PATH = str(token)
    from ray.autoscaler._private.kuberay.autoscaling_config import AutoscalingConfigProducer
    from ray.autoscaler.v2.instance_manager.cloud_providers.kuberay.cloud_provider import (
        KubeRayProvider,
    )

    logging.getLogger("ray").setLevel(logging.WARNING)
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {cluster.token}"

    def post(path: str, body: dict[str, Any]) -> None:
        resp = http.post(cluster.url + path, json=body, verify=str(ca))
        resp.raise_for_status()

    async def start_operator() -> tuple[KubeClient, Manager, asyncio.Task[None]]:
        client = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
        options = ManagerOptions.from_flat(metrics_addr=None, health_addr=None, leader_elect=False)
        manager = Manager(client, options)
        return client, manager, asyncio.create_task(manager.run())

    post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd_manifest())
    client, manager, operator = loop.run(start_operator())
    watch = Watch(
        cluster.url,
        cluster.token,
        str(ca),
        f"/api/v1/namespaces/{NS}/pods",
        f"ray.io/cluster={NAME}",
    )
    spec_watch = Watch(
        cluster.url, cluster.token, str(ca), f"/apis/ray.io/v1/namespaces/{NS}/rayclusters"
    )
    try:
        post(f"/apis/ray.io/v1/namespaces/{NS}/rayclusters", raycluster())
        watch.wait("two running slices", lambda pods: len(running_slices(pods)) == 2)
        config = AutoscalingConfigProducer(NAME, NS)()
        provider_config = dict(config["provider"], head_node_type=config["head_node_type"])
        provider = KubeRayProvider(NAME, provider_config, gcs_client=None)

        terminate, launch, ray_calls, reconciles = [], [], [], []
        after_patch, launch_after_patch = [], []

        def generation() -> int:
            with spec_watch.cond:
                return int(spec_watch.state[NAME]["metadata"]["generation"])

        def patched(since: int) -> float:
            return spec_watch.wait(
                "Ray's patch",
                lambda objs: any(o["metadata"]["generation"] > since for o in objs),
            )

        for r in range(args.rounds):
            current = running_slices(list(watch.state.values()))
            oldest = min(
                current.values(), key=lambda m: int(m[0]["metadata"]["labels"][REPLICA_INDEX])
            )
            victims = {p["metadata"]["name"] for p in oldest}
            victim = sorted(victims)[r % HOSTS]

            before = manager.reconciles
            gen = generation()
            t0 = time.monotonic()
            provider.terminate([victim], f"terminate-{r}")
            ray_calls.append(time.monotonic() - t0)
            done = watch.wait(
                "slice terminating",
                lambda pods, v=victims: not {p["metadata"]["name"] for p in live(pods)} & v,
            )
            terminate.append(done - t0)
            after_patch.append(done - patched(gen))
            reconciles.append(manager.reconciles - before)
            errors = provider.poll_errors()
            assert not errors, errors

            known = set(current)
            gen = generation()
            t0 = time.monotonic()
            provider.launch({"tpu": HOSTS}, f"launch-{r}")
            ray_calls.append(time.monotonic() - t0)
            errors = provider.poll_errors()
            assert not errors, errors
            done = watch.wait(
                "new slice running",
                lambda pods, k=known: (
                    len(running_slices(pods)) == 2 and bool(set(running_slices(pods)) - k)
                ),
            )
            launch.append(done - t0)
            launch_after_patch.append(done - patched(gen))
            # Let the terminated pods leave so the next round starts from a quiet cluster.
            watch.wait(
                "old pods removed",
                lambda pods, v=victims: not v & {p["metadata"]["name"] for p in pods},
            )

        print(
            f"ray {importlib.import_module('ray').__version__}, KubeRayProvider (autoscaler v2); "
            f"TPU v6e 4x4, {HOSTS} hosts per slice; {args.rounds} rounds; "
            f"simulated kubelet start delay {KUBELET_DELAY * 1000:.0f} ms"
        )
        print(summary("terminate -> whole slice deleting", terminate))
        print(summary("  of which Ray's patch -> deleting", after_patch))
        print(summary("launch -> whole slice Running", launch))
        print(summary("  of which Ray's patch -> Running", launch_after_patch))
        print(summary("Ray's own call (GET, LIST, PATCH)", ray_calls))
        print(f"{'reconciles finished meanwhile':<34} median {statistics.median(reconciles):7.1f}")
        ok = statistics.median(after_patch) < GOAL_TERMINATE_S
        verdict = "met" if ok else "MISSED"
        goal = f"{GOAL_TERMINATE_S * 1000:.0f} ms"
        print(f"goal: patch -> whole slice deleting, median under {goal}: {verdict}")
        return 0 if ok else 1
    finally:
        # The watch threads are daemons: they end with the server (closing a response that
        # another thread is reading would block on the SSL lock).
        loop.loop.call_soon_threadsafe(manager.stop)
        with contextlib.suppress(Exception):
            loop.run(_join(operator), timeout=15)
        loop.run(client.close())
        loop.run(cluster.stop())


async def _join(task: asyncio.Task[None]) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        await task


if __name__ == "__main__":
    sys.exit(main())
