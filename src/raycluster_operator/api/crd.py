"""The CustomResourceDefinition of ``rayclusters.ray.io`` this operator installs.

The schema types only the fields the operator reads, and preserves everything else, so any
RayCluster KubeRay accepts is accepted here too and nothing a user wrote is pruned. Bounds and
defaults match KubeRay's: counts are int32 and non-negative, ``numOfHosts`` defaults to 1 and
must be at least 1, ``replicas``/``minReplicas`` default to 0 (Ray's autoscalers read both
unconditionally) and ``maxReplicas`` to 2^31-1. Status is a subresource (the operator writes
only status) and keeps our extra slice counts.
"""

from __future__ import annotations

import copy
from typing import Any

from raycluster_operator.api.models import API_GROUP, INT32_MAX, KIND, PLURAL

VERSION = "v1"
NAME = f"{PLURAL}.{API_GROUP}"


def _int32(*, minimum: int | None = None, default: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "integer", "format": "int32", "maximum": INT32_MAX}
    if minimum is not None:
        out["minimum"] = minimum
    if default is not None:
        out["default"] = default
    return out


def _open_object(properties: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if properties:
        out["properties"] = properties
    out.update(extra)
    return out


_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_POD_TEMPLATE = _open_object(description="A Kubernetes PodTemplateSpec; not pruned.")

_HEAD_GROUP = _open_object(
    {
        "rayStartParams": _STRING_MAP,
        "template": _POD_TEMPLATE,
        "serviceType": {"type": "string"},
        "headService": _open_object(),
        "enableIngress": {"type": "boolean"},
        "resources": _STRING_MAP,
        "labels": _STRING_MAP,
    },
    required=["template"],
)

_WORKER_GROUP = _open_object(
    {
        "groupName": {"type": "string"},
        "replicas": _int32(minimum=0, default=0),
        "minReplicas": _int32(minimum=0, default=0),
        "maxReplicas": _int32(minimum=0, default=INT32_MAX),
        "numOfHosts": _int32(minimum=1, default=1),
        "idleTimeoutSeconds": _int32(minimum=0),
        "suspend": {"type": "boolean"},
        "rayStartParams": _STRING_MAP,
        "template": _POD_TEMPLATE,
        "scaleStrategy": _open_object(
            {"workersToDelete": {"type": "array", "items": {"type": "string"}}}
        ),
        "resources": _STRING_MAP,
        "labels": _STRING_MAP,
    },
    required=["groupName"],
)

_SPEC = _open_object(
    {
        "rayVersion": {"type": "string"},
        "enableInTreeAutoscaling": {"type": "boolean"},
        "autoscalerOptions": _open_object(),
        "suspend": {"type": "boolean"},
        "idleSuspend": {"type": "boolean"},
        "idleTerminationOptions": _open_object(
            {"timeoutSeconds": _int32(minimum=0), "policy": {"type": "string"}}
        ),
        "managedBy": {"type": "string"},
        "headGroupSpec": _HEAD_GROUP,
        "workerGroupSpecs": {"type": "array", "items": _WORKER_GROUP},
    },
    required=["headGroupSpec"],
)

_WORKER_GROUP_STATUS = _open_object(
    {
        "groupName": {"type": "string"},
        "numOfHosts": {"type": "integer", "format": "int32"},
        "desiredSlices": {"type": "integer", "format": "int32"},
        "readySlices": {"type": "integer", "format": "int32"},
        "brokenSlices": {"type": "integer", "format": "int32"},
        "desiredPods": {"type": "integer", "format": "int32"},
        "readyPods": {"type": "integer", "format": "int32"},
    }
)

_STATUS = _open_object(
    {
        "state": {"type": "string"},
        "desiredWorkerReplicas": {"type": "integer", "format": "int32"},
        "readyWorkerReplicas": {"type": "integer", "format": "int32"},
        "availableWorkerReplicas": {"type": "integer", "format": "int32"},
        "desiredWorkerSlices": {"type": "integer", "format": "int32"},
        "readyWorkerSlices": {"type": "integer", "format": "int32"},
        "workerGroups": {"type": "array", "items": _WORKER_GROUP_STATUS},
    }
)

_PRINTER_COLUMNS = [
    {"name": "Desired Pods", "type": "integer", "jsonPath": ".status.desiredWorkerReplicas"},
    {"name": "Ready Pods", "type": "integer", "jsonPath": ".status.readyWorkerReplicas"},
    {"name": "Ready Slices", "type": "integer", "jsonPath": ".status.readyWorkerSlices"},
    {"name": "Status", "type": "string", "jsonPath": ".status.state"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def crd_manifest() -> dict[str, Any]:
    """A fresh dict each call (callers may add labels or annotations to it)."""
    schema = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": copy.deepcopy(_SPEC),
            "status": copy.deepcopy(_STATUS),
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": API_GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "categories": ["all"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": copy.deepcopy(_PRINTER_COLUMNS),
                }
            ],
        },
    }
