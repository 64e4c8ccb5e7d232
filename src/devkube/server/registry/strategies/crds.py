"""CustomResourceDefinitions: which resources a CRD serves and how its schema shapes objects.

What a schema does to objects (pruning, defaulting, validation) lives in `schema.structural`.
"""

from __future__ import annotations

from typing import Any

from devkube.server.registry.resources import ResourceType
from devkube.server.schema import structural
from devkube.server.schema.cel import rules


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
    for i, version in enumerate(versions):
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if isinstance(schema, dict):
            where = f"spec.versions[{i}].schema.openAPIV3Schema"
            found += [(c[0], c[1]) for c in structural.schema_problems(schema, where)]
    return found + [(c[0], c[1]) for c in rules.crd_problems(crd)]


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
