"""The RayJob controller's own metrics (docs/design.md §11), on the operator's registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class RayJobMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.transitions = Counter(
            "raycluster_operator_rayjob_transitions",
            "RayJob jobDeploymentStatus moves, by source, target and cause.",
            ["source", "target", "cause"],
            registry=registry,
        )
        self.slice_failures = Counter(
            "raycluster_operator_rayjob_slice_failures",
            "Worker slices that broke while a RayJob ran, by the policy's action.",
            ["action"],
            registry=registry,
        )
        self.jobs_api_errors = Counter(
            "raycluster_operator_rayjob_jobs_api_errors",
            "Requests to a head's Jobs API that failed.",
            registry=registry,
        )
