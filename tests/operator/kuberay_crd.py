"""A test fixture shaped like KubeRay v1.7's own ``rayclusters.ray.io`` CRD (v1.6 with the GCS
backend: the same CEL rules on managedBy, one more on gcsFaultToleranceOptions.backend).

Facts from KubeRay's ``ray-operator/config/crd/bases/ray.io_rayclusters.yaml`` (v1.6, v1.7): a full
structural schema with no ``x-kubernetes-preserve-unknown-fields`` anywhere in spec or status,
status fields limited to KubeRay's (no slice counts), no ``idleSuspend`` or
``idleTerminationOptions`` in spec, descriptions stripped (controller-gen maxDescLen=0), and
KubeRay's printer columns. Its field set is ours minus every field whose description carries
our EXTENSION marker, which is the claim ``api/crd.py`` makes; ``test_kuberay_crd.py`` also
checks the KubeRay facts directly (no preserve-unknown-fields, KubeRay's status keys).
"""

from __future__ import annotations

from typing import Any

from raycluster_operator.api.crd import EXTENSION, crd_manifest

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


def kuberay_crd() -> dict[str, Any]:
    crd = crd_manifest()
    version = crd["spec"]["versions"][0]
    version["schema"] = _strip(version["schema"])
    # KubeRay's upgrade types; RollingUpdate is ours (its description says so: EXTENSION).
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    spec["upgradeStrategy"]["properties"]["type"]["enum"] = ["Recreate", "None"]
    version["additionalPrinterColumns"] = [
        c for c in version["additionalPrinterColumns"] if c["name"] != "ready slices"
    ]
    crd["metadata"]["annotations"] = {"controller-gen.kubebuilder.io/version": "v0.16.5"}
    return crd
