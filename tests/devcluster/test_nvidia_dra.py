"""The simulated NVIDIA DRA driver (devkube/addons/nvidia): ComputeDomain CRD and device
classes installed, channel devices published per IMEX node, a claim template per domain,
channels prepared only inside one clique, member nodes labelled, status Ready with them, and
everything cleaned up with the domain."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devkube import DevCluster, addons_for
from devkube.addons.nvidia.driver import CHANNEL_DIR, NvidiaDraDriver
from tests.harness.cluster import start_dev_cluster, stop_dev_cluster

NODES = ["gpu:gb200:4:2", "cpu:1"]
NS = "default"
CDS = f"/apis/resource.nvidia.com/v1beta1/namespaces/{NS}/computedomains"
R = "/apis/resource.k8s.io/v1"
PODS = f"/api/v1/namespaces/{NS}/pods"
CLIQUE = "nvidia.com/gpu.clique"
DOMAIN_LABEL = "resource.nvidia.com/computeDomain"


@pytest.fixture
async def cluster() -> AsyncIterator[DevCluster]:
    started = await start_dev_cluster(NODES, addons=addons_for(NODES))
    try:
        yield started
    finally:
        await stop_dev_cluster(started)


def test_addons_only_for_imex_gpus() -> None:
    assert [type(a) for a in addons_for(NODES)] == [NvidiaDraDriver]
    assert addons_for(["gpu:h100:2", "cpu:2"]) == []
    assert addons_for(["tpu:v6e:4x4"]) == []


def domain(name: str, hosts: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": name},
        "spec": {"numNodes": hosts, "channel": {"resourceClaimTemplate": {"name": name}}},
    }


def member(name: str, template: str, clique: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceClaims": [{"name": "imex", "resourceClaimTemplateName": template}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "imex"}]}}],
    }
    if clique is not None:
        spec["nodeSelector"] = {CLIQUE: clique}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def test_a_domain_gets_its_template_its_nodes_and_goes_clean(
    cluster: DevCluster, eventually: Any
) -> None:
    client = cluster.client
    slices = (await client.list(f"{R}/resourceslices"))["items"]
    gpu_nodes = [n for n in cluster.node_manifests if CLIQUE in n["metadata"]["labels"]]
    assert {s["spec"]["nodeName"] for s in slices} == {n["metadata"]["name"] for n in gpu_nodes}
    assert {d["name"] for d in slices[0]["spec"]["devices"]} == {"channel-0", "daemon-0"}
    classes = {c["metadata"]["name"] for c in (await client.list(f"{R}/deviceclasses"))["items"]}
    assert {
        "compute-domain-default-channel.nvidia.com",
        "compute-domain-daemon.nvidia.com",
    } <= classes

    created = await client.create(CDS, domain("cd-a", 4))
    uid = created["metadata"]["uid"]

    async def template_made() -> dict[str, Any]:
        items = (await client.list(f"{R}/namespaces/{NS}/resourceclaimtemplates"))["items"]
        assert [t["metadata"]["name"] for t in items] == ["cd-a"]
        return dict(items[0])

    template = await eventually(template_made)
    config = template["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert config["domainID"] == uid and config["allocationMode"] == "Single"
    assert (await client.get(f"{CDS}/cd-a"))["status"]["status"] == "NotReady"

    clique = gpu_nodes[0]["metadata"]["labels"][CLIQUE]
    for i in range(4):
        await client.create(PODS, member(f"m{i}", "cd-a", clique))

    async def ready() -> dict[str, Any]:
        cd = await client.get(f"{CDS}/cd-a")
        assert cd["status"]["status"] == "Ready"
        return cd

    cd = await eventually(ready)
    assert len(cd["status"]["nodes"]) == 4
    assert {n["cliqueID"] for n in cd["status"]["nodes"]} == {clique}
    assert sorted(n["index"] for n in cd["status"]["nodes"]) == [0, 1, 2, 3]
    nodes = (await client.list("/api/v1/nodes"))["items"]
    labelled = {
        n["metadata"]["name"] for n in nodes if n["metadata"]["labels"].get(DOMAIN_LABEL) == uid
    }
    assert labelled == {n["name"] for n in cd["status"]["nodes"]}

    # A fifth member in the other clique is allocated a channel there but never prepared: the
    # domain stays inside one clique, and the pod waits with the driver's reason.
    other = next(
        n["metadata"]["labels"][CLIQUE]
        for n in gpu_nodes
        if n["metadata"]["labels"][CLIQUE] != clique
    )
    await client.create(PODS, member("stray", "cd-a", other))

    async def refused() -> None:
        events = (await client.list(f"/api/v1/namespaces/{NS}/events"))["items"]
        reasons = [
            e["message"]
            for e in events
            if e["involvedObject"]["name"] == "stray"
            and e["reason"] == "FailedPrepareDynamicResources"
        ]
        assert any("is in clique" in m for m in reasons), reasons

    await eventually(refused)
    stray = await client.get(f"{PODS}/stray")
    assert stray["status"].get("phase") == "Pending"

    for name in ("m0", "m1", "m2", "m3", "stray"):
        await client.delete(f"{PODS}/{name}", grace_period_seconds=0)

    async def released() -> None:
        nodes = (await client.list("/api/v1/nodes"))["items"]
        assert not [n for n in nodes if DOMAIN_LABEL in n["metadata"]["labels"]]
        assert (await client.get(f"{CDS}/cd-a"))["status"]["status"] == "NotReady"
        assert (await client.list(f"{R}/namespaces/{NS}/resourceclaims"))["items"] == []

    await eventually(released)
    await client.delete(f"{CDS}/cd-a")

    async def gone() -> None:
        assert (await client.list(CDS))["items"] == []
        assert (await client.list(f"{R}/namespaces/{NS}/resourceclaimtemplates"))["items"] == []

    await eventually(gone)


@pytest.mark.process_runtime
async def test_process_runtime_shows_the_channel_inside_the_pod_only(eventually: Any) -> None:
    nodes = ["gpu:gb200:2"]
    cluster = await start_dev_cluster(nodes, runtime="process", addons=addons_for(nodes))
    try:
        client = cluster.client
        await client.create(CDS, domain("cd-p", 2))

        async def template_made() -> None:
            items = (await client.list(f"{R}/namespaces/{NS}/resourceclaimtemplates"))["items"]
            assert items

        await eventually(template_made)
        pod = member("p0", "cd-p", None)
        pod["spec"]["containers"][0]["command"] = [
            "sh",
            "-c",
            "ls /dev/nvidia-caps-imex-channels; echo listed; exec sleep 3600",
        ]
        await client.create(PODS, pod)

        async def listed() -> str:
            log = await client.request("GET", f"{PODS}/p0/log")
            text = str(log.get("message", log))
            assert "listed" in text
            return text

        text = await eventually(listed)
        assert text.split() == ["channel0", "listed"]
        # The host keeps only the (empty) mount point; the channel is the pod's alone.
        assert os.listdir(CHANNEL_DIR) == []
    finally:
        await stop_dev_cluster(cluster)
