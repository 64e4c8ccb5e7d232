"""The namespaces' ResourceQuotas and LimitRanges, watched when the operator may read them
(§4 rule 13c: a slice's pods are charged as admission charges them, LimitRange defaults
included; without the LimitRange grant they are charged without those defaults).

Before the informers start, one `list` per watched namespace asks whether the grant is
there: a 403 turns the watch off for good (the install without the grant keeps working; the
planner is then handed no quotas, checks nothing, and the executor's refusal path alone keeps
slices whole). A quota change concerns every RayCluster of its namespace: a raised quota or
one freed by another team's pods lets a waiting slice be created at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from raycluster_operator.api.objects import Obj, Resource
from raycluster_operator.controller.runtime.informer import Informer
from raycluster_operator.controller.runtime.store import StoreView, by_namespace
from raycluster_operator.kube import LIMIT_RANGES, RESOURCE_QUOTAS, Forbidden, KubeClient

log = logging.getLogger(__name__)

BY_NAMESPACE = "namespace"


def slim_quota(obj: Obj) -> Obj:
    """What the quota check reads: name, namespace, scopes, and the status figures."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "ResourceQuota"),
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta
        },
        "spec": {k: spec[k] for k in ("scopes", "scopeSelector") if k in spec},
        "status": {k: status[k] for k in ("hard", "used") if k in status},
    }


def slim_limit_range(obj: Obj) -> Obj:
    """What the charge reads of a LimitRange: its name and items."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "LimitRange"),
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta
        },
        "spec": {"limits": (obj.get("spec") or {}).get("limits") or []},
    }


class QuotaWatch:
    def __init__(
        self,
        client: KubeClient,
        namespaces: list[str | None],
        watch_timeout: int,
        on_namespace: Callable[[str], None],
    ) -> None:
        self._client = client
        self._namespaces = namespaces
        self._on_namespace = on_namespace
        self.informers: list[Informer] = []
        for ns in namespaces:
            informer = Informer(
                client,
                RESOURCE_QUOTAS,
                namespace=ns,
                indexers={BY_NAMESPACE: by_namespace},
                transform=slim_quota,
                watch_timeout=watch_timeout,
            )
            informer.add_handler(self._changed)
            self.informers.append(informer)
        self._view = StoreView([i.store for i in self.informers])
        self.limit_informers: list[Informer] = []
        for ns in namespaces:
            informer = Informer(
                client,
                LIMIT_RANGES,
                namespace=ns,
                indexers={BY_NAMESPACE: by_namespace},
                transform=slim_limit_range,
                watch_timeout=watch_timeout,
            )
            informer.add_handler(self._changed)
            self.limit_informers.append(informer)
        self._limits = StoreView([i.store for i in self.limit_informers])
        self.enabled = True
        self.limits_enabled = True

    async def probe(self) -> bool:
        """Whether the operator may list quotas everywhere it serves; off for good if not."""
        try:
            for ns in self._namespaces:
                await self._client.list(RESOURCE_QUOTAS, ns, page_size=1)
        except Forbidden as error:
            log.warning(
                "resourcequotas are not readable (%s): slices are not checked against quotas "
                "before creation (docs/design.md §4 rule 13c)",
                error,
            )
            self.enabled = False
            self.informers = []
        try:
            for ns in self._namespaces if self.enabled else []:
                await self._client.list(LIMIT_RANGES, ns, page_size=1)
        except Forbidden as error:
            log.warning(
                "limitranges are not readable (%s): slices are charged without their defaults "
                "(docs/design.md §4 rule 13c)",
                error,
            )
            self.limits_enabled = False
        if not (self.enabled and self.limits_enabled):
            self.limit_informers = []
        return self.enabled

    def in_namespace(self, namespace: str) -> Sequence[Mapping[str, Any]] | None:
        """The namespace's quotas, or None when they are not watched."""
        if not self.enabled:
            return None
        return self._view.by_index(BY_NAMESPACE, namespace)

    def limit_ranges_in(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        """The namespace's LimitRanges (none when they are not watched)."""
        if not (self.enabled and self.limits_enabled):
            return ()
        return self._limits.by_index(BY_NAMESPACE, namespace)

    def _changed(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is not None:
            self._on_namespace(Resource(obj).namespace or "")
