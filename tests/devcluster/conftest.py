"""The dev cluster's own tests: a bare API server (a test module with its own options
defines its own ``server``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from devkube.server import ApiServer


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer() as srv:
        yield srv
