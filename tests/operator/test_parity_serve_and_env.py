"""KubeRay's serve service and the GKE TPU webhook's env, through the dev cluster with the real
kubectl: ``<cluster>-serve-svc`` for an annotated RayCluster selecting its serving pods, and
TPU v7x pods with two TPU containers, each its own TPU worker (the webhook's per-container
``TPU_WORKER_ID``, ``TPU_PROCESS_ADDRESSES``/``TPU_PROCESS_PORT``, device-plugin address)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from parity_kubectl import Kubectl

from tests.harness.operator_world import World, cpu_group, eventually, raycluster, running_world


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


async def test_the_serve_service_selects_the_serving_pods(world: World, tmp_path: Path) -> None:
    kubectl = Kubectl(world.cluster, tmp_path)
    await world.start_operator()
    obj = raycluster("srv", [cpu_group("g", replicas=2, hosts=2)])
    obj["metadata"]["annotations"] = {"ray.io/enable-serve-service": "true"}
    await kubectl.apply(obj)

    async def service() -> dict[str, Any]:
        svc: dict[str, Any] = await kubectl.json("get", "service", "srv-serve-svc")
        return svc

    svc = await eventually(service, within=30)
    assert svc["spec"]["selector"] == {"ray.io/cluster": "srv", "ray.io/serve": "true"}
    assert [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [("serve", 8000)]
    assert svc["metadata"]["labels"]["ray.io/serve"] == "srv-serve"
    assert svc["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayCluster"
    assert svc["metadata"]["ownerReferences"][0]["name"] == "srv"

    async def every_pod_serves() -> None:
        selector = ",".join(f"{k}={v}" for k, v in svc["spec"]["selector"].items())
        serving = (await kubectl.json("get", "pods", "-l", selector))["items"]
        assert len(serving) == 5

    await eventually(every_pod_serves, within=30)

    # Without the annotation there is no serve service.
    await kubectl.apply(raycluster("plain", [cpu_group("g", replicas=1)]))

    async def head_service_only() -> None:
        names = (await kubectl("get", "services", "-o", "name")).split()
        assert "service/plain-head-svc" in names
        assert "service/plain-serve-svc" not in names

    await eventually(head_service_only, within=30)


@pytest.fixture
async def v7x_world() -> AsyncIterator[World]:
    async with running_world(["tpu:tpu7x:2x2x4:1", "cpu:4"]) as w:
        yield w


def v7x_group() -> dict[str, Any]:
    """A TPU v7x 2x2x4 slice (16 chips, 4 hosts of 4 chips), two TPU containers per pod."""
    chips = {"cpu": "100m", "memory": "128Mi", "google.com/tpu": "2"}
    ray = {
        "name": "ray-worker",
        "image": "rayproject/ray:2.60.0",
        "resources": {"requests": chips, "limits": chips},
    }
    second = copy.deepcopy(ray) | {"name": "jax-1"}
    return {
        "groupName": "v7x",
        "replicas": 1,
        "numOfHosts": 4,
        "rayStartParams": {},
        "template": {
            "spec": {
                "nodeSelector": {
                    "cloud.google.com/gke-tpu-accelerator": "tpu7x",
                    "cloud.google.com/gke-tpu-topology": "2x2x4",
                },
                "containers": [ray, second],
            }
        },
    }


async def test_v7x_pods_get_one_tpu_worker_per_container(v7x_world: World, tmp_path: Path) -> None:
    kubectl = Kubectl(v7x_world.cluster, tmp_path)
    await v7x_world.start_operator()
    await kubectl.apply(raycluster("ir", [v7x_group()]))

    async def four_hosts() -> list[dict[str, Any]]:
        pods = [
            p
            for p in await kubectl.pods("ir")
            if p["metadata"]["labels"].get("ray.io/node-type") == "worker"
        ]
        assert len(pods) == 4
        return pods

    pods = await eventually(four_hosts, within=30)
    ids: list[int] = []
    for pod in pods:
        host = int(pod["metadata"]["labels"]["ray.io/replica-host-index"])
        first, second = (env_of(c) for c in pod["spec"]["containers"])
        assert (first["TPU_WORKER_ID"], second["TPU_WORKER_ID"]) == (
            str(2 * host),
            str(2 * host + 1),
        )
        assert (first["TPU_PROCESS_PORT"], second["TPU_PROCESS_PORT"]) == ("8476", "8477")
        addresses = first["TPU_PROCESS_ADDRESSES"].split(",")
        assert addresses == [
            f"v7x-0-{h}.ir-headless:{port}" for h in range(4) for port in (8476, 8477)
        ]
        assert second["TPU_PROCESS_ADDRESSES"] == first["TPU_PROCESS_ADDRESSES"]
        assert first["TPU_NAME"] == second["TPU_NAME"] == "v7x-0"
        assert first["TPU_DEVICE_PLUGIN_HOST_IP"] == {
            "fieldRef": {"apiVersion": "v1", "fieldPath": "status.hostIP"}
        }
        assert first["TPU_DEVICE_PLUGIN_ADDR"] == "$(TPU_DEVICE_PLUGIN_HOST_IP):2112"
        ids += [int(first["TPU_WORKER_ID"]), int(second["TPU_WORKER_ID"])]
    assert sorted(ids) == list(range(8))

    # The slice is placed whole on the v7x node pool and runs.
    async def running() -> None:
        now = await four_hosts()
        assert all(p["status"].get("phase") == "Running" for p in now)

    await eventually(running, within=30)
