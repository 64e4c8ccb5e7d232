"""Waiting for the cluster to reach a state: the one retry loop every test and world uses."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


async def eventually(
    check: Callable[[], Any], within: float = 30.0, *, interval: float = 0.05
) -> Any:
    """Retry ``check`` (sync or async; AssertionError means "not yet") and return its value.

    The timeout only turns a hang into a failure; it is not a performance limit.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            result = check()
            if isinstance(result, Awaitable):
                result = await result
            return result
        except AssertionError:
            if loop.time() > deadline:
                raise
        await asyncio.sleep(interval)


def holds(cond: bool) -> None:
    """An assertion as a callable, for ``eventually(lambda: holds(x.ready()))``."""
    assert cond
