"""Pod affinity that keeps a slice's hosts in one topology domain, merged into the user's.

The TPU webhook replaced the user's affinity with its own (a known bug); here our terms are
appended to whatever the user wrote, so their node affinity, zone spreading and other terms
keep working.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from raycluster_operator.api import labels

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
#: The most a preferred term can weigh: kube-scheduler's inter-pod affinity score then outranks
#: its resource scores, so a slice's first host picks a domain free of other slices whenever
#: there is one (docs/design.md §3.5).
_PREFER_APART = 100


def slice_affinity(
    *,
    cluster: str,
    group: str,
    replica_name: str | None,
    slice_name: str,
    topology_key: str,
    exclusive: bool,
    slice_id: str = "",
) -> dict[str, Any]:
    """Required co-location with the pods of the same slice; with ``exclusive``, required
    separation from every other slice: the group's own, and (by ``slice_id``) any slice of
    any RayCluster in any namespace.

    The slice is identified by its replica name when the pod has one, else by the
    ``replicaIndex`` label that every multi-host pod carries.

    Why every RayCluster: kube-scheduler places pods one at a time. Two clusters' slices
    created together could each start in one domain, two hosts each, and then neither fits
    there nor anywhere else (their hosts must share the domain): both wait for good while
    other domains stay free. Benchmarked beside KubeRay (docs/design.md §8.3).

    Without ``exclusive`` (an NVLink clique may hold several slices) the same split happened
    to two slices of one RayCluster created together; a preferred term keeps each slice's
    first host away from the domains other slices of the cluster hold, while one is free.
    """
    key, value = (
        (labels.REPLICA_NAME, replica_name)
        if replica_name is not None
        else (labels.V1_REPLICA_INDEX, slice_name)
    )
    same_slice = {
        "labelSelector": {
            "matchLabels": {labels.CLUSTER: cluster, labels.GROUP: group, key: value}
        },
        "topologyKey": topology_key,
    }
    affinity: dict[str, Any] = {"podAffinity": {_REQUIRED: [same_slice]}}
    if exclusive:
        other_slices = {
            "labelSelector": {
                "matchLabels": {labels.CLUSTER: cluster, labels.GROUP: group},
                "matchExpressions": [
                    {"key": key, "operator": "Exists"},
                    {"key": key, "operator": "NotIn", "values": [value]},
                ],
            },
            "topologyKey": topology_key,
        }
        terms = [other_slices]
        if slice_id:
            terms.append(
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": labels.SLICE_ID, "operator": "Exists"},
                            {"key": labels.SLICE_ID, "operator": "NotIn", "values": [slice_id]},
                        ]
                    },
                    "namespaceSelector": {},
                    "topologyKey": topology_key,
                }
            )
        affinity["podAntiAffinity"] = {_REQUIRED: terms}
    else:
        other_slices_of_cluster = {
            "labelSelector": {
                "matchLabels": {labels.CLUSTER: cluster},
                "matchExpressions": [
                    {"key": labels.V1_REPLICA_INDEX, "operator": "Exists"},
                    {"key": labels.V1_REPLICA_INDEX, "operator": "NotIn", "values": [slice_name]},
                ],
            },
            "topologyKey": topology_key,
        }
        affinity["podAntiAffinity"] = {
            _PREFERRED: [{"weight": _PREFER_APART, "podAffinityTerm": other_slices_of_cluster}]
        }
    return affinity


def merge_affinity(user: Mapping[str, Any] | None, ours: Mapping[str, Any]) -> dict[str, Any]:
    """The user's affinity with our required terms appended (never replaced, never repeated)."""
    merged: dict[str, Any] = copy.deepcopy(dict(user)) if isinstance(user, Mapping) else {}
    for kind, section in ours.items():
        target = merged.get(kind)
        if not isinstance(target, dict):
            target = merged[kind] = {}
        for rule, terms in section.items():
            existing = target.get(rule)
            if not isinstance(existing, list):
                existing = target[rule] = []
            for term in terms:
                if term not in existing:
                    existing.append(copy.deepcopy(term))
    return merged
