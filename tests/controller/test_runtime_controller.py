"""The generic controller runs any kind: a toy one, registered in this module alone, gets the
same retry vocabulary, metrics and drain as RayClusters and RayJobs (docs/design.md §7)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import pytest
from prometheus_client import CollectorRegistry

from raycluster_operator.controller.runtime.controller import Controller, LoopOptions
from raycluster_operator.controller.runtime.informer import Informer
from raycluster_operator.controller.runtime.metrics import ControllerMetrics
from raycluster_operator.controller.runtime.reconcile import Result, TerminalError

FAST = LoopOptions(retry_base_delay=0.001, retry_max_delay=0.001, resync_period=3600)


class Toy:
    """A kind whose passes do what each key's script says, one step per pass."""

    name = "toy"

    def __init__(self, scripts: dict[str, list[Callable[[], Result]]]) -> None:
        self.scripts = scripts
        self.passes: dict[str, int] = {}
        self.terms_closed = 0
        self.enqueue: Callable[[str], None] = lambda key: None
        #: Set when a key has run out of script (its last pass happened).
        self.finished: dict[str, asyncio.Event] = {k: asyncio.Event() for k in scripts}

    @property
    def informers(self) -> Sequence[Informer]:
        return ()

    def route(self, enqueue: Callable[[str], None]) -> None:
        self.enqueue = enqueue

    def all_keys(self) -> Sequence[str]:
        return list(self.scripts)

    async def wait_synced(self) -> None:
        return None

    @asynccontextmanager
    async def term(self, resync: Callable[[], None]) -> AsyncIterator[Toy]:
        try:
            yield self
        finally:
            self.terms_closed += 1

    async def reconcile(self, key: str) -> Result:
        n = self.passes[key] = self.passes.get(key, 0) + 1
        script = self.scripts[key]
        if n >= len(script):
            self.finished[key].set()
        return script[min(n, len(script)) - 1]()


def ok() -> Result:
    return Result()


def again() -> Result:
    return Result(requeue_after=0.001)


def refused() -> Result:
    raise TerminalError("forbidden: no")


def bug() -> Result:
    raise RuntimeError("a bug")


async def run(toy: Toy, *keys: str) -> Controller[Toy]:
    controller = Controller(toy, FAST, metrics=ControllerMetrics(CollectorRegistry(), "toy"))
    term = asyncio.create_task(controller.lead(stopping=lambda: True))
    try:
        await asyncio.gather(*(toy.finished[k].wait() for k in keys))
    finally:
        term.cancel()
        await asyncio.gather(term, return_exceptions=True)
    return controller


def count(controller: Controller[Toy], result: str) -> float:
    return float(controller.metrics.reconciles.labels(result)._value.get())


async def test_requeue_after_brings_a_key_back_without_a_change() -> None:
    toy = Toy({"a": [again, again, ok]})
    controller = await run(toy, "a")
    assert toy.passes["a"] == 3
    assert (count(controller, "requeue"), count(controller, "success")) == (2, 1)
    assert toy.terms_closed == 1


async def test_a_bug_is_logged_with_its_traceback_counted_and_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    toy = Toy({"b": [bug, bug, ok]})
    with caplog.at_level(logging.WARNING, logger="raycluster_operator"):
        controller = await run(toy, "b")
    failed = [r for r in caplog.records if "toy b failed" in r.getMessage()]
    assert len(failed) == 2 and all(r.exc_info for r in failed)
    assert controller.metrics.reconcile_errors._value.get() == 2
    assert count(controller, "success") == 1


async def test_a_terminal_error_stops_the_key_until_it_changes() -> None:
    refusing = asyncio.Event()

    def refuse() -> Result:
        refusing.set()  # the worker handles the raise before this test runs again
        return refused()

    toy = Toy({"c": [refuse, ok]})
    controller = Controller(toy, FAST, metrics=ControllerMetrics(CollectorRegistry(), "toy"))
    term = asyncio.create_task(controller.lead(stopping=lambda: True))
    try:
        await refusing.wait()
        queue = controller.queue
        assert count(controller, "terminal") == 1
        assert queue is not None and queue.num_requeues("c") == 0 and toy.passes["c"] == 1
        toy.enqueue("c")  # the change
        await toy.finished["c"].wait()
    finally:
        term.cancel()
        await asyncio.gather(term, return_exceptions=True)
    assert toy.passes["c"] == 2 and count(controller, "success") == 1


@pytest.mark.parametrize("clean", [True, False])
async def test_a_clean_stop_drains_a_pass_in_flight_and_a_lost_lease_does_not(
    clean: bool,
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    class Slow(Toy):
        async def reconcile(self, key: str) -> Result:
            started.set()
            await release.wait()
            finished.append(key)
            return Result()

    toy = Slow({"d": [ok]})
    controller = Controller(toy, FAST, metrics=ControllerMetrics(CollectorRegistry(), "toy"))
    term = asyncio.create_task(controller.lead(stopping=lambda: clean))
    await started.wait()
    term.cancel()
    for _ in range(3):  # let the term reach its drain
        await asyncio.sleep(0)
    release.set()
    await asyncio.gather(term, return_exceptions=True)
    assert finished == (["d"] if clean else [])
