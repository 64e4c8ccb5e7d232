"""The in-tree Ray autoscaler: a sidecar in the head pod and the RBAC it needs.

The sidecar runs Ray's own ``ray kuberay-autoscaler`` entry point, which waits for the head's
GCS, reads the RayCluster and patches ``replicas`` / ``scaleStrategy.workersToDelete``. It
finds the cluster from its flags, the head pod from ``RAY_HEAD_POD_NAME`` and the CRD version
from ``KUBERAY_CRD_VER``; it logs into the head's log directory, so both containers share a
``/tmp/ray`` volume as under KubeRay.
"""

from __future__ import annotations

from typing import Any

from raycluster_operator.api import labels, names
from raycluster_operator.api.models import RayCluster
from raycluster_operator.builders.metadata import base_labels, object_meta

CONTAINER_NAME = "autoscaler"
LOG_VOLUME = "ray-logs"
LOG_DIR = "/tmp/ray"
_DEFAULT_RESOURCES = {
    "limits": {"cpu": "500m", "memory": "512Mi"},
    "requests": {"cpu": "500m", "memory": "512Mi"},
}


def service_account_name(cluster: RayCluster) -> str:
    return names.fit(cluster.metadata.name)


def _ensure_log_volume(spec: dict[str, Any], container: dict[str, Any]) -> None:
    volumes = spec.setdefault("volumes", [])
    if not any(isinstance(v, dict) and v.get("name") == LOG_VOLUME for v in volumes):
        volumes.append({"name": LOG_VOLUME, "emptyDir": {}})
    mounts = container.setdefault("volumeMounts", [])
    if not any(isinstance(m, dict) and m.get("mountPath") == LOG_DIR for m in mounts):
        mounts.append({"name": LOG_VOLUME, "mountPath": LOG_DIR})


def sidecar(cluster: RayCluster, head_image: str | None) -> dict[str, Any]:
    options = cluster.spec.autoscaler_options
    name, namespace = cluster.metadata.name, cluster.metadata.namespace
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": (options.image if options and options.image else head_image),
        "command": ["ray"],
        "args": ["kuberay-autoscaler", "--cluster-name", name, "--cluster-namespace", namespace],
        "env": [
            {"name": "RAY_CLUSTER_NAME", "value": name},
            {"name": "RAY_CLUSTER_NAMESPACE", "value": namespace},
            {
                "name": "RAY_HEAD_POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
            {"name": "KUBERAY_CRD_VER", "value": "v1"},
            *(options.env or [] if options else []),
        ],
        "resources": (options.resources if options and options.resources else _DEFAULT_RESOURCES),
    }
    if options is not None:
        if options.image_pull_policy:
            container["imagePullPolicy"] = options.image_pull_policy
        if options.env_from:
            container["envFrom"] = list(options.env_from)
        if options.volume_mounts:
            container["volumeMounts"] = list(options.volume_mounts)
        if options.security_context:
            container["securityContext"] = dict(options.security_context)
    return container


def add_sidecar(cluster: RayCluster, spec: dict[str, Any]) -> None:
    """Add the autoscaler container, the shared log volume and the service account."""
    containers: list[dict[str, Any]] = spec["containers"]
    if any(c.get("name") == CONTAINER_NAME for c in containers):
        return
    ray = containers[0]
    image = ray.get("image")
    side = sidecar(cluster, image if isinstance(image, str) else None)
    _ensure_log_volume(spec, ray)
    _ensure_log_volume(spec, side)
    containers.append(side)
    spec.setdefault("serviceAccountName", service_account_name(cluster))


def build_autoscaler_rbac(cluster: RayCluster) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding named after the cluster, granting what KubeRay
    grants the autoscaler: read pods (and resize them in place), read and patch its
    RayCluster. It never deletes pods itself: it names them in workersToDelete."""
    name = service_account_name(cluster)
    meta_labels = base_labels(cluster, group=labels.HEAD_GROUP, node_type=labels.NODE_TYPE_HEAD)
    meta_labels = {
        k: v
        for k, v in meta_labels.items()
        if k in (labels.CLUSTER, labels.APP_NAME, labels.CREATED_BY)
    }
    meta = object_meta(cluster, name=name, labels_=meta_labels)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["pods"],
                    "verbs": ["get", "list", "watch", "patch"],
                },
                {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
                {
                    "apiGroups": ["ray.io"],
                    "resources": ["rayclusters"],
                    "verbs": ["get", "list", "watch", "patch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "subjects": [
                {"kind": "ServiceAccount", "name": name, "namespace": cluster.metadata.namespace}
            ],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        },
    ]
