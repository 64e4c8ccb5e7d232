"""Simulated nodes from a short spec: TPU node pools, GPU NVLink domains and plain CPU nodes.

The dev cluster keeps its own small TPU table (it must not import the operator's accelerators
package): enough to give each pool the hosts, chips and GKE labels a real pool would have.

Spec grammar (one entry per `--nodes` option; entries may also be comma-separated):

    tpu:<generation>:<topology>[:<pools>]   generation v4 | v5e | v5p | v6e | tpu7x
                                            one pool = the hosts of one slice
    tpu:<machine type>:<topology>[:<pools>] the same with GKE's machine type, which fixes the
                                            chips per host: ct6e-standard-4t:2x4 is 2 hosts of
                                            4 chips, ct6e-standard-8t:2x4 one host of 8
    gpu:<model>:<hosts per domain>[:<domains>]   hosts of a domain share nvidia.com/gpu.clique
    cpu:<count>                             plain nodes
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

ZONE = "us-central2-b"
TPU_RESOURCE = "google.com/tpu"
GPU_RESOURCE = "nvidia.com/gpu"
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
BETA_INSTANCE_TYPE_LABEL = "beta.kubernetes.io/instance-type"  # GKE still sets both
CPU_MACHINE_TYPE = "n2-standard-16"  # what the plain nodes' 16 CPUs / 64Gi are on GKE
CLIQUE_LABEL = "nvidia.com/gpu.clique"
# GKE's placement labels on nodes of compact capacity, coarsest first: the block, the
# sub-block within it and the physical host. Kueue's Topology Aware Scheduling reads them
# (`TPU_TOPOLOGY_LEVELS`, then kubernetes.io/hostname). Here every TPU entry of the spec is
# one block, each of its pools (one slice) one sub-block, each node its own host.
BLOCK_LABEL = "cloud.google.com/gce-topology-block"
SUBBLOCK_LABEL = "cloud.google.com/gce-topology-subblock"
HOST_LABEL = "cloud.google.com/gce-topology-host"
TPU_TOPOLOGY_LEVELS = (BLOCK_LABEL, SUBBLOCK_LABEL, HOST_LABEL, "kubernetes.io/hostname")

DEFAULT_SPEC: tuple[str, ...] = ("tpu:v6e:4x4:2", "gpu:gb200:18:1", "cpu:4")


@dataclass(frozen=True)
class TpuGeneration:
    accelerator: str  # the value of cloud.google.com/gke-tpu-accelerator
    dimensions: int  # 2-D (v5e, v6e) or 3-D (v4, v5p, tpu7x) topologies


TPU_GENERATIONS: dict[str, TpuGeneration] = {
    "v4": TpuGeneration("tpu-v4-podslice", 3),
    "v5e": TpuGeneration("tpu-v5-lite-podslice", 2),
    "v5p": TpuGeneration("tpu-v5p-slice", 3),
    "v6e": TpuGeneration("tpu-v6e-slice", 2),
    "tpu7x": TpuGeneration("tpu7x", 3),
}


@dataclass(frozen=True)
class TpuMachine:
    """A GKE TPU machine type: one VM (one node) with `chips` TPU chips."""

    generation: str
    chips: int
    cpu: str
    memory: str


# GKE's TPU machine types (the `--machine-type` of a TPU node pool). v5e and v6e come with 1,
# 4 or 8 chips per VM: a multi-host slice is made of 4-chip VMs, an 8-chip VM is only ever the
# single-host 2x4 slice. v4, v5p and tpu7x VMs always carry 4 chips.
TPU_MACHINES: dict[str, TpuMachine] = {
    "ct4p-hightpu-4t": TpuMachine("v4", 4, "240", "407Gi"),
    "ct5lp-hightpu-1t": TpuMachine("v5e", 1, "24", "48Gi"),
    "ct5lp-hightpu-4t": TpuMachine("v5e", 4, "112", "192Gi"),
    "ct5lp-hightpu-8t": TpuMachine("v5e", 8, "224", "384Gi"),
    "ct5p-hightpu-4t": TpuMachine("v5p", 4, "208", "448Gi"),
    "ct6e-standard-1t": TpuMachine("v6e", 1, "44", "176Gi"),
    "ct6e-standard-4t": TpuMachine("v6e", 4, "180", "720Gi"),
    "ct6e-standard-8t": TpuMachine("v6e", 8, "180", "1440Gi"),
    "tpu7x-standard-4t": TpuMachine("tpu7x", 4, "224", "960Gi"),
}

# GPUs per node by model; GB200/GB300 trays carry 4 GPUs, HGX boards 8.
GPU_MODELS: dict[str, tuple[int, str]] = {
    "gb200": (4, "NVIDIA-GB200"),
    "gb300": (4, "NVIDIA-GB300"),
    "h100": (8, "NVIDIA-H100-80GB-HBM3"),
    "h200": (8, "NVIDIA-H200"),
    "a100": (8, "NVIDIA-A100-SXM4-80GB"),
}


class NodeSpecError(ValueError):
    """A --nodes entry that does not follow the grammar."""


@dataclass(frozen=True)
class TpuPools:
    generation: str
    topology: str
    pools: int
    machine: str = ""  # GKE machine type; empty: the generation's usual one for the topology


@dataclass(frozen=True)
class GpuDomains:
    model: str
    hosts: int
    domains: int


@dataclass(frozen=True)
class CpuNodes:
    count: int


NodeGroup = TpuPools | GpuDomains | CpuNodes


def _chips(generation: str, topology: str) -> int:
    info = TPU_GENERATIONS.get(generation)
    if info is None:
        raise NodeSpecError(
            f"unknown TPU generation {generation!r} (known: {', '.join(TPU_GENERATIONS)})"
        )
    try:
        dims = [int(d) for d in topology.lower().split("x")]
    except ValueError:
        raise NodeSpecError(f"bad TPU topology {topology!r}") from None
    if len(dims) != info.dimensions or any(d < 1 for d in dims):
        raise NodeSpecError(
            f"TPU {generation} needs a {info.dimensions}-D topology like "
            f"{'2x2x2' if info.dimensions == 3 else '4x4'}, got {topology!r}"
        )
    return math.prod(dims)


def default_machine(generation: str, topology: str) -> str:
    """The machine type GKE uses for a topology when none is named: the single-host VM for
    v5e/v6e slices of up to 8 chips (1x1 -> 1t, 2x2 -> 4t, 2x4 -> 8t), else the 4-chip VM."""
    chips = _chips(generation, topology)
    wanted = chips if TPU_GENERATIONS[generation].dimensions == 2 and chips in (1, 8) else 4
    for name, machine in TPU_MACHINES.items():
        if machine.generation == generation and machine.chips == wanted:
            return name
    raise NodeSpecError(f"no {generation} machine type with {wanted} chips")  # pragma: no cover


def tpu_slice_shape(generation: str, topology: str, machine: str = "") -> tuple[int, int]:
    """(hosts, chips per host) of one slice, as GKE provisions it on `machine` (default: the
    generation's usual machine type for the topology)."""
    chips = _chips(generation, topology)
    machine = machine or default_machine(generation, topology)
    found = TPU_MACHINES.get(machine)
    if found is None:
        raise NodeSpecError(
            f"unknown TPU machine type {machine!r} (known: {', '.join(TPU_MACHINES)})"
        )
    if found.generation != generation:
        raise NodeSpecError(f"machine type {machine} is TPU {found.generation}, not {generation}")
    per_host = found.chips
    if per_host == 4 and TPU_GENERATIONS[generation].dimensions == 3 and chips < 4:
        return 1, chips  # the smallest 3-D slices sit on one 4-chip VM
    if per_host == 4 and chips == 4:
        return 1, 4
    if per_host in (1, 8) and chips != per_host:
        raise NodeSpecError(
            f"machine type {machine} ({per_host} chips) only serves the single-host "
            f"{'1x1' if per_host == 1 else '2x4'} topology, not {topology!r}"
        )
    if chips % per_host or chips < per_host:
        raise NodeSpecError(
            f"TPU topology {topology!r} is not a whole number of {per_host}-chip hosts"
        )
    return chips // per_host, per_host


def parse_entry(entry: str) -> NodeGroup:
    parts = entry.strip().lower().split(":")
    kind = parts[0]
    try:
        if kind == "tpu" and len(parts) in (3, 4):
            pools = int(parts[3]) if len(parts) == 4 else 1
            machine = parts[1] if parts[1] in TPU_MACHINES else ""
            generation = TPU_MACHINES[machine].generation if machine else parts[1]
            tpu_slice_shape(generation, parts[2], machine)  # validate now, not when building
            group: NodeGroup = TpuPools(generation, parts[2], pools, machine)
            count = pools
        elif kind == "gpu" and len(parts) in (3, 4):
            if parts[1] not in GPU_MODELS:
                raise NodeSpecError(
                    f"unknown GPU model {parts[1]!r} (known: {', '.join(GPU_MODELS)})"
                )
            hosts = int(parts[2])
            domains = int(parts[3]) if len(parts) == 4 else 1
            if hosts < 1:
                raise NodeSpecError(f"{entry!r}: hosts per domain must be >= 1")
            group = GpuDomains(parts[1], hosts, domains)
            count = domains
        elif kind == "cpu" and len(parts) == 2:
            count = int(parts[1])
            group = CpuNodes(count)
        else:
            raise NodeSpecError(
                f"bad node spec {entry!r}: expected tpu:<gen|machine type>:<topology>[:<pools>], "
                "gpu:<model>:<hosts>[:<domains>] or cpu:<count>"
            )
    except ValueError as error:
        if isinstance(error, NodeSpecError):
            raise
        raise NodeSpecError(f"bad number in node spec {entry!r}") from None
    if count < 0:
        raise NodeSpecError(f"{entry!r}: counts must not be negative")
    return group


def parse_spec(entries: Iterable[str] | None) -> list[NodeGroup]:
    """Parse --nodes entries (each may hold several comma-separated ones); none -> the default."""
    flat = [e for entry in entries or () for e in entry.split(",") if e.strip()]
    return [parse_entry(e) for e in (flat or DEFAULT_SPEC)]


def accelerator_taint(resource: str) -> dict[str, str]:
    """GKE taints TPU and GPU nodes so that only pods asking for the accelerator land there
    (such pods get the toleration from the ExtendedResourceToleration admission plugin)."""
    return {"key": resource, "value": "present", "effect": "NoSchedule"}


def _node(
    name: str,
    index: int,
    labels: dict[str, str],
    resources: dict[str, str],
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A Ready node; `index` picks its InternalIP and pod range, unique in the cluster."""
    capacity = {"pods": "110", **resources}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": ZONE,
                "topology.kubernetes.io/region": ZONE.rsplit("-", 1)[0],
                **labels,
            },
        },
        "spec": {"podCIDR": pod_cidr(index), **({"taints": taints} if taints else {})},
        "status": {
            "capacity": dict(capacity),
            "allocatable": dict(capacity),
            "addresses": [
                {"type": "InternalIP", "address": node_ip(index)},
                {"type": "Hostname", "address": name},
            ],
            "conditions": [
                *healthy_pressure_conditions(),
                ready_condition(True, "KubeletReady", "kubelet is posting ready status"),
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.31.0-devcluster",
                "containerRuntimeVersion": "devcluster://simulated",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


# The node conditions a healthy kubelet reports besides Ready: (type, reason, message), False.
PRESSURE_CONDITIONS: tuple[tuple[str, str, str], ...] = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
)


def healthy_pressure_conditions(now: str = "") -> list[dict[str, str]]:
    conditions = []
    for kind, reason, message in PRESSURE_CONDITIONS:
        condition = {"type": kind, "status": "False", "reason": reason, "message": message}
        if now:
            condition["lastHeartbeatTime"] = now
            condition["lastTransitionTime"] = now
        conditions.append(condition)
    return conditions


def ready_condition(ready: bool, reason: str, message: str, now: str = "") -> dict[str, str]:
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": reason,
        "message": message,
    }
    if now:
        condition["lastHeartbeatTime"] = now
        condition["lastTransitionTime"] = now
    return condition


def pod_cidr(index: int) -> str:
    """A /24 per node: 10.<64 + index // 256>.<index % 256>.0/24."""
    return f"10.{64 + index // 256}.{index % 256}.0/24"


def node_ip(index: int) -> str:
    return f"10.128.{index // 250}.{index % 250 + 2}"


def build_nodes(groups: Sequence[NodeGroup]) -> list[dict[str, Any]]:
    """Node manifests for the groups; names are stable so a spec always yields the same nodes."""
    nodes: list[dict[str, Any]] = []
    seen: dict[str, int] = {}

    def pool_name(base: str) -> str:
        # Two entries with the same shape get distinct pool names.
        n = seen.get(base, 0)
        seen[base] = n + 1
        return f"{base}-{n}"

    for group in groups:
        if isinstance(group, TpuPools):
            info = TPU_GENERATIONS[group.generation]
            topology = group.topology.lower()
            usual = default_machine(group.generation, topology)
            machine_type = group.machine or usual
            machine = TPU_MACHINES[machine_type]
            hosts, chips = tpu_slice_shape(group.generation, topology, machine_type)
            # Pools on the usual machine keep their short names; others say their chips.
            base = f"tpu-{group.generation}-{topology}"
            if machine_type != usual:
                base += f"-{machine.chips}t"
            block = pool_name(base + "-block")
            for _ in range(group.pools):
                pool = pool_name(base)
                labels = {
                    ACCELERATOR_LABEL: info.accelerator,
                    TOPOLOGY_LABEL: topology,
                    NODEPOOL_LABEL: pool,
                    INSTANCE_TYPE_LABEL: machine_type,
                    BETA_INSTANCE_TYPE_LABEL: machine_type,
                    BLOCK_LABEL: block,
                    SUBBLOCK_LABEL: pool,
                }
                resources = {
                    "cpu": machine.cpu,
                    "memory": machine.memory,
                    TPU_RESOURCE: str(chips),
                }
                for h in range(hosts):
                    taints = [accelerator_taint(TPU_RESOURCE)]
                    name = f"{pool}-h{h}"
                    host = {**labels, HOST_LABEL: name}
                    nodes.append(_node(name, len(nodes), host, resources, taints))
        elif isinstance(group, GpuDomains):
            gpus, product = GPU_MODELS[group.model]
            for _ in range(group.domains):
                pool = pool_name(f"gpu-{group.model}")
                labels = {
                    NODEPOOL_LABEL: pool,
                    CLIQUE_LABEL: f"devcluster.{pool}",
                    "nvidia.com/gpu.product": product,
                    "nvidia.com/gpu.count": str(gpus),
                }
                resources = {"cpu": "144", "memory": "880Gi", GPU_RESOURCE: str(gpus)}
                for h in range(group.hosts):
                    taints = [accelerator_taint(GPU_RESOURCE)]
                    nodes.append(_node(f"{pool}-n{h}", len(nodes), labels, resources, taints))
        else:
            pool = pool_name("cpu")
            for h in range(group.count):
                labels = {
                    NODEPOOL_LABEL: pool,
                    INSTANCE_TYPE_LABEL: CPU_MACHINE_TYPE,
                    BETA_INSTANCE_TYPE_LABEL: CPU_MACHINE_TYPE,
                }
                resources = {"cpu": "16", "memory": "64Gi"}
                nodes.append(_node(f"{pool}-n{h}", len(nodes), labels, resources))
    return nodes


SPEC_HELP = """\
Simulated nodes, repeatable (default: tpu:v6e:4x4:2 gpu:gb200:18:1 cpu:4).
`tpu:<gen>:<topology>[:<pools>]` adds node pools of one slice each (gen v4, v5e, v5p,
v6e, tpu7x; e.g. tpu:v6e:4x4:2 = 2 pools of 4 hosts with 4 chips; tpu:v5p:2x2x4 = 1 pool
of 4 hosts; v5e/v6e 2x4 = 1 host with 8 chips). Name GKE's machine type instead of the
generation to pick the hosts: tpu:ct6e-standard-4t:2x4 = 1 pool of 2 hosts with 4 chips,
tpu:ct6e-standard-8t:2x4 = 1 host with 8 (also ct5lp-hightpu-1t/4t/8t, ct6e-standard-1t,
ct4p-hightpu-4t, ct5p-hightpu-4t, tpu7x-standard-4t). Nodes carry GKE's labels
(gke-tpu-accelerator, gke-tpu-topology, gke-nodepool, node.kubernetes.io/instance-type;
TPU nodes also gce-topology-block/-subblock/-host: an entry is a block, a pool a sub-block);
`gpu:<model>:<hosts>[:<domains>]` adds NVLink domains whose hosts share an
nvidia.com/gpu.clique label (gb200, gb300: 4 GPUs per host; h100, h200, a100: 8);
`cpu:<count>` adds plain nodes. TPU and GPU nodes are tainted
<resource>=present:NoSchedule as on GKE; pods requesting the resource tolerate it."""
