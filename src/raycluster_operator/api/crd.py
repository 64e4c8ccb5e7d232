"""The CustomResourceDefinition of ``rayclusters.ray.io`` this operator installs.

A full structural schema: every field of KubeRay's RayCluster ``v1`` (v1.7; KubeRay's CEL
rules word for word) with KubeRay's types,
defaults, enums and printer columns, so the API server prunes and refuses what KubeRay's own
CRD prunes and refuses, and ``kubectl explain`` reaches every leaf. Embedded Kubernetes types
(the pod templates, the head Service, the autoscaler container's fields) come from
``k8s_schemas.json``, generated from Kubernetes' OpenAPI by ``deploy/k8s_schemas.py``.

Our own additions are few and marked: their description starts with ``EXTENSION``. They are
``spec.idleSuspend`` and ``spec.idleTerminationOptions`` (Ray's autoscaler v2 idle policy) and,
in status, the slice counts (``desiredWorkerSlices``, ``readyWorkerSlices``, ``workerGroups``).
Under KubeRay's own CRD the API server prunes them; the operator then compares the status it
wants after the same pruning and reports a pruned spec extension
(``controller/raycluster/crdfit.py``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from raycluster_operator.api.models import API_GROUP, INT32_MAX, KIND, PLURAL

VERSION = "v1"
NAME = f"{PLURAL}.{API_GROUP}"
#: Every description of a field KubeRay's CRD does not have starts with this.
EXTENSION = "EXTENSION (raycluster-operator; pruned under KubeRay's CRD):"

Schema = dict[str, Any]


@cache
def _k8s_types() -> dict[str, Schema]:
    text = resources.files("raycluster_operator.api").joinpath("k8s_schemas.json").read_text()
    types: dict[str, Schema] = json.loads(text)["types"]
    return types


def k8s(name: str, description: str = "") -> Schema:
    """A Kubernetes type's structural schema (a fresh copy)."""
    out: Schema = copy.deepcopy(_k8s_types()[name])
    if description:
        out = {"description": description, **out}
    return out


def _d(description: str, schema: Schema) -> Schema:
    return {"description": description, **schema}


def _int32(description: str, **extra: Any) -> Schema:
    return {"description": description, "type": "integer", "format": "int32", **extra}


def _string(description: str, **extra: Any) -> Schema:
    return {"description": description, "type": "string", **extra}


def _int_or_string(description: str) -> Schema:
    return {
        "description": description,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }


def _bool(description: str) -> Schema:
    return {"description": description, "type": "boolean"}


def _string_map(description: str) -> Schema:
    return {
        "description": description,
        "type": "object",
        "additionalProperties": {"type": "string"},
    }


def _quantity(description: str) -> Schema:
    out = k8s("ResourceRequirements")["properties"]["limits"]["additionalProperties"]
    return {"description": description, **out}


def _array(description: str, items: Schema, **extra: Any) -> Schema:
    return {"description": description, "type": "array", "items": items, **extra}


_ATOMIC: Schema = {"x-kubernetes-list-type": "atomic"}


def _label_selector() -> Schema:
    """metav1.LabelSelector, as controller-gen writes it."""
    requirement = {
        "type": "object",
        "required": ["key", "operator"],
        "properties": {
            "key": {"type": "string"},
            "operator": {"type": "string"},
            "values": {"type": "array", "items": {"type": "string"}, **_ATOMIC},
        },
    }
    return {
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "matchExpressions": {"type": "array", "items": requirement, **_ATOMIC},
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }


def _condition() -> Schema:
    """metav1.Condition, as controller-gen writes it."""
    return {
        "type": "object",
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "message": {"type": "string", "maxLength": 32768},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "reason": {
                "type": "string",
                "maxLength": 1024,
                "minLength": 1,
                "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            },
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "type": {
                "type": "string",
                "maxLength": 316,
                "pattern": (
                    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
                ),
            },
        },
    }


def _redis_credential(description: str) -> Schema:
    return {
        "description": description,
        "type": "object",
        "properties": {"value": {"type": "string"}, "valueFrom": k8s("EnvVarSource")},
    }


