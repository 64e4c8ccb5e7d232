"""The loop every dev-cluster controller runs (devkube.machinery.control_loop), on its own: a
poke makes a pass, the period makes one without a poke, a failed pass is logged and the loop goes on
(retried when asked), and stop ends the named task. The controllers built on it are proven
through the API by test_gc, test_node_lifecycle, test_scheduler_loop and test_workloads_*."""

from __future__ import annotations

import asyncio

import pytest

from devkube.machinery.control_loop import ControlLoop
from tests.harness.waiting import eventually


def running(name: str) -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == name]


async def test_a_poke_makes_a_pass_in_the_named_task_and_stop_ends_it() -> None:
    passes: list[str] = []

    async def run_pass() -> None:
        task = asyncio.current_task()
        passes.append(task.get_name() if task else "")

    loop = ControlLoop("test loop", run_pass, period=None)
    loop.start()
    await asyncio.sleep(0.05)
    assert passes == []  # no period and no poke: no pass
    loop.poke()

    def one_pass() -> None:
        assert passes == ["test loop"]

    await eventually(one_pass)
    assert len(running("test loop")) == 1
    await loop.stop()
    assert running("test loop") == []


async def test_the_period_makes_passes_without_a_poke() -> None:
    count = 0

    async def run_pass() -> None:
        nonlocal count
        count += 1

    loop = ControlLoop("periodic", run_pass, period=lambda: 0.01)
    loop.start()

    def several() -> None:
        assert count >= 3

    try:
        await eventually(several)
    finally:
        await loop.stop()


@pytest.mark.parametrize("retry_after", [None, 0.01])
async def test_a_failed_pass_is_logged_and_retried_only_when_asked(
    retry_after: float | None, caplog: pytest.LogCaptureFixture
) -> None:
    calls = 0

    async def run_pass() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")

    loop = ControlLoop(
        "flaky", run_pass, period=None, retry_after=retry_after, failure="flaky pass failed"
    )
    loop.start()
    loop.poke()

    def failed_once() -> None:
        assert calls >= 1
        assert any(r.getMessage() == "flaky pass failed" for r in caplog.records)

    try:
        await eventually(failed_once)
        if retry_after is None:
            await asyncio.sleep(0.05)
            assert calls == 1  # waits for the next poke
            loop.poke()

        def passed_again() -> None:
            assert calls == 2

        await eventually(passed_again)
    finally:
        await loop.stop()
