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


def slice_affinity(
    *,
    cluster: str,
    group: str,
    replica_name: str | None,
    slice_name: str,
    topology_key: str,
    exclusive: bool,
) -> dict[str, Any]:
    """Required co-location with the pods of the same slice; with ``exclusive``, required
    separation from the group's other slices.

    The slice is identified by its replica name when the pod has one, else by the
    ``replicaIndex`` label that every multi-host pod carries.
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
        affinity["podAntiAffinity"] = {_REQUIRED: [other_slices]}
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
