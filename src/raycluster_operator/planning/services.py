"""Services the cluster needs: the head service always, the headless one for multi-host,
and KubeRay's serve service when the RayCluster is annotated ``ray.io/enable-serve-service``.

The headless service gives every multi-host pod a stable DNS name
(``<hostname>.<cluster>-headless``), which TPU_WORKER_HOSTNAMES and JAX rely on; it is only
made when some group has numOfHosts > 1, as KubeRay does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raycluster_operator import builders
from raycluster_operator.api.models import RayCluster
from raycluster_operator.api.objects import Service


def desired_services(cluster: RayCluster) -> tuple[dict[str, Any], ...]:
    out = [builders.build_head_service(cluster)]
    if any(g.num_of_hosts > 1 for g in cluster.spec.worker_group_specs):
        out.append(builders.build_headless_service(cluster))
    if builders.needs_serve_service(cluster):
        out.append(builders.build_serve_service(cluster))
    return tuple(out)


def service_name(service: Mapping[str, Any]) -> str:
    return Service(service).name


def missing_services(
    desired: Sequence[Mapping[str, Any]], observed: Sequence[Mapping[str, Any]]
) -> tuple[str, ...]:
    present = {service_name(s) for s in observed}
    return tuple(name for name in map(service_name, desired) if name not in present)
