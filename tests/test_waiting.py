"""`eventually` (tests/harness/waiting.py): what counts as "not yet" and what ends the wait."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness.waiting import eventually


async def test_a_field_not_written_yet_is_not_yet() -> None:
    """A pod's conditions before the scheduler wrote them: a KeyError on early tries, then
    the value (test_dra failed on this once under load: the KeyError ended the wait)."""
    status: dict[str, Any] = {}
    tries = 0

    def scheduled() -> str:
        nonlocal tries
        tries += 1
        if tries == 3:
            status["conditions"] = [{"type": "PodScheduled"}]
        return str(status["conditions"][0]["type"])

    assert await eventually(scheduled, interval=0) == "PodScheduled"
    assert tries == 3


async def test_an_index_not_there_yet_is_not_yet() -> None:
    items: list[str] = []

    async def first() -> str:
        items.append("a")
        return items[1]

    assert await eventually(first, interval=0) == "a"


async def test_still_missing_at_the_deadline_is_raised() -> None:
    with pytest.raises(KeyError, match="conditions"):
        await eventually(lambda: {}["conditions"], within=0, interval=0)


async def test_any_other_error_ends_the_wait_at_once() -> None:
    tries = 0

    def broken() -> None:
        nonlocal tries
        tries += 1
        raise TypeError("not a 'not yet'")

    with pytest.raises(TypeError):
        await eventually(broken)
    assert tries == 1
