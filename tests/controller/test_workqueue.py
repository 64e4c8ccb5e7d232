from __future__ import annotations

import asyncio

import pytest

from raycluster_operator.controller.runtime.workqueue import ShutDown, WorkQueue


async def test_a_key_added_many_times_is_processed_once() -> None:
    q = WorkQueue()
    for _ in range(5):
        q.add("ns/a")
    q.add("ns/b")
    assert len(q) == 2
    assert await q.get() == "ns/a"
    assert await q.get() == "ns/b"
    assert len(q) == 0


async def test_a_key_in_flight_is_not_handed_out_again_until_done() -> None:
    q = WorkQueue()
    q.add("ns/a")
    key = await q.get()
    q.add("ns/a")  # changed while being processed
    assert len(q) == 0
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    q.done(key)
    assert await asyncio.wait_for(getter, 1) == "ns/a"


async def test_done_without_new_changes_does_not_requeue() -> None:
    q = WorkQueue()
    q.add("k")
    q.done(await q.get())
    assert len(q) == 0


async def test_failures_back_off_exponentially_and_forget_resets() -> None:
    q = WorkQueue(base_delay=1.0, max_delay=10.0)
    assert [q.add_rate_limited("k") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert q.num_requeues("k") == 6
    q.forget("k")
    assert q.backoff("k") == 1.0
    q.shutdown()


async def test_add_after_delivers_later_and_keeps_the_earliest_schedule() -> None:
    q = WorkQueue()
    q.add_after("k", 30.0)
    q.add_after("k", 0.01)
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), 5) == "k"


async def test_shutdown_wakes_waiting_workers() -> None:
    q = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.shutdown()
    with pytest.raises(ShutDown):
        await getter


async def test_many_failing_keys_share_an_overall_retry_budget() -> None:
    from raycluster_operator.controller.runtime.ratelimit import TokenBucket

    now = [0.0]
    q = WorkQueue(base_delay=0.001, retry_bucket=TokenBucket(10, 2, clock=lambda: now[0]))
    delays = [q.add_rate_limited(f"k{i}") for i in range(4)]
    assert delays[:2] == [0.001, 0.001]  # within the burst: per-key backoff only
    assert delays[2:] == [0.1, 0.2]  # then paced at 10 retries a second
    q.shutdown()
