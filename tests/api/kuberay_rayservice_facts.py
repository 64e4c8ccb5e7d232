"""Facts of KubeRay v1.7's RayService CRD (`ray-operator/config/crd/bases/ray.io_rayservices.yaml`
at `ray-operator/v1.7.0`), read from its public source and written down as data: every field path
outside the embedded RayCluster spec/status and Service with its type, format, default, enum,
bounds and required fields (``{}`` steps into a map's values, ``[]`` into a list's items); the
CEL rules by path; the printer columns."""

from __future__ import annotations

from typing import Any

FIELDS: dict[str, dict[str, Any]] = {
    "spec": {"required": ["rayClusterConfig"], "type": "object"},
    "spec.deploymentUnhealthySecondThreshold": {"format": "int32", "type": "integer"},
    "spec.excludeHeadPodFromServeSvc": {"type": "boolean"},
    "spec.managedBy": {"type": "string"},
    "spec.rayClusterConfig": {"required": ["headGroupSpec"], "type": "object"},
    "spec.rayClusterDeletionDelaySeconds": {"format": "int32", "minimum": 0, "type": "integer"},
    "spec.serveConfigV2": {"type": "string"},
    "spec.serveService": {"type": "object"},
    "spec.serviceUnhealthySecondThreshold": {"format": "int32", "type": "integer"},
    "spec.suspend": {"type": "boolean"},
    "spec.upgradeStrategy": {"type": "object"},
    "spec.upgradeStrategy.clusterUpgradeOptions": {
        "required": ["gatewayClassName", "intervalSeconds", "stepSizePercent"],
        "type": "object",
    },
    "spec.upgradeStrategy.clusterUpgradeOptions.gatewayClassName": {"type": "string"},
    "spec.upgradeStrategy.clusterUpgradeOptions.intervalSeconds": {
        "format": "int32",
        "type": "integer",
    },
    "spec.upgradeStrategy.clusterUpgradeOptions.maxSurgePercent": {
        "default": 100,
        "format": "int32",
        "type": "integer",
    },
    "spec.upgradeStrategy.clusterUpgradeOptions.stepSizePercent": {
        "format": "int32",
        "type": "integer",
    },
    "spec.upgradeStrategy.type": {"type": "string"},
    "status": {"type": "object"},
    "status.activeServiceStatus": {"type": "object"},
    "status.activeServiceStatus.applicationStatuses": {"type": "object"},
    "status.activeServiceStatus.applicationStatuses{}.message": {"type": "string"},
    "status.activeServiceStatus.applicationStatuses{}.serveDeploymentStatuses": {"type": "object"},
    "status.activeServiceStatus.applicationStatuses{}.serveDeploymentStatuses{}.message": {
        "type": "string"
    },
    "status.activeServiceStatus.applicationStatuses{}.serveDeploymentStatuses{}.status": {
        "type": "string"
    },
    "status.activeServiceStatus.applicationStatuses{}.status": {"type": "string"},
    "status.activeServiceStatus.lastTrafficMigratedTime": {"format": "date-time", "type": "string"},
    "status.activeServiceStatus.rayClusterName": {"type": "string"},
    "status.activeServiceStatus.rayClusterStatus": {"type": "object"},
    "status.activeServiceStatus.targetCapacity": {"format": "int32", "type": "integer"},
    "status.activeServiceStatus.trafficRoutedPercent": {"format": "int32", "type": "integer"},
    "status.conditions": {
        "type": "array",
        "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-list-type": "map",
    },
    "status.conditions[].lastTransitionTime": {"format": "date-time", "type": "string"},
    "status.conditions[].message": {"maxLength": 32768, "type": "string"},
    "status.conditions[].observedGeneration": {"format": "int64", "minimum": 0, "type": "integer"},
    "status.conditions[].reason": {
        "maxLength": 1024,
        "minLength": 1,
        "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        "type": "string",
    },
    "status.conditions[].status": {"enum": ["True", "False", "Unknown"], "type": "string"},
    "status.conditions[].type": {
        "maxLength": 316,
        "pattern": (
            r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        ),
        "type": "string",
    },
    "status.lastUpdateTime": {"format": "date-time", "type": "string"},
    "status.numServeEndpoints": {"format": "int32", "type": "integer"},
    "status.observedGeneration": {"format": "int64", "type": "integer"},
    "status.pendingServiceStatus": {"type": "object"},
    "status.pendingServiceStatus.applicationStatuses": {"type": "object"},
    "status.pendingServiceStatus.applicationStatuses{}.message": {"type": "string"},
    "status.pendingServiceStatus.applicationStatuses{}.serveDeploymentStatuses": {"type": "object"},
    "status.pendingServiceStatus.applicationStatuses{}.serveDeploymentStatuses{}.message": {
        "type": "string"
    },
    "status.pendingServiceStatus.applicationStatuses{}.serveDeploymentStatuses{}.status": {
        "type": "string"
    },
    "status.pendingServiceStatus.applicationStatuses{}.status": {"type": "string"},
    "status.pendingServiceStatus.lastTrafficMigratedTime": {
        "format": "date-time",
        "type": "string",
    },
    "status.pendingServiceStatus.rayClusterName": {"type": "string"},
    "status.pendingServiceStatus.rayClusterStatus": {"type": "object"},
    "status.pendingServiceStatus.targetCapacity": {"format": "int32", "type": "integer"},
    "status.pendingServiceStatus.trafficRoutedPercent": {"format": "int32", "type": "integer"},
    "status.serviceStatus": {"type": "string"},
}

CEL_RULES: dict[str, list[str]] = {
    "spec.managedBy": [
        "self == oldSelf",
        "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",
    ]
}

PRINTER_COLUMNS: list[tuple[str, str, str]] = [
    ("service status", "string", ".status.serviceStatus"),
    ("num serve endpoints", "string", ".status.numServeEndpoints"),
]
