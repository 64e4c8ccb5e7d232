"""Server-side printing (meta.k8s.io Table), which `kubectl get` asks for first."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .resources import ResourceType


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def age(timestamp: str | None, now: datetime | None = None) -> str:
    if not timestamp:
        return "<unknown>"
    then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    if seconds < 120:
        return f"{max(seconds, 0)}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _json_path(obj: Any, path: str) -> Any:
    """The subset of JSONPath printer columns use: .a.b, .a[0].b, .a[*].b."""
    cur: list[Any] = [obj]
    for token in re.findall(r"[^.\[\]]+|\[\*\]|\[\d+\]", path.strip("{}").lstrip(".")):
        nxt: list[Any] = []
        for value in cur:
            if token == "[*]" and isinstance(value, list):
                nxt.extend(value)
            elif token.startswith("[") and isinstance(value, list):
                idx = int(token[1:-1])
                if idx < len(value):
                    nxt.append(value[idx])
            elif isinstance(value, Mapping) and token in value:
                nxt.append(value[token])
        cur = nxt
    if not cur:
        return None
    return cur[0] if len(cur) == 1 else ",".join(str(v) for v in cur)


def _pod_cells(pod: Mapping[str, Any]) -> list[Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    phase = status.get("reason") or status.get("phase") or "Unknown"
    for s in statuses:
        waiting = (s.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            phase = waiting["reason"]
    if pod["metadata"].get("deletionTimestamp"):
        phase = "Terminating"
    return [f"{ready}/{len(spec.get('containers') or [])}", phase, restarts]


def table(
    rt: ResourceType,
    objs: list[Mapping[str, Any]],
    rv: int,
    token: str | None,
    query: Mapping[str, str],
) -> dict[str, Any]:
    columns: list[dict[str, Any]] = [
        {"name": "Name", "type": "string", "format": "name", "priority": 0}
    ]
    extra: list[tuple[str, Any]] = []
    if rt.plural == "pods" and rt.builtin:
        for name, kind in (("Ready", "string"), ("Status", "string"), ("Restarts", "integer")):
            columns.append({"name": name, "type": kind, "format": "", "priority": 0})
    for col in rt.printer_columns:
        columns.append(
            {
                "name": col.get("name", ""),
                "type": col.get("type", "string"),
                "format": col.get("format", ""),
                "priority": int(col.get("priority", 0)),
                "description": col.get("description", ""),
            }
        )
        extra.append((col.get("type", "string"), col.get("jsonPath", "")))
    has_age = any(c.get("name") == "Age" for c in rt.printer_columns)
    if not has_age:
        columns.append({"name": "Age", "type": "string", "format": "", "priority": 0})
    include = query.get("includeObject", "Metadata")
    rows = []
    for obj in objs:
        cells: list[Any] = [obj["metadata"]["name"]]
        if rt.plural == "pods" and rt.builtin:
            cells.extend(_pod_cells(obj))
        for kind, path in extra:
            value = _json_path(obj, path)
            if kind == "date" and isinstance(value, str):
                value = age(value)
            cells.append(value)
        if not has_age:
            cells.append(age(obj["metadata"].get("creationTimestamp")))
        row: dict[str, Any] = {"cells": cells}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if token:
        meta["continue"] = token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": columns,
        "rows": rows,
    }