def _autoscaler_options() -> Schema:
    return {
        "description": "How the Ray autoscaler sidecar of the head pod runs.",
        "type": "object",
        "properties": {
            "env": _array("Extra environment of the autoscaler container.", k8s("EnvVar")),
            "envFrom": _array("Extra environment sources.", k8s("EnvFromSource")),
            "idleTimeoutSeconds": _int32("Seconds a worker is idle before it is removed."),
            "image": _string("The autoscaler image (default: the head's image)."),
            "imagePullPolicy": _string("Pull policy of the autoscaler image."),
            "resources": k8s("ResourceRequirements", "The autoscaler container's resources."),
            "securityContext": k8s("SecurityContext", "The autoscaler container's security."),
            "upscalingMode": _string(
                "How fast the autoscaler scales up.",
                enum=["Default", "Aggressive", "Conservative"],
            ),
            "version": _string("Autoscaler generation.", enum=["v1", "v2"]),
            "command": _array(
                "Command of the autoscaler container (KubeRay v1.7; accepted, not acted on: "
                "the operator's sidecar command stands and an UnsupportedField Warning says so).",
                {"type": "string"},
            ),
            "args": _array(
                "Arguments of the autoscaler container (KubeRay v1.7; accepted, not acted on, "
                "as command).",
                {"type": "string"},
            ),
            "volumeMounts": _array("Extra volume mounts.", k8s("VolumeMount")),
        },
    }


def _ingress_options() -> Schema:
    """KubeRay v1.7's ``headGroupSpec.ingressOptions``: the Ingress KubeRay would make for the
    dashboard. Kept so nothing is pruned; this operator makes no Ingress (rule 3a)."""
    tls = {
        "type": "object",
        "properties": {
            "hosts": _array("Hosts of the certificate.", {"type": "string"}, **_ATOMIC),
            "secretName": _string("Secret holding the certificate."),
        },
    }
    return {
        "description": "The dashboard Ingress (KubeRay v1.7; accepted, not acted on: no "
        "Ingress is made, an UnsupportedField Warning says so).",
        "type": "object",
        "properties": {
            "host": _string("Host name the Ingress routes."),
            "path": _string("Path the Ingress routes."),
            "pathType": _string(
                "How the path matches.", enum=["Exact", "Prefix", "ImplementationSpecific"]
            ),
            "tls": _array("TLS of the Ingress.", tls),
        },
    }


def _head_group() -> Schema:
    return {
        "description": "The head pod: one per cluster.",
        "type": "object",
        "required": ["template"],
        "properties": {
            "enableIngress": _bool(
                "Create an Ingress for the dashboard (accepted, not acted on: no Ingress is "
                "made, an UnsupportedField Warning says so)."
            ),
            "headService": k8s("Service", "Overrides for the head Service."),
            "ingressOptions": _ingress_options(),
            "labels": _string_map("Ray node labels of the head (ray start --labels)."),
            "rayStartParams": _string_map("Arguments of `ray start --head`, as strings."),
            "resources": _string_map("Ray logical resources of the head (ray start)."),
            "serviceType": _string("Type of the head Service (ClusterIP by default)."),
            "template": k8s("PodTemplateSpec", "The head pod's template."),
        },
    }


def _worker_group() -> Schema:
    return {
        "type": "object",
        "required": ["groupName", "maxReplicas", "minReplicas", "template"],
        "properties": {
            "groupName": _string("Unique name of the group within the cluster."),
            "idleTimeoutSeconds": _int32("Seconds a worker of this group is idle before removal."),
            "labels": _string_map("Ray node labels of the group's workers."),
            "maxReplicas": _int32(
                "Most replicas (slices) the autoscaler may ask for.", default=INT32_MAX
            ),
            "maxUnavailable": _int32(
                f"{EXTENSION} how many slices of the group planned disruptions (drains, "
                "node maintenance, cluster-autoscaler scale-downs) may take at once; "
                "default 1. A disrupted slice is moved whole, make-before-break; "
                "without room for its stand-in it goes at its eviction or maintenance time, "
                "never leaving fewer than replicas - maxUnavailable slices ready on that "
                "account.",
                minimum=1,
            ),
            "minReplicas": _int32("Fewest replicas (slices) the autoscaler keeps.", default=0),
            "priority": _int32(
                "Which group the autoscaler prefers when several fit (KubeRay v1.7; kept, "
                "read by Ray's autoscaler, not by the operator).",
                default=0,
            ),
            "numOfHosts": _int32(
                "Hosts (pods) per replica: a multi-host TPU slice or GPU domain is one replica.",
                default=1,
            ),
            "rayStartParams": _string_map("Arguments of `ray start` for workers, as strings."),
            "replicas": _int32("Desired replicas (slices) of the group.", default=0),
            "resources": _string_map("Ray logical resources of the group's workers."),
            "scaleStrategy": {
                "description": "Which workers a scale-down removes.",
                "type": "object",
                "properties": {
                    "workersToDelete": _array(
                        "Pod names the autoscaler asks to remove.", {"type": "string"}
                    )
                },
            },
            "suspend": _bool("Delete the group's pods and keep it at zero."),
            "template": k8s("PodTemplateSpec", "The worker pods' template."),
        },
    }


