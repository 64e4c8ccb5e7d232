"""Whether a worker group gets a ComputeDomain per slice (docs/design.md §3.9).

On GB200/GB300 the hosts of an NVLink domain reach each other's GPU memory only through an
IMEX channel, which NVIDIA's DRA driver hands out per ComputeDomain. A multi-host NVLink
group (its slices are held in one ``nvidia.com/gpu.clique``, a label GPU Feature Discovery
sets only on multi-node NVLink GPUs) gets one domain per slice unless its template annotation
``raycluster-operator.io/compute-domain`` says ``false``: the clique is what NVIDIA's own
examples key a multi-node NVLink workload on, whereas a GPU product label is written in as
many ways as there are clouds (``nvidia.com/gpu.product``, GKE's
``cloud.google.com/gke-accelerator``, none at all). A template whose ``spec.resourceClaims``
already holds an entry named ``compute-domain-channel`` supplies its own channel: the
operator adds none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raycluster_operator.accelerators.profile import AcceleratorKind, profile_for
from raycluster_operator.api import labels
from raycluster_operator.api.models import WorkerGroupSpec

#: The pod's claim entry (and the Ray container's claim) for the slice's channel.
CHANNEL_CLAIM = "compute-domain-channel"


def _template(group: WorkerGroupSpec, key: str) -> Mapping[str, Any]:
    part = group.template.get(key)
    return part if isinstance(part, Mapping) else {}


def _mode(group: WorkerGroupSpec) -> str:
    annotations = _template(group, "metadata").get("annotations")
    value = (
        annotations.get(labels.COMPUTE_DOMAIN_ANNOTATION)
        if isinstance(annotations, Mapping)
        else None
    )
    return value if isinstance(value, str) else "auto"


def supplies_own_channel(group: WorkerGroupSpec) -> bool:
    claims = _template(group, "spec").get("resourceClaims")
    return isinstance(claims, list) and any(
        isinstance(c, Mapping) and c.get("name") == CHANNEL_CLAIM for c in claims
    )


def wants_compute_domains(group: WorkerGroupSpec) -> bool:
    """One ComputeDomain per slice of this group (``true`` and ``auto`` alike: a group that is
    not multi-host NVLink has no IMEX domain to give a channel to)."""
    if group.num_of_hosts <= 1 or profile_for(group).kind is not AcceleratorKind.GPU_NVLINK:
        return False
    mode = _mode(group)
    if mode == "false" or supplies_own_channel(group):
        return False
    return mode in ("true", "auto")
