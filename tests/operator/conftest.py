"""Fixtures of the operator tests; the world lives in tests/harness/operator_world.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.harness import control_planes
from tests.harness.operator_world import SharedWorld, World, running_world


@pytest.fixture
async def world(control_plane: str) -> AsyncIterator[World]:
    control_planes.require(control_plane)
    async with running_world(control_plane=control_plane) as w:
        yield w


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_world(control_plane: str) -> AsyncIterator[SharedWorld]:
    """The world ``shared_world`` hands to each test of a module, its operator running (on
    the module's control plane: tests/harness/control_planes.py)."""
    control_planes.require(control_plane)
    async with running_world(world_class=SharedWorld, control_plane=control_plane) as w:
        await w.start_operator()
        assert isinstance(w, SharedWorld)
        yield w


@pytest_asyncio.fixture(loop_scope="module")
async def shared_world(module_world: SharedWorld) -> AsyncIterator[SharedWorld]:
    """A world shared by the module's tests (docs/design.md §8.1): no cluster or operator
    start per test. The module runs on one event loop: it sets
    ``pytestmark = pytest.mark.asyncio(loop_scope="module")``."""
    yield module_world
    await module_world.clean()
