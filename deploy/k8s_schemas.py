"""Regenerate src/raycluster_operator/api/k8s_schemas.json from Kubernetes' own OpenAPI.

Run: .venv/bin/python deploy/k8s_schemas.py   (or deploy/generate.py, which runs this too)

The source is the JSON Schema of Kubernetes' published OpenAPI that the ``kubernetes-validate``
package ships per Kubernetes version. Each type the RayCluster CRD embeds (the pod template,
the head Service, the autoscaler container's fields) is inlined and rewritten the way
controller-gen writes a CRD: no ``$ref``, one ``type`` per node (``null`` goes), IntOrString
and Quantity become ``x-kubernetes-int-or-string``, an embedded ObjectMeta keeps only the
fields a template may set, and descriptions are dropped (KubeRay's CRD drops them too: the pod
template appears twice and a CRD must stay well under etcd's object size limit).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

KUBERNETES_VERSION = "1.37.0"
OUT = Path(__file__).parent.parent / "src/raycluster_operator/api/k8s_schemas.json"

#: The embedded types, by the name the CRD module uses.
TYPES = {
    "PodTemplateSpec": "io.k8s.api.core.v1.PodTemplateSpec",
    "Service": "io.k8s.api.core.v1.Service",
    "EnvVar": "io.k8s.api.core.v1.EnvVar",
    "EnvVarSource": "io.k8s.api.core.v1.EnvVarSource",
    "EnvFromSource": "io.k8s.api.core.v1.EnvFromSource",
    "ResourceRequirements": "io.k8s.api.core.v1.ResourceRequirements",
    "SecurityContext": "io.k8s.api.core.v1.SecurityContext",
    "VolumeMount": "io.k8s.api.core.v1.VolumeMount",
}
_QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_SPECIAL: dict[str, dict[str, Any]] = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    },
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": _QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    },
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"type": "string", "format": "date-time"},
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": {"type": "string", "format": "date-time"},
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
        "type": "object",
        "properties": {
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "name": {"type": "string"},
            "namespace": {"type": "string"},
        },
    },
}
_KEEP = (
    "format",
    "enum",
    "default",
    "required",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
)


def definitions() -> dict[str, Any]:
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    text = (root / f"v{KUBERNETES_VERSION}-local" / "_definitions.json").read_text()
    defs: dict[str, Any] = json.loads(text)["$defs"]
    return defs


def structural(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in _SPECIAL:
            return json.loads(json.dumps(_SPECIAL[name]))
        if name in seen:
            raise ValueError(f"recursive type {name} cannot be inlined")
        return structural(defs[name], defs, (*seen, name))
    out: dict[str, Any] = {}
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if "oneOf" in node:  # a bare IntOrString/Quantity inlined without $ref
        return json.loads(json.dumps(_SPECIAL["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]))
    if kind:
        out["type"] = kind
    for key in _KEEP:
        if key in node:
            out[key] = node[key]
    props = node.get("properties")
    if isinstance(props, dict):
        out["properties"] = {k: structural(v, defs, seen) for k, v in sorted(props.items())}
    items = node.get("items")
    if isinstance(items, dict):
        out["items"] = structural(items, defs, seen)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = structural(extra, defs, seen)
    if kind == "object" and "properties" not in out and "additionalProperties" not in out:
        # Free-form objects (e.g. a RawExtension) keep what they are given.
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def generate() -> dict[str, Any]:
    defs = definitions()
    return {
        "kubernetesVersion": KUBERNETES_VERSION,
        "source": "kubernetes-validate (Kubernetes OpenAPI as JSON Schema)",
        "types": {short: structural(defs[full], defs, (full,)) for short, full in TYPES.items()},
    }


def render() -> str:
    return json.dumps(generate(), sort_keys=True, separators=(",", ":")) + "\n"


def main() -> None:
    OUT.write_text(render())


if __name__ == "__main__":
    main()
