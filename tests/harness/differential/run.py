"""Both control planes, started side by side, replay the same corpus."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from devkube import DevCluster

from .corpus import Area
from .replay import Outcome, Replay

#: A small cluster: two CPU nodes (cpu-0-n0, cpu-0-n1; the DRA area publishes a slice on
#: the second).
NODES = ("cpu:2",)


async def replay(
    control_plane: str, areas: list[Area], nodes: Sequence[str] = NODES
) -> dict[str, Outcome]:
    async with DevCluster(nodes=list(nodes), control_plane=control_plane) as cluster:
        runner = Replay(cluster)
        try:
            return await runner.run(areas)
        finally:
            await runner.close()
            slowest = sorted(runner.took.items(), key=lambda kv: -kv[1])[:6]
            shown = ", ".join(f"{name} {took:.0f} s" for name, took in slowest)
            print(f"{control_plane}: slowest areas and steps {shown}", file=sys.stderr)


async def both(areas: list[Area]) -> tuple[dict[str, Outcome], dict[str, Outcome]]:
    embedded, kubernetes = await asyncio.gather(
        replay("embedded", areas), replay("kubernetes", areas)
    )
    return embedded, kubernetes
