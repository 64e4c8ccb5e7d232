"""Paths into JSON answers, as the corpus writes them: `spec.containers[0].resources`,
`status.conditions[type=Complete].status`, `metadata.labels[batch.kubernetes.io/job-name]`
(a bracket holds an index, a `key=value` selector of a list, or a key that has dots)."""

from __future__ import annotations

import re
from typing import Any

_SEGMENT = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")
MISSING = object()


def segments(path: str) -> list[str | int | tuple[str, str]]:
    out: list[str | int | tuple[str, str]] = []
    for key, bracket in _SEGMENT.findall(path):
        if key:
            out.append(key)
        elif bracket.isdigit():
            out.append(int(bracket))
        elif "=" in bracket:
            field, _, value = bracket.partition("=")
            out.append((field, value))
        else:
            out.append(bracket)
    return out


def get(value: Any, path: str) -> Any:
    """The value at `path`, or MISSING."""
    for segment in segments(path):
        if isinstance(segment, int):
            if not isinstance(value, list) or segment >= len(value):
                return MISSING
            value = value[segment]
        elif isinstance(segment, tuple):
            if not isinstance(value, list):
                return MISSING
            field, wanted = segment
            value = next(
                (v for v in value if isinstance(v, dict) and str(v.get(field)) == wanted),
                MISSING,
            )
            if value is MISSING:
                return MISSING
        else:
            if not isinstance(value, dict) or segment not in value:
                return MISSING
            value = value[segment]
    return value


def drop(value: Any, path: str) -> None:
    """Remove what `path` names, where it exists."""
    parts = segments(path)
    parent = get(value, _join(parts[:-1])) if len(parts) > 1 else value
    last = parts[-1]
    if isinstance(last, str) and isinstance(parent, dict):
        parent.pop(last, None)
    elif isinstance(last, int) and isinstance(parent, list) and last < len(parent):
        parent.pop(last)
    elif isinstance(last, tuple) and isinstance(parent, list):
        field, wanted = last
        parent[:] = [v for v in parent if not (isinstance(v, dict) and str(v.get(field)) == wanted)]


def _join(parts: list[str | int | tuple[str, str]]) -> str:
    out = []
    for p in parts:
        if isinstance(p, int):
            out.append(f"[{p}]")
        elif isinstance(p, tuple):
            out.append(f"[{p[0]}={p[1]}]")
        else:
            out.append(f"[{p}]")
    return "".join(out)
