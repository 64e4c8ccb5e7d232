from __future__ import annotations

import copy
from typing import Any

from raycluster_operator.api.models import RayCluster, load_cluster

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
