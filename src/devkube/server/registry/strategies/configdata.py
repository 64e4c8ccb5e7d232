"""ConfigMaps and Secrets as kube-apiserver stores them (docs/design.md §8, "API server"):
a Secret's `stringData` is folded into `data` (base64) and dropped, its `type` defaults to
`Opaque` and never changes, and once `immutable: true` is stored neither kind's data (nor
the flag) may change.
"""

from __future__ import annotations

import base64
from typing import Any

from kubefacts.objects import Obj

Cause = tuple[str, str]

IMMUTABLE = "Forbidden: field is immutable when `immutable` is set"


def secret_from_request(obj: Obj) -> None:
    """The v1 -> internal conversion and defaults of a written Secret, in place."""
    strings = obj.pop("stringData", None)
    if isinstance(strings, dict) and strings:
        data = obj.get("data")
        if not isinstance(data, dict):
            data = obj["data"] = {}
        for key, value in strings.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
    if not obj.get("type"):
        obj["type"] = "Opaque"


def _data_fields(plural: str) -> tuple[str, ...]:
    return ("data", "binaryData") if plural == "configmaps" else ("data",)


def update_causes(plural: str, old: Obj, new: Obj) -> list[Cause]:
    """ValidateConfigMapUpdate / ValidateSecretUpdate beyond metadata."""
    causes: list[Cause] = []
    if plural == "secrets" and new.get("type") != old.get("type"):
        shown = _quoted(new.get("type"))
        causes.append(("type", f"Invalid value: {shown}: field is immutable"))
    if old.get("immutable") is True:
        if new.get("immutable") is not True:
            causes.append(("immutable", IMMUTABLE))
        for key in _data_fields(plural):
            if (old.get(key) or None) != (new.get(key) or None):
                causes.append((key, IMMUTABLE))
    return causes


def _quoted(value: Any) -> str:
    text = "" if value is None else str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
