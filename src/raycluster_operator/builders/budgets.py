"""Manifests for planned disruptions (docs/design.md §4 rule 12b): a slice's own
PodDisruptionBudget, and the node affinity that keeps a moved slice off the disrupted nodes.

A PodDisruptionBudget counts pods; a slice is all its hosts or nothing. So each multi-host
slice gets a budget of its own with ``minAvailable`` = its host count: an integer, so that the
disruption controller counts the selected pods without asking for the controller's scale (a
RayCluster has no scale subresource, and a percentage or ``maxUnavailable`` budget over pods
without a scalable controller fails to sync). With every host Ready no eviction is allowed: a
drain waits (kubectl retries the 429 every 5 s) while the operator moves the slice whole.
`unhealthyPodEvictionPolicy: AlwaysAllow` lets a drain take a host that is not Ready at once
(the slice is broken already; the budget protects only healthy slices). The
budget selects the slice by cluster and replica name (replica names are unique in a cluster,
not across clusters of a namespace), is owned by the RayCluster, and is labelled with the
cluster's name so the operator's informer sees only its own budgets.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from raycluster_operator import OPERATOR_NAME
from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster
from raycluster_operator.api.names import fit
from raycluster_operator.builders.metadata import owner_reference

PDB_API_VERSION = "policy/v1"
PDB_KIND = "PodDisruptionBudget"
#: Kubernetes' hostname label: what a moved slice's node affinity excludes.
HOSTNAME = "kubernetes.io/hostname"
#: PodDisruptionBudget names are DNS subdomains.
_NAME_MAX = 253


def budget_name(cluster: str, replica_name: str) -> str:
    return fit(f"{cluster}-{replica_name}", _NAME_MAX)


def slice_budget(cluster: RayCluster, group: str, replica_name: str, hosts: int) -> dict[str, Any]:
    """The budget that keeps a voluntary eviction from taking one host of this slice."""
    name = cluster.metadata.name
    return {
        "apiVersion": PDB_API_VERSION,
        "kind": PDB_KIND,
        "metadata": {
            "name": budget_name(name, replica_name),
            "namespace": cluster.metadata.namespace,
            "labels": {
                labels.CLUSTER: name,
                labels.GROUP: group,
                labels.REPLICA_NAME: replica_name,
                labels.CREATED_BY: OPERATOR_NAME,
            },
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": {
            "minAvailable": hosts,
            # A NotReady host must not hold a drain until the slice is replaced: an unhealthy
            # pod is evictable whatever the budget says (docs/design.md §4 rule 12b).
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
            "selector": {"matchLabels": {labels.CLUSTER: name, labels.REPLICA_NAME: replica_name}},
        },
    }


def avoid_nodes(manifest: Mapping[str, Any], nodes: Iterable[str]) -> dict[str, Any]:
    """The pod with a required node affinity excluding ``nodes`` (by hostname), added to every
    node selector term the pod already has (terms are ORed: each must exclude them)."""
    avoided = sorted(set(nodes))
    out = copy.deepcopy(dict(manifest))
    if not avoided:
        return out
    expression = {"key": HOSTNAME, "operator": "NotIn", "values": avoided}
    spec = out.setdefault("spec", {})
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term.setdefault("matchExpressions", []).append(dict(expression))
    required["nodeSelectorTerms"] = terms
    return out
