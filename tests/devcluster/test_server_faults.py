"""Fault injection: seeded error rates, Retry-After, latency, watch drops, the HTTP switch."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from devkube.server import ApiServer, Faults
from tests.harness.cluster import client_ssl_context

CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    srv = ApiServer(faults=Faults(seed=3))
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
async def session(server: ApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    headers = {"Authorization": f"Bearer {server.token}"}
    async with aiohttp.ClientSession(headers=headers) as s:
        yield s


async def test_error_rate_is_seeded_and_scoped(
    server: ApiServer, session: aiohttp.ClientSession
) -> None:
    ssl = client_ssl_context(server)
    server.faults.fail("list", "configmaps", rate=0.5, code=500)

    async def codes() -> list[int]:
        out = []
        for _ in range(20):
            async with session.get(server.url + CMS, ssl=ssl) as resp:
                out.append(resp.status)
        return out

    first = await codes()
    assert set(first) == {200, 500}
    async with session.get(server.url + "/api/v1/namespaces/default/pods", ssl=ssl) as resp:
        assert resp.status == 200  # another resource is untouched
    server.faults.clear()
    server.faults.seed = -1
    server.faults.load_json(
        {"seed": 3, "rules": [{"verb": "list", "resource": "configmaps", "rate": 0.5}]}
    )
    assert await codes() == first  # same seed, same sequence


async def test_429_carries_retry_after_and_a_status_body(
    server: ApiServer, session: aiohttp.ClientSession
) -> None:
    server.faults.fail("create", "*", code=429, retry_after=2)
    async with session.post(
        server.url + CMS, json={"metadata": {"name": "c"}}, ssl=client_ssl_context(server)
    ) as resp:
        assert resp.status == 429
        assert resp.headers["Retry-After"] == "2"
        body = await resp.json()
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 2
    assert server.store.get("configmaps", "default", "c") is None  # nothing was written


async def test_latency_delays_matching_requests(
    server: ApiServer, session: aiohttp.ClientSession
) -> None:
    server.faults.slow("get", "configmaps", seconds=0.3)
    ssl = client_ssl_context(server)
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with session.get(server.url + CMS + "/missing", ssl=ssl) as resp:
        assert resp.status == 404
    assert loop.time() - start >= 0.3


async def test_http_switchboard_round_trips_and_drops_watches(
    server: ApiServer, session: aiohttp.ClientSession
) -> None:
    ssl = client_ssl_context(server)
    doc = {
        "seed": 9,
        "latency": 0.0,
        "rules": [{"verb": "patch", "resource": "pods/status", "rate": 1, "code": 409}],
    }
    async with session.put(server.url + "/devcluster/faults", json=doc, ssl=ssl) as resp:
        assert resp.status == 200
    async with session.get(server.url + "/devcluster/faults", ssl=ssl) as resp:
        state = await resp.json()
    assert state["seed"] == 9 and state["rules"][0]["resource"] == "pods/status"
    async with session.post(server.url + CMS, json={"metadata": {"name": "c"}}, ssl=ssl) as resp:
        old_rv = (await resp.json())["metadata"]["resourceVersion"]
    async with session.post(server.url + CMS, json={"metadata": {"name": "d"}}, ssl=ssl) as resp:
        assert resp.status == 201
    expire = {"expireHistoryNow": True, "rules": state["rules"], "seed": 9}
    async with session.put(server.url + "/devcluster/faults", json=expire, ssl=ssl) as resp:
        assert resp.status == 200
    params = {"watch": "1", "resourceVersion": old_rv}
    async with session.get(server.url + CMS, params=params, ssl=ssl) as resp:
        line = await resp.content.readline()
    assert json.loads(line)["object"]["code"] == 410
    decided = server.faults.decide("patch", "pods/status")[1]
    assert decided is not None and decided.code == 409 and decided.reason == "Conflict"

    async def watch() -> None:
        async with session.get(server.url + CMS, params={"watch": "1"}, ssl=ssl) as resp:
            async for _ in resp.content:
                pass

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.2)
    async with session.put(
        server.url + "/devcluster/faults", json={"dropWatchesNow": True}, ssl=ssl
    ) as resp:
        assert resp.status == 200
    with pytest.raises(aiohttp.ClientError):
        await asyncio.wait_for(task, 5)
    async with (
        aiohttp.ClientSession() as anonymous,
        anonymous.get(server.url + "/devcluster/faults", ssl=ssl) as resp,
    ):
        assert resp.status == 401  # the switchboard needs the token too


async def test_periodic_watch_drops(server: ApiServer, session: aiohttp.ClientSession) -> None:
    ssl = client_ssl_context(server)
    server.faults.drop_watches_every = 0.3
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(aiohttp.ClientError):
        async with session.get(server.url + CMS, params={"watch": "1"}, ssl=ssl) as resp:
            async for line in resp.content:
                json.loads(line)
    assert loop.time() - start < 5
