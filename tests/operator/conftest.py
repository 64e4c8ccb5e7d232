"""Fixtures of the operator tests; the world lives in tests/harness/operator_world.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.harness.operator_world import World, running_world


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with running_world() as w:
        yield w
