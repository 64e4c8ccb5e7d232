"""Cluster-wide facts that shape every pod of a RayCluster, read from the spec in one place.

Both the pod builders and the template hash ask them: a fact that shapes a pod but is missing
from the hash would let an upgrade go unnoticed (docs/design.md §3.8).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from raycluster_operator.api.models import RayCluster
from raycluster_operator.builders import ray_start

OVERWRITE_CMD_ANNOTATION = "ray.io/overwrite-container-cmd"


def autoscaling_enabled(cluster: RayCluster) -> bool:
    return bool(cluster.spec.enable_in_tree_autoscaling)


def autoscaler_v2(cluster: RayCluster) -> bool:
    """KubeRay's test: autoscalerOptions.version v2, or the head sets RAY_enable_autoscaler_v2."""
    if not autoscaling_enabled(cluster):
        return False
    options = cluster.spec.autoscaler_options
    if options is not None and options.version == "v2":
        return True
    _, spec = split_template(cluster.spec.head_group_spec.template)
    containers = spec.get("containers")
    head_env = containers[0].get("env") if isinstance(containers, list) and containers else None
    return any(
        isinstance(e, Mapping)
        and e.get("name") == "RAY_enable_autoscaler_v2"
        and str(e.get("value", "")).lower() in ("1", "true")
        for e in (head_env if isinstance(head_env, list) else [])
    )


def gcs_port(cluster: RayCluster) -> int:
    port = cluster.spec.head_group_spec.ray_start_params.get("port")
    return int(port) if port is not None and str(port).isdecimal() else ray_start.GCS_PORT


def overwrite_cmd(cluster: RayCluster) -> bool:
    annotations = cluster.metadata.annotations or {}
    return annotations.get(OVERWRITE_CMD_ANNOTATION, "").lower() == "true"


def split_template(template: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A pod template's metadata and spec, deep-copied so a builder may change them freely."""
    metadata = template.get("metadata")
    spec = template.get("spec")
    return (
        copy.deepcopy(dict(metadata)) if isinstance(metadata, Mapping) else {},
        copy.deepcopy(dict(spec)) if isinstance(spec, Mapping) else {},
    )
