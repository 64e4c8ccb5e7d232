"""RoleBinding and ClusterRoleBinding validation as kube-apiserver's (docs/design.md §8,
"Request pipeline"): `roleRef` names a Role or ClusterRole of rbac.authorization.k8s.io (a
ClusterRoleBinding a ClusterRole only), by a name that is a path segment, and never changes.
"""

from __future__ import annotations

import json
from typing import Any

from kubefacts.objects import Obj

Cause = tuple[str, str]

GROUP = "rbac.authorization.k8s.io"


def _quoted(value: Any) -> str:
    return json.dumps("" if value is None else str(value))


def _name_causes(name: str) -> list[Cause]:
    if name in (".", ".."):
        return [("roleRef.name", f"Invalid value: {_quoted(name)}: may not be '{name}'")]
    causes: list[Cause] = []
    for bad in ("/", "%"):
        if bad in name:
            why = f"may not contain '{bad}'"
            causes.append(("roleRef.name", f"Invalid value: {_quoted(name)}: {why}"))
    return causes


def binding_causes(plural: str, obj: Obj) -> list[Cause]:
    ref = obj.get("roleRef") or {}
    kinds = ("Role", "ClusterRole") if plural == "rolebindings" else ("ClusterRole",)
    causes: list[Cause] = []
    if ref.get("apiGroup") != GROUP:
        shown = _quoted(ref.get("apiGroup"))
        causes.append(
            ("roleRef.apiGroup", f'Unsupported value: {shown}: supported values: "{GROUP}"')
        )
    if ref.get("kind") not in kinds:
        supported = ", ".join(f'"{kind}"' for kind in kinds)
        shown = _quoted(ref.get("kind"))
        causes.append(
            ("roleRef.kind", f"Unsupported value: {shown}: supported values: {supported}")
        )
    name = str(ref.get("name") or "")
    causes += _name_causes(name) if name else [("roleRef.name", "Required value")]
    return causes


def binding_update_causes(old: Obj, new: Obj) -> list[Cause]:
    before, after = old.get("roleRef") or {}, new.get("roleRef") or {}
    keys = (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name"))
    if all(before.get(key) == after.get(key) for _, key in keys):
        return []
    internal = {go: after.get(key) or "" for go, key in keys}
    shown = json.dumps(internal, separators=(",", ":"))
    return [("roleRef", f"Invalid value: {shown}: field is immutable")]
