"""Dynamic Resource Allocation on the dev cluster: a claim generated per pod from a template,
allocated by the scheduler from ResourceSlices through a DeviceClass selector, reserved for
the pod, released and deleted with it; an unallocatable claim leaves the pod Pending with
kube-scheduler's reason."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from devkube import DevCluster
from devkube.scheduler.dra import selector_matches
from tests.harness.cluster import start_dev_cluster, stop_dev_cluster

R = "/apis/resource.k8s.io/v1"
NS = "default"
DRIVER = "gpu.example.com"


@pytest.fixture
async def cluster() -> AsyncIterator[DevCluster]:
    started = await start_dev_cluster(["cpu:2"])
    try:
        yield started
    finally:
        await stop_dev_cluster(started)


def test_selector_forms() -> None:
    device = {"name": "d", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}}
    driver = "compute-domain.nvidia.com"
    expr = (
        "device.driver == 'compute-domain.nvidia.com' && "
        "device.attributes['compute-domain.nvidia.com'].type == 'channel' && "
        "device.attributes['compute-domain.nvidia.com'].id == 0"
    )
    assert selector_matches(expr, driver, device)
    assert not selector_matches(expr.replace("== 0", "== 1"), driver, device)
    assert not selector_matches(expr.replace("'channel'", "'daemon'"), driver, device)
    assert not selector_matches("device.driver == 'other'", driver, device)
    # An id compared as a string is another type: no match, as CEL's no-overload error.
    assert not selector_matches(expr.replace("== 0", "== '0'"), driver, device)
    assert not selector_matches("size(device.attributes) > 0", driver, device)


async def setup_devices(cluster: DevCluster, nodes: list[str]) -> None:
    await cluster.client.create(
        f"{R}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.example.com"},
            "spec": {
                "selectors": [
                    {"cel": {"expression": f"device.driver == '{DRIVER}'"}},
                    {"cel": {"expression": f"device.attributes['{DRIVER}'].kind == 'gpu'"}},
                ]
            },
        },
    )
    for node in nodes:
        await cluster.client.create(
            f"{R}/resourceslices",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-gpu"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {"name": "gpu-0", "attributes": {"kind": {"string": "gpu"}}},
                        {"name": "nic-0", "attributes": {"kind": {"string": "nic"}}},
                    ],
                },
            },
        )
    await cluster.client.create(
        f"{R}/namespaces/{NS}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
                        ]
                    }
                }
            },
        },
    )


async def claimer(cluster: DevCluster, name: str) -> dict[str, Any]:
    return await cluster.client.create(
        f"/api/v1/namespaces/{NS}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [
                    {"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}
                ],
            },
        },
    )


async def test_claims_are_generated_allocated_reserved_and_released(
    cluster: DevCluster, eventually: Any
) -> None:
    nodes = cluster.node_names
    await setup_devices(cluster, nodes)
    pods = [await claimer(cluster, f"p{i}") for i in range(3)]
    pod_path = f"/api/v1/namespaces/{NS}/pods"

    async def two_running_one_pending() -> dict[str, dict[str, Any]]:
        seen = {
            p["metadata"]["name"]: await cluster.client.get(f"{pod_path}/{p['metadata']['name']}")
            for p in pods
        }
        bound = [p for p in seen.values() if p["spec"].get("nodeName")]
        assert len(bound) == 2
        # The pending pod's claim and status are written apart from the bindings: wait for
        # them too, or a loaded machine reads them before they exist.
        assert all((p.get("status") or {}).get("resourceClaimStatuses") for p in seen.values())
        return seen

    seen = await eventually(two_running_one_pending)
    claims = (await cluster.client.list(f"{R}/namespaces/{NS}/resourceclaims"))["items"]
    by_owner = {c["metadata"]["ownerReferences"][0]["name"]: c for c in claims}
    assert set(by_owner) == {"p0", "p1", "p2"}
    used_nodes = set()
    for name, pod in seen.items():
        claim = by_owner[name]
        assert claim["metadata"]["name"].startswith(f"{name}-gpu-")
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
        assert pod["status"]["resourceClaimStatuses"] == [
            {"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}
        ]
        node = pod["spec"].get("nodeName")
        if node is None:
            pending = pod
            assert "allocation" not in claim.get("status", {})
            continue
        used_nodes.add(node)
        allocation = claim["status"]["allocation"]
        assert allocation["devices"]["results"] == [
            {"request": "gpu", "driver": DRIVER, "pool": node, "device": "gpu-0"}
        ]
        term = allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
        assert term == {"key": "metadata.name", "operator": "In", "values": [node]}
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}
        ]
    assert used_nodes == set(nodes)

    async def unschedulable() -> None:
        pod = await cluster.client.get(f"{pod_path}/{pending['metadata']['name']}")
        # No condition yet is "not yet" (an AssertionError), not a KeyError ending the wait.
        conditions = {c["type"]: c for c in pod["status"].get("conditions") or []}
        assert "PodScheduled" in conditions, pod["status"]
        scheduled = conditions["PodScheduled"]
        assert scheduled["reason"] == "Unschedulable"
        assert scheduled["message"] == "0/2 nodes are available: 2 cannot allocate all claims."

    await eventually(unschedulable)

    # One holder goes: its claim goes with it and the pending pod gets the freed device.
    holder = next(n for n, p in seen.items() if p["spec"].get("nodeName"))
    await cluster.client.delete(f"{pod_path}/{holder}", grace_period_seconds=0)

    async def handed_over() -> None:
        pod = await cluster.client.get(f"{pod_path}/{pending['metadata']['name']}")
        assert pod["spec"].get("nodeName") == seen[holder]["spec"]["nodeName"]
        left = (await cluster.client.list(f"{R}/namespaces/{NS}/resourceclaims"))["items"]
        owners = {c["metadata"]["ownerReferences"][0]["name"] for c in left}
        assert holder not in owners

    await eventually(handed_over)
    for pod in pods:
        if pod["metadata"]["name"] == holder:
            continue
        await cluster.client.delete(f"{pod_path}/{pod['metadata']['name']}", grace_period_seconds=0)

    async def none_left() -> None:
        left = (await cluster.client.list(f"{R}/namespaces/{NS}/resourceclaims"))["items"]
        assert left == []

    await eventually(none_left)
