"""Whatever a user writes: parsing never raises, and a cluster without problems always builds."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raycluster_operator.accelerators import validate_cluster
from raycluster_operator.api.validation import parse_cluster
from raycluster_operator.builders import (
    build_autoscaler_rbac,
    build_head_pod,
    build_head_service,
    build_headless_service,
)

from .conftest import cluster_dict, worker_pod

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**32) | st.sampled_from(["", "x", "1", "4x4"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["name", "value", "image", "env", "ports", "containerPort", "limits", "memory"]
            ),
            inner,
            max_size=3,
        )
    ),
    max_leaves=6,
)

PATHS: list[list[Any]] = [
    ["metadata"],
    ["metadata", "annotations"],
    ["spec", "enableInTreeAutoscaling"],
    ["spec", "autoscalerOptions"],
    ["spec", "headGroupSpec", "rayStartParams"],
    ["spec", "headGroupSpec", "headService"],
    ["spec", "headGroupSpec", "template", "metadata"],
    ["spec", "headGroupSpec", "template", "spec", "containers", 0, "env"],
    ["spec", "headGroupSpec", "template", "spec", "containers", 0, "ports"],
    ["spec", "headGroupSpec", "template", "spec", "containers", 0, "resources"],
    ["spec", "headGroupSpec", "template", "spec", "containers", 0, "command"],
    ["spec", "headGroupSpec", "template", "spec", "volumes"],
    ["spec", "workerGroupSpecs", 0, "numOfHosts"],
    ["spec", "workerGroupSpecs", 0, "replicas"],
    ["spec", "workerGroupSpecs", 0, "template", "metadata"],
    ["spec", "workerGroupSpecs", 0, "template", "spec", "affinity"],
    ["spec", "workerGroupSpecs", 0, "template", "spec", "nodeSelector"],
    ["spec", "workerGroupSpecs", 0, "template", "spec", "containers", 0, "env"],
    ["spec", "workerGroupSpecs", 0, "template", "spec", "containers", 0, "resources"],
    ["spec", "workerGroupSpecs", 0, "template", "spec", "containers", 0, "args"],
    ["spec", "workerGroupSpecs", 1, "template", "spec"],
    ["spec", "workerGroupSpecs", 1, "scaleStrategy"],
]


def set_path(obj: dict[str, Any], path: list[Any], value: Any) -> None:
    node: Any = obj
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(range(len(PATHS))), json_values), max_size=3))
def test_parse_never_raises_and_valid_clusters_always_build(
    edits: list[tuple[int, Any]],
) -> None:
    obj = cluster_dict(enableInTreeAutoscaling=True)
    for index, value in edits:
        try:
            set_path(obj, PATHS[index], copy.deepcopy(value))
        except (KeyError, IndexError, TypeError):
            continue
    cluster, problems = parse_cluster(obj)
    if cluster is None or problems or validate_cluster(cluster):
        return
    build_head_pod(cluster)
    build_head_service(cluster)
    build_headless_service(cluster)
    build_autoscaler_rbac(cluster)
    for group in cluster.spec.worker_group_specs:
        multi = group.num_of_hosts > 1
        for host in range(min(group.num_of_hosts, 3)):
            worker_pod(cluster, group, host=host if multi else None)
