"""Reading one pod as the API returns it: who it belongs to, and whether it still counts.

The planner sees raw JSON from the cache; every question it asks about a pod ("is it live?",
"which replica?") is answered here once, so the rules elsewhere read as rules, not as dict
digging.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from raycluster_operator.api import labels

_DONE_PHASES = frozenset({"Failed", "Succeeded"})


@dataclass(frozen=True, slots=True)
class PodView:
    name: str
    uid: str | None
    namespace: str | None
    labels: Mapping[str, str]
    #: ``metadata.deletionTimestamp`` is set: the pod is going away and is never deleted again.
    terminating: bool
    #: Will not run Ray again: phase Failed/Succeeded, or the Ray container terminated under
    #: restartPolicy Never (KubeRay's rule, which the autoscaler v2 relies on).
    failed: bool
    running: bool
    ready: bool
    #: ``metadata.creationTimestamp`` (RFC 3339, sorts as text); "" when unknown.
    created: str
    pod_ip: str | None

    @property
    def live(self) -> bool:
        """Counts towards a replica: neither going away nor finished."""
        return not self.terminating and not self.failed

    @property
    def running_and_ready(self) -> bool:
        return self.live and self.running and self.ready

    @property
    def group(self) -> str | None:
        return self.labels.get(labels.GROUP)

    @property
    def node_type(self) -> str | None:
        return self.labels.get(labels.NODE_TYPE)

    @property
    def replica_name(self) -> str | None:
        return self.labels.get(labels.REPLICA_NAME) or None

    @property
    def replica_index(self) -> int | None:
        return parse_index(self.labels.get(labels.REPLICA_INDEX))

    @property
    def host_index(self) -> int | None:
        return parse_index(self.labels.get(labels.HOST_INDEX))


def parse_index(value: str | None) -> int | None:
    """A label value holding a non-negative decimal index, else None (the label is unusable)."""
    if value is None or not value.isascii() or not value.isdigit():
        return None
    return int(value)


def read_pod(obj: Mapping[str, Any]) -> PodView:
    metadata: Mapping[str, Any] = obj.get("metadata") or {}
    spec: Mapping[str, Any] = obj.get("spec") or {}
    status: Mapping[str, Any] = obj.get("status") or {}
    phase = status.get("phase") or ""
    running = phase == "Running"
    return PodView(
        name=metadata.get("name") or "",
        uid=metadata.get("uid"),
        namespace=metadata.get("namespace"),
        labels=metadata.get("labels") or {},
        terminating=metadata.get("deletionTimestamp") is not None,
        failed=phase in _DONE_PHASES or (running and _ray_container_ended(spec, status)),
        running=running,
        ready=_is_ready(status),
        created=str(metadata.get("creationTimestamp") or ""),
        pod_ip=status.get("podIP"),
    )


def _is_ready(status: Mapping[str, Any]) -> bool:
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def _ray_container_ended(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """The Ray container (the first one) terminated and the kubelet will not restart it."""
    if spec.get("restartPolicy") != "Never":
        return False
    statuses = status.get("containerStatuses") or ()
    if not statuses:
        return False
    containers = spec.get("containers") or ()
    ray_name = containers[0].get("name") if containers else None
    chosen = next((s for s in statuses if s.get("name") == ray_name), statuses[0])
    return bool((chosen.get("state") or {}).get("terminated"))
