"""Google Cloud TPU slices on GKE: generations, topologies, hosts per slice, and host env.

What the GKE TPU webhook did at admission time is computed here from the pod's identity, so
every host of a slice gets its environment at creation and no webhook (with its stale-cache
and truncated-hostname bugs) is needed. Facts come from REFERENCE.md and Ray's own
``ray/_private/accelerators/tpu.py`` (which turns this env into node labels).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from raycluster_operator.accelerators.identity import HostIdentity
from raycluster_operator.api import labels
from raycluster_operator.api.models import WorkerGroupSpec
from raycluster_operator.api.problems import Problem
from raycluster_operator.api.quantities import container_quantity

#: Extended resource name of TPU chips.
TPU_RESOURCE = "google.com/tpu"


@dataclass(frozen=True)
class Generation:
    name: str
    #: Value of the GKE node label ``cloud.google.com/gke-tpu-accelerator``.
    gke_accelerator: str
    #: Number of dimensions of a topology string (``2x2x2`` -> 3).
    dims: int
    chips_per_host: tuple[int, ...]
    #: TensorCores per chip: Ray's pod type counts cores (``v4-16`` is 8 chips).
    cores_per_chip: int
    #: Prefix Ray accepts in ``TPU_ACCELERATOR_TYPE`` (``v5litepod-16``, ``tpu7x-8``).
    pod_type_prefix: str


GENERATIONS: tuple[Generation, ...] = (
    Generation("v4", "tpu-v4-podslice", 3, (4,), 2, "v4"),
    Generation("v5e", "tpu-v5-lite-podslice", 2, (1, 4, 8), 1, "v5litepod"),
    Generation("v5p", "tpu-v5p-slice", 3, (4,), 2, "v5p"),
    Generation("v6e", "tpu-v6e-slice", 2, (1, 4, 8), 1, "v6e"),
    Generation("tpu7x", "tpu7x", 3, (4,), 2, "tpu7x"),
)
_BY_GKE_LABEL = {g.gke_accelerator: g for g in GENERATIONS} | {
    # Single-host v5e node pools use the "device" spelling.
    "tpu-v5-lite-device": GENERATIONS[1],
}


def generation_for(gke_accelerator: str) -> Generation | None:
    return _BY_GKE_LABEL.get(gke_accelerator)


def parse_topology(topology: str) -> tuple[int, ...] | None:
    """``"4x4"`` -> ``(4, 4)``; None when the text is not a topology."""
    parts = topology.strip().lower().split("x")
    if len(parts) not in (2, 3) or not all(p.isdecimal() and int(p) > 0 for p in parts):
        return None
    return tuple(int(p) for p in parts)


def chips_in(topology: str) -> int:
    dims = parse_topology(topology)
    if dims is None:
        raise ValueError(f"not a TPU topology: {topology!r}")
    return math.prod(dims)


def hosts_per_slice(topology: str, chips_per_host: int) -> int:
    """The webhook's rule: ``max(chips in topology / chips per pod, 1)``."""
    return max(chips_in(topology) // chips_per_host, 1)


def pod_type(generation: Generation, topology: str) -> str:
    """Ray's TPU pod type, e.g. ``v6e-16`` for a v6e 4x4 slice (it counts TensorCores)."""
    return f"{generation.pod_type_prefix}-{chips_in(topology) * generation.cores_per_chip}"


# --- reading a worker group ---


def _pod_spec(group: WorkerGroupSpec) -> Mapping[str, Any]:
    spec = group.template.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _containers(group: WorkerGroupSpec) -> list[Mapping[str, Any]]:
    containers = _pod_spec(group).get("containers")
    if not isinstance(containers, list):
        return []
    return [c for c in containers if isinstance(c, Mapping)]


def tpu_chips_per_pod(group: WorkerGroupSpec) -> tuple[Fraction, Fraction]:
    """(requests, limits) of ``google.com/tpu`` summed over the pod's containers."""
    containers = _containers(group)
    requests = sum(
        (container_quantity(c, TPU_RESOURCE, kind="requests") for c in containers), Fraction(0)
    )
    limits = sum(
        (container_quantity(c, TPU_RESOURCE, kind="limits") for c in containers), Fraction(0)
    )
    return requests, limits


def is_tpu_group(group: WorkerGroupSpec) -> bool:
    return any(tpu_chips_per_pod(group))


def node_selector(group: WorkerGroupSpec) -> Mapping[str, Any]:
    selector = _pod_spec(group).get("nodeSelector")
    return selector if isinstance(selector, Mapping) else {}


@dataclass(frozen=True)
class TpuSlice:
    """What is known of a TPU group's slices from its template."""

    generation: Generation | None
    topology: str | None
    chips_per_host: int

    @property
    def pod_type(self) -> str | None:
        if self.generation is None or self.topology is None:
            return None
        if parse_topology(self.topology) is None:
            return None
        return pod_type(self.generation, self.topology)


def tpu_slice(group: WorkerGroupSpec) -> TpuSlice:
    requests, limits = tpu_chips_per_pod(group)
    chips = limits or requests
    selector = node_selector(group)
    accelerator = selector.get(labels.GKE_TPU_ACCELERATOR)
    topology = selector.get(labels.GKE_TPU_TOPOLOGY)
    return TpuSlice(
        generation=generation_for(accelerator) if isinstance(accelerator, str) else None,
        topology=topology.strip().lower() if isinstance(topology, str) else None,
        chips_per_host=int(chips),
    )


def validate_tpu_group(group: WorkerGroupSpec, path: str) -> list[Problem]:
    """The webhook's admission check, plus the mistakes it let through, with the fix spelled out."""
    requests, limits = tpu_chips_per_pod(group)
    if not (requests or limits):
        return []
    resources_path = f"{path}.template.spec.containers"
    problems: list[Problem] = []
    if requests and limits and requests != limits:
        problems.append(
            Problem(
                resources_path,
                f"{TPU_RESOURCE} requests ({requests}) and limits ({limits}) must be equal",
            )
        )
    chips = limits or requests
    if chips.denominator != 1 or chips < 1:
        return [
            *problems,
            Problem(resources_path, f"{TPU_RESOURCE} must be a whole number of chips per pod"),
        ]
    per_pod = int(chips)
    selector = node_selector(group)
    selector_path = f"{path}.template.spec.nodeSelector"
    accelerator = selector.get(labels.GKE_TPU_ACCELERATOR)
    generation = generation_for(accelerator) if isinstance(accelerator, str) else None
    if generation is not None and per_pod not in generation.chips_per_host:
        options = ", ".join(str(n) for n in generation.chips_per_host)
        problems.append(
            Problem(
                resources_path,
                f"{generation.name} hosts have {options} chips; each pod requests {per_pod} "
                f"{TPU_RESOURCE}",
            )
        )
    topology = selector.get(labels.GKE_TPU_TOPOLOGY)
    if topology is None:
        return problems
    topology_path = f"{selector_path}[{labels.GKE_TPU_TOPOLOGY!r}]"
    dims = parse_topology(topology) if isinstance(topology, str) else None
    if dims is None:
        return [
            *problems,
            Problem(topology_path, f"{topology!r} is not a TPU topology such as 4x4 or 2x2x2"),
        ]
    assert isinstance(topology, str)
    if generation is not None and len(dims) != generation.dims:
        problems.append(
            Problem(
                topology_path,
                f"{generation.name} topologies have {generation.dims} dimensions, "
                f"{topology!r} has {len(dims)}",
            )
        )
    total = math.prod(dims)
    if per_pod > total or total % per_pod:
        problems.append(
            Problem(
                resources_path,
                f"topology {topology} has {total} chips, which is not a whole number of hosts "
                f"of {per_pod} chips",
            )
        )
        return problems
    expected = hosts_per_slice(topology, per_pod)
    if group.num_of_hosts != expected:
        problems.append(
            Problem(
                f"{path}.numOfHosts",
                f"topology {topology} has {total} chips and each pod requests {per_pod} "
                f"{TPU_RESOURCE}, so numOfHosts must be {expected} (it is "
                f"{group.num_of_hosts})",
            )
        )
    return problems


# --- the environment of one host ---


def tpu_env(
    identity: HostIdentity,
    tpu: TpuSlice,
    user_env: Collection[str],
    *,
    megascale_coordinator: str | None,
) -> list[tuple[str, str]]:
    """The TPU variables to add to the ray container, skipping any named in ``user_env``.

    ``megascale_coordinator`` is host 0 of slice 0, used only when the user asked for
    multi-slice training by setting ``MEGASCALE_NUM_SLICES`` (as the webhook does).
    """
    out: list[tuple[str, str]] = [("TPU_WORKER_ID", str(identity.host_index))]
    if identity.slice_name:
        out.append(("TPU_NAME", identity.slice_name))
    if identity.num_hosts > 1 and identity.hostnames:
        out.append(("TPU_WORKER_HOSTNAMES", ",".join(identity.hostnames)))
    if tpu.pod_type is not None:
        out.append(("TPU_ACCELERATOR_TYPE", tpu.pod_type))
    if tpu.topology is not None and parse_topology(tpu.topology) is not None:
        out.append(("TPU_TOPOLOGY", tpu.topology))
    if "MEGASCALE_NUM_SLICES" in user_env:
        out.append(("MEGASCALE_SLICE_ID", str(identity.replica_index)))
        if megascale_coordinator is not None:
            out.append(("MEGASCALE_COORDINATOR_ADDRESS", megascale_coordinator))
    return [(k, v) for k, v in out if k not in user_env]
