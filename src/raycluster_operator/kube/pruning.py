"""What the API server keeps of an object under a CRD's structural schema.

The server prunes every field its schema does not declare (unless the schema preserves
unknown fields there), drops nulls a field does not allow and fills defaults. A controller
that compares what it wants with what is stored must compare after the same treatment, or
it rewrites forever a field the server throws away (docs/design.md, "Running beside
KubeRay's CRD").
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

Schema = Mapping[str, Any]
_ROOT = ("apiVersion", "kind", "metadata")


def prune(value: Any, schema: Schema | None, *, root: bool = False) -> tuple[Any, list[str]]:
    """A pruned, defaulted copy of ``value`` and the paths of the fields the server drops
    (``root``: ``value`` is a whole object, whose apiVersion, kind and metadata are kept)."""
    dropped: list[str] = []
    if not schema:
        return copy.deepcopy(value), dropped
    return _walk(copy.deepcopy(value), schema, "", dropped, keep_meta=root), dropped


def _walk(value: Any, schema: Schema, path: str, dropped: list[str], *, keep_meta: bool) -> Any:
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [
                _walk(v, items, f"{path}[{i}]", dropped, keep_meta=False)
                for i, v in enumerate(value)
            ]
        return value
    if not isinstance(value, dict):
        return value
    props: Mapping[str, Any] = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    keep_meta = keep_meta or bool(schema.get("x-kubernetes-embedded-resource"))
    prefix = f"{path}." if path else ""
    for key in list(value):
        sub = props.get(key)
        if keep_meta and key in _ROOT:
            continue
        if sub is not None:
            if value[key] is None and not sub.get("nullable"):
                del value[key]
                continue
            value[key] = _walk(value[key], sub, prefix + key, dropped, keep_meta=False)
        elif isinstance(extra, Mapping):
            value[key] = _walk(value[key], extra, prefix + key, dropped, keep_meta=False)
        elif extra is True or preserve:
            continue
        else:
            dropped.append(prefix + key)
            del value[key]
    for key, sub in props.items():
        if key not in value and "default" in sub:
            value[key] = _walk(
                copy.deepcopy(sub["default"]), sub, prefix + key, [], keep_meta=False
            )
    return value