#: KubeRay's CEL rules on ``spec.managedBy`` (v1.6 and v1.7, every CRD of ray.io/v1 that has
#: the field): set once, and only to one of two values. Our operator has no value of its own
#: (docs/design.md §3.7): it reconciles clusters without managedBy or naming KubeRay's.
MANAGED_BY_RULES: list[Schema] = [
    {"message": "the managedBy field is immutable", "rule": "self == oldSelf"},
    {
        "message": "the managedBy field value must be either 'ray.io/kuberay-operator' or "
        "'kueue.x-k8s.io/multikueue'",
        "rule": "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",
    },
]
#: KubeRay v1.7's rule on ``spec.gcsFaultToleranceOptions.backend``.
BACKEND_RULES: list[Schema] = [
    {"message": "gcsFaultToleranceOptions.backend is immutable", "rule": "self == oldSelf"}
]


def _gcs_fault_tolerance() -> Schema:
    """KubeRay v1.7's shape: a backend (``redis`` or ``rocksdb``, immutable) and no longer a
    required ``redisAddress`` (a rocksdb backend has none)."""
    return {
        "description": "GCS fault tolerance: external Redis, or RocksDB on a volume "
        "(accepted, not acted on: an UnsupportedField Warning says so).",
        "type": "object",
        "properties": {
            "backend": _string(
                "Where GCS keeps its state (immutable).",
                enum=["redis", "rocksdb"],
                **{"x-kubernetes-validations": copy.deepcopy(BACKEND_RULES)},
            ),
            "externalStorageNamespace": _string("Namespace of the cluster in Redis."),
            "redisAddress": _string("host:port of Redis."),
            "redisPassword": _redis_credential("Redis password."),
            "redisUsername": _redis_credential("Redis user name."),
            "storage": {
                "description": "The volume of the rocksdb backend.",
                "type": "object",
                "properties": {
                    "accessModes": _array("Access modes of the claim.", {"type": "string"}),
                    "claimName": _string("An existing PersistentVolumeClaim to use."),
                    "deletionPolicy": _string(
                        "What happens to the claim with the cluster.",
                        enum=["DeleteWithCluster", "Retain"],
                    ),
                    "size": _quantity("Size of the claim."),
                    "storageClassName": _string("Storage class of the claim."),
                    "subPath": _string("Sub-path within the volume."),
                },
            },
        },
    }


def _network_policy_rules() -> Schema:
    """networking/v1's NetworkPolicyIngressRule and NetworkPolicyEgressRule lists, as KubeRay
    v1.7 embeds them."""
    peer = {
        "type": "object",
        "properties": {
            "ipBlock": {
                "type": "object",
                "required": ["cidr"],
                "properties": {
                    "cidr": {"type": "string"},
                    "except": {"type": "array", "items": {"type": "string"}, **_ATOMIC},
                },
            },
            "namespaceSelector": _label_selector(),
            "podSelector": _label_selector(),
        },
    }
    port = {
        "type": "object",
        "properties": {
            "endPort": {"type": "integer", "format": "int32"},
            "port": {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            },
            "protocol": {"type": "string"},
        },
    }
    ports = {"type": "array", "items": port, **_ATOMIC}
    peers = {"type": "array", "items": peer, **_ATOMIC}
    ingress = {"type": "object", "properties": {"from": peers, "ports": ports}}
    egress = {"type": "object", "properties": {"to": copy.deepcopy(peers), "ports": ports}}
    return {
        "ingressRules": _array("Ingress rules added to the base policy.", ingress),
        "egressRules": _array("Egress rules added to the base policy.", egress),
    }


