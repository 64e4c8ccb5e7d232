"""The embedded dev cluster: an in-process Kubernetes API server with fake controllers.

It knows Kubernetes, not Ray, and imports nothing else from raycluster_operator.
"""

from __future__ import annotations

from raycluster_operator.devcluster.cluster import RUNTIMES, DevCluster
from raycluster_operator.devcluster.nodes import NodeSpecError, build_nodes, parse_spec

__all__ = ["RUNTIMES", "DevCluster", "NodeSpecError", "build_nodes", "parse_spec"]
