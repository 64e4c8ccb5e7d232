"""accelerators layer: TPU / GPU NVLink / generic multi-host profiles (pure)."""

from __future__ import annotations

from raycluster_operator.accelerators.compute_domain import CHANNEL_CLAIM, wants_compute_domains
from raycluster_operator.accelerators.identity import HostIdentity
from raycluster_operator.accelerators.placement import merge_affinity, slice_affinity
from raycluster_operator.accelerators.profile import (
    AcceleratorKind,
    AcceleratorProfile,
    profile_for,
    validate_cluster,
    validate_group,
)
from raycluster_operator.accelerators.tpu import tpu_container_positions

__all__ = [
    "CHANNEL_CLAIM",
    "AcceleratorKind",
    "AcceleratorProfile",
    "HostIdentity",
    "merge_affinity",
    "profile_for",
    "slice_affinity",
    "tpu_container_positions",
    "validate_cluster",
    "validate_group",
    "wants_compute_domains",
]
