"""A pod's QoS class, as Kubernetes' `ComputePodQOS` (pkg/apis/core/helper/qos) decides it.

One implementation for the API server (which writes `status.qosClass` once, after LimitRange
defaults) and the kubelet (which reports it), so the two cannot disagree about `1000m` and
`1`: quantities are compared as numbers.

- only cpu and memory count, and only amounts above zero;
- with pod-level resources (`spec.resources`, even empty) those decide, else the
  containers' and init containers' (ephemeral containers cannot state resources);
- BestEffort when nothing counted is requested or limited; Guaranteed when every container
  (or the pod) limits both cpu and memory and the summed requests equal the summed limits
  for every resource; Burstable otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from .quantities import parse_quantity

QOS_RESOURCES = ("cpu", "memory")
BEST_EFFORT, BURSTABLE, GUARANTEED = "BestEffort", "Burstable", "Guaranteed"


def _positive(section: Any) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, value in (section or {}).items():
        if name not in QOS_RESOURCES:
            continue
        try:
            amount = parse_quantity(value)
        except ValueError:
            continue  # validation refuses it; nothing to classify by
        if amount > 0:
            out[name] = amount
    return out


def pod_qos(spec: Mapping[str, Any]) -> str:
    """The QoS class of a pod with this spec."""
    pod_level = spec.get("resources")
    sources: Iterable[Mapping[str, Any]]
    if isinstance(pod_level, Mapping):
        sources = [pod_level]
        limits_required = bool(pod_level.get("limits"))
    else:
        sources = [
            c.get("resources") or {}
            for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
        ]
        limits_required = True
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for res in sources:
        for name, amount in _positive(res.get("requests")).items():
            requests[name] = requests.get(name, Fraction(0)) + amount
        found = _positive(res.get("limits"))
        for name, amount in found.items():
            limits[name] = limits.get(name, Fraction(0)) + amount
        if limits_required and not all(name in found for name in QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and any(limits.get(name) != amount for name, amount in requests.items()):
        guaranteed = False
    return GUARANTEED if guaranteed and len(requests) == len(limits) else BURSTABLE
