"""What a RayService creates: its RayClusters, its serve service and the Serve config it deploys
(docs/design.md §12). Pure: names come in as arguments.

Shapes follow KubeRay v1.7's (``constructRayClusterForRayService``, ``BuildServeService``):
a cluster carries the RayService's labels plus ``ray.io/originated-from-cr-name`` / ``-crd``
(which is how its pods are built for serving, ``builders.metadata.serves_rayservice``), a
controller ownerReference to the RayService, and annotations recording the spec it was built
from: a hash of ``rayClusterConfig`` without the counts (``replicas`` and
``scaleStrategy.workersToDelete``, which the autoscaler owns, and ``suspend``) and its number of
worker groups, so that a changed spec is an upgrade and groups appended at the end are added
in place, as in KubeRay. The hash is ours (KubeRay hashes its Go structs), under our own key.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import yaml

from raycluster_operator import OPERATOR_NAME
from raycluster_operator.api import labels
from raycluster_operator.api.objects import Obj
from raycluster_operator.builders.metadata import RAYSERVICE_CRD
from raycluster_operator.builders.probes import DEFAULT_SERVE_PORT, SERVE_PORT_NAME
from raycluster_operator.builders.rayjob import LAST_APPLIED

API_VERSION = "ray.io/v1"
#: rayClusterConfig's hash (without the counts) a cluster was built from.
SPEC_HASH = "raycluster-operator.io/rayservice-spec-hash"
#: How many worker groups it was built with (KubeRay's ``ray.io/num-worker-groups``).
NUM_WORKER_GROUPS = "ray.io/num-worker-groups"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value: Mapping[str, Any] = obj.get("metadata") or {}
    return value


def _spec(rayservice: Mapping[str, Any]) -> Mapping[str, Any]:
    value: Mapping[str, Any] = rayservice.get("spec") or {}
    return value


def serve_service_name(rayservice_name: str) -> str:
    return f"{rayservice_name}-serve-svc"


def owner_reference(rayservice: Mapping[str, Any]) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": RAYSERVICE_CRD,
        "name": _meta(rayservice)["name"],
        "uid": _meta(rayservice).get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def origin_labels(rayservice: Mapping[str, Any]) -> dict[str, str]:
    return {
        labels.ORIGINATED_FROM_CR_NAME: str(_meta(rayservice)["name"]),
        labels.ORIGINATED_FROM_CRD: RAYSERVICE_CRD,
    }


def spec_hash(rayservice: Mapping[str, Any], groups: int | None = None) -> str:
    """rayClusterConfig's hash without the counts; with ``groups``, of its first ``groups``
    worker groups only (are the others appended at the end?)."""
    spec = copy.deepcopy(dict(_spec(rayservice).get("rayClusterConfig") or {}))
    spec.pop("suspend", None)
    workers = list(spec.get("workerGroupSpecs") or [])
    if groups is not None:
        workers = workers[:groups]
    for group in workers:
        group.pop("replicas", None)
        (group.get("scaleStrategy") or {}).pop("workersToDelete", None)
    spec["workerGroupSpecs"] = workers
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def worker_groups(rayservice: Mapping[str, Any]) -> int:
    return len((_spec(rayservice).get("rayClusterConfig") or {}).get("workerGroupSpecs") or [])


def ray_cluster(rayservice: Mapping[str, Any], name: str) -> Obj:
    """The RayCluster ``name`` of the service: rayClusterConfig as given."""
    meta = _meta(rayservice)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    annotations[SPEC_HASH] = spec_hash(rayservice)
    annotations[NUM_WORKER_GROUPS] = str(worker_groups(rayservice))
    return {
        "apiVersion": API_VERSION,
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": {**(meta.get("labels") or {}), **origin_labels(rayservice)},
            "annotations": annotations,
            "ownerReferences": [owner_reference(rayservice)],
        },
        "spec": copy.deepcopy(dict(_spec(rayservice).get("rayClusterConfig") or {})),
    }


def _head_container(cluster_spec: Mapping[str, Any]) -> Mapping[str, Any]:
    template = (cluster_spec.get("headGroupSpec") or {}).get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or [{}]
    first: Mapping[str, Any] = containers[0]
    return first


def serving_port(cluster_spec: Mapping[str, Any]) -> int:
    """The head container's ``serve`` port, else 8000: where its Serve proxy listens."""
    for port in _head_container(cluster_spec).get("ports") or []:
        if port.get("name") == SERVE_PORT_NAME and port.get("containerPort"):
            return int(port["containerPort"])
    return DEFAULT_SERVE_PORT


