"""desiredCPU / desiredMemory / desiredGPU / desiredTPU: what the desired pods ask for.

KubeRay sums, per container, the request of each resource (the limit when no request is set)
over every desired pod, head included. Summing exactly (fractions) avoids float drift, which
would otherwise change the status text, and with it cause a status write, on every pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from raycluster_operator.api.models import RayCluster
from raycluster_operator.api.quantities import container_quantity
from raycluster_operator.planning.desired import cluster_suspended, desired_pods

TPU = "google.com/tpu"


def pod_resources(template: Mapping[str, Any]) -> dict[str, Fraction]:
    """Per resource name, the sum over containers of request-or-limit."""
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    total: dict[str, Fraction] = {}
    for container in containers if isinstance(containers, list) else ():
        if not isinstance(container, Mapping):
            continue
        resources = container.get("resources")
        if not isinstance(resources, Mapping):
            continue
        names: set[str] = set()
        for kind in ("requests", "limits"):
            section = resources.get(kind)
            if isinstance(section, Mapping):
                names.update(str(k) for k in section)
        for name in names:
            amount = container_quantity(container, name, kind="requests") or container_quantity(
                container, name, kind="limits"
            )
            total[name] = total.get(name, Fraction(0)) + amount
    return total


def desired_resources(cluster: RayCluster) -> dict[str, str]:
    """The four status fields, formatted like Kubernetes quantities."""
    suspended = cluster_suspended(cluster)
    total: dict[str, Fraction] = {}

    def add(template: Mapping[str, Any], count: int) -> None:
        for name, amount in pod_resources(template).items():
            total[name] = total.get(name, Fraction(0)) + amount * count

    if not suspended:
        add(cluster.spec.head_group_spec.template, 1)
    for group in cluster.spec.worker_group_specs:
        add(group.template, desired_pods(group, cluster_suspended=suspended))
    gpu = sum((v for k, v in total.items() if k.endswith("gpu")), Fraction(0))
    return {
        "desiredCPU": format_decimal(total.get("cpu", Fraction(0))),
        "desiredMemory": format_bytes(total.get("memory", Fraction(0))),
        "desiredGPU": format_decimal(gpu),
        "desiredTPU": format_decimal(total.get(TPU, Fraction(0))),
    }


def format_decimal(value: Fraction) -> str:
    """``4``, ``1500m``: whole units when exact, else milli-units rounded up."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = -(-value.numerator * 1000 // value.denominator)
    return f"{milli}m"


def format_bytes(value: Fraction) -> str:
    """``12Gi``, ``512Mi``: the largest binary unit that divides exactly, else plain bytes."""
    whole = -(-value.numerator // value.denominator)
    if whole == 0:
        return "0"
    for suffix, size in (
        ("Ei", 2**60),
        ("Pi", 2**50),
        ("Ti", 2**40),
        ("Gi", 2**30),
        ("Mi", 2**20),
        ("Ki", 2**10),
    ):
        if whole % size == 0:
            return f"{whole // size}{suffix}"
    return str(whole)
