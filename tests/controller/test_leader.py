"""Lease leader election against a real API server, with short timings."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import pytest

from devkube.server import ApiServer
from kubefacts.timestamps import micro_time
from raycluster_operator.controller.runtime.leader import LeaderElector, LeaseTiming
from raycluster_operator.kube import KubeClient

FAST = LeaseTiming(lease_duration=1.0, renew_deadline=0.6, retry_period=0.1)


@pytest.fixture
async def clients() -> AsyncIterator[tuple[ApiServer, KubeClient, KubeClient]]:
    async with ApiServer() as server:
        a = KubeClient.from_kubeconfig(server.kubeconfig_dict())
        b = KubeClient.from_kubeconfig(server.kubeconfig_dict())
        yield server, a, b
        await a.close()
        await b.close()


def elector(client: KubeClient, identity: str) -> LeaderElector:
    return LeaderElector(client, namespace="default", name="op", identity=identity, timing=FAST)


async def wait_for(cond: Callable[[], bool], within: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not cond():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_only_one_candidate_leads_and_a_successor_takes_over_on_release(
    clients: tuple[ApiServer, KubeClient, KubeClient],
) -> None:
    _, ca, cb = clients
    leading: list[str] = []

    def lead_as(name: str):
        async def lead() -> None:
            leading.append(name)
            await asyncio.Event().wait()

        return lead

    a, b = elector(ca, "a"), elector(cb, "b")
    ta = asyncio.create_task(a.run(lead_as("a")))
    await wait_for(lambda: leading == ["a"])
    tb = asyncio.create_task(b.run(lead_as("b")))
    await asyncio.sleep(FAST.lease_duration * 2)  # b keeps trying while a renews
    assert leading == ["a"] and not b.is_leader

    ta.cancel()  # a stops cleanly and releases the Lease
    with contextlib.suppress(asyncio.CancelledError):
        await ta
    await wait_for(lambda: leading == ["a", "b"], within=FAST.lease_duration * 3)
    assert b.is_leader
    lease = await cb.get_lease("default", "op")
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] >= 1
    tb.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await tb


async def test_a_release_after_a_renewal_whose_answer_was_lost_still_releases(
    clients: tuple[ApiServer, KubeClient, KubeClient],
) -> None:
    """A stop cancels the renewal loop; a renewal the server applied but whose answer the
    elector never read leaves it a stale Lease (a Conflict on release)."""
    _, ca, cb = clients
    a = elector(ca, "a")
    assert await a.try_acquire_or_renew()
    lease = await cb.get_lease("default", "op")
    lease["spec"]["renewTime"] = micro_time(datetime.now(UTC))
    await cb.replace_lease(lease)  # the renewal as the server applied it
    await a.release()
    released = await cb.get_lease("default", "op")
    assert released["spec"]["holderIdentity"] == ""
    assert released["spec"]["leaseDurationSeconds"] == 1
    await a.release()  # once released, nothing more to do
    assert (await cb.get_lease("default", "op"))["metadata"]["resourceVersion"] == released[
        "metadata"
    ]["resourceVersion"]


async def test_a_crashed_leader_is_replaced_after_the_lease_expires(
    clients: tuple[ApiServer, KubeClient, KubeClient],
) -> None:
    _, ca, cb = clients
    a, b = elector(ca, "a"), elector(cb, "b")
    assert await a.try_acquire_or_renew()  # a leads, then vanishes without releasing
    assert not await b.try_acquire_or_renew()
    tb = asyncio.create_task(b.run(lambda: asyncio.Event().wait()))
    await wait_for(lambda: b.is_leader, within=FAST.lease_duration * 4)
    tb.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await tb


async def test_a_leader_that_cannot_renew_stops_leading(
    clients: tuple[ApiServer, KubeClient, KubeClient],
) -> None:
    server, ca, _ = clients
    a = elector(ca, "a")
    stopped = asyncio.Event()

    async def lead() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    ta = asyncio.create_task(a.run(lead))
    await wait_for(lambda: a.is_leader)
    server.faults.fail("update", "leases", code=500)
    server.faults.fail("get", "leases", code=500)
    await asyncio.wait_for(stopped.wait(), FAST.renew_deadline * 5)
    assert not a.is_leader
    ta.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await ta


async def test_a_crash_of_the_leading_task_says_what_crashed_and_campaigns_again(
    clients: tuple[ApiServer, KubeClient, KubeClient], caplog: pytest.LogCaptureFixture
) -> None:
    _, ca, _ = clients
    a = elector(ca, "a")
    terms: list[int] = []
    second = asyncio.Event()

    async def lead() -> None:
        terms.append(len(terms))
        if len(terms) == 1:
            raise RuntimeError("the workers' queue broke")
        second.set()
        await asyncio.Event().wait()

    with caplog.at_level(logging.INFO, logger="raycluster_operator"):
        ta = asyncio.create_task(a.run(lead))
        await second.wait()  # led again after the crash
        ta.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ta
    messages = [r.getMessage() for r in caplog.records]
    assert not any("lost the lease" in m for m in messages), messages
    (crash,) = [r for r in caplog.records if "crashed" in r.getMessage()]
    assert "the workers' queue broke" in crash.getMessage()
    assert crash.exc_info is not None and isinstance(crash.exc_info[1], RuntimeError)
