"""The CustomResourceDefinition of ``rayservices.ray.io`` (docs/design.md §12).

A structural schema with every field of KubeRay v1.7's RayService ``v1``: the same types,
defaults, bounds, required fields, CEL rules (``managedBy``) and printer columns, so a manifest
KubeRay accepts is accepted here. The embedded ``rayClusterConfig`` is our RayCluster spec
schema (``crd.spec_schema``) and each ``rayClusterStatus`` our RayCluster status schema, so the
clusters a RayService runs have every multi-host feature; ``serveService`` is Kubernetes'
Service, generated from its OpenAPI like the RayCluster CRD's embedded types. No extensions:
what the operator adds to serving (slice-aware endpoints, §12) is carried by pod labels and
Events, which every schema keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raycluster_operator.api.crd import (
    _array,
    _bool,
    _condition,
    _int32,
    _string,
    k8s,
    namespaced_crd,
    spec_schema,
    status_schema,
)
from raycluster_operator.api.models import API_GROUP

KIND = "RayService"
PLURAL = "rayservices"
NAME = f"{PLURAL}.{API_GROUP}"

Schema = dict[str, Any]

#: KubeRay v1.7's upgrade types (``RayServiceUpgradeType``).
NEW_CLUSTER = "NewCluster"
INCREMENTAL = "NewClusterWithIncrementalUpgrade"
NONE = "None"
UPGRADE_TYPES = (NEW_CLUSTER, INCREMENTAL, NONE)
_MANAGED_BY = ["ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue"]


def _managed_by() -> Schema:
    return {
        **_string("The controller that reconciles this RayService; others leave it alone."),
        "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "the managedBy field is immutable"},
            {
                "rule": f"self in {_MANAGED_BY!r}",
                "message": "the managedBy field value must be either 'ray.io/kuberay-operator' "
                "or 'kueue.x-k8s.io/multikueue'",
            },
        ],
    }


def _upgrade_strategy() -> Schema:
    options: Schema = {
        "description": "NewClusterWithIncrementalUpgrade's steps (Gateway API).",
        "type": "object",
        "required": ["gatewayClassName", "intervalSeconds", "stepSizePercent"],
        "properties": {
            "gatewayClassName": _string("The GatewayClass of the Gateway the upgrade routes."),
            "intervalSeconds": _int32("Seconds between traffic steps."),
            "maxSurgePercent": _int32("Capacity added to the new cluster per step.", default=100),
            "stepSizePercent": _int32("Traffic moved per step."),
        },
    }
    return {
        "description": "How a changed rayClusterConfig reaches the running service.",
        "type": "object",
        "properties": {
            "clusterUpgradeOptions": options,
            "type": _string(f"{NEW_CLUSTER} (the default), {INCREMENTAL} or {NONE}."),
        },
    }


def rayservice_spec_schema() -> Schema:
    cluster = spec_schema()
    cluster["description"] = "The RayCluster the service runs on (a new one per upgrade)."
    props: Schema = {
        "deploymentUnhealthySecondThreshold": _int32("Deprecated by KubeRay; not acted on."),
        "excludeHeadPodFromServeSvc": _bool("Never route the serve service to the head pod."),
        "managedBy": _managed_by(),
        "rayClusterConfig": cluster,
        "rayClusterDeletionDelaySeconds": _int32(
            "Seconds an old cluster keeps running after traffic left it (default 60).",
            minimum=0,
        ),
        "serveConfigV2": _string("Ray Serve's declarative config (YAML), deployed as given."),
        "serveService": k8s("Service", "The serve service's own shape (selector excepted)."),
        "serviceUnhealthySecondThreshold": _int32("Deprecated by KubeRay; not acted on."),
        "suspend": _bool("Delete the clusters and hold the service."),
        "upgradeStrategy": _upgrade_strategy(),
    }
    return {
        "description": "The desired Ray Serve service.",
        "type": "object",
        "required": ["rayClusterConfig"],
        "properties": props,
    }


def _named_statuses(description: str, status: Schema) -> Schema:
    return {"description": description, "type": "object", "additionalProperties": status}


def _app_status() -> Schema:
    deployment: Schema = {
        "type": "object",
        "properties": {
            "message": _string("Why, as Serve says it."),
            "status": _string("UPDATING, HEALTHY or UNHEALTHY."),
        },
    }
    return {
        "type": "object",
        "properties": {
            "message": _string("Why, as Serve says it."),
            "serveDeploymentStatuses": _named_statuses("Deployments by name.", deployment),
            "status": _string(
                "NOT_STARTED, DEPLOYING, RUNNING, DEPLOY_FAILED, DELETING or UNHEALTHY."
            ),
        },
    }


def _service_status(description: str, group_fields: Mapping[str, Mapping[str, Any]]) -> Schema:
    cluster_status = status_schema(group_fields)
    cluster_status["description"] = "The RayCluster's status, as last seen."
    return {
        "description": description,
        "type": "object",
        "properties": {
            "applicationStatuses": _named_statuses("Serve applications by name.", _app_status()),
            "lastTrafficMigratedTime": _string(
                "When traffic last moved (incremental upgrade).", format="date-time"
            ),
            "rayClusterName": _string("The RayCluster."),
            "rayClusterStatus": cluster_status,
            "targetCapacity": _int32("Serve's target_capacity (incremental upgrade)."),
            "trafficRoutedPercent": _int32("Traffic routed to it (incremental upgrade)."),
        },
    }


def rayservice_status_schema(group_fields: Mapping[str, Mapping[str, Any]]) -> Schema:
    props: Schema = {
        "activeServiceStatus": _service_status(
            "The cluster the serve service points at.", group_fields
        ),
        "conditions": _array(
            "Ready and UpgradeInProgress.",
            _condition(),
            **{"x-kubernetes-list-map-keys": ["type"], "x-kubernetes-list-type": "map"},
        ),
        "lastUpdateTime": _string("When the status last changed.", format="date-time"),
        "numServeEndpoints": _int32("Ready pods behind the serve service."),
        "observedGeneration": {
            "description": "The spec generation this status is for.",
            "type": "integer",
            "format": "int64",
        },
        "pendingServiceStatus": _service_status(
            "The cluster an upgrade is preparing.", group_fields
        ),
        "serviceStatus": _string("Running once Ready is True."),
    }
    return {"description": "What the operator observed.", "type": "object", "properties": props}


_PRINTER_COLUMNS: list[Schema] = [
    {"name": "service status", "type": "string", "jsonPath": ".status.serviceStatus"},
    {"name": "num serve endpoints", "type": "string", "jsonPath": ".status.numServeEndpoints"},
]


def rayservice_crd_manifest(group_fields: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A fresh dict each call."""
    return namespaced_crd(
        KIND,
        PLURAL,
        "Ray Serve applications on a RayCluster the operator creates and upgrades.",
        rayservice_spec_schema(),
        rayservice_status_schema(group_fields),
        _PRINTER_COLUMNS,
    )
