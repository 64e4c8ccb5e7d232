"""What tests read off a pod object, in one place (the label keys are the operator's
contract, docs/design.md "Labels, names, environment")."""

from __future__ import annotations

from .objects import Obj

CLUSTER = "ray.io/cluster"
GROUP = "ray.io/group"
NODE_TYPE = "ray.io/node-type"
REPLICA_INDEX = "ray.io/worker-group-replica-index"
REPLICA_NAME = "ray.io/worker-group-replica-name"
HOST_INDEX = "ray.io/replica-host-index"


def labels(pod: Obj) -> dict[str, str]:
    return dict(pod["metadata"].get("labels") or {})


def is_ready(pod: Obj) -> bool:
    """Running with the Ready condition True, as `kubectl get` counts READY pods."""
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def is_terminating(pod: Obj) -> bool:
    return "deletionTimestamp" in pod["metadata"]


def is_running(pod: Obj) -> bool:
    """The first container runs (its Ray has been started, not necessarily Ready)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and "running" in statuses[0].get("state", {})


def live(pods: list[Obj]) -> list[Obj]:
    """Pods without a deletionTimestamp."""
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def of_type(pods: list[Obj], node_type: str, group: str | None = None) -> list[Obj]:
    """The head or worker pods (of one group, if given)."""
    return [
        p
        for p in pods
        if labels(p).get(NODE_TYPE) == node_type
        and (group is None or labels(p).get(GROUP) == group)
    ]


def slice_hosts(pods: list[Obj]) -> dict[int, list[int]]:
    """replica index -> sorted host indices (multi-host workers)."""
    out: dict[int, list[int]] = {}
    for pod in pods:
        lbl = labels(pod)
        out.setdefault(int(lbl.get(REPLICA_INDEX, "-1")), []).append(int(lbl.get(HOST_INDEX, "0")))
    return {k: sorted(v) for k, v in sorted(out.items())}


def replica_names(pods: list[Obj]) -> set[str]:
    return {labels(p).get(REPLICA_NAME, "") for p in pods}
