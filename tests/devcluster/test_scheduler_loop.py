"""The scheduler loop against a running dev cluster: slices of TPU hosts via the API."""

from __future__ import annotations

import asyncio
from typing import Any

from devkube import DevCluster

PODS = "/api/v1/namespaces/default/pods"
POOL = "cloud.google.com/gke-nodepool"


def host(replica: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{replica}-{index}", "labels": {"replica": replica}},
        "spec": {
            "nodeSelector": {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"},
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"replica": replica}},
                            "topologyKey": POOL,
                        }
                    ]
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {
                                "matchExpressions": [
                                    {"key": "replica", "operator": "Exists"},
                                    {"key": "replica", "operator": "NotIn", "values": [replica]},
                                ]
                            },
                            "topologyKey": POOL,
                        }
                    ]
                },
            },
            "containers": [
                {"name": "ray", "image": "ray", "resources": {"limits": {"google.com/tpu": 4}}}
            ],
        },
    }


async def test_slices_fill_whole_pools_and_the_extra_slice_waits_with_a_reason(
    dev_cluster: DevCluster, eventually: Any
) -> None:
    client = dev_cluster.client
    await asyncio.gather(*(client.create(PODS, host(r, h)) for r in ("a", "b") for h in range(4)))

    async def placed() -> dict[str, str]:
        pods = (await client.list(PODS))["items"]
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
        assert all(nodes.get(f"{r}-{h}") for r in ("a", "b") for h in range(4)), nodes
        return {k: v for k, v in nodes.items() if v}

    await eventually(placed)
    nodes = await placed()
    pools = {r: {nodes[f"{r}-{h}"].rsplit("-", 1)[0] for h in range(4)} for r in ("a", "b")}
    assert len(pools["a"]) == len(pools["b"]) == 1 and pools["a"] != pools["b"]

    await client.create(PODS, host("c", 0))

    async def waits() -> None:
        status = (await client.get(f"{PODS}/c-0"))["status"]
        scheduled = [c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"]
        assert scheduled and scheduled[0]["reason"] == "Unschedulable"
        assert "Insufficient google.com/tpu" in scheduled[0]["message"]

    await eventually(waits)

    async def warned() -> None:
        events = (await client.list("/api/v1/namespaces/default/events"))["items"]
        reasons = {(e["involvedObject"]["name"], e["reason"]) for e in events}
        assert ("c-0", "FailedScheduling") in reasons
        assert ("a-0", "Scheduled") in reasons

    await eventually(warned)

    # Freeing a pool lets the waiting slice in.
    for h in range(4):
        await client.delete(f"{PODS}/a-{h}")

    async def bound() -> None:
        assert (await client.get(f"{PODS}/c-0"))["spec"].get("nodeName")

    await eventually(bound)
