"""Whether a worker group gets a ComputeDomain per slice (docs/design.md §3.9).

On GB200/GB300 the hosts of an NVLink domain reach each other's GPU memory only through an
IMEX channel, which NVIDIA's DRA driver hands out per ComputeDomain. A multi-host NVLink
group gets one domain per slice when its template annotation
``raycluster-operator.io/compute-domain`` says ``true``, or says ``auto`` (the default) and
the template targets an IMEX GPU: its nodeSelector or a required node affinity term names a
GB200/GB300 product in ``nvidia.com/gpu.product``. ``false`` turns it off. A template whose
``spec.resourceClaims`` already holds an entry named ``compute-domain-channel`` supplies its
own channel: the operator adds none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from raycluster_operator.accelerators.profile import AcceleratorKind, profile_for
from raycluster_operator.api import labels
from raycluster_operator.api.models import WorkerGroupSpec

#: GPUs whose NVLink domains span hosts through IMEX.
IMEX_PRODUCTS = ("GB200", "GB300")
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


def _imex(values: Iterable[Any]) -> bool:
    return any(isinstance(v, str) and any(p in v.upper() for p in IMEX_PRODUCTS) for v in values)


def targets_imex_gpu(group: WorkerGroupSpec) -> bool:
    """The template asks for nodes of a GB200/GB300 product."""
    spec = _template(group, "spec")
    selector = spec.get("nodeSelector")
    if isinstance(selector, Mapping) and _imex([selector.get(labels.NVIDIA_GPU_PRODUCT)]):
        return True
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = (
        node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node, Mapping)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    for term in terms if isinstance(terms, list) else []:
        for expr in (term.get("matchExpressions") or []) if isinstance(term, Mapping) else []:
            if (
                isinstance(expr, Mapping)
                and expr.get("key") == labels.NVIDIA_GPU_PRODUCT
                and expr.get("operator") == "In"
                and _imex(expr.get("values") or [])
            ):
                return True
    return False


def supplies_own_channel(group: WorkerGroupSpec) -> bool:
    claims = _template(group, "spec").get("resourceClaims")
    return isinstance(claims, list) and any(
        isinstance(c, Mapping) and c.get("name") == CHANNEL_CLAIM for c in claims
    )


def wants_compute_domains(group: WorkerGroupSpec) -> bool:
    """One ComputeDomain per slice of this group."""
    if group.num_of_hosts <= 1 or profile_for(group).kind is not AcceleratorKind.GPU_NVLINK:
        return False
    mode = _mode(group)
    if mode == "false" or supplies_own_channel(group):
        return False
    return mode == "true" or targets_imex_gpu(group)
