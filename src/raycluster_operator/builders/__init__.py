"""builders layer: pure head/worker pod, service and autoscaler RBAC manifests."""

from __future__ import annotations

from raycluster_operator.builders.autoscaler import build_autoscaler_rbac
from raycluster_operator.builders.pods import (
    WorkerPods,
    build_head_pod,
    build_worker_pod,
)
from raycluster_operator.builders.services import (
    build_head_service,
    build_headless_service,
    build_serve_service,
    needs_headless_service,
    needs_serve_service,
)

__all__ = [
    "WorkerPods",
    "build_autoscaler_rbac",
    "build_head_pod",
    "build_head_service",
    "build_headless_service",
    "build_serve_service",
    "build_worker_pod",
    "needs_headless_service",
    "needs_serve_service",
]
