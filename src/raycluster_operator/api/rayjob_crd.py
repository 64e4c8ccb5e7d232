"""The CustomResourceDefinition of ``rayjobs.ray.io`` (docs/design.md §11).

A structural schema with every field of KubeRay v1.7's RayJob ``v1``: the same types, defaults,
enums, CEL rules (``x-kubernetes-validations``) and printer columns, so a manifest KubeRay
accepts is accepted here and one it refuses is refused. The embedded ``rayClusterSpec`` is our
RayCluster spec schema (``crd.spec_schema``) and ``status.rayClusterStatus`` our RayCluster
status schema, so the RayCluster a RayJob creates has every multi-host feature.

Our additions are marked like the RayCluster CRD's (descriptions start with ``EXTENSION``):
``spec.sliceFailurePolicy`` and, in status, ``sliceFailures`` and ``resubmissions``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raycluster_operator.api.crd import (
    EXTENSION,
    _array,
    _bool,
    _int32,
    _string,
    _string_map,
    k8s,
    namespaced_crd,
    spec_schema,
    status_schema,
)
from raycluster_operator.api.models import API_GROUP

KIND = "RayJob"
PLURAL = "rayjobs"
VERSION = "v1"
NAME = f"{PLURAL}.{API_GROUP}"

Schema = dict[str, Any]

DELETION_POLICIES = ["DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"]
SLICE_FAILURE_POLICIES = ["LeaveToRay", "Resubmit", "FailJob"]
_MANAGED_BY = ["ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue"]


def _rule(rule: str, message: str) -> Schema:
    return {"rule": rule, "message": message}


def _time(description: str) -> Schema:
    return _string(description, format="date-time")


def _policy(description: str) -> Schema:
    return {
        "description": description,
        "type": "object",
        "properties": {"policy": _string("What to delete.", enum=list(DELETION_POLICIES))},
    }


def _deletion_rule() -> Schema:
    condition: Schema = {
        "description": "When the rule applies.",
        "type": "object",
        "properties": {
            "jobDeploymentStatus": _string("Deployment status to match.", enum=["Failed"]),
            "jobStatus": _string("Ray job status to match.", enum=["SUCCEEDED", "FAILED"]),
            "ttlSeconds": _int32(
                "Seconds after the job ends before the policy runs.", default=0, minimum=0
            ),
        },
        "x-kubernetes-validations": [
            _rule(
                "!(has(self.jobStatus) && has(self.jobDeploymentStatus))",
                "JobStatus and JobDeploymentStatus cannot be used together within the same "
                "deletion condition.",
            ),
            _rule(
                "has(self.jobStatus) || has(self.jobDeploymentStatus)",
                "the deletion condition requires either the JobStatus or the "
                "JobDeploymentStatus field.",
            ),
        ],
    }
    return {
        "type": "object",
        "required": ["condition", "policy"],
        "properties": {
            "condition": condition,
            "policy": _string("What to delete.", enum=list(DELETION_POLICIES)),
        },
    }


def _deletion_strategy() -> Schema:
    return {
        "description": "What to delete when the job ends (replaces shutdownAfterJobFinishes).",
        "type": "object",
        "properties": {
            "deletionRules": _array(
                "Rules by job outcome, each after its own TTL.",
                _deletion_rule(),
                minItems=1,
                **{"x-kubernetes-list-type": "atomic"},
            ),
            "onFailure": _policy("Policy when the job failed."),
            "onSuccess": _policy("Policy when the job succeeded."),
        },
        "x-kubernetes-validations": [
            _rule(
                "!((has(self.onSuccess) || has(self.onFailure)) && has(self.deletionRules))",
                "legacy policies (onSuccess/onFailure) and deletionRules cannot be used "
                "together within the same deletionStrategy",
            ),
            _rule(
                "((has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules))",
                "deletionStrategy requires either BOTH onSuccess and onFailure, OR the "
                "deletionRules field (cannot be empty)",
            ),
        ],
    }


def _managed_by() -> Schema:
    return {
        **_string("The controller that reconciles this RayJob; others leave it alone."),
        "x-kubernetes-validations": [
            _rule("self == oldSelf", "the managedBy field is immutable"),
            _rule(
                f"self in {_MANAGED_BY!r}",
                "the managedBy field value must be either 'ray.io/kuberay-operator' or "
                "'kueue.x-k8s.io/multikueue'",
            ),
        ],
    }


def rayjob_spec_schema() -> Schema:
    cluster = spec_schema()
    cluster["description"] = "The RayCluster to create for the job (one per attempt)."
    props: Schema = {
        "activeDeadlineSeconds": _int32("Seconds from start before the job fails."),
        "backoffLimit": _int32("Retries of a failed job, each on a new RayCluster.", default=0),
        "clusterSelector": _string_map("Run on an existing RayCluster (ray.io/cluster: NAME)."),
        "deletionStrategy": _deletion_strategy(),
        "entrypoint": _string("The command `ray job submit` runs."),
        "entrypointNumCpus": {"description": "CPUs for the entrypoint.", "type": "number"},
        "entrypointNumGpus": {"description": "GPUs for the entrypoint.", "type": "number"},
        "entrypointResources": _string("Custom resources for the entrypoint, as JSON."),
        "jobId": _string("The Ray job's submission id (InteractiveMode: the user's)."),
        "managedBy": _managed_by(),
        "metadata": _string_map("Metadata of the Ray job."),
        "preRunningDeadlineSeconds": _int32(
            "Seconds the job may take to start running.", minimum=1
        ),
        "rayClusterSpec": cluster,
        "runtimeEnvYAML": _string("The Ray runtime environment, as YAML."),
        "shutdownAfterJobFinishes": _bool("Delete the RayCluster once the job ends."),
        "submissionMode": _string(
            "K8sJobMode, HTTPMode, InteractiveMode or SidecarMode.", default="K8sJobMode"
        ),
        "submitterConfig": {
            "description": "The submitter Job's settings.",
            "type": "object",
            "properties": {"backoffLimit": _int32("The submitter Job's backoffLimit.")},
        },
        "submitterPodTemplate": k8s("PodTemplateSpec", "The submitter pod (K8sJobMode)."),
        "suspend": _bool("Delete the RayCluster and hold the job (Kueue's admission)."),
        "ttlSecondsAfterFinished": _int32(
            "Seconds after the job ends before its cluster is deleted.", default=0
        ),
        "sliceFailurePolicy": _string(
            f"{EXTENSION} what a worker slice that breaks while the job runs does to it: "
            "LeaveToRay (the default: the slice is replaced and Ray's retries decide), "
            "Resubmit (stop the Ray job and submit it again on the healed cluster, counted "
            "against backoffLimit) or FailJob.",
            enum=list(SLICE_FAILURE_POLICIES),
        ),
    }
    return {"description": "The desired Ray job.", "type": "object", "properties": props}


def _slice_failure() -> Schema:
    return {
        "type": "object",
        "properties": {
            "group": _string("Worker group of the slice."),
            "slice": _string("The slice (TPU_NAME, replicaIndex label)."),
            "host": _string("Host index within the slice."),
            "pod": _string("The pod that broke."),
            "node": _string("Its node."),
            "reason": _string("Failed, Deleted or Lost."),
            "action": _string("What the policy did: LeftToRay, Resubmitted or FailedJob."),
            "time": _time("When it was seen."),
        },
    }


def rayjob_status_schema(group_fields: Mapping[str, Mapping[str, Any]]) -> Schema:
    cluster_status = status_schema(group_fields)
    cluster_status["description"] = "The RayCluster's status, as last seen."
    props: Schema = {
        "dashboardURL": _string("host:port of the head's dashboard."),
        "endTime": _time("When the job reached Complete or Failed."),
        "failed": _int32("Failed attempts.", default=0),
        "jobDeploymentStatus": _string("Where the RayJob is in its lifecycle."),
        "jobId": _string("The Ray job's submission id."),
        "jobStatus": _string("The Ray job's status from the Jobs API."),
        "jobStatusCheckFailureStartTime": _time("Since when the Jobs API has not answered."),
        "message": _string("Why the job is in this state."),
        "observedGeneration": {
            "description": "The spec generation this status is for.",
            "type": "integer",
            "format": "int64",
        },
        "rayClusterName": _string("The RayCluster of this attempt."),
        "rayClusterStatus": cluster_status,
        "rayJobInfo": {
            "description": "Times reported by Ray.",
            "type": "object",
            "properties": {"endTime": _time("Ray's end."), "startTime": _time("Ray's start.")},
        },
        "reason": _string("Why the job failed."),
        "startTime": _time("When this attempt started."),
        "succeeded": _int32("Succeeded attempts.", default=0),
        "sliceFailures": _array(
            f"{EXTENSION} worker slices that broke while the job ran, newest last (at most "
            "10), and what sliceFailurePolicy did.",
            _slice_failure(),
        ),
    }
    return {"description": "What the operator observed.", "type": "object", "properties": props}


_PRINTER_COLUMNS: list[Schema] = [
    {"name": "job status", "type": "string", "jsonPath": ".status.jobStatus"},
    {"name": "deployment status", "type": "string", "jsonPath": ".status.jobDeploymentStatus"},
    {"name": "ray cluster name", "type": "string", "jsonPath": ".status.rayClusterName"},
    {"name": "start time", "type": "string", "jsonPath": ".status.startTime"},
    {"name": "end time", "type": "string", "jsonPath": ".status.endTime"},
    {"name": "age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def rayjob_crd_manifest(group_fields: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A fresh dict each call."""
    return namespaced_crd(
        KIND,
        PLURAL,
        "A Ray job run on a RayCluster the operator creates (or selects).",
        rayjob_spec_schema(),
        rayjob_status_schema(group_fields),
        _PRINTER_COLUMNS,
    )