def _serve_ports(cluster_spec: Mapping[str, Any]) -> list[Obj]:
    """The head container's ports named ``serve`` or ``serve-*`` (KubeRay's isServingPort)."""
    found = []
    for port in _head_container(cluster_spec).get("ports") or []:
        name = str(port.get("name") or "")
        if name == SERVE_PORT_NAME or name.startswith(f"{SERVE_PORT_NAME}-"):
            found.append({"name": name, "port": int(port.get("containerPort") or 0)})
    return found


class NoServePort(ValueError):
    """KubeRay's refusal, in its words: no serve port and no serveService."""


def serve_service(rayservice: Mapping[str, Any], cluster: str) -> Obj:
    """``<name>-serve-svc`` pointed at ``cluster``: its pods labelled ``ray.io/serve: "true"``.
    A ``serveService`` is the shape (its selector ignored, its ports kept by name over the
    head's), as in KubeRay."""
    spec = _spec(rayservice)
    name = str(_meta(rayservice)["name"])
    cluster_spec = spec.get("rayClusterConfig") or {}
    ports = _serve_ports(cluster_spec)
    custom = spec.get("serveService")
    if not ports and not custom:
        raise NoServePort(
            "Please specify a port named 'serve' (or with the prefix 'serve-', e.g. "
            "'serve-grpc') in the Ray head container; otherwise, the Kubernetes service for "
            "Ray Serve will not be created."
        )
    svc_labels = {
        **origin_labels(rayservice),
        labels.SERVE: f"{name}-serve",
        labels.CREATED_BY: OPERATOR_NAME,
    }
    service: Obj = copy.deepcopy(dict(custom)) if custom else {}
    service_meta = service.setdefault("metadata", {})
    service_spec = service.setdefault("spec", {})
    if custom:
        theirs = {p.get("name"): p for p in service_spec.get("ports") or []}
        ports = [theirs.get(p["name"], p) for p in ports] or list(theirs.values())
    service["apiVersion"] = "v1"
    service["kind"] = "Service"
    service_meta["name"] = service_meta.get("name") or serve_service_name(name)
    service_meta["namespace"] = _meta(rayservice).get("namespace")
    service_meta["labels"] = {**(service_meta.get("labels") or {}), **svc_labels}
    service_meta["ownerReferences"] = [owner_reference(rayservice)]
    service_meta.pop("resourceVersion", None)
    head = cluster_spec.get("headGroupSpec") or {}
    service_spec.setdefault("type", head.get("serviceType") or "ClusterIP")
    service_spec["selector"] = selector(cluster)
    service_spec["ports"] = ports
    service.pop("status", None)
    return service


def selector(cluster: str) -> dict[str, str]:
    return {labels.CLUSTER: cluster, labels.SERVE: labels.SERVE_TRUE}


def serve_config(rayservice: Mapping[str, Any]) -> Obj:
    """serveConfigV2 as the JSON body of ``PUT /api/serve/applications/``."""
    text = str(_spec(rayservice).get("serveConfigV2") or "")
    loaded = yaml.safe_load(text) if text.strip() else {}
    if not isinstance(loaded, dict):
        raise ValueError("serveConfigV2 is not a mapping")
    return loaded
