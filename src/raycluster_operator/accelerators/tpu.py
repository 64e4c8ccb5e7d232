"""Google Cloud TPU slices on GKE: generations, topologies, hosts per slice, and host env.

What the GKE TPU webhook did at admission time is computed here from the pod's identity, so
every host of a slice gets its environment at creation and no webhook (with its stale-cache
and truncated-hostname bugs) is needed. Facts come from docs/design.md §9.2 and Ray's own
``ray/_private/accelerators/tpu.py`` (which turns this env into node labels).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeAlias

from raycluster_operator.accelerators.identity import HostIdentity
from raycluster_operator.api import labels
from raycluster_operator.api.models import WorkerGroupSpec
from raycluster_operator.api.problems import Problem
from raycluster_operator.api.quantities import container_quantity

#: Extended resource name of TPU chips.
TPU_RESOURCE = "google.com/tpu"
#: The GKE TPU device plugin serves its Prometheus metrics on the node at this port; Ray's
#: dashboard agent reads ``TPU_DEVICE_PLUGIN_ADDR`` to show TPU utilisation (the webhook's
#: value, ``$(TPU_DEVICE_PLUGIN_HOST_IP):2112``).
DEVICE_PLUGIN_METRICS_PORT = 2112
#: First port of the TPU runtime processes on a host, one port per TPU container (v7x).
#: LeaderWorkerSet and JAX's own GKE tests use 8476; the GKE webhook's code uses 8471 while
#: its comment says 8476. We take 8476: two of three sources, and the one libtpu users meet
#: in LWS. A user's ``TPU_PROCESS_PORT`` is kept.
TPU_PROCESS_PORT_BASE = 8476
#: ``MEGASCALE_PORT`` (8080 is Ray's metrics port), as the webhook sets it.
MEGASCALE_PORT = 8081
#: Generations whose runtime counts processes, not hosts: one pod may run several TPU
#: containers (v7x's two chiplets per chip, NUMA-aligned), each its own TPU worker.
PER_CONTAINER_GENERATIONS = frozenset({"tpu7x"})

#: An env value: text, or a ``valueFrom`` object.
EnvValue: TypeAlias = str | dict[str, Any]


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


def tpu_container_positions(containers: object) -> list[int]:
    """Positions, in ``spec.containers``, of the containers that request TPU chips."""
    if not isinstance(containers, list):
        return []
    return [
        i
        for i, c in enumerate(containers)
        if isinstance(c, Mapping)
        and (
            container_quantity(c, TPU_RESOURCE, kind="limits")
            or container_quantity(c, TPU_RESOURCE, kind="requests")
        )
    ]


def _per_container(tpu: TpuSlice) -> bool:
    return tpu.generation is not None and tpu.generation.name in PER_CONTAINER_GENERATIONS


def tpu_worker_id(
    identity: HostIdentity, tpu: TpuSlice, container_index: int = 0, tpu_containers: int = 1
) -> int:
    """The TPU worker id of one TPU container: the host index, except on v7x where each TPU
    container of a host is its own worker."""
    if _per_container(tpu):
        return identity.host_index * tpu_containers + container_index
    return identity.host_index


def ray_node_labels(
    identity: HostIdentity, tpu: TpuSlice, *, container_index: int = 0, tpu_containers: int = 1
) -> dict[str, str]:
    """The Ray node labels of a TPU host, as true as its TPU env (docs/design.md, rule 3.4a).

    Ray would derive the same labels from ``TPU_WORKER_ID``/``TPU_NAME``/
    ``TPU_ACCELERATOR_TYPE``, but a ``--labels`` flag overrides what Ray derives; these are
    rendered explicitly and win over any group ``labels`` or ``rayStartParams.labels``, so a
    group label meant for the autoscaler can never make every host claim worker 0.
    """
    out = {
        labels.RAY_TPU_WORKER_ID: str(tpu_worker_id(identity, tpu, container_index, tpu_containers))
    }
    if identity.slice_name:
        out[labels.RAY_TPU_SLICE_NAME] = identity.slice_name
    if tpu.pod_type is not None:
        out[labels.RAY_TPU_POD_TYPE] = tpu.pod_type
    if tpu.topology is not None and parse_topology(tpu.topology) is not None:
        out[labels.RAY_TPU_TOPOLOGY] = tpu.topology
    return out


def tpu_env(
    identity: HostIdentity,
    tpu: TpuSlice,
    user_env: Collection[str],
    *,
    megascale_coordinator: str | None,
    container_index: int = 0,
    tpu_containers: int = 1,
) -> list[tuple[str, EnvValue]]:
    """The TPU variables for one TPU container of a host, skipping any named in ``user_env``.

    ``megascale_coordinator`` is host 0 of slice 0, used only when the user asked for
    multi-slice training by setting ``MEGASCALE_NUM_SLICES`` (as the webhook does).
    ``container_index`` counts TPU containers of the pod (of ``tpu_containers``): on v7x each
    is its own TPU worker (``TPU_WORKER_ID = host * containers + index``) reachable at its own
    port listed in ``TPU_PROCESS_ADDRESSES``; on older generations every TPU container of a
    host shares the host's worker id.
    """
    per_container = _per_container(tpu)
    worker_id = tpu_worker_id(identity, tpu, container_index, tpu_containers)
    out: list[tuple[str, EnvValue]] = [("TPU_WORKER_ID", str(worker_id))]
    if identity.slice_name:
        out.append(("TPU_NAME", identity.slice_name))
    if identity.num_hosts > 1 and identity.hostnames:
        out.append(("TPU_WORKER_HOSTNAMES", ",".join(identity.hostnames)))
        if per_container:
            out.append(
                (
                    "TPU_PROCESS_ADDRESSES",
                    ",".join(
                        f"{host}:{TPU_PROCESS_PORT_BASE + c}"
                        for host in identity.hostnames
                        for c in range(tpu_containers)
                    ),
                )
            )
            out.append(("TPU_PROCESS_PORT", str(TPU_PROCESS_PORT_BASE + container_index)))
    if tpu.pod_type is not None:
        out.append(("TPU_ACCELERATOR_TYPE", tpu.pod_type))
    if tpu.topology is not None and parse_topology(tpu.topology) is not None:
        out.append(("TPU_TOPOLOGY", tpu.topology))
    if "MEGASCALE_NUM_SLICES" in user_env:
        out.append(("MEGASCALE_SLICE_ID", str(identity.replica_index)))
        if megascale_coordinator is not None:
            # v7x runs one megascale endpoint per container, so the coordinator is named with
            # container 0's port; older generations have one per host at the default port.
            suffix = f":{MEGASCALE_PORT}" if per_container else ""
            out.append(("MEGASCALE_COORDINATOR_ADDRESS", f"{megascale_coordinator}{suffix}"))
        port = MEGASCALE_PORT + (container_index if per_container else 0)
        out.append(("MEGASCALE_PORT", str(port)))
    # The device plugin's metrics endpoint on this pod's node; the address refers to the host
    # IP variable, so that one must come first in the list.
    out.append(
        (
            "TPU_DEVICE_PLUGIN_HOST_IP",
            {"valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.hostIP"}}},
        )
    )
    out.append(
        ("TPU_DEVICE_PLUGIN_ADDR", f"$(TPU_DEVICE_PLUGIN_HOST_IP):{DEVICE_PLUGIN_METRICS_PORT}")
    )
    return [(k, v) for k, v in out if k not in user_env]
