"""What tests read off a pod object, in one place."""

from __future__ import annotations

from typing import Any


def labels(pod: dict[str, Any]) -> dict[str, str]:
    return dict(pod["metadata"].get("labels") or {})


def is_ready(pod: dict[str, Any]) -> bool:
    """Running with the Ready condition True, as `kubectl get` counts READY pods."""
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
