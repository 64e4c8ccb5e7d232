"""Lists inside a copied template that we extend: absent and ``null`` both mean empty.

Kubernetes treats ``volumes: null`` like a missing field, so the builders must too.
"""

from __future__ import annotations

from typing import Any


def ensure_list(obj: dict[str, Any], key: str) -> list[Any]:
    """``obj[key]`` as a list we may append to, created when absent or null (validation has
    already rejected any other type)."""
    value = obj.get(key)
    if not isinstance(value, list):
        value = obj[key] = []
    return value
