"""Kueue, built from the Go module proxy and run beside Kubernetes' own control plane, queueing
and admitting RayClusters and RayJobs (docs/design.md §8.4)."""

from devkube.addons.kueue.addon import Kueue, KueueError, kueue_available

__all__ = ["Kueue", "KueueError", "kueue_available"]