def _network_policy() -> Schema:
    """KubeRay v1.7's ``spec.networkPolicy``, its shape whole so that nothing is pruned."""
    rules = _network_policy_rules
    return {
        "description": "Network isolation of the cluster's pods (KubeRay v1.7; accepted, not "
        "acted on: this operator makes no NetworkPolicy, an UnsupportedField Warning says so).",
        "type": "object",
        "properties": {
            "mode": _string(
                "What is denied by default.",
                enum=["DenyAll", "DenyAllIngress", "DenyAllEgress"],
                default="DenyAll",
            ),
            "head": {"type": "object", "properties": rules()},
            "worker": {"type": "object", "properties": rules()},
            "workerGroups": _array(
                "Rules per worker group, in place of worker's.",
                {
                    "type": "object",
                    "required": ["groupName"],
                    "properties": {"groupName": {"type": "string"}, **rules()},
                },
                **{"x-kubernetes-list-map-keys": ["groupName"], "x-kubernetes-list-type": "map"},
            ),
        },
    }


def _history_server_options() -> Schema:
    """KubeRay v1.7's ``spec.historyServerOptions``: a collector sidecar's settings."""
    return {
        "description": "The Ray history server's collector sidecar (KubeRay v1.7; accepted, "
        "not acted on: no collector runs, an UnsupportedField Warning says so).",
        "type": "object",
        "properties": {
            "collectorOptions": {
                "type": "object",
                "properties": {
                    "env": _array("Environment of the collector.", k8s("EnvVar")),
                    "image": _string("The collector image."),
                    "imagePullPolicy": _string("Pull policy of the collector image."),
                    "resources": k8s("ResourceRequirements", "The collector's resources."),
                },
            }
        },
    }


def _upgrade_strategy() -> Schema:
    return {
        "description": "What a change of the pod templates does.",
        "type": "object",
        "properties": {
            "type": _string(
                "Upgrade type. RollingUpdate is an EXTENSION (raycluster-operator; "
                "KubeRay's enum rejects it): worker slices replaced whole, within "
                "rollingUpdate's bounds.",
                enum=["Recreate", "None", "RollingUpdate"],
            ),
            "rollingUpdate": {
                "description": f"{EXTENSION} bounds of a RollingUpdate, in slices per "
                "worker group (an integer, or a percentage of the desired slices).",
                "type": "object",
                "properties": {
                    "maxUnavailable": _int_or_string(
                        "Slices that may be unready during the update (default 1; a "
                        "percentage rounds down)."
                    ),
                    "maxSurge": _int_or_string(
                        "Slices created above the desired number (default 0; a "
                        "percentage rounds up)."
                    ),
                },
            },
        },
    }


