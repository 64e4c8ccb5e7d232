"""Watch streams: initial state, resume, 410, bookmarks, selector transitions, slow watchers."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from devkube.server import ApiServer
from devkube.server.registry.selectors import Selection
from devkube.server.registry.store import Watcher
from tests.harness.cluster import client_ssl_context

CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    srv = ApiServer(history_size=5, bookmark_interval=0.2)
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


class Api:
    def __init__(self, server: ApiServer, session: aiohttp.ClientSession) -> None:
        self.server, self.session = server, session
        self.headers = {"Authorization": f"Bearer {server.token}"}
        self.ssl = client_ssl_context(server)

    async def send(
        self, method: str, path: str, body: Any = None, ctype: str = "application/json"
    ) -> Any:
        headers = dict(self.headers)
        if body is not None:
            headers["Content-Type"] = ctype
        async with self.session.request(
            method,
            self.server.url + path,
            headers=headers,
            ssl=self.ssl,
            data=None if body is None else json.dumps(body),
        ) as resp:
            return await resp.json()

    async def watch(self, path: str, **params: str) -> AsyncIterator[dict[str, Any]]:
        query = {"watch": "true", **params}
        async with self.session.get(
            self.server.url + path, headers=self.headers, ssl=self.ssl, params=query
        ) as resp:
            assert resp.status == 200
            async for line in resp.content:
                if line.strip():
                    yield json.loads(line)


@pytest.fixture
def api(server: ApiServer, session: aiohttp.ClientSession) -> Api:
    return Api(server, session)


def cm(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": {}}


async def collect(stream: AsyncIterator[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    out = []
    async for event in stream:
        out.append(event)
        if len(out) == n:
            break
    return out


async def test_watch_without_version_sends_state_then_changes(api: Api) -> None:
    await api.send("POST", CMS, cm("a"))
    stream = api.watch(CMS, timeoutSeconds="5")
    first = await collect(stream, 1)
    assert first[0]["type"] == "ADDED" and first[0]["object"]["metadata"]["name"] == "a"
    await api.send("POST", CMS, cm("b"))
    await api.send("DELETE", f"{CMS}/a")
    events = await collect(stream, 2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    await stream.aclose()


async def test_watch_resumes_from_a_resource_version(api: Api) -> None:
    a = await api.send("POST", CMS, cm("a"))
    await api.send("POST", CMS, cm("b"))
    events = await collect(api.watch(CMS, resourceVersion=a["metadata"]["resourceVersion"]), 1)
    assert (events[0]["type"], events[0]["object"]["metadata"]["name"]) == ("ADDED", "b")


async def test_too_old_resource_version_answers_410(api: Api) -> None:
    first = await api.send("POST", CMS, cm("a"))
    for i in range(8):  # history holds 5 changes
        await api.send("POST", CMS, cm(f"x{i}"))
    events = await collect(api.watch(CMS, resourceVersion=first["metadata"]["resourceVersion"]), 1)
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"


async def test_expired_history_answers_410_to_every_resume_from_before_it(
    server: ApiServer, api: Api
) -> None:
    first = await api.send("POST", CMS, cm("a"))
    newest = await api.send("POST", CMS, cm("b"))
    server.faults.expire_watch_history()
    lagging = await collect(api.watch(CMS, resourceVersion=first["metadata"]["resourceVersion"]), 1)
    assert lagging[0]["type"] == "ERROR" and lagging[0]["object"]["code"] == 410
    # Even a client that had seen the newest change (on a quiet cluster, every informer) must
    # list again, or an expiry proves nothing about the 410 path (issue #36).
    resumed = api.watch(
        CMS, resourceVersion=newest["metadata"]["resourceVersion"], timeoutSeconds="5"
    )
    latest = [(e["type"], e["object"].get("code")) for e in await collect(resumed, 1)]
    assert latest == [("ERROR", 410)]
    # A list after the expiry answers a version that resumes cleanly.
    listed = (await api.send("GET", CMS))["metadata"]["resourceVersion"]
    assert int(listed) > int(newest["metadata"]["resourceVersion"])
    await api.send("POST", CMS, cm("c"))
    caught_up = await collect(api.watch(CMS, resourceVersion=listed), 1)
    assert caught_up[0]["type"] == "ADDED" and caught_up[0]["object"]["metadata"]["name"] == "c"


async def test_bookmarks_on_resume_and_periodically(api: Api) -> None:
    a = await api.send("POST", CMS, cm("a"))
    stream = api.watch(
        CMS, resourceVersion=a["metadata"]["resourceVersion"], allowWatchBookmarks="true"
    )
    events = await collect(stream, 2)
    assert [e["type"] for e in events] == ["BOOKMARK", "BOOKMARK"]
    assert events[0]["object"]["kind"] == "ConfigMap"
    assert int(events[0]["object"]["metadata"]["resourceVersion"]) >= int(
        a["metadata"]["resourceVersion"]
    )
    await stream.aclose()


async def test_send_initial_events_ends_with_annotated_bookmark(api: Api) -> None:
    await api.send("POST", CMS, cm("a"))
    stream = api.watch(
        CMS,
        sendInitialEvents="true",
        allowWatchBookmarks="true",
        resourceVersionMatch="NotOlderThan",
    )
    events = await collect(stream, 2)
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    await stream.aclose()


async def test_selector_transitions_become_added_and_deleted(api: Api) -> None:
    await api.send("POST", CMS, cm("a", {"app": "x"}))
    stream = api.watch(CMS, labelSelector="app=x")
    assert (await collect(stream, 1))[0]["type"] == "ADDED"
    merge = "application/merge-patch+json"
    await api.send("PATCH", f"{CMS}/a", {"metadata": {"labels": {"app": "y"}}}, merge)
    await api.send("PATCH", f"{CMS}/a", {"metadata": {"labels": {"app": "x"}}}, merge)
    events = await collect(stream, 2)
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]
    assert events[0]["object"]["metadata"]["labels"] == {"app": "x"}  # the previous content
    await stream.aclose()


async def test_timeout_seconds_ends_the_stream(api: Api) -> None:
    events = [e async for e in api.watch(CMS, timeoutSeconds="1", resourceVersion="1")]
    assert events == []


async def test_slow_watcher_is_cut_with_410_without_blocking_writes(
    server: ApiServer, api: Api
) -> None:
    server.store.watch_queue_size = 3

    async def drain() -> list[dict[str, Any]]:
        return [e async for e in api.watch(CMS, resourceVersion=str(server.store.rv))]

    task = asyncio.create_task(drain())
    await asyncio.sleep(0.2)  # the watch is registered and idle before we write
    watcher = next(iter(server.hub.open))
    configmaps = server.registry.get("", "v1", "configmaps")
    assert configmaps is not None
    for i in range(10):  # synchronous writes: the reader gets no chance to keep up
        server.objects.create(configmaps, "default", cm(f"c{i}"))
    assert watcher.overflowed
    events = await asyncio.wait_for(task, 5)
    assert events[-1]["type"] == "ERROR" and events[-1]["object"]["code"] == 410


async def test_dropped_watches_break_the_connection(server: ApiServer, api: Api) -> None:
    stream = api.watch(CMS)
    task = asyncio.create_task(collect(stream, 100))
    await asyncio.sleep(0.2)
    assert server.faults.drop_watches() == 1
    with pytest.raises(aiohttp.ClientError):
        await asyncio.wait_for(task, 5)


async def test_a_watch_whose_client_left_is_unregistered(server: ApiServer, api: Api) -> None:
    stream = api.watch(CMS, resourceVersion=str(server.store.rv))
    task = asyncio.create_task(collect(stream, 1))
    for _ in range(50):
        if server.hub.open:
            break
        await asyncio.sleep(0.02)
    assert len(server.hub.open) == 1
    task.cancel()  # the client goes away without the server writing anything
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await stream.aclose()
    for _ in range(100):
        if not server.hub.open:
            break
        await asyncio.sleep(0.02)
    assert not server.hub.open


async def test_initial_state_does_not_count_against_the_backlog_bound() -> None:
    watcher = Watcher("configmaps", Selection(None), max_queue=3)
    for i in range(6):
        watcher.push("ADDED", i, force=True)
    for i in range(3):
        watcher.push("ADDED", 10 + i)
    assert not watcher.overflowed
    assert len(await watcher.next_batch()) == 9
    for i in range(3):
        watcher.push("MODIFIED", i)
    assert not watcher.overflowed
    watcher.push("MODIFIED", 3)  # the fourth undrained change is one too many
    assert watcher.overflowed
