"""devkube: a Kubernetes API server with a scheduler and kubelets, for tests and demos.

A product of its own beside the operator (docs/design.md §1): it knows Kubernetes,
not Ray, and imports nothing of ``raycluster_operator``; the operator reaches it only over
HTTPS. This module is its public API. Names are
loaded on first use, so `cli` can read the node grammar without starting up the server code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from devkube.addons import addons_for
    from devkube.addons.kuberay import KubeRayOperator
    from devkube.addons.kueue import Kueue, kueue_available
    from devkube.cluster import RUNTIMES, DevCluster
    from devkube.nodes import SPEC_HELP, NodeSpecError, build_nodes, parse_spec
    from devkube.process import process_runtime_available

__all__ = [
    "RUNTIMES",
    "SPEC_HELP",
    "DevCluster",
    "KubeRayOperator",
    "Kueue",
    "NodeSpecError",
    "addons_for",
    "build_nodes",
    "kueue_available",
    "parse_spec",
    "process_runtime_available",
]

_HOMES = {
    "RUNTIMES": "cluster",
    "DevCluster": "cluster",
    "NodeSpecError": "nodes",
    "build_nodes": "nodes",
    "parse_spec": "nodes",
    "SPEC_HELP": "nodes",
    "process_runtime_available": "process",
    "addons_for": "addons",
    "KubeRayOperator": "addons.kuberay",
    "Kueue": "addons.kueue",
    "kueue_available": "addons.kueue",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
