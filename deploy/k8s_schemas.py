"""Regenerate the schemas taken from Kubernetes' own OpenAPI (two generated files).

Run: .venv/bin/python deploy/k8s_schemas.py   (or deploy/generate.py, which runs this too)

- src/raycluster_operator/api/k8s_schemas.json: the Kubernetes types the RayCluster CRD embeds;
- src/devkube/server/schema/builtin_schemas.json: the built-in kinds the dev API server serves,
  so it drops and reports unknown fields and refuses wrongly typed values as kube-apiserver's
  decoder
  does (``devkube/server/schema/builtin.py``).

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
    _default_list_map_keys(out)
    return out


#: Kubernetes' `+default` markers on list-map keys that are not required (what controller-gen
#: writes as `default:`). kube-apiserver refuses a CRD whose list-map key has neither a default
#: nor `required` ("this property is in x-kubernetes-list-map-keys, so it must have a default
#: or be a required property"); the published OpenAPI this is generated from leaves them out.
_LIST_MAP_KEY_DEFAULTS = {"protocol": "TCP", "name": ""}


def _default_list_map_keys(node: dict[str, Any]) -> None:
    if node.get("x-kubernetes-list-type") != "map":
        return
    items = node.get("items") or {}
    props = items.get("properties") or {}
    for key in node.get("x-kubernetes-list-map-keys") or ():
        if key in (items.get("required") or ()) or "default" in props.get(key, {}):
            continue
        if key not in _LIST_MAP_KEY_DEFAULTS:
            raise ValueError(f"list-map key {key!r} has neither a default nor required")
        props[key]["default"] = _LIST_MAP_KEY_DEFAULTS[key]


def generate() -> dict[str, Any]:
    defs = definitions()
    return {
        "kubernetesVersion": KUBERNETES_VERSION,
        "source": "kubernetes-validate (Kubernetes OpenAPI as JSON Schema)",
        "types": {short: structural(defs[full], defs, (full,)) for short, full in TYPES.items()},
    }


def render() -> str:
    return json.dumps(generate(), sort_keys=True, separators=(",", ":")) + "\n"


BUILTIN_OUT = Path(__file__).parent.parent / "src/devkube/server/schema/builtin_schemas.json"
#: apiVersion/Kind -> OpenAPI definition, for the built-in kinds the dev server serves.
BUILTIN_KINDS = {
    "v1/Pod": "io.k8s.api.core.v1.Pod",
    "v1/Service": "io.k8s.api.core.v1.Service",
    "v1/Namespace": "io.k8s.api.core.v1.Namespace",
    "v1/Endpoints": "io.k8s.api.core.v1.Endpoints",
    "v1/ConfigMap": "io.k8s.api.core.v1.ConfigMap",
    "v1/Secret": "io.k8s.api.core.v1.Secret",
    "v1/ServiceAccount": "io.k8s.api.core.v1.ServiceAccount",
    "v1/Event": "io.k8s.api.core.v1.Event",
    "v1/Node": "io.k8s.api.core.v1.Node",
    "events.k8s.io/v1/Event": "io.k8s.api.events.v1.Event",
    "coordination.k8s.io/v1/Lease": "io.k8s.api.coordination.v1.Lease",
    "rbac.authorization.k8s.io/v1/Role": "io.k8s.api.rbac.v1.Role",
    "rbac.authorization.k8s.io/v1/RoleBinding": "io.k8s.api.rbac.v1.RoleBinding",
    "rbac.authorization.k8s.io/v1/ClusterRole": "io.k8s.api.rbac.v1.ClusterRole",
    "rbac.authorization.k8s.io/v1/ClusterRoleBinding": "io.k8s.api.rbac.v1.ClusterRoleBinding",
    "apps/v1/Deployment": "io.k8s.api.apps.v1.Deployment",
    "apps/v1/StatefulSet": "io.k8s.api.apps.v1.StatefulSet",
    "apps/v1/ReplicaSet": "io.k8s.api.apps.v1.ReplicaSet",
    "apps/v1/DaemonSet": "io.k8s.api.apps.v1.DaemonSet",
    "batch/v1/Job": "io.k8s.api.batch.v1.Job",
    "policy/v1/PodDisruptionBudget": "io.k8s.api.policy.v1.PodDisruptionBudget",
    "policy/v1/Eviction": "io.k8s.api.policy.v1.Eviction",
    "v1/ResourceQuota": "io.k8s.api.core.v1.ResourceQuota",
    "v1/LimitRange": "io.k8s.api.core.v1.LimitRange",
    "resource.k8s.io/v1/DeviceClass": "io.k8s.api.resource.v1.DeviceClass",
    "resource.k8s.io/v1/ResourceClaim": "io.k8s.api.resource.v1.ResourceClaim",
    "resource.k8s.io/v1/ResourceClaimTemplate": "io.k8s.api.resource.v1.ResourceClaimTemplate",
    "resource.k8s.io/v1/ResourceSlice": "io.k8s.api.resource.v1.ResourceSlice",
}
#: Types whose Go decoding is custom: any JSON scalar of the right kind is accepted here.
_OPAQUE = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": (
        "intstr.IntOrString",
        ["integer", "string"],
    ),
    "io.k8s.apimachinery.pkg.api.resource.Quantity": (
        "resource.Quantity",
        ["integer", "number", "string"],
    ),
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": ("v1.Time", ["string"]),
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": ("v1.MicroTime", ["string"]),
}


def _go_scalar(node: dict[str, Any]) -> tuple[str, str]:
    """(JSON type, Go type) of a scalar schema node."""
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    fmt = node.get("format")
    if kind == "integer":
        return "integer", {"int32": "int32"}.get(str(fmt), "int64")
    if kind == "number":
        return "number", "float64"
    if kind == "boolean":
        return "boolean", "bool"
    if kind == "string":
        return "string", "[]uint8" if fmt == "byte" else "string"
    return str(kind or ""), ""


def _builtin_node(node: dict[str, Any], used: set[str]) -> dict[str, Any]:
    """A compact node: ``ref`` (a definition), or ``t``/``go`` (JSON and Go type) with
    ``p`` (properties), ``i`` (items), ``a`` (map values), ``any`` (preserve everything)."""
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in _OPAQUE:
            go, kinds = _OPAQUE[name]
            return {"t": kinds, "go": go}
        used.add(name)
        return {"ref": name}
    kind, go = _go_scalar(node)
    out: dict[str, Any] = {"t": [kind]} if kind else {}
    if kind == "array" and isinstance(node.get("items"), dict):
        item = _builtin_node(node["items"], used)
        out["i"] = item
        out["go"] = "[]" + _go_name(item)
    elif kind == "object" and isinstance(node.get("additionalProperties"), dict):
        value = _builtin_node(node["additionalProperties"], used)
        out["a"] = value
        out["go"] = "map[string]" + _go_name(value)
    elif kind == "object" and not node.get("properties"):
        out["any"] = True
        out["go"] = "runtime.RawExtension"
    elif go:
        out["go"] = go
    return out


def _go_name(node: dict[str, Any]) -> str:
    if "ref" in node:
        return "v1." + str(node["ref"]).rsplit(".", 1)[-1]
    return str(node.get("go", "interface {}"))


def builtin() -> dict[str, Any]:
    defs = definitions()
    out: dict[str, Any] = {}
    pending = list(BUILTIN_KINDS.values())
    while pending:
        name = pending.pop()
        if name in out:
            continue
        used: set[str] = set()
        node = defs[name]
        props = node.get("properties") or {}
        out[name] = {
            "t": ["object"],
            "go": "v1." + name.rsplit(".", 1)[-1],
            "p": {k: _builtin_node(v, used) for k, v in sorted(props.items())},
        }
        pending += sorted(used - set(out))
    return {
        "kubernetesVersion": KUBERNETES_VERSION,
        "source": "kubernetes-validate (Kubernetes OpenAPI as JSON Schema)",
        "kinds": BUILTIN_KINDS,
        "definitions": dict(sorted(out.items())),
    }


def render_builtin() -> str:
    return json.dumps(builtin(), sort_keys=True, separators=(",", ":")) + "\n"


def main() -> None:
    OUT.write_text(render())
    BUILTIN_OUT.write_text(render_builtin())


if __name__ == "__main__":
    main()
