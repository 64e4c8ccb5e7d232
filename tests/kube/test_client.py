"""The adapter against a real HTTPS API server: dicts in and out, errors mapped."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkube.server import ApiServer
from raycluster_operator.kube import (
    CRDS,
    LEASES,
    PODS,
    RAYCLUSTERS,
    AlreadyExists,
    Conflict,
    Gone,
    KubeClient,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
)


def pod(generate: str = "p-", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": generate, "labels": labels},
        "spec": {"containers": [{"name": "ray", "image": "rayproject/ray"}]},
    }


async def test_create_list_get_delete_round_trip(kube: KubeClient) -> None:
    created = await kube.create(PODS, pod(**{"ray.io/cluster": "c"}), namespace="default")
    name = created["metadata"]["name"]
    assert name.startswith("p-")
    listing = await kube.list(PODS, "default", label_selector="ray.io/cluster=c")
    assert [p["metadata"]["name"] for p in listing.items] == [name]
    assert int(listing.resource_version) >= int(created["metadata"]["resourceVersion"])
    assert (await kube.get(PODS, "default", name))["metadata"]["uid"] == created["metadata"]["uid"]
    await kube.delete(PODS, "default", name, grace_period=0, uid=created["metadata"]["uid"])
    with pytest.raises(NotFound):
        await kube.get(PODS, "default", name)
    assert kube.counts["create"] == 1 and kube.counts["delete"] == 1
    assert kube.writes == 2


async def test_delete_precondition_protects_a_namesake(kube: KubeClient) -> None:
    created = await kube.create(PODS, {**pod(), "metadata": {"name": "fixed"}}, namespace="default")
    with pytest.raises(Conflict):
        await kube.delete(PODS, "default", "fixed", uid="not-" + created["metadata"]["uid"])
    with pytest.raises(AlreadyExists):
        await kube.create(PODS, {**pod(), "metadata": {"name": "fixed"}}, namespace="default")


async def test_watch_yields_changes_after_the_listed_version(kube: KubeClient) -> None:
    listing = await kube.list(PODS, "default")
    events: list[tuple[str, str]] = []

    async def watch() -> None:
        async for etype, obj in kube.watch(
            PODS, "default", resource_version=listing.resource_version, timeout_seconds=5
        ):
            if etype != "BOOKMARK":
                events.append((etype, obj["metadata"]["name"]))
            if len(events) == 2:
                return

    task = asyncio.create_task(watch())
    created = await kube.create(PODS, pod(), namespace="default")
    await kube.delete(PODS, "default", created["metadata"]["name"], grace_period=0)
    await asyncio.wait_for(task, 10)
    name = created["metadata"]["name"]
    assert events[0] == ("ADDED", name)
    assert events[-1][1] == name and events[-1][0] in ("MODIFIED", "DELETED")


async def test_watch_from_a_compacted_version_raises_gone() -> None:
    async with ApiServer(history_size=2) as server:
        kube = KubeClient.from_kubeconfig(server.kubeconfig_dict())
        old = (await kube.list(PODS, "default")).resource_version
        for _ in range(6):
            await kube.create(PODS, pod(), namespace="default")
        with pytest.raises(Gone):
            async for _ in kube.watch(PODS, "default", resource_version=old, timeout_seconds=2):
                pass
        await kube.close()


async def test_status_is_merge_patched_through_the_subresource(
    kube: KubeClient, raycluster_crd: dict[str, Any]
) -> None:
    await kube.create(CRDS, raycluster_crd)
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "default"},
        "spec": {"headGroupSpec": {"template": {}}},
    }
    for _ in range(50):
        try:
            created = await kube.create(RAYCLUSTERS, cluster)
            break
        except (NotFound, KubeError):
            await asyncio.sleep(0.05)
    patched = await kube.patch_status(RAYCLUSTERS, "default", "rc", {"state": "ready"})
    assert patched["status"] == {"state": "ready"}
    assert patched["spec"] == created["spec"]
    patched = await kube.patch_status(RAYCLUSTERS, "default", "rc", {"state": None, "x": 1})
    assert patched["status"] == {"x": 1}


async def test_leases_are_compare_and_swap(kube: KubeClient) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l", "namespace": "default"},
        "spec": {"holderIdentity": "a"},
    }
    first = await kube.create_lease(lease)
    second = await kube.replace_lease({**first, "spec": {"holderIdentity": "b"}})
    assert (await kube.get_lease("default", "l"))["spec"]["holderIdentity"] == "b"
    with pytest.raises(Conflict):
        await kube.replace_lease({**first, "spec": {"holderIdentity": "c"}})
    assert second["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    assert LEASES.plural == "leases"


async def test_events_are_created_in_events_k8s_io(kube: KubeClient) -> None:
    event = await kube.create_event(
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "e1", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "t",
            "reportingInstance": "t",
            "action": "Test",
            "reason": "Tested",
            "type": "Normal",
            "regarding": {"kind": "Pod", "name": "x", "namespace": "default"},
        }
    )
    assert event["reason"] == "Tested"
    patched = await kube.patch_event(
        "default", "e1", {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}}
    )
    assert patched["series"]["count"] == 2


async def test_throttling_is_retried_after_the_servers_delay(
    api_server: ApiServer, kube: KubeClient
) -> None:
    rule = api_server.faults.fail("list", "pods", code=429, retry_after=1)
    task = asyncio.create_task(kube.list(PODS, "default"))
    await asyncio.sleep(0.2)
    api_server.faults.rules.remove(rule)
    await asyncio.wait_for(task, 10)
    assert kube.counts["list"] >= 2


async def test_persistent_throttling_surfaces_as_too_many_requests(api_server: ApiServer) -> None:
    kube = KubeClient.from_kubeconfig(api_server.kubeconfig_dict())
    kube._max_throttled_retries = 1
    api_server.faults.fail("get", "pods", code=429, retry_after=0)
    with pytest.raises(TooManyRequests):
        await kube.get(PODS, "default", "x")
    api_server.faults.clear()
    api_server.faults.fail("get", "pods", code=503)
    with pytest.raises(ServerError):
        await kube.get(PODS, "default", "x")
    await kube.close()


async def test_tls_is_verified_unless_explicitly_disabled(
    api_server: ApiServer, tmp_path: Path
) -> None:
    config = api_server.kubeconfig_dict()
    del config["clusters"][0]["cluster"]["certificate-authority-data"]
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    unverified = KubeClient.from_kubeconfig(path)
    with pytest.raises(ServerError):
        await unverified.list(PODS, "default")
    await unverified.close()
    insecure = KubeClient.from_kubeconfig(path, insecure=True)
    assert (await insecure.list(PODS, "default")).resource_version
    await insecure.close()


async def test_wrong_token_is_forbidden(api_server: ApiServer) -> None:
    config = api_server.kubeconfig_dict()
    config["users"][0]["user"]["token"] = "wrong"
    kube = KubeClient.from_kubeconfig(config)
    with pytest.raises(KubeError) as info:
        await kube.list(PODS, "default")
    assert info.value.code == 401
    await kube.close()


async def test_exec_credential_plugins_supply_the_token(
    api_server: ApiServer, tmp_path: Path
) -> None:
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": api_server.token},
    }
    plugin = tmp_path / "credential.py"
    plugin.write_text(f"print({json.dumps(json.dumps(credential))})\n")
    config = api_server.kubeconfig_dict()
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin)],
        }
    }
    kube = KubeClient.from_kubeconfig(config)
    assert (await kube.list(PODS, "default")).resource_version
    await kube.close()
