"""What the Deployment and ReplicaSet controllers share: controller references, pod readiness,
the pod-template hash, and a pass loop that runs after every burst of watched changes.

The two controllers act only through the API, like kube-controller-manager's: they read
shared watch caches and write objects and status subresources over HTTPS.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.informer import Informer
from kubefacts.names import SUFFIX_ALPHABET
from kubefacts.objects import Obj

APPS = "apps/v1"
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
# A pod the controller has just created or deleted counts as such until the watch shows it,
# or this many seconds have passed (then the cache is trusted again).
EXPECTATION_TTL = 30.0


def meta(obj: Obj) -> Mapping[str, Any]:
    value: Mapping[str, Any] = obj.get("metadata") or {}
    return value


def uid(obj: Obj) -> str:
    return str(meta(obj).get("uid", ""))


def controller_uid(obj: Obj) -> str | None:
    """The uid of the object's managing owner (the ownerReference with controller=true)."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def owner_reference(owner: Obj, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": APPS,
        "kind": kind,
        "name": meta(owner)["name"],
        "uid": uid(owner),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_is_active(pod: Obj) -> bool:
    """Counts toward a ReplicaSet's replicas: not finished and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not meta(pod).get("deletionTimestamp")


def pod_is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def replicas_of(obj: Obj) -> int:
    """spec.replicas, defaulting to 1 as the API server's defaulting does."""
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _pruned(value: Any) -> Any:
    """Without null, {} and [] anywhere: how Go clients serialise an unset field varies
    (`kubectl rollout undo` sends `resources: {}` and `creationTimestamp: null`)."""
    if isinstance(value, Mapping):
        kept = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def template_hash(template: Obj, collision_count: int | None = None) -> str:
    """A stable short name for a pod template: equal templates give equal hashes, so an
    unchanged Deployment finds its ReplicaSet again (a rollback finds the old one); the
    alphabet keeps it a valid label value. A Deployment's ``status.collisionCount`` is mixed
    in when set, so a name taken by a foreign ReplicaSet is avoided on the next try."""
    clean = copy.deepcopy(dict(template))
    labels = dict((clean.get("metadata") or {}).get("labels") or {})
    labels.pop(HASH_LABEL, None)
    clean.setdefault("metadata", {})
    clean["metadata"] = {**clean["metadata"], "labels": labels}
    clean = _pruned(clean)
    text = json.dumps(clean, sort_keys=True)
    if collision_count is not None:
        text += f"#{collision_count}"
    digest = hashlib.sha256(text.encode()).digest()
    number = int.from_bytes(digest[:8], "big")
    chars = []
    for _ in range(10):
        number, index = divmod(number, len(SUFFIX_ALPHABET))
        chars.append(SUFFIX_ALPHABET[index])
    return "".join(chars)


def set_condition(
    conditions: list[dict[str, Any]], kind: str, status: str, reason: str, message: str, now: str
) -> list[dict[str, Any]]:
    """The conditions with `kind` set; its transition time moves only when its status does."""
    old = next((c for c in conditions if c.get("type") == kind), None)
    changed = old is None or old.get("status") != status
    entry = {
        "type": kind,
        "status": status,
        "lastUpdateTime": now
        if changed or (old or {}).get("reason") != reason
        else (old or {}).get("lastUpdateTime", now),
        "lastTransitionTime": now if changed else (old or {}).get("lastTransitionTime", now),
        "reason": reason,
        "message": message,
    }
    return [*(c for c in conditions if c.get("type") != kind), entry]


class PassLoop:
    """Runs `sync` after every burst of changes seen by `informers` (and once at start).

    A pass that fails is retried shortly; `resync` forces a pass now and then so a write lost
    to a conflict is made again even when nothing else changes."""

    def __init__(
        self,
        name: str,
        informers: list[Informer],
        sync: Callable[[], Awaitable[None]],
        *,
        debounce: float = 0.02,
        resync: float = 2.0,
    ) -> None:
        self._informers = informers
        self._loop = ControlLoop(name, sync, period=resync, debounce=debounce, retry_after=0.2)
        for informer in informers:
            informer.subscribe(self._loop.changed)

    def poke(self) -> None:
        self._loop.poke()

    async def start(self) -> None:
        for informer in self._informers:
            informer.start()
        await asyncio.gather(*(i.synced.wait() for i in self._informers))
        self._loop.poke()
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
