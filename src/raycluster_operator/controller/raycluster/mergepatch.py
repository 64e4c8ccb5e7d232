"""The JSON merge patch (RFC 7386) that turns one status into another.

Status is written as a merge patch so that the operator never needs the object's
resourceVersion (no conflicts with the autoscaler's spec patches) and sends only what changed;
keys that disappeared are sent as null.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merge_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {key: None for key in current if key not in desired}
    for key, value in desired.items():
        old = current.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            sub = merge_patch(old, value)
            if sub:
                patch[key] = sub
        elif key not in current or old != value:
            patch[key] = value
    return patch
