"""The fake controllers' client: list+watch resumes, and re-lists when its version expired."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from devkube import DevCluster
from devkube.machinery.client import ApiClient, ApiError, WatchEvent

CM = "/api/v1/namespaces/default/configmaps"


class ExpiringOnce(ApiClient):
    """Answers the first watch with the server's two ways of saying "too old"."""

    def __init__(self, *args: Any, how: str) -> None:
        super().__init__(*args)
        self.how = how
        self.watches = 0
        self.rewatched = asyncio.Event()

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        timeout_seconds: int | None = None,
        params: Mapping[str, str] | None = None,
    ) -> AsyncIterator[WatchEvent]:
        self.watches += 1
        if self.watches == 1:
            if self.how == "status":
                raise ApiError(410, {"reason": "Expired"})
            yield WatchEvent("ERROR", {"kind": "Status", "code": 410, "reason": "Expired"})
            return
        self.rewatched.set()
        async for event in super().watch(path, resource_version=resource_version, params=params):
            yield event


async def collect_until_added(client: ApiClient, name: str) -> list[str]:
    seen: list[str] = []
    async for event in client.list_and_watch(CM):
        seen.append(event.type)
        if event.type == "ADDED" and event.object["metadata"]["name"] == name:
            return seen
    raise AssertionError("the stream ended")


async def test_an_expired_version_leads_to_a_fresh_list(dev_cluster: DevCluster) -> None:
    for how in ("status", "event"):
        client = ExpiringOnce(dev_cluster.url, dev_cluster.token, dev_cluster.ca_pem, how=how)
        async with client:
            task = asyncio.create_task(collect_until_added(client, f"late-{how}"))
            await asyncio.wait_for(client.rewatched.wait(), 20)
            await dev_cluster.client.create(
                CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"late-{how}"}}
            )
            seen = await asyncio.wait_for(task, 20)
        assert seen[:2] == ["SYNC", "SYNC"], seen
        assert seen[-1] == "ADDED"


async def test_errors_carry_the_status_reason(dev_cluster: DevCluster) -> None:
    try:
        await dev_cluster.client.get(f"{CM}/missing")
    except ApiError as error:
        assert error.status == 404 and error.reason == "NotFound"
    else:
        raise AssertionError("expected a 404")
