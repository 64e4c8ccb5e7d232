"""Which kind of multi-host unit a worker group is, and what that means for its pods.

A profile is chosen from the group's template alone, so the same group always gets the same
treatment. Three kinds:

- **TPU** (a container requests ``google.com/tpu``): webhook-compatible env, hosts kept in one
  ``cloud.google.com/gke-nodepool``, one slice per node pool by default (as the webhook does).
- **GPU NVLink** (a multi-host group requesting ``nvidia.com/gpu``, or a group whose topology
  key is ``nvidia.com/gpu.clique``): hosts kept in one NVLink clique, and every host labelled
  ``ray.io/gpu-domain=<slice>`` in Ray so placement groups with
  ``topology_strategy={"ray.io/gpu-domain": "STRICT_PACK"}`` pack onto one domain.
- **generic**: no accelerator; co-location only if the template annotation
  ``ray.io/multi-host-topology-key`` names a node label.

Template annotations (on ``template.metadata.annotations`` of a worker group) override the
defaults: ``ray.io/multi-host-topology-key: <node label key>`` and
``ray.io/exclusive-topology: "true"|"false"`` (at most one slice of the group per domain).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from raycluster_operator.accelerators import tpu
from raycluster_operator.accelerators.identity import HostIdentity
from raycluster_operator.accelerators.placement import slice_affinity
from raycluster_operator.accelerators.tpu import EnvValue
from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster, WorkerGroupSpec
from raycluster_operator.api.problems import Problem
from raycluster_operator.api.quantities import container_quantity
from raycluster_operator.api.validation import validate_structure

GPU_RESOURCE = "nvidia.com/gpu"
#: Ray node label its placement groups can pack by (``topology_strategy``).
RAY_GPU_DOMAIN = "ray.io/gpu-domain"


class AcceleratorKind(StrEnum):
    TPU = "tpu"
    GPU_NVLINK = "gpu-nvlink"
    GENERIC = "generic"


@dataclass(frozen=True)
class AcceleratorProfile:
    kind: AcceleratorKind
    #: Node label all hosts of one slice share; None: no co-location is asked for.
    topology_key: str | None
    #: At most one slice of the group per topology domain.
    exclusive: bool
    tpu: tpu.TpuSlice | None = None

    def host_env(
        self,
        identity: HostIdentity,
        user_env: Collection[str],
        *,
        megascale_coordinator: str | None = None,
        container_index: int = 0,
        tpu_containers: int = 1,
    ) -> list[tuple[str, EnvValue]]:
        """Accelerator env for one container of a host, leaving out names the user set.

        ``container_index`` / ``tpu_containers``: the container's place among the pod's TPU
        containers (several on v7x, each its own TPU worker)."""
        if self.kind is AcceleratorKind.TPU and self.tpu is not None:
            return tpu.tpu_env(
                identity,
                self.tpu,
                user_env,
                megascale_coordinator=megascale_coordinator,
                container_index=container_index,
                tpu_containers=tpu_containers,
            )
        return []

    def ray_labels(
        self, identity: HostIdentity, *, container_index: int = 0, tpu_containers: int = 1
    ) -> dict[str, str]:
        """Ray node labels (``ray start --labels``) this host must carry; they win over the
        group's own labels (docs/design.md, rule 3.4a).

        TPU: the host's worker id, slice name, pod type and topology, the labels Ray's slice
        reservations select on. NVLink domains: nothing in Ray reads a domain from the
        environment, so the slice name is given as the domain: all hosts of a slice are
        placed in one clique, so equal values mean one NVLink domain.
        """
        if self.kind is AcceleratorKind.TPU and self.tpu is not None:
            return tpu.ray_node_labels(
                identity,
                self.tpu,
                container_index=container_index,
                tpu_containers=tpu_containers,
            )
        if self.kind is AcceleratorKind.GPU_NVLINK and identity.num_hosts > 1:
            return {RAY_GPU_DOMAIN: identity.slice_name}
        return {}

    def placement(self, identity: HostIdentity) -> dict[str, Any] | None:
        """Our affinity terms for a host, or None when the group asks for none."""
        if identity.num_hosts <= 1 or self.topology_key is None:
            return None
        return slice_affinity(
            cluster=identity.cluster,
            group=identity.group,
            replica_name=identity.replica_name,
            slice_name=identity.slice_name,
            slice_id=identity.slice_id,
            topology_key=self.topology_key,
            exclusive=self.exclusive,
        )


def _annotations(group: WorkerGroupSpec) -> Mapping[str, Any]:
    metadata = group.template.get("metadata")
    if not isinstance(metadata, Mapping):
        return {}
    annotations = metadata.get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def requests_gpus(group: WorkerGroupSpec) -> bool:
    spec = group.template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, list):
        return False
    return any(
        container_quantity(c, GPU_RESOURCE, kind=kind) > 0
        for c in containers
        if isinstance(c, Mapping)
        for kind in ("limits", "requests")
    )


def profile_for(group: WorkerGroupSpec) -> AcceleratorProfile:
    annotations = _annotations(group)
    key = annotations.get(labels.TOPOLOGY_KEY_ANNOTATION)
    key = key if isinstance(key, str) and key else None
    exclusive = annotations.get(labels.EXCLUSIVE_TOPOLOGY_ANNOTATION)
    if tpu.is_tpu_group(group):
        return AcceleratorProfile(
            AcceleratorKind.TPU,
            key or labels.GKE_NODEPOOL,
            exclusive != "false",
            tpu.tpu_slice(group),
        )
    if key == labels.NVIDIA_GPU_CLIQUE or (
        key is None and group.num_of_hosts > 1 and requests_gpus(group)
    ):
        return AcceleratorProfile(
            AcceleratorKind.GPU_NVLINK, key or labels.NVIDIA_GPU_CLIQUE, exclusive == "true"
        )
    return AcceleratorProfile(AcceleratorKind.GENERIC, key, exclusive == "true")


def validate_group(group: WorkerGroupSpec, path: str) -> list[Problem]:
    """Accelerator problems of one group (``path`` is ``spec.workerGroupSpecs[i]``)."""
    problems = tpu.validate_tpu_group(group, path)
    annotations = _annotations(group)
    apath = f"{path}.template.metadata.annotations"
    exclusive = annotations.get(labels.EXCLUSIVE_TOPOLOGY_ANNOTATION)
    if exclusive is not None and exclusive not in ("true", "false"):
        problems.append(
            Problem(
                f"{apath}[{labels.EXCLUSIVE_TOPOLOGY_ANNOTATION!r}]",
                f'must be "true" or "false", not {exclusive!r}',
            )
        )
    domains = annotations.get(labels.COMPUTE_DOMAIN_ANNOTATION)
    if domains is not None and domains not in ("auto", "true", "false"):
        problems.append(
            Problem(
                f"{apath}[{labels.COMPUTE_DOMAIN_ANNOTATION!r}]",
                f'must be "auto", "true" or "false", not {domains!r}',
            )
        )
    key = annotations.get(labels.TOPOLOGY_KEY_ANNOTATION)
    if key is not None and (not isinstance(key, str) or not _is_label_key(key)):
        problems.append(
            Problem(
                f"{apath}[{labels.TOPOLOGY_KEY_ANNOTATION!r}]",
                f"{key!r} is not a node label key such as topology.kubernetes.io/zone",
            )
        )
    if exclusive == "true" and profile_for(group).topology_key is None:
        problems.append(
            Problem(
                f"{apath}[{labels.EXCLUSIVE_TOPOLOGY_ANNOTATION!r}]",
                f"needs a topology: also set {labels.TOPOLOGY_KEY_ANNOTATION} to a node label key",
            )
        )
    return problems


def validate_cluster(cluster: RayCluster) -> list[Problem]:
    """Structural and accelerator problems of the whole cluster, in field order."""
    problems = validate_structure(cluster)
    for i, group in enumerate(cluster.spec.worker_group_specs):
        problems += validate_group(group, f"spec.workerGroupSpecs[{i}]")
    return problems


_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _is_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _LABEL_PREFIX.fullmatch(prefix)):
        return False
    return _LABEL_NAME.fullmatch(name) is not None
