"""events.k8s.io/v1 Events: the user-facing answer to "why did my slice go away?".

Every create and delete carries its reason; repeats of the same event about the same object
(an invalid group reconciled again, say) are folded into one Event whose ``series.count``
grows, as client-go's correlator does, instead of a new object each time.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from raycluster_operator.kube import KubeClient, KubeError, NotFound

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NOTE_MAX = 1024


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    at: float


def _micro(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def reference(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
    }
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    return ref


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        *,
        controller: str = "ray.io/raycluster-operator",
        instance: str = "raycluster-operator",
        window: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.controller = controller
        self.instance = instance
        self.window = window
        self._clock = clock
        self._seen: dict[tuple[str, ...], _Seen] = {}

    async def emit(
        self,
        regarding: Obj,
        type_: str,
        reason: str,
        note: str,
        *,
        action: str,
        related: Obj | None = None,
    ) -> None:
        """Record an event; failures are logged, never raised (events are best effort)."""
        ref = reference(regarding)
        namespace = ref["namespace"] or "default"
        note = note[:NOTE_MAX]
        key = (namespace, ref["kind"], ref["name"], ref.get("uid", ""), type_, reason, note)
        now = self._clock()
        wall = _micro(datetime.now(UTC))
        log.info("event %s %s/%s %s: %s", type_, ref["kind"], ref["name"], reason, note)
        self._prune(now)
        seen = self._seen.get(key)
        try:
            if seen is not None and now - seen.at < self.window:
                seen.count += 1
                seen.at = now
                try:
                    await self.client.patch_event(
                        seen.namespace,
                        seen.name,
                        {"series": {"count": seen.count, "lastObservedTime": wall}},
                    )
                    return
                except NotFound:
                    pass
            event: Obj = {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{_name_prefix(ref['name'])}.{secrets.token_hex(8)}",
                    "namespace": namespace,
                },
                "eventTime": wall,
                "reportingController": self.controller,
                "reportingInstance": self.instance,
                "action": action,
                "reason": reason,
                "note": note,
                "type": type_,
                "regarding": ref,
            }
            if related is not None:
                event["related"] = reference(related)
            created = await self.client.create_event(event)
            self._seen[key] = _Seen(created["metadata"]["name"], namespace, 1, now)
        except KubeError as exc:
            log.warning("could not record event %s on %s: %s", reason, ref["name"], exc)

    def _prune(self, now: float) -> None:
        if len(self._seen) < 4096:
            return
        for key in [k for k, v in self._seen.items() if now - v.at >= self.window]:
            del self._seen[key]


def _name_prefix(name: str) -> str:
    """The regarding object's name, cut so ``<prefix>.<16 hex>`` stays a valid object name
    (253 characters; a cut must not end a DNS label with '-' or '.')."""
    return name[: 253 - 17].rstrip("-.")
