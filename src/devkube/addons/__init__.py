"""Add-ons that are not Kubernetes itself (simulated vendor drivers and the like), kept apart
from the core so the core never depends on them (docs/design.md §8)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from devkube.nodes import build_nodes, parse_spec


def addons_for(nodes: Sequence[str] | None = None) -> list[Any]:
    """The add-ons a node list calls for (`DevCluster(addons=...)`): NVIDIA's DRA driver for
    ComputeDomains when a node is an IMEX-capable GPU (GB200, GB300) in an NVLink clique."""
    from devkube.addons.nvidia.driver import NvidiaDraDriver, imex_capable

    if any(imex_capable(node) for node in build_nodes(parse_spec(nodes))):
        return [NvidiaDraDriver()]
    return []
