"""KubeRay's own operator, built from the Go module proxy and run beside a dev cluster, for
comparisons and coexistence (docs/design.md §8.3)."""

from devkube.addons.kuberay.operator import KubeRayError, KubeRayOperator

__all__ = ["KubeRayError", "KubeRayOperator"]