def spec_schema() -> Schema:
    return {
        "description": "The desired Ray cluster.",
        "type": "object",
        "required": ["headGroupSpec"],
        "properties": {
            "authOptions": {
                "description": "Authentication of Ray's dashboard and GCS (accepted, not acted "
                "on: the cluster runs without Ray token authentication, an UnsupportedField "
                "Warning says so).",
                "type": "object",
                "properties": {
                    "enableK8sTokenAuth": _bool("Accept Kubernetes ServiceAccount tokens."),
                    "mode": _string("Authentication mode.", enum=["disabled", "token"]),
                    "secretName": _string("Secret holding the token."),
                },
            },
            "autoscalerOptions": _autoscaler_options(),
            "enableInTreeAutoscaling": _bool("Run the Ray autoscaler as a head sidecar."),
            "gcsFaultToleranceOptions": _gcs_fault_tolerance(),
            "headGroupSpec": _head_group(),
            "headServiceAnnotations": _string_map(
                "Annotations of the head Service (accepted, not acted on: the head Service's "
                "annotations come from headService; an UnsupportedField Warning says so)."
            ),
            "historyServerOptions": _history_server_options(),
            "idleSuspend": _bool(
                f"{EXTENSION} set by Ray's autoscaler v2 (idle policy Suspend): the cluster "
                "is suspended like spec.suspend."
            ),
            "idleTerminationOptions": {
                "description": (
                    f"{EXTENSION} the idle policy Ray's autoscaler v2 applies to the whole "
                    "cluster; the operator only honours its result."
                ),
                "type": "object",
                "properties": {
                    "policy": _string("What happens to an idle cluster."),
                    "timeoutSeconds": _int32("Seconds the cluster is idle first.", minimum=0),
                },
            },
            "networkPolicy": _network_policy(),
            "managedBy": _string(
                "The controller that reconciles this cluster (ray.io/kuberay-operator or "
                "kueue.x-k8s.io/multikueue); others are left alone.",
                **{"x-kubernetes-validations": copy.deepcopy(MANAGED_BY_RULES)},
            ),
            "rayVersion": _string("Ray version of the images."),
            "suspend": _bool("Delete every pod of the cluster and keep it down."),
            "tlsOptions": {
                "description": "mTLS between the cluster's pods (KubeRay v1.7; accepted, not "
                "acted on: with enabled true the cluster runs without TLS, an UnsupportedField "
                "Warning says so).",
                "type": "object",
                "properties": {"enabled": _bool("Turn mTLS on.")},
            },
            "upgradeStrategy": _upgrade_strategy(),
            "workerGroupSpecs": _array("The worker groups.", _worker_group()),
        },
    }


def _group_status(fields: Mapping[str, Mapping[str, Any]]) -> Schema:
    counts = {
        "numOfHosts": "Hosts per slice.",
        "desiredSlices": "Slices the group should have.",
        "readySlices": "Slices whose every host is ready.",
        "brokenSlices": "Slices with a failed or missing host.",
        "desiredPods": "Pods the group should have.",
        "readyPods": "Ready pods of the group.",
    }
    props: Schema = {"groupName": _string("The worker group.")}
    props |= {name: _int32(text) for name, text in counts.items()}
    props["updatedSlices"] = _int32(
        "Serving slices built from the group's current template (ray.io/pod-template-hash)."
    )
    props["suspending"] = {
        "description": "True while the group's suspension deletes its pods: it stays so, and "
        "nothing is created, until every pod of the group is gone.",
        "type": "boolean",
    }
    props["lastDeletion"] = {
        "description": "The latest deletion of the group's pods, and why.",
        "type": "object",
        "properties": {
            "reason": _string("Named reason of the deletion."),
            "message": _string("What was wrong."),
            "pods": _int32("Pods deleted."),
            "time": _string("When.", format="date-time"),
        },
    }
    props["disruptedSlices"] = _array(
        "Slices a planned disruption (drain, node maintenance, scale-down) is moving: each is "
        "replaced whole by a stand-in placed off its nodes, then deleted.",
        {
            "type": "object",
            "properties": {
                "slice": _string("The slice (replica name)."),
                "index": _int32("Its replica index."),
                "reason": _string("NodeDrain, NodeScaleDown, NodeTermination or HostMaintenance."),
                "node": _string("The node that goes."),
                "message": _string("What the node says (cordon, taint or maintenance label)."),
                "deadline": _string("The announced maintenance time.", format="date-time"),
                "budgetReleased": {
                    "description": "No stand-in can be placed: the slice's disruption budget "
                    "is no longer kept, so the drain's eviction takes it (whole).",
                    "type": "boolean",
                },
            },
        },
    )
    # Then the fields the lifecycle features declare (``Feature.fields``).
    props |= {name: copy.deepcopy(dict(schema)) for name, schema in fields.items()}
    return {
        "description": f"{EXTENSION} per-group slice counts.",
        "type": "array",
        "items": {"type": "object", "properties": props},
    }


