"""The in-tree Ray autoscaler: a sidecar in the head pod and the RBAC it needs.

The sidecar runs Ray's own ``ray kuberay-autoscaler`` entry point (``run_kuberay_autoscaler``),
which waits for the head's GCS, reads the RayCluster and patches ``replicas`` /
``scaleStrategy.workersToDelete``; before it, the slice-scaling correction of
``raycluster_operator.sidecar.slice_autoscaler`` (docs/design.md, rule 7b). It
finds the cluster from its flags, the head pod from ``RAY_HEAD_POD_NAME`` and the CRD version
from ``KUBERAY_CRD_VER``; it logs into the head's log directory, so both containers share a
``/tmp/ray`` volume as under KubeRay.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from raycluster_operator.api import labels, names
from raycluster_operator.api.models import RayCluster
from raycluster_operator.builders.fields import ensure_list
from raycluster_operator.builders.metadata import base_labels, object_meta

CONTAINER_NAME = "autoscaler"
LOG_VOLUME = "ray-logs"
LOG_DIR = "/tmp/ray"
_DEFAULT_RESOURCES = {
    "limits": {"cpu": "500m", "memory": "512Mi"},
    "requests": {"cpu": "500m", "memory": "512Mi"},
}


#: The sidecar's program: Ray's own autoscaler with the slice-scaling correction
#: (docs/design.md, rule 7b), run from source because the image is the user's Ray image.
SIDECAR_PROGRAM = ("raycluster_operator.sidecar", "slice_autoscaler.py")


@functools.cache
def sidecar_program() -> str:
    """The program's source, read once from this package (deterministic, like code)."""
    package, name = SIDECAR_PROGRAM
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def _user_service_account(cluster: RayCluster) -> str | None:
    spec = cluster.spec.head_group_spec.template.get("spec")
    name = spec.get("serviceAccountName") if isinstance(spec, dict) else None
    return name if isinstance(name, str) and name else None


def service_account_name(cluster: RayCluster) -> str:
    """The head pod's service account if the user chose one (as KubeRay), else the cluster's
    name."""
    return _user_service_account(cluster) or names.fit(cluster.metadata.name)


def _ensure_log_volume(spec: dict[str, Any], container: dict[str, Any]) -> None:
    volumes = ensure_list(spec, "volumes")
    if not any(isinstance(v, dict) and v.get("name") == LOG_VOLUME for v in volumes):
        volumes.append({"name": LOG_VOLUME, "emptyDir": {}})
    mounts = ensure_list(container, "volumeMounts")
    if not any(isinstance(m, dict) and m.get("mountPath") == LOG_DIR for m in mounts):
        mounts.append({"name": LOG_VOLUME, "mountPath": LOG_DIR})


def sidecar(cluster: RayCluster, head_image: str | None) -> dict[str, Any]:
    options = cluster.spec.autoscaler_options
    name, namespace = cluster.metadata.name, cluster.metadata.namespace
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": (options.image if options and options.image else head_image),
        # As `ray kuberay-autoscaler --cluster-name ... --cluster-namespace ...`, with the
        # version-gated slice-scaling correction applied first (rule 7b).
        "command": ["python", "-c", sidecar_program()],
        "args": ["--cluster-name", name, "--cluster-namespace", namespace],
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


#: What the sidecar never needs, whatever the user's template: it meets Pod Security
#: `restricted` on these (docs/design.md §3.10), and it never pushes a pod below `baseline`.
_SIDECAR_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _sidecar_security(spec: dict[str, Any], ray: dict[str, Any]) -> dict[str, Any]:
    """The sidecar's securityContext: restricted's container fields always; who it runs as
    follows the Ray container when that one runs as a non-root user (so both share the
    /tmp/ray files they write), and is otherwise the pod's or the image's, as under KubeRay
    (a root Ray image keeps a working autoscaler)."""
    out = dict(_SIDECAR_SECURITY)
    mine = ray.get("securityContext") or {}
    pod = spec.get("securityContext") or {}
    user = mine.get("runAsUser", pod.get("runAsUser"))
    if mine.get("runAsNonRoot") is True or (isinstance(user, int) and user > 0):
        out["runAsNonRoot"] = True
        for key in ("runAsUser", "runAsGroup"):
            if key in mine:
                out[key] = mine[key]
    return out


def add_sidecar(cluster: RayCluster, spec: dict[str, Any]) -> None:
    """Add the autoscaler container, the shared log volume and the service account."""
    containers: list[dict[str, Any]] = spec["containers"]
    if any(c.get("name") == CONTAINER_NAME for c in containers):
        return
    ray = containers[0]
    image = ray.get("image")
    side = sidecar(cluster, image if isinstance(image, str) else None)
    if "securityContext" not in side:  # autoscalerOptions.securityContext wins whole
        side["securityContext"] = _sidecar_security(spec, ray)
    _ensure_log_volume(spec, ray)
    _ensure_log_volume(spec, side)
    containers.append(side)
    if not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = service_account_name(cluster)


def build_autoscaler_rbac(cluster: RayCluster) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding named after the cluster.

    The Role grants what KubeRay grants the autoscaler (read pods, get and patch its
    RayCluster) plus list/watch of RayClusters and in-place pod resize, which Ray 2.60's
    autoscaler v2 can use, and delete of its RayCluster for idle termination (policy Delete).
    It never deletes pods itself: it names them in workersToDelete.
    When the user named the head pod's service account, that account is bound and not
    created (it is theirs, as under KubeRay).
    """
    name = names.fit(cluster.metadata.name)
    account = service_account_name(cluster)
    meta_labels = base_labels(cluster, group=labels.HEAD_GROUP, node_type=labels.NODE_TYPE_HEAD)
    meta_labels = {
        k: v
        for k, v in meta_labels.items()
        if k in (labels.CLUSTER, labels.APP_NAME, labels.CREATED_BY)
    }

    def meta() -> dict[str, Any]:
        return object_meta(cluster, name=name, labels_=meta_labels)

    objects: list[dict[str, Any]] = []
    if _user_service_account(cluster) is None:
        objects.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()})
    return [
        *objects,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(),
            "rules": [
                # patch: Ray's in-place resize records its progress in the pod annotation
                # ray.io/ippr-status (a strategic-merge PATCH of the pod itself).
                {
                    "apiGroups": [""],
                    "resources": ["pods"],
                    "verbs": ["get", "list", "watch", "patch"],
                },
                {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
                # delete: idle termination with policy Delete (Ray 2.60) deletes the
                # RayCluster itself, after adding a finalizer the operator releases.
                {
                    "apiGroups": ["ray.io"],
                    "resources": ["rayclusters"],
                    "verbs": ["get", "list", "watch", "patch", "delete"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(),
            "subjects": [
                {"kind": "ServiceAccount", "name": account, "namespace": cluster.metadata.namespace}
            ],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        },
    ]
