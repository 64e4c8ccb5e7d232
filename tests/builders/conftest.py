from __future__ import annotations

import copy
from typing import Any

from raycluster_operator.api.models import RayCluster, WorkerGroupSpec, load_cluster
from raycluster_operator.builders import build_worker_pod

IMAGE = "rayproject/ray:2.60.0"


def tpu_worker_group(**overrides: Any) -> dict[str, Any]:
    group: dict[str, Any] = {
        "groupName": "tpu",
        "replicas": 2,
        "numOfHosts": 4,
        "rayStartParams": {},
        "template": {
            "metadata": {"labels": {"team": "research"}, "annotations": {"note": "x"}},
            "spec": {
                "nodeSelector": {
                    "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                    "cloud.google.com/gke-tpu-topology": "4x4",
                },
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": IMAGE,
                        "resources": {
                            "limits": {"cpu": "8", "memory": "16Gi", "google.com/tpu": "4"},
                            "requests": {"cpu": "8", "memory": "16Gi", "google.com/tpu": "4"},
                        },
                    }
                ],
            },
        },
    }
    group.update(overrides)
    return group


def cluster_dict(**spec_overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "demo", "namespace": "ml", "uid": "uid-1"},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "ray-head",
                                "image": IMAGE,
                                "resources": {"limits": {"cpu": "2", "memory": "4Gi"}},
                            }
                        ]
                    }
                },
            },
            "workerGroupSpecs": [
                tpu_worker_group(),
                {
                    "groupName": "cpu",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "w",
                                    "image": IMAGE,
                                    "resources": {"requests": {"cpu": "500m"}},
                                }
                            ]
                        }
                    },
                },
            ],
        },
    }
    obj["spec"].update(spec_overrides)
    return obj


def make_cluster(**spec_overrides: Any) -> RayCluster:
    return load_cluster(copy.deepcopy(cluster_dict(**spec_overrides)))


def env_of(pod: dict[str, Any], container: int = 0) -> dict[str, Any]:
    return {
        e["name"]: e.get("value", e.get("valueFrom"))
        for e in pod["spec"]["containers"][container].get("env", [])
    }


def worker_pod(
    cluster: RayCluster,
    group: int | WorkerGroupSpec = 0,
    *,
    replica: int | None = 0,
    host: int | None = None,
    replica_name: str | None = None,
    **options: bool,
) -> dict[str, Any]:
    """A worker pod as the planner asks for one: `group` is the group or its index in the
    cluster; a `host` makes it that host of a multi-host slice named `replica_name` (by default
    the group's name and a fixed suffix, as the planner draws one), no `host` a single-host pod.
    Tests of the builder's own argument contract call `build_worker_pod` directly."""
    spec = cluster.spec.worker_group_specs[group] if isinstance(group, int) else group
    if host is not None and replica_name is None:
        replica_name = f"{spec.group_name[:50]}-bcdfg"
    return build_worker_pod(
        cluster,
        spec,
        replica_index=replica,
        replica_name=replica_name if host is not None else None,
        host_index=host,
        **options,
    )
