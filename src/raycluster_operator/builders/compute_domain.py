"""A slice's ComputeDomain, and the claim on its channel in each of the slice's pods
(docs/design.md §3.9). Pure: the planner decides whether a slice has one."""

from __future__ import annotations

from typing import Any

from raycluster_operator import OPERATOR_NAME
from raycluster_operator.accelerators import CHANNEL_CLAIM
from raycluster_operator.api import labels, names
from raycluster_operator.api.models import RayCluster, WorkerGroupSpec
from raycluster_operator.builders.fields import ensure_list
from raycluster_operator.builders.metadata import owner_reference

API_VERSION = "resource.nvidia.com/v1beta1"
KIND = "ComputeDomain"
#: One IMEX channel per pod, the driver's default: what NCCL needs across hosts.
ALLOCATION_MODE = "Single"


def compute_domain(
    cluster: RayCluster, group: WorkerGroupSpec, replica_name: str
) -> dict[str, Any]:
    """The ComputeDomain of one slice: owned by the RayCluster (garbage collection removes it
    with the cluster), labelled with the cluster, group and replica name, ``numNodes`` = the
    slice's hosts so the driver's Ready means every host has joined."""
    name = names.compute_domain_name(cluster.metadata.name, replica_name)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": cluster.metadata.namespace,
            "labels": {
                labels.CLUSTER: cluster.metadata.name,
                labels.GROUP: group.group_name,
                labels.REPLICA_NAME: replica_name,
                labels.CREATED_BY: OPERATOR_NAME,
            },
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": {
            "numNodes": group.num_of_hosts,
            "channel": {
                "resourceClaimTemplate": {"name": name},
                "allocationMode": ALLOCATION_MODE,
            },
        },
    }


def wire_channel(pod: dict[str, Any], domain: str) -> dict[str, Any]:
    """The pod with the domain's claim template in ``spec.resourceClaims`` and the claim in
    its Ray container's ``resources.claims`` (the user's own entries are kept)."""
    spec = pod["spec"]
    claims = ensure_list(spec, "resourceClaims")
    claims.append({"name": CHANNEL_CLAIM, "resourceClaimTemplateName": domain})
    container = spec["containers"][0]
    if not isinstance(container.get("resources"), dict):
        container["resources"] = {}
    resources = container["resources"]
    ensure_list(resources, "claims").append({"name": CHANNEL_CLAIM})
    return pod
