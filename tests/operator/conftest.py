"""Fixtures of the operator tests; the helpers live in operator_harness.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from operator_harness import World, running_world


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with running_world() as w:
        yield w
