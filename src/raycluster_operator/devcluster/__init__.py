"""The embedded dev cluster: an in-process Kubernetes API server with fake controllers.

It knows Kubernetes, not Ray, and imports nothing else from raycluster_operator. Names are
loaded on first use, so `cli` can read the node grammar without starting up the server code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raycluster_operator.devcluster.cluster import RUNTIMES, DevCluster
    from raycluster_operator.devcluster.nodes import NodeSpecError, build_nodes, parse_spec

__all__ = ["RUNTIMES", "DevCluster", "NodeSpecError", "build_nodes", "parse_spec"]

_HOMES = {
    "RUNTIMES": "cluster",
    "DevCluster": "cluster",
    "NodeSpecError": "nodes",
    "build_nodes": "nodes",
    "parse_spec": "nodes",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
