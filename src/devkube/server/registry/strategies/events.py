"""Core v1 Events and events.k8s.io/v1 Events are one resource in two shapes.

The real server stores both in one place, so an Event written through events.k8s.io (as
controllers do) shows in `kubectl get events` and `kubectl describe`. We store the core shape
and convert the events.k8s.io view on the way in and out.
"""

from __future__ import annotations

from typing import Any

GROUP = "events.k8s.io"

# events.k8s.io/v1 field -> core/v1 field, for fields that only changed name.
_RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "reportingController": "reportingComponent",
}
_SAME = (
    "metadata",
    "eventTime",
    "series",
    "action",
    "reason",
    "related",
    "reportingInstance",
    "type",
)

# Field selector paths of the events.k8s.io view, in terms of the stored core shape.
FIELD_ALIASES = {"note": "message", "reportingController": "reportingComponent"}


def field_alias(path: str) -> str:
    if path.startswith("regarding."):
        return "involvedObject." + path[len("regarding.") :]
    return FIELD_ALIASES.get(path, path)


def to_core(obj: dict[str, Any]) -> dict[str, Any]:
    core: dict[str, Any] = {"apiVersion": "v1", "kind": "Event"}
    for key in _SAME:
        if key in obj:
            core[key] = obj[key]
    for new, old in _RENAMED.items():
        if new in obj:
            core[old] = obj[new]
    if "series" in obj and isinstance(obj["series"], dict):
        core["series"] = {
            "count": obj["series"].get("count"),
            "lastObservedTime": obj["series"].get("lastObservedTime"),
        }
    core.setdefault("involvedObject", {})
    return core


def to_events_v1(core: dict[str, Any], api_version: str) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": "Event"}
    for key in _SAME:
        if key in core:
            obj[key] = core[key]
    for new, old in _RENAMED.items():
        if old in core:
            obj[new] = core[old]
    return obj
