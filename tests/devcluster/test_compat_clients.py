"""The official `kubernetes` client and lightkube against the dev API server, unchanged."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import urllib3
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.core_v1 import ConfigMap as ConfigMapModel
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.types import OnErrorAction, OnErrorResult, PatchType

from devkube.server import ApiServer
from tests.harness.cluster import ThreadedServer, write_ca
from tests.harness.manifests import crd

# ---------------------------------------------------------------- the official client (sync)


@pytest.fixture
def threaded(tmp_path: Path) -> Iterator[tuple[ThreadedServer, kubernetes.client.CoreV1Api]]:
    runner = ThreadedServer(history_size=20)
    with runner as server:
        config = kubernetes.client.Configuration()
        config.host = server.url
        config.api_key = {"authorization": server.token}
        config.api_key_prefix = {"authorization": "Bearer"}
        config.ssl_ca_cert = str(write_ca(server, tmp_path / "ca.crt"))
        with kubernetes.client.ApiClient(config) as api:
            yield runner, kubernetes.client.CoreV1Api(api)


def configmap(name: str, **data: str) -> kubernetes.client.V1ConfigMap:
    return kubernetes.client.V1ConfigMap(
        metadata=kubernetes.client.V1ObjectMeta(name=name), data=data
    )


def test_official_client_crud_and_stale_update(
    threaded: tuple[ThreadedServer, kubernetes.client.CoreV1Api],
) -> None:
    _, core = threaded
    created = core.create_namespaced_config_map("default", configmap("c", a="1"))
    assert created.metadata.uid and created.data == {"a": "1"}
    got = core.read_namespaced_config_map("c", "default")
    got.data["b"] = "2"
    updated = core.replace_namespaced_config_map("c", "default", got)
    assert updated.data == {"a": "1", "b": "2"}
    with pytest.raises(kubernetes.client.ApiException) as stale:
        core.replace_namespaced_config_map("c", "default", got)  # got has the old resourceVersion
    assert stale.value.status == 409
    patched = core.patch_namespaced_config_map("c", "default", {"data": {"c": "3"}})
    assert patched.data == {"a": "1", "b": "2", "c": "3"}
    listed = core.list_namespaced_config_map("default", label_selector="")
    assert [c.metadata.name for c in listed.items] == ["c"] and listed.metadata.resource_version
    core.delete_namespaced_config_map("c", "default")
    with pytest.raises(kubernetes.client.ApiException) as gone:
        core.read_namespaced_config_map("c", "default")
    assert gone.value.status == 404
    with pytest.raises(kubernetes.client.ApiException) as exists:
        core.create_namespace(
            kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name="default"))
        )
    assert exists.value.status == 409


def test_official_client_watch_resumes_after_a_dropped_connection(
    threaded: tuple[ThreadedServer, kubernetes.client.CoreV1Api],
) -> None:
    runner, core = threaded
    server = runner.server
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", configmap("a"))
    seen: list[tuple[str, str]] = []
    last_rv = rv
    watch = kubernetes.watch.Watch()
    with pytest.raises(urllib3.exceptions.ProtocolError):  # the cut connection
        for event in watch.stream(
            core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=10
        ):
            seen.append((event["type"], event["object"].metadata.name))
            last_rv = event["object"].metadata.resource_version
            # while this client is connected, cut every watch and write behind its back
            assert runner.run(_drop(server)) == 1
            core.create_namespaced_config_map("default", configmap("b"))
    assert seen == [("ADDED", "a")]
    resumed = kubernetes.watch.Watch()
    for event in resumed.stream(
        core.list_namespaced_config_map, "default", resource_version=last_rv, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].metadata.name))
        resumed.stop()
    assert seen == [("ADDED", "a"), ("ADDED", "b")]


async def _drop(server: ApiServer) -> int:
    return server.faults.drop_watches()


async def _expire(server: ApiServer) -> None:
    server.faults.expire_watch_history()


def test_official_client_relists_after_410(
    threaded: tuple[ThreadedServer, kubernetes.client.CoreV1Api],
) -> None:
    runner, core = threaded
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", configmap("a"))
    runner.run(_expire(runner.server))
    with pytest.raises(kubernetes.client.ApiException) as expired:
        for _ in kubernetes.watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=5
        ):
            pass
    assert expired.value.status == 410
    relisted = core.list_namespaced_config_map("default")
    assert [c.metadata.name for c in relisted.items] == ["a"]
    events = kubernetes.watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=relisted.metadata.resource_version,
        timeout_seconds=1,
    )
    assert list(events) == []  # caught up: nothing missed, nothing repeated


def test_official_client_reads_custom_objects(
    threaded: tuple[ThreadedServer, kubernetes.client.CoreV1Api],
) -> None:
    _, core = threaded
    api_client = core.api_client
    ext = kubernetes.client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition(_crd_body())
    custom = kubernetes.client.CustomObjectsApi(api_client)
    body = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"x": 1},
    }
    custom.create_namespaced_custom_object("example.com", "v1", "default", "widgets", body)
    got = custom.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "w")
    assert got["spec"] == {"x": 1}
    custom.patch_namespaced_custom_object_status(
        "example.com", "v1", "default", "widgets", "w", {"status": {"ok": True}}
    )
    got = custom.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "w")
    assert got["status"] == {"ok": True} and got["metadata"]["generation"] == 1


def _crd_body() -> dict[str, Any]:
    return crd("widgets", "Widget")


# ---------------------------------------------------------------- lightkube (async, in loop)


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    srv = ApiServer(history_size=20)
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
async def lk(server: ApiServer) -> AsyncIterator[AsyncClient]:
    client = AsyncClient(config=KubeConfig.from_dict(server.kubeconfig_dict()), namespace="default")
    yield client
    await client.close()


def lk_configmap(name: str, **data: str) -> ConfigMapModel:
    return ConfigMap(metadata=ObjectMeta(name=name), data=data)


async def test_lightkube_crud_and_conflict(lk: AsyncClient) -> None:
    created = await lk.create(lk_configmap("c", a="1"))
    assert created.metadata is not None and created.metadata.uid
    got = await lk.get(ConfigMap, "c")
    assert got.data == {"a": "1"}
    got.data = {"a": "2"}
    await lk.replace(got)
    with pytest.raises(ApiError) as stale:
        await lk.replace(got)
    assert stale.value.status.code == 409
    patched = await lk.patch(ConfigMap, "c", {"data": {"b": "3"}}, patch_type=PatchType.MERGE)
    assert patched.data == {"a": "2", "b": "3"}
    patched = await lk.patch(
        ConfigMap, "c", [{"op": "remove", "path": "/data/a"}], patch_type=PatchType.JSON
    )
    assert patched.data == {"b": "3"}
    names = [c.metadata.name async for c in lk.list(ConfigMap) if c.metadata]
    assert names == ["c"]
    await lk.delete(ConfigMap, "c")
    with pytest.raises(ApiError) as missing:
        await lk.get(ConfigMap, "c")
    assert missing.value.status.code == 404


async def test_lightkube_apply_and_generic_resources(lk: AsyncClient) -> None:
    await lk.create(CustomResourceDefinition.from_dict(_crd_body()))
    widget = create_namespaced_resource("example.com", "v1", "Widget", "widgets")
    obj = widget.from_dict(
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"x": 1},
        }
    )
    applied = await lk.apply(obj, field_manager="test")
    assert applied["spec"] == {"x": 1}
    obj["spec"]["x"] = 2
    applied = await lk.apply(obj, field_manager="test")
    assert applied["spec"] == {"x": 2}
    pods = [p async for p in lk.list(Pod, labels={"app": "none"})]
    assert pods == []


def _retry(error: Exception, count: int) -> OnErrorResult:
    return OnErrorResult(OnErrorAction.RETRY, sleep=0.05)


async def test_lightkube_watch_resumes_after_drops_and_relists_after_410(
    server: ApiServer, lk: AsyncClient
) -> None:
    seen: list[tuple[str, str]] = []
    got = asyncio.Event()

    async def follow() -> None:
        async for kind, obj in lk.watch(ConfigMap, on_error=_retry):
            assert obj.metadata is not None and obj.metadata.name is not None
            seen.append((kind, obj.metadata.name))
            got.set()

    task = asyncio.create_task(follow())
    await lk.create(lk_configmap("a"))
    await asyncio.wait_for(got.wait(), 5)
    got.clear()
    assert server.faults.drop_watches() == 1
    await lk.create(lk_configmap("b"))  # written while the watch is cut
    await asyncio.wait_for(got.wait(), 5)
    assert seen == [("ADDED", "a"), ("ADDED", "b")]  # resumed from "a": nothing lost or doubled
    # Cut it again and, before it can reconnect, overflow the 20-change history: resuming
    # from "b" answers 410 and lightkube starts over from the current state.
    got.clear()
    seen.clear()
    server.faults.drop_watches()
    configmaps = server.registry.get("", "v1", "configmaps")
    assert configmaps is not None
    for i in range(25):  # synchronous: no await, so the client cannot reconnect in between
        server.objects.create(configmaps, "default", {"metadata": {"name": f"x{i}"}})
    for _ in range(50):
        if len(seen) >= 27:
            break
        await asyncio.sleep(0.1)
    assert sorted(name for _, name in seen) == sorted(["a", "b", *(f"x{i}" for i in range(25))])
    assert {kind for kind, _ in seen} == {"ADDED"}
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _drop_gracefully(server: ApiServer) -> int:
    return server.faults.drop_watches(graceful=True)


def test_official_client_watch_continues_over_a_clean_stream_end(
    threaded: tuple[ThreadedServer, kubernetes.client.CoreV1Api],
) -> None:
    runner, core = threaded
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", configmap("a"))
    seen: list[str] = []
    watch = kubernetes.watch.Watch()
    for event in watch.stream(core.list_namespaced_config_map, "default", resource_version=rv):
        seen.append(event["object"].metadata.name)
        if len(seen) == 1:
            assert runner.run(_drop_gracefully(runner.server)) == 1
            core.create_namespaced_config_map("default", configmap("b"))
        else:
            watch.stop()
    assert seen == ["a", "b"]  # the client re-watched from its last resourceVersion by itself
