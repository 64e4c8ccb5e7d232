"""Events: the user-facing answer to "why did my slice go away?".

Written as core/v1 Events, as client-go's core/v1 recorder (KubeRay's) writes them:
``firstTimestamp``, ``lastTimestamp``, ``count`` and ``source``, which ``kubectl get events
--sort-by=.lastTimestamp`` and most dashboards read. kube-apiserver refuses those fields on an
events.k8s.io/v1 create (they must be unset there), so the core API is the one that carries
them; readers of events.k8s.io/v1 see the same objects (docs/design.md §6).

Every create and delete carries its reason; volume is bounded the way client-go's event
correlator bounds it:

- repeats of the same event about the same object (same type, reason and note) fold into one
  Event whose ``series.count`` grows, instead of a new object each time;
- once more than ``SIMILAR_LIMIT`` events with the same object, type and reason but different
  notes arrive within the window (a slice deleted and recreated in a loop, each with its own
  slice name), the rest fold into one ``(combined from similar events): ...`` Event whose
  count grows.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from raycluster_operator.api.objects import Obj, Resource
from raycluster_operator.kube import KubeClient, KubeError, NotFound

log = logging.getLogger(__name__)

NOTE_MAX = 1024
#: client-go's ``maxEvents`` of its aggregator: distinct notes per (object, type, reason)
#: before they are combined.
SIMILAR_LIMIT = 10
COMBINED_PREFIX = "(combined from similar events): "


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    at: float


def _second(now: datetime) -> str:
    """A metav1.Time: RFC 3339 to the second, as core/v1 Events carry their timestamps."""
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def reference(obj: Obj) -> Obj:
    view = Resource(obj)
    ref: Obj = {
        "apiVersion": view.api_version,
        "kind": view.kind,
        "name": view.name,
        "namespace": view.namespace or "",
    }
    if view.uid:
        ref["uid"] = view.uid
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
        #: (object, type, reason) -> distinct notes seen in the window, and when last.
        self._similar: dict[tuple[str, ...], tuple[set[str], float]] = {}

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
        now = self._clock()
        note, fold = self._aggregate(ref, namespace, type_, reason, note, now)
        key = (namespace, ref["kind"], ref["name"], ref.get("uid", ""), type_, reason, fold)
        second = _second(datetime.now(UTC))
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
                        {"count": seen.count, "lastTimestamp": second},
                    )
                    return
                except NotFound:
                    pass
            event: Obj = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{_name_prefix(ref['name'])}.{secrets.token_hex(8)}",
                    "namespace": namespace,
                },
                "involvedObject": ref,
                "reason": reason,
                "message": note,
                "type": type_,
                "firstTimestamp": second,
                "lastTimestamp": second,
                "count": 1,
                "source": {"component": self.controller},
                "reportingComponent": self.controller,
                "reportingInstance": self.instance,
                "action": action,
            }
            if related is not None:
                event["related"] = reference(related)
            created = await self.client.create_event(event)
            self._seen[key] = _Seen(Resource(created).name, namespace, 1, now)
        except KubeError as exc:
            log.warning("could not record event %s on %s: %s", reason, ref["name"], exc)

    def _aggregate(
        self, ref: Obj, namespace: str, type_: str, reason: str, note: str, now: float
    ) -> tuple[str, str]:
        """The note to record and the key it folds under: itself, or once too many similar
        notes came within the window, one combined Event per (object, type, reason)."""
        similar = (namespace, ref["kind"], ref["name"], ref.get("uid", ""), type_, reason)
        notes, at = self._similar.get(similar, (set(), now))
        if now - at >= self.window:
            notes = set()
        self._similar[similar] = (notes, now)
        if note not in notes and len(notes) >= SIMILAR_LIMIT:
            return (COMBINED_PREFIX + note)[:NOTE_MAX], COMBINED_PREFIX
        notes.add(note)
        return note, note

    def _prune(self, now: float) -> None:
        if len(self._similar) >= 4096:
            for key in [k for k, v in self._similar.items() if now - v[1] >= self.window]:
                del self._similar[key]
        if len(self._seen) < 4096:
            return
        for key in [k for k, v in self._seen.items() if now - v.at >= self.window]:
            del self._seen[key]


def _name_prefix(name: str) -> str:
    """The regarding object's name, cut so ``<prefix>.<16 hex>`` stays a valid object name
    (253 characters; a cut must not end a DNS label with '-' or '.')."""
    return name[: 253 - 17].rstrip("-.")
