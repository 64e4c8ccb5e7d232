"""A test fixture shaped like KubeRay v1.7's own ``rayclusters.ray.io`` CRD (v1.6 with the GCS
backend: the same CEL rules on managedBy, one more on gcsFaultToleranceOptions.backend).

Facts from KubeRay's ``ray-operator/config/crd/bases/ray.io_rayclusters.yaml`` (v1.6, v1.7): a full
structural schema with no ``x-kubernetes-preserve-unknown-fields`` anywhere in spec or status,
status fields limited to KubeRay's (no slice counts), no ``idleSuspend`` or
``idleTerminationOptions`` in spec, descriptions stripped (controller-gen maxDescLen=0), and
KubeRay's printer columns. Its field set is ours minus every field whose description carries
our EXTENSION marker, which is the claim ``api/crd.py`` makes; ``test_kuberay_crd.py`` also
checks the KubeRay facts directly (no preserve-unknown-fields, KubeRay's status keys).
Plus the defaults v1.7's file declares and ours does not, which the server applies to every
stored cluster as it reads it: a port's ``protocol: TCP``, a reference's ``name: ""`` and the
rest of `KUBERAY_V17_DEFAULTS`.
"""

from __future__ import annotations

from typing import Any

from raycluster_operator.api.crd import EXTENSION
from raycluster_operator.controller.crds import crd_manifest

#: KubeRay v1.6's RayCluster status fields, from its CRD.
KUBERAY_STATUS_FIELDS = frozenset(
    {
        "availableWorkerReplicas",
        "conditions",
        "desiredCPU",
        "desiredGPU",
        "desiredMemory",
        "desiredTPU",
        "desiredWorkerReplicas",
        "endpoints",
        "head",
        "lastUpdateTime",
        "maxWorkerReplicas",
        "minWorkerReplicas",
        "observedGeneration",
        "readyWorkerReplicas",
        "reason",
        "state",
        "stateTransitionTimes",
    }
)


def _strip(node: Any) -> Any:
    if isinstance(node, list):
        return [_strip(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description":
            continue
        if key == "properties":
            out[key] = {
                name: _strip(sub)
                for name, sub in value.items()
                if not str(sub.get("description", "")).startswith(EXTENSION)
            }
        else:
            out[key] = _strip(value)
    return out


#: The defaults KubeRay v1.7's file declares and ours does not, as (key of the enclosing
#: object, field, default); the items of a list have the list's key. Counted from
#: helm-chart/kuberay-operator/crds/ray.io_rayclusters.yaml at v1.7.0: 115 defaults there, 6
#: in ours (numOfHosts, replicas, minReplicas, maxReplicas, a group's priority,
#: networkPolicy.mode), which KubeRay shares.
KUBERAY_V17_DEFAULTS: tuple[tuple[str, str, object], ...] = (
    ("azureDisk", "fsType", "ext4"),
    ("azureDisk", "readOnly", False),
    ("configMap", "name", ""),
    ("configMapKeyRef", "name", ""),
    ("configMapRef", "name", ""),
    ("fileKeyRef", "optional", False),
    ("grpc", "service", ""),
    ("imagePullSecrets", "name", ""),
    ("iscsi", "iscsiInterface", "default"),
    ("nodePublishSecretRef", "name", ""),
    ("ports", "protocol", "TCP"),
    ("rbd", "keyring", "/etc/ceph/keyring"),
    ("rbd", "pool", "rbd"),
    ("rbd", "user", "admin"),
    ("scaleIO", "fsType", "xfs"),
    ("scaleIO", "storageMode", "ThinProvisioned"),
    ("secret", "name", ""),
    ("secretKeyRef", "name", ""),
    ("secretRef", "name", ""),
)


_NO_DEFAULTS_BELOW = frozenset({"status", "networkPolicy"})


def _defaults(node: Any, key: str = "") -> int:
    """Set `KUBERAY_V17_DEFAULTS` wherever the schema has the field; how many were set."""
    if not isinstance(node, dict):
        return 0
    props = node.get("properties") or {}
    set_here = 0
    for parent, name, value in KUBERAY_V17_DEFAULTS:
        if parent == key and name in props:
            props[name]["default"] = value
            set_here += 1
    items = node.get("items")
    below = _defaults(items, key) if isinstance(items, dict) else 0
    # a Service's status ports have no default (their protocol is required), nor have a
    # NetworkPolicy rule's ports (networking/v1 defaults them in its own API, not here)
    inside = sum(
        _defaults(sub, name) for name, sub in props.items() if name not in _NO_DEFAULTS_BELOW
    )
    return set_here + below + inside


def kuberay_crd() -> dict[str, Any]:
    crd = crd_manifest()
    version = crd["spec"]["versions"][0]
    version["schema"] = _strip(version["schema"])
    # KubeRay's upgrade types; RollingUpdate is ours (its description says so: EXTENSION).
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    spec["upgradeStrategy"]["properties"]["type"]["enum"] = ["Recreate", "None"]
    # v1.7 declares 109 defaults of these shapes; ours shares the other 6 (the four counts,
    # a worker group's priority, networkPolicy.mode)
    assert _defaults(version["schema"]["openAPIV3Schema"]) == 109
    version["additionalPrinterColumns"] = [
        c for c in version["additionalPrinterColumns"] if c["name"] != "ready slices"
    ]
    crd["metadata"]["annotations"] = {"controller-gen.kubebuilder.io/version": "v0.16.5"}
    return crd


#: KubeRay v1.7's RayCluster spec fields, three levels that matter (from its CRD file).
KUBERAY_V17_FIELDS = {
    "spec": {
        "authOptions",
        "autoscalerOptions",
        "enableInTreeAutoscaling",
        "gcsFaultToleranceOptions",
        "headGroupSpec",
        "headServiceAnnotations",
        "historyServerOptions",
        "managedBy",
        "networkPolicy",
        "rayVersion",
        "suspend",
        "tlsOptions",
        "upgradeStrategy",
        "workerGroupSpecs",
    },
    "workerGroupSpecs": {
        "groupName",
        "idleTimeoutSeconds",
        "labels",
        "maxReplicas",
        "minReplicas",
        "numOfHosts",
        "priority",
        "rayStartParams",
        "replicas",
        "resources",
        "scaleStrategy",
        "suspend",
        "template",
    },
    "headGroupSpec": {
        "enableIngress",
        "headService",
        "ingressOptions",
        "labels",
        "rayStartParams",
        "resources",
        "serviceType",
        "template",
    },
    "autoscalerOptions": {
        "args",
        "command",
        "env",
        "envFrom",
        "idleTimeoutSeconds",
        "image",
        "imagePullPolicy",
        "resources",
        "securityContext",
        "upscalingMode",
        "version",
        "volumeMounts",
    },
}