def status_schema(group_fields: Mapping[str, Mapping[str, Any]]) -> Schema:
    """``group_fields``: the ``workerGroups`` fields the lifecycle features declare (what
    ``controller/crds.py`` hands over)."""
    return {
        "description": "What the operator observed.",
        "type": "object",
        "properties": {
            "availableWorkerReplicas": _int32("Running worker pods."),
            "conditions": _array(
                "Conditions of the cluster (HeadPodReady, RayClusterProvisioned, ...).",
                _condition(),
                **{"x-kubernetes-list-map-keys": ["type"], "x-kubernetes-list-type": "map"},
            ),
            "desiredCPU": _quantity("CPU requested by all pods."),
            "desiredGPU": _quantity("GPUs requested by all pods."),
            "desiredMemory": _quantity("Memory requested by all pods."),
            "desiredTPU": _quantity("TPU chips requested by all pods."),
            "desiredWorkerReplicas": _int32("Worker pods wanted."),
            "endpoints": _string_map("Ports of the head service by name."),
            "head": {
                "description": "The head pod and service.",
                "type": "object",
                "properties": {
                    "podIP": _string("IP of the head pod."),
                    "podName": _string("Name of the head pod."),
                    "serviceIP": _string("Cluster IP of the head service."),
                    "serviceName": _string("Name of the head service."),
                },
            },
            "lastUpdateTime": _string(
                "When the status last changed.", format="date-time", nullable=True
            ),
            "maxWorkerReplicas": _int32("Most worker pods the groups allow."),
            "minWorkerReplicas": _int32("Fewest worker pods the groups allow."),
            "observedGeneration": {
                "description": "The spec generation this status is for.",
                "type": "integer",
                "format": "int64",
            },
            "readyWorkerReplicas": _int32("Ready worker pods."),
            "reason": _string("Why the cluster failed."),
            "state": _string("ready, suspended or failed."),
            "stateTransitionTimes": {
                "description": "When each state was last entered.",
                "type": "object",
                "additionalProperties": {"type": "string", "format": "date-time"},
            },
            "desiredWorkerSlices": _int32(f"{EXTENSION} worker slices wanted."),
            "readyWorkerSlices": _int32(f"{EXTENSION} worker slices fully ready."),
            "workerGroups": _group_status(group_fields),
        },
    }


#: KubeRay's printer columns, then our Ready Slices (a TPU user's first question).
_PRINTER_COLUMNS: list[Schema] = [
    {"name": "desired workers", "type": "integer", "jsonPath": ".status.desiredWorkerReplicas"},
    {"name": "available workers", "type": "integer", "jsonPath": ".status.availableWorkerReplicas"},
    {"name": "cpus", "type": "string", "jsonPath": ".status.desiredCPU"},
    {"name": "memory", "type": "string", "jsonPath": ".status.desiredMemory"},
    {"name": "gpus", "type": "string", "jsonPath": ".status.desiredGPU"},
    {"name": "tpus", "type": "string", "jsonPath": ".status.desiredTPU", "priority": 1},
    {"name": "ready slices", "type": "integer", "jsonPath": ".status.readyWorkerSlices"},
    {"name": "status", "type": "string", "jsonPath": ".status.state"},
    {"name": "age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "head pod IP", "type": "string", "jsonPath": ".status.head.podIP", "priority": 1},
    {
        "name": "head service IP",
        "type": "string",
        "jsonPath": ".status.head.serviceIP",
        "priority": 1,
    },
]


def crd_manifest(group_fields: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A fresh dict each call (callers may add labels or annotations to it); the operator's
    whole CRD, with the features' status fields, is ``controller/crds.py``'s."""
    return namespaced_crd(
        KIND,
        PLURAL,
        "A Ray cluster whose multi-host worker groups scale by whole slices.",
        spec_schema(),
        status_schema(group_fields),
        _PRINTER_COLUMNS,
    )


def namespaced_crd(
    kind: str,
    plural: str,
    description: str,
    spec: dict[str, Any],
    status: dict[str, Any],
    columns: list[dict[str, Any]],
) -> dict[str, Any]:
    """One `ray.io/v1` namespaced kind with a status subresource, as KubeRay ships its CRDs
    (RayCluster and RayJob share this shape)."""
    schema = {
        "description": description,
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{API_GROUP}"},
        "spec": {
            "group": API_GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
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
                    "additionalPrinterColumns": copy.deepcopy(columns),
                }
            ],
        },
    }
