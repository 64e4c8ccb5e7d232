"""The operator killed at seeded random moments and restarted at once, through the lifecycle.

After each step's change the running operator is cancelled (no drain: writes in flight are
abandoned, expectations and caches lost) after a random 0-300 ms, four times in a row, each
time replaced by a fresh one; the last one is left to converge. The checker's invariants must
hold throughout and the end state must be exact.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from scenario import NODES, lifecycle

from tests.harness import control_planes
from tests.harness.hardening_world import RunningOperator, World, world

pytestmark = pytest.mark.control_planes

KILLS_PER_STEP = 4
SEED = 20261129


async def test_the_lifecycle_survives_an_operator_killed_at_random_points(
    control_plane: str,
) -> None:
    control_planes.require(control_plane)
    rng = random.Random(SEED)
    delays: list[float] = []
    async with world(NODES, control_plane=control_plane) as w:
        current: list[RunningOperator] = [await w.start_operator()]

        async def kill_repeatedly(step: str) -> None:
            for _ in range(KILLS_PER_STEP):
                delay = rng.uniform(0.0, 0.3)
                delays.append(delay)
                await asyncio.sleep(delay)
                await current[-1].crash()
                current.append(await w.start_operator(wait=False))

        timings = await lifecycle(w, "crashy", hook=kill_repeatedly, within=60)
        await _assert_clean(w)
    assert len(delays) >= 20
    print(
        f"\n{len(delays)} kills at {', '.join(f'{d * 1000:.0f}' for d in delays)} ms; "
        f"converged in {timings.total:.1f}s; {w.checker.snapshots} snapshots checked"
    )


@pytest.mark.embedded_only(
    "fault injection: a lossy API (failed creates and deletes, watches dropped)"
)
async def test_kills_under_api_faults_too(control_plane: str) -> None:
    """Crashes and faults together: a restarted operator meets a lossy API at once."""
    rng = random.Random(SEED + 1)
    async with world(NODES) as w:
        current: list[RunningOperator] = [await w.start_operator()]
        w.cluster.faults.fail("create", "pods", rate=0.05, code=500)
        w.cluster.faults.fail("delete", "pods", rate=0.05, code=500)
        w.cluster.faults.drop_watches_every = 1.5
        kills = 0

        async def kill_twice(step: str) -> None:
            nonlocal kills
            for _ in range(2):
                await asyncio.sleep(rng.uniform(0.0, 0.3))
                await current[-1].crash()
                kills += 1
                current.append(await w.start_operator(wait=False))

        await lifecycle(w, "crashy-faults", hook=kill_twice, within=90)
        w.cluster.faults.clear()
        await _assert_clean(w)
    assert kills == 12


async def _assert_clean(w: World) -> None:
    assert w.checker.violations == []
    assert w.checker.spec_violations() == []
    assert await w.orphans() == []
