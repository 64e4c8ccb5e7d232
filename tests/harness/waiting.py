"""Waiting for the cluster to reach a state: the one retry loop every test and world uses."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


async def eventually(
    check: Callable[[], Any], within: float = 30.0, *, interval: float = 0.05
) -> Any:
    """Retry ``check`` (sync or async) and return its value. An AssertionError means "not
    yet", and so does a LookupError (KeyError, IndexError): a check reading a field or an item
    that a controller has not written yet (a pod's conditions before the scheduler looked) is
    early, not wrong, and ending the wait on it made the check a race (issue #36). Anything
    else ends the wait at once; at the deadline the last "not yet" is raised.

    The timeout only turns a hang into a failure; it is not a performance limit. Between tries
    it waits ``interval``, or twice as long as the try took if that is longer: a check that
    runs kubectl (a process, a TLS handshake, a decode: 0.1-0.3 s of CPU) would otherwise poll
    back to back and keep a core busy for as long as it waits, which under `make test`'s
    workers slows everything else, the awaited operator included.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        began = loop.time()
        try:
            result = check()
            if isinstance(result, Awaitable):
                result = await result
            return result
        except (AssertionError, LookupError):
            if loop.time() > deadline:
                raise
        await asyncio.sleep(max(interval, 2 * (loop.time() - began)))


def holds(cond: bool) -> None:
    """An assertion as a callable, for ``eventually(lambda: holds(x.ready()))``."""
    assert cond
