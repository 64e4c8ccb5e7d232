"""Facts of KubeRay v1.7's RayJob CRD (`ray-operator/config/crd/bases/ray.io_rayjobs.yaml`),
read from its public source and written down as data: every field path outside the embedded
RayCluster spec/status and pod template with its type, format, default, enum and bounds; the
CEL rules by path; the printer columns. v1.6.2 has the same fields except
`status.jobStatusCheckFailureStartTime`."""

from __future__ import annotations

from typing import Any

FIELDS: dict[str, dict[str, Any]] = {
    "spec": {"type": "object"},
    "spec.activeDeadlineSeconds": {"format": "int32", "type": "integer"},
    "spec.backoffLimit": {"default": 0, "format": "int32", "type": "integer"},
    "spec.clusterSelector": {"type": "object"},
    "spec.deletionStrategy": {"type": "object"},
    "spec.deletionStrategy.deletionRules": {
        "minItems": 1,
        "type": "array",
        "x-kubernetes-list-type": "atomic",
    },
    "spec.deletionStrategy.deletionRules[].condition": {"type": "object"},
    "spec.deletionStrategy.deletionRules[].condition.jobDeploymentStatus": {
        "enum": ["Failed"],
        "type": "string",
    },
    "spec.deletionStrategy.deletionRules[].condition.jobStatus": {
        "enum": ["SUCCEEDED", "FAILED"],
        "type": "string",
    },
    "spec.deletionStrategy.deletionRules[].condition.ttlSeconds": {
        "default": 0,
        "format": "int32",
        "minimum": 0,
        "type": "integer",
    },
    "spec.deletionStrategy.deletionRules[].policy": {
        "enum": ["DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"],
        "type": "string",
    },
    "spec.deletionStrategy.onFailure": {"type": "object"},
    "spec.deletionStrategy.onFailure.policy": {
        "enum": ["DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"],
        "type": "string",
    },
    "spec.deletionStrategy.onSuccess": {"type": "object"},
    "spec.deletionStrategy.onSuccess.policy": {
        "enum": ["DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"],
        "type": "string",
    },
    "spec.entrypoint": {"type": "string"},
    "spec.entrypointNumCpus": {"type": "number"},
    "spec.entrypointNumGpus": {"type": "number"},
    "spec.entrypointResources": {"type": "string"},
    "spec.jobId": {"type": "string"},
    "spec.managedBy": {"type": "string"},
    "spec.metadata": {"type": "object"},
    "spec.preRunningDeadlineSeconds": {"format": "int32", "minimum": 1, "type": "integer"},
    "spec.rayClusterSpec": {"type": "object"},
    "spec.runtimeEnvYAML": {"type": "string"},
    "spec.shutdownAfterJobFinishes": {"type": "boolean"},
    "spec.submissionMode": {"default": "K8sJobMode", "type": "string"},
    "spec.submitterConfig": {"type": "object"},
    "spec.submitterConfig.backoffLimit": {"format": "int32", "type": "integer"},
    "spec.submitterPodTemplate": {"type": "object"},
    "spec.suspend": {"type": "boolean"},
    "spec.ttlSecondsAfterFinished": {"default": 0, "format": "int32", "type": "integer"},
    "status": {"type": "object"},
    "status.dashboardURL": {"type": "string"},
    "status.endTime": {"format": "date-time", "type": "string"},
    "status.failed": {"default": 0, "format": "int32", "type": "integer"},
    "status.jobDeploymentStatus": {"type": "string"},
    "status.jobId": {"type": "string"},
    "status.jobStatus": {"type": "string"},
    "status.jobStatusCheckFailureStartTime": {"format": "date-time", "type": "string"},
    "status.message": {"type": "string"},
    "status.observedGeneration": {"format": "int64", "type": "integer"},
    "status.rayClusterName": {"type": "string"},
    "status.rayClusterStatus": {"type": "object"},
    "status.rayJobInfo": {"type": "object"},
    "status.rayJobInfo.endTime": {"format": "date-time", "type": "string"},
    "status.rayJobInfo.startTime": {"format": "date-time", "type": "string"},
    "status.reason": {"type": "string"},
    "status.startTime": {"format": "date-time", "type": "string"},
    "status.succeeded": {"default": 0, "format": "int32", "type": "integer"},
}

CEL_RULES: dict[str, list[str]] = {
    "spec.deletionStrategy": [
        "!((has(self.onSuccess) || has(self.onFailure)) && has(self.deletionRules))",
        "((has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules))",
    ],
    "spec.deletionStrategy.deletionRules[].condition": [
        "!(has(self.jobStatus) && has(self.jobDeploymentStatus))",
        "has(self.jobStatus) || has(self.jobDeploymentStatus)",
    ],
    "spec.managedBy": [
        "self == oldSelf",
        "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",
    ],
}

PRINTER_COLUMNS: list[tuple[str, str, str]] = [
    ("job status", "string", ".status.jobStatus"),
    ("deployment status", "string", ".status.jobDeploymentStatus"),
    ("ray cluster name", "string", ".status.rayClusterName"),
    ("start time", "string", ".status.startTime"),
    ("end time", "string", ".status.endTime"),
    ("age", "date", ".metadata.creationTimestamp"),
]
