"""Which of a cluster's wanted objects exist, as the planner asks (docs/design.md §7).

The planner only asks ``(kind, name) in present`` for the few objects a cluster wants
(services, RBAC, ComputeDomains, budgets). Answering by a lookup in the namespace's caches
keeps a pass O(its cluster): a set built from every object of the namespace cost O(clusters
in the namespace) per pass, which made convergence superlinear (issue 26).
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from raycluster_operator.controller.runtime.store import StoreView
from raycluster_operator.planning import ObjectId


class Present(Container[ObjectId]):
    """The objects of one namespace the planner may ask about, by (kind, name): cached, or
    vouched for by this operator's own creates not yet seen in the cache."""

    def __init__(
        self, namespace: str, caches: Mapping[str, StoreView], vouched: frozenset[ObjectId]
    ) -> None:
        self._namespace = namespace
        self._caches = caches
        self._vouched = vouched

    def __contains__(self, oid: object) -> bool:
        if oid in self._vouched:
            return True
        if not isinstance(oid, tuple) or len(oid) != 2:
            return False
        cache = self._caches.get(oid[0])
        return cache is not None and cache.get(f"{self._namespace}/{oid[1]}") is not None
