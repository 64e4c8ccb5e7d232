"""Pydantic models of KubeRay's `ray.io/v1` RayCluster, with KubeRay's field names.

The models exist to read a RayCluster safely, not to own it: every model keeps fields it does
not know (``extra="allow"``) and pod templates stay plain dicts, so a load followed by
``dump_cluster`` gives back what the user wrote. The operator never writes a spec, so
round-trip safety matters for `plan -o json`, for the dev cluster demo and for tests.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: Largest value of a Kubernetes int32 field; KubeRay caps maxReplicas at it.
INT32_MAX = 2**31 - 1

API_GROUP = "ray.io"
API_VERSION = "ray.io/v1"
KIND = "RayCluster"
PLURAL = "rayclusters"


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ScaleStrategy(_Model):
    workers_to_delete: list[str] = Field(default_factory=list, alias="workersToDelete")


class HeadGroupSpec(_Model):
    ray_start_params: dict[str, str] = Field(default_factory=dict, alias="rayStartParams")
    template: dict[str, Any] = Field(default_factory=dict)
    service_type: str | None = Field(default=None, alias="serviceType")
    head_service: dict[str, Any] | None = Field(default=None, alias="headService")
    enable_ingress: bool | None = Field(default=None, alias="enableIngress")
    resources: dict[str, str] | None = None
    labels: dict[str, str] | None = None


class WorkerGroupSpec(_Model):
    group_name: str = Field(alias="groupName")
    replicas: int | None = None
    min_replicas: int | None = Field(default=None, alias="minReplicas")
    max_replicas: int | None = Field(default=None, alias="maxReplicas")
    num_of_hosts: int = Field(default=1, alias="numOfHosts")
    idle_timeout_seconds: int | None = Field(default=None, alias="idleTimeoutSeconds")
    suspend: bool | None = None
    ray_start_params: dict[str, str] = Field(default_factory=dict, alias="rayStartParams")
    template: dict[str, Any] = Field(default_factory=dict)
    scale_strategy: ScaleStrategy | None = Field(default=None, alias="scaleStrategy")
    resources: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    #: EXTENSION: how many slices the group's planned disruptions may take at once (rule 12b).
    max_unavailable: int | None = Field(default=None, alias="maxUnavailable")

    @property
    def workers_to_delete(self) -> list[str]:
        return self.scale_strategy.workers_to_delete if self.scale_strategy else []


class AutoscalerOptions(_Model):
    upscaling_mode: str | None = Field(default=None, alias="upscalingMode")
    idle_timeout_seconds: int | None = Field(default=None, alias="idleTimeoutSeconds")
    image: str | None = None
    image_pull_policy: str | None = Field(default=None, alias="imagePullPolicy")
    resources: dict[str, Any] | None = None
    env: list[dict[str, Any]] | None = None
    env_from: list[dict[str, Any]] | None = Field(default=None, alias="envFrom")
    volume_mounts: list[dict[str, Any]] | None = Field(default=None, alias="volumeMounts")
    security_context: dict[str, Any] | None = Field(default=None, alias="securityContext")
    version: str | None = None


class IdleTerminationOptions(_Model):
    """Read by Ray's autoscaler v2, which acts on it; the operator only honours the result
    (``idleSuspend``, or Ray's finalizer on a deleted cluster)."""

    timeout_seconds: int | None = Field(default=None, alias="timeoutSeconds")
    policy: str | None = None


class RollingUpdate(_Model):
    """Ours (docs/design.md §4, rule 12a): bounds of a rolling upgrade, counted in slices."""

    max_unavailable: int | str | None = Field(default=None, alias="maxUnavailable")
    max_surge: int | str | None = Field(default=None, alias="maxSurge")


class UpgradeStrategy(_Model):
    #: ``None`` (the default), ``Recreate`` (KubeRay's) or ``RollingUpdate`` (ours).
    type: str | None = None
    rolling_update: RollingUpdate | None = Field(default=None, alias="rollingUpdate")


class RayClusterSpec(_Model):
    ray_version: str | None = Field(default=None, alias="rayVersion")
    enable_in_tree_autoscaling: bool | None = Field(default=None, alias="enableInTreeAutoscaling")
    autoscaler_options: AutoscalerOptions | None = Field(default=None, alias="autoscalerOptions")
    suspend: bool | None = None
    #: Set by Ray's autoscaler (idle policy Suspend); suspends the cluster like ``suspend``.
    idle_suspend: bool | None = Field(default=None, alias="idleSuspend")
    idle_termination_options: IdleTerminationOptions | None = Field(
        default=None, alias="idleTerminationOptions"
    )
    managed_by: str | None = Field(default=None, alias="managedBy")
    head_group_spec: HeadGroupSpec = Field(alias="headGroupSpec")
    worker_group_specs: list[WorkerGroupSpec] = Field(
        default_factory=list, alias="workerGroupSpecs"
    )
    upgrade_strategy: UpgradeStrategy | None = Field(default=None, alias="upgradeStrategy")


class Condition(_Model):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = Field(default=None, alias="lastTransitionTime")
    observed_generation: int | None = Field(default=None, alias="observedGeneration")


class HeadInfo(_Model):
    pod_ip: str | None = Field(default=None, alias="podIP")
    service_ip: str | None = Field(default=None, alias="serviceIP")
    pod_name: str | None = Field(default=None, alias="podName")
    service_name: str | None = Field(default=None, alias="serviceName")


class WorkerGroupStatus(_Model):
    """Our per-group slice counts (not in KubeRay): slices are what multi-host users reason in."""

    group_name: str = Field(alias="groupName")
    num_of_hosts: int | None = Field(default=None, alias="numOfHosts")
    desired_slices: int | None = Field(default=None, alias="desiredSlices")
    ready_slices: int | None = Field(default=None, alias="readySlices")
    broken_slices: int | None = Field(default=None, alias="brokenSlices")
    desired_pods: int | None = Field(default=None, alias="desiredPods")
    ready_pods: int | None = Field(default=None, alias="readyPods")
    updated_slices: int | None = Field(default=None, alias="updatedSlices")


class RayClusterStatus(_Model):
    state: str | None = None
    reason: str | None = None
    desired_worker_replicas: int | None = Field(default=None, alias="desiredWorkerReplicas")
    ready_worker_replicas: int | None = Field(default=None, alias="readyWorkerReplicas")
    available_worker_replicas: int | None = Field(default=None, alias="availableWorkerReplicas")
    min_worker_replicas: int | None = Field(default=None, alias="minWorkerReplicas")
    max_worker_replicas: int | None = Field(default=None, alias="maxWorkerReplicas")
    desired_cpu: str | None = Field(default=None, alias="desiredCPU")
    desired_memory: str | None = Field(default=None, alias="desiredMemory")
    desired_gpu: str | None = Field(default=None, alias="desiredGPU")
    desired_tpu: str | None = Field(default=None, alias="desiredTPU")
    last_update_time: str | None = Field(default=None, alias="lastUpdateTime")
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    endpoints: dict[str, str] | None = None
    head: HeadInfo | None = None
    conditions: list[Condition] | None = None
    desired_worker_slices: int | None = Field(default=None, alias="desiredWorkerSlices")
    ready_worker_slices: int | None = Field(default=None, alias="readyWorkerSlices")
    worker_groups: list[WorkerGroupStatus] | None = Field(default=None, alias="workerGroups")


class ObjectMeta(_Model):
    name: str = ""
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    deletion_timestamp: str | None = Field(default=None, alias="deletionTimestamp")


class RayCluster(_Model):
    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: RayClusterSpec
    status: RayClusterStatus | None = None


def load_cluster(obj: dict[str, Any]) -> RayCluster:
    """Parse a RayCluster object as the API server returns it (raises pydantic.ValidationError)."""
    return RayCluster.model_validate(obj)


def dump_cluster(cluster: RayCluster) -> dict[str, Any]:
    """Back to the wire form, keeping only what was set, so unknown fields survive unchanged."""
    return cluster.model_dump(by_alias=True, exclude_unset=True, mode="json")
