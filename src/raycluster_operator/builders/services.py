"""The head service (how workers and users reach GCS, dashboard and client) and the headless
service that gives multi-host pods resolvable ``hostname.subdomain`` names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raycluster_operator import OPERATOR_NAME
from raycluster_operator.api import labels, names
from raycluster_operator.api.models import RayCluster
from raycluster_operator.builders.metadata import base_labels, object_meta
from raycluster_operator.builders.pods import build_head_pod


def needs_headless_service(cluster: RayCluster) -> bool:
    return any(g.num_of_hosts > 1 for g in cluster.spec.worker_group_specs)


def build_head_service(cluster: RayCluster) -> dict[str, Any]:
    """Ports are the head container's named ports (defaults filled by the pod builder)."""
    name = cluster.metadata.name
    head_container = build_head_pod(cluster)["spec"]["containers"][0]
    ports = [
        {
            "name": p["name"],
            "port": p["containerPort"],
            "targetPort": p["containerPort"],
            "protocol": p.get("protocol", "TCP"),
        }
        for p in head_container.get("ports", [])
        if isinstance(p, Mapping) and "name" in p and "containerPort" in p
    ]
    svc_labels = base_labels(cluster, group=labels.HEAD_GROUP, node_type=labels.NODE_TYPE_HEAD)
    del svc_labels[labels.IS_RAY_NODE], svc_labels[labels.GROUP]
    user = cluster.spec.head_group_spec.head_service or {}
    user_meta = user.get("metadata") if isinstance(user.get("metadata"), Mapping) else {}
    meta = object_meta(cluster, name=names.head_service_name(name), labels_=svc_labels)
    if isinstance(user_meta, Mapping) and isinstance(user_meta.get("annotations"), Mapping):
        meta["annotations"] = dict(user_meta["annotations"])
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": cluster.spec.head_group_spec.service_type or "ClusterIP",
            "selector": {labels.CLUSTER: name, labels.NODE_TYPE: labels.NODE_TYPE_HEAD},
            "ports": ports,
        },
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
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {labels.CLUSTER: name, labels.NODE_TYPE: labels.NODE_TYPE_WORKER},
        },
    }
