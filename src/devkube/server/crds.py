"""CustomResourceDefinitions: which resources a CRD serves and how its schema shapes objects.

Structural-schema semantics kept: `default` values fill absent fields (recursively, through
objects and array items), and fields not in `properties` are pruned unless the schema says
`x-kubernetes-preserve-unknown-fields: true` (or the object has additionalProperties). Metadata
is left alone except at the root. Validation keywords (types, patterns, enums) are not enforced.
"""

from __future__ import annotations

import copy
from typing import Any

from .resources import ResourceType

ROOT_KEEP = ("apiVersion", "kind", "metadata")


def resource_types(crd: dict[str, Any]) -> list[ResourceType]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    types = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        types.append(
            ResourceType(
                group=group,
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=namespaced,
                singular=names.get("singular") or names["kind"].lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=frozenset(k for k in ("status", "scale") if k in subresources),
                builtin=False,
                tracks_generation=True,
                schema=schema,
                scale=subresources.get("scale"),
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
            )
        )
    return types


def problems(crd: dict[str, Any]) -> list[tuple[str, str]]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    found: list[tuple[str, str]] = []
    group, plural = spec.get("group"), names.get("plural")
    if not group:
        found.append(("spec.group", "Required value"))
    if not plural:
        found.append(("spec.names.plural", "Required value"))
    if not names.get("kind"):
        found.append(("spec.names.kind", "Required value"))
    if group and plural and crd.get("metadata", {}).get("name") != f"{plural}.{group}":
        found.append(("metadata.name", 'must be spec.names.plural+"."+spec.group'))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        found.append(("spec.scope", 'Unsupported value: must be "Namespaced" or "Cluster"'))
    versions = spec.get("versions") or []
    if not versions:
        found.append(("spec.versions", "Required value"))
    if sum(1 for v in versions if v.get("storage")) != 1:
        found.append(("spec.versions", "must have exactly one version marked as storage version"))
    return found


def accepted_status(crd: dict[str, Any], now: str) -> dict[str, Any]:
    """The status the real server converges to for a CRD whose names are free."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    conditions = [
        {
            "type": "NamesAccepted",
            "status": "True",
            "reason": "NoConflicts",
            "message": "no conflicts found",
            "lastTransitionTime": now,
        },
        {
            "type": "Established",
            "status": "True",
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
            "lastTransitionTime": now,
        },
    ]
    old = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}
    for cond in conditions:
        prev = old.get(cond["type"])
        if prev and prev.get("status") == cond["status"]:
            cond["lastTransitionTime"] = prev.get("lastTransitionTime", now)
    return {
        "acceptedNames": names,
        "conditions": conditions,
        "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
    }


def default_crd(crd: dict[str, Any]) -> None:
    spec = crd.setdefault("spec", {})
    names = spec.setdefault("names", {})
    if names.get("kind"):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})
    for version in spec.get("versions") or []:
        version.setdefault("served", True)


def shape(obj: dict[str, Any], schema: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """Apply schema defaults and pruning to a custom object: a new dict and the pruned paths
    (which `fieldValidation=Strict` turns into an error, as the real server does)."""
    if not schema:
        return obj, []
    pruned: list[str] = []
    result = _shape(copy.deepcopy(obj), schema, pruned, "", root=True)
    assert isinstance(result, dict)
    return result, pruned


def _shape(
    value: Any, schema: dict[str, Any], pruned: list[str], path: str, root: bool = False
) -> Any:
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        if schema.get("x-kubernetes-embedded-resource") and not root:
            root = True
        for key, sub in props.items():
            if key not in value and isinstance(sub, dict) and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        for key in list(value):
            if root and key in ROOT_KEEP:
                continue
            here = f"{path}.{key}" if path else key
            if key in props:
                value[key] = _shape(value[key], props[key], pruned, here)
            elif isinstance(additional, dict):
                value[key] = _shape(value[key], additional, pruned, here)
            elif additional is True or preserve:
                continue
            else:
                pruned.append(here)
                del value[key]
        return value
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [_shape(v, items, pruned, f"{path}[{i}]") for i, v in enumerate(value)]
        return value
    return value
