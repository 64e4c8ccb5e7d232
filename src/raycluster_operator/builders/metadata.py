"""Labels and owner references shared by every object the operator creates.

User labels from a pod template are kept, but never over the operator's own keys: the Ray
autoscaler, KubeRay tooling and our planner select pods by them, so a user label that changed
``ray.io/group`` would make a pod invisible or double-counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raycluster_operator import OPERATOR_NAME
from raycluster_operator.api import labels, names
from raycluster_operator.api.models import API_VERSION, KIND, RayCluster

#: The value of ``ray.io/originated-from-crd`` on a cluster a RayService created.
RAYSERVICE_CRD = "RayService"


def base_labels(cluster: RayCluster, *, group: str, node_type: str) -> dict[str, str]:
    """The labels KubeRay puts on every pod of a node type (docs/design.md §3.1)."""
    name = cluster.metadata.name
    return {
        labels.CLUSTER: name,
        labels.GROUP: group,
        labels.NODE_TYPE: node_type,
        labels.IS_RAY_NODE: labels.IS_RAY_NODE_VALUE,
        labels.IDENTIFIER: names.fit(name, suffix=f"-{node_type}"),
        labels.APP_NAME: labels.APP_NAME_VALUE,
        labels.CREATED_BY: OPERATOR_NAME,
    }


def serve_enabled(cluster: RayCluster) -> bool:
    """The RayCluster asks for KubeRay's serve service (annotation, value exactly "true")."""
    annotations = cluster.metadata.annotations or {}
    return annotations.get(labels.ENABLE_SERVE_SERVICE_ANNOTATION) == "true"


def serves_rayservice(cluster: RayCluster) -> bool:
    """A RayService made this cluster (KubeRay's ``ray.io/originated-from-crd`` label): its
    pods carry ``ray.io/serve`` as the RayService controller keeps it, its single-host
    workers a Serve proxy readiness check and its Ray containers KubeRay's serving env."""
    found = cluster.metadata.labels or {}
    return found.get(labels.ORIGINATED_FROM_CRD) == RAYSERVICE_CRD


def rayservice_serve_label(cluster: RayCluster, *, head: bool, multi_host: bool) -> dict[str, str]:
    """``ray.io/serve`` at creation on a RayService's cluster, over the template's value as
    KubeRay sets it: a worker is ``true`` (its readiness probe checks its Serve proxy), the
    head ``false`` until the RayService controller sees its proxy healthy. A host of a
    multi-host slice starts ``false`` too, and the controller turns it ``true`` while every
    host of its slice is ready and its own proxy answers (docs/design.md §12, RS4): a partial
    slice never serves."""
    if not serves_rayservice(cluster):
        return {}
    serving = not (head or multi_host)
    return {labels.SERVE: labels.SERVE_TRUE if serving else labels.SERVE_FALSE}


def default_labels(cluster: RayCluster) -> dict[str, str]:
    """Labels a pod gets unless its template says otherwise: ``ray.io/serve: "true"`` when
    the serve service is enabled, so every Ray node is behind it as in KubeRay, while a
    template may set ``"false"`` (say, on the head) to keep a pod out."""
    return {labels.SERVE: labels.SERVE_TRUE} if serve_enabled(cluster) else {}


def merge_labels(
    user: object, ours: Mapping[str, str], defaults: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Defaults first, then the user's labels, then ours on top. The identity keys the
    operator owns are dropped from the user's labels even where we do not set them (a
    single-host pod has no replica name), so a template cannot forge a slice identity."""
    kept = {
        str(k): str(v)
        for k, v in (user.items() if isinstance(user, Mapping) else ())
        if str(k) not in labels.OWNED_KEYS
    }
    return {**(defaults or {}), **kept, **ours}


def owner_reference(cluster: RayCluster) -> dict[str, Any]:
    """Controller reference to the RayCluster: deleting it garbage-collects what we made."""
    ref: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": cluster.metadata.name,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    if cluster.metadata.uid:
        ref["uid"] = cluster.metadata.uid
    return ref


def object_meta(cluster: RayCluster, *, name: str, labels_: Mapping[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": cluster.metadata.namespace,
        "labels": dict(labels_),
        "ownerReferences": [owner_reference(cluster)],
    }
