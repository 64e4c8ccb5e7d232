"""Both control planes, started side by side, replay the same corpus."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from devkube import DevCluster

from .corpus import Area
from .replay import Outcome, Replay

#: A small cluster: two CPU nodes (a budget needs pods on more than one) and one GPU node.
NODES = ("cpu:2",)


async def replay(control_plane: str, areas: list[Area], nodes: Sequence[str] = NODES) -> dict[str, Outcome]:
    async with DevCluster(nodes=list(nodes), control_plane=control_plane) as cluster:
        runner = Replay(cluster)
        try:
            return await runner.run(areas)
        finally:
            await runner.close()


async def both(areas: list[Area]) -> tuple[dict[str, Outcome], dict[str, Outcome]]:
    embedded, kubernetes = await asyncio.gather(
        replay("embedded", areas), replay("kubernetes", areas)
    )
    return embedded, kubernetes
