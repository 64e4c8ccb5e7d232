"""The head service (how workers and users reach GCS, dashboard and client) and the headless
service that gives multi-host pods resolvable ``hostname.subdomain`` names.

As in KubeRay, the head service is headless when its type is ClusterIP (a cluster has one head
pod, so a virtual IP adds nothing), its ports are the head container's (or the defaults when
it declares none) plus ``metrics``, and a user's ``headGroupSpec.headService`` is the starting
point with our name, namespace, selector and labels forced onto it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from raycluster_operator import OPERATOR_NAME
from raycluster_operator.api import labels, names
from raycluster_operator.api.models import RayCluster
from raycluster_operator.builders import ray_start
from raycluster_operator.builders.metadata import base_labels, object_meta, serve_enabled

_DEFAULT_PORTS = {
    "client": ray_start.CLIENT_PORT,
    "gcs-server": ray_start.GCS_PORT,
    "dashboard": ray_start.DASHBOARD_PORT,
    "metrics": ray_start.METRICS_PORT,
    "serve": ray_start.SERVE_PORT,
}


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def needs_headless_service(cluster: RayCluster) -> bool:
    return any(g.num_of_hosts > 1 for g in cluster.spec.worker_group_specs)


def head_service_ports(cluster: RayCluster) -> dict[str, int]:
    spec = cluster.spec.head_group_spec.template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    declared = (
        containers[0].get("ports")
        if isinstance(containers, list) and containers and isinstance(containers[0], Mapping)
        else None
    )
    ports: dict[str, int] = {}
    for port in declared if isinstance(declared, list) else []:
        if isinstance(port, Mapping) and isinstance(port.get("containerPort"), int):
            name = port.get("name") or f"{port['containerPort']}-port"
            ports[str(name)] = port["containerPort"]
    if not ports:
        ports = dict(_DEFAULT_PORTS)
    ports.setdefault("metrics", ray_start.METRICS_PORT)
    return ports


def build_head_service(cluster: RayCluster) -> dict[str, Any]:
    name = cluster.metadata.name
    svc_labels = base_labels(cluster, group=labels.HEAD_GROUP, node_type=labels.NODE_TYPE_HEAD)
    del svc_labels[labels.IS_RAY_NODE], svc_labels[labels.GROUP]
    ports = [
        {"name": port_name, "port": number, "appProtocol": "tcp"}
        for port_name, number in sorted(head_service_ports(cluster).items())
    ]
    service_type = cluster.spec.head_group_spec.service_type or "ClusterIP"
    user = cluster.spec.head_group_spec.head_service
    if isinstance(user, Mapping):
        service = copy.deepcopy(dict(user))
        meta = _dict(service.get("metadata"))
        user_labels = _dict(meta.get("labels"))
        meta.update(
            name=meta.get("name") or names.head_service_name(name),
            namespace=cluster.metadata.namespace,
            labels={**user_labels, **svc_labels},
            ownerReferences=object_meta(cluster, name="", labels_={})["ownerReferences"],
        )
        spec = _dict(service.get("spec"))
        user_ports = _list(spec.get("ports"))
        taken = {p.get("name") for p in user_ports if isinstance(p, Mapping)}
        spec["ports"] = [*user_ports, *(p for p in ports if p["name"] not in taken)]
        spec["selector"] = {labels.CLUSTER: name, labels.NODE_TYPE: labels.NODE_TYPE_HEAD}
        spec.setdefault("type", service_type)
        return {**service, "apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}
    spec = {
        "type": service_type,
        "selector": {labels.CLUSTER: name, labels.NODE_TYPE: labels.NODE_TYPE_HEAD},
        "ports": ports,
    }
    if service_type == "ClusterIP":
        spec["clusterIP"] = "None"
        spec["publishNotReadyAddresses"] = True
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(cluster, name=names.head_service_name(name), labels_=svc_labels),
        "spec": spec,
    }


def build_headless_service(cluster: RayCluster) -> dict[str, Any]:
    """Selects every worker so each multi-host pod's hostname resolves, ready or not (JAX and
    the TPU runtime resolve peers before Ray reports ready)."""
    name = cluster.metadata.name
    svc_labels = {
        labels.CLUSTER: name,
        labels.HEADLESS_SVC: name,
        labels.APP_NAME: labels.APP_NAME_VALUE,
        labels.CREATED_BY: OPERATOR_NAME,
    }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(
            cluster, name=names.headless_service_name(name), labels_=svc_labels
        ),
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {labels.CLUSTER: name, labels.NODE_TYPE: labels.NODE_TYPE_WORKER},
        },
    }


def needs_serve_service(cluster: RayCluster) -> bool:
    return serve_enabled(cluster)


def build_serve_service(cluster: RayCluster) -> dict[str, Any]:
    """KubeRay's ``<cluster>-serve-svc`` for a RayCluster annotated
    ``ray.io/enable-serve-service: "true"``: only the ``serve`` port (the head container's
    port of that name, else 8000), KubeRay's labels, the head service's type, and a selector
    on the cluster's pods labelled ``ray.io/serve: "true"`` (every pod by default; see
    ``metadata.default_labels``). KubeRay selects on the cluster label alone for a
    RayCluster; the extra key lets a template take a pod out of serving traffic."""
    name = cluster.metadata.name
    port = head_service_ports(cluster).get("serve", ray_start.SERVE_PORT)
    svc_labels = {
        labels.ORIGINATED_FROM_CR_NAME: name,
        labels.ORIGINATED_FROM_CRD: "RayCluster",
        labels.SERVE: f"{name}-serve",
        labels.APP_NAME: labels.APP_NAME_VALUE,
        labels.CREATED_BY: OPERATOR_NAME,
    }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(cluster, name=names.serve_service_name(name), labels_=svc_labels),
        "spec": {
            "type": cluster.spec.head_group_spec.service_type or "ClusterIP",
            "selector": {labels.CLUSTER: name, labels.SERVE: labels.SERVE_TRUE},
            "ports": [{"name": "serve", "port": port}],
        },
    }
