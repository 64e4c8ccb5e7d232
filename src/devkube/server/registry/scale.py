"""The scale subresource (autoscaling/v1 Scale): over a CRD's declared replica paths, and over
the built-in workloads' ``spec.replicas``, ``status.replicas`` and ``spec.selector``.

``status.selector`` is a label selector *string*, as a HorizontalPodAutoscaler reads it to
find the pods: a CRD names the field that already holds one (``labelSelectorPath``); for a
Deployment, ReplicaSet or StatefulSet the API server formats the object's ``spec.selector``
the way apimachinery prints a selector (requirements sorted by key, ``k=v``,
``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``).
"""

from __future__ import annotations

import copy
from typing import Any

from devkube.server.errors import bad_request
from devkube.server.registry.resources import ResourceType


def _paths(rt: ResourceType) -> tuple[str, str, str | None]:
    decl = rt.scale or {}
    return (
        decl.get("specReplicasPath", ".spec.replicas"),
        decl.get("statusReplicasPath", ".status.replicas"),
        decl.get("labelSelectorPath"),
    )


def _get(obj: Any, path: str | None) -> Any:
    if not path:
        return None
    cur = obj
    for part in path.strip(".").split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def selector_string(selector: Any) -> str | None:
    """A metav1.LabelSelector as apimachinery prints it; None for none (or an unknown operator,
    which the real server would have refused to store)."""
    if not isinstance(selector, dict):
        return None
    terms: list[tuple[str, str]] = [
        (str(k), f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()
    ]
    for expr in selector.get("matchExpressions") or []:
        key, op = str(expr.get("key", "")), expr.get("operator")
        values = ",".join(sorted(str(v) for v in expr.get("values") or []))
        term = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(str(op))
        if term is None:
            return None
        terms.append((key, term))
    return ",".join(term for _, term in sorted(terms, key=lambda t: t[0])) or None


def view(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    spec_path, status_path, selector_path = _paths(rt)
    meta = obj["metadata"]
    status: dict[str, Any] = {"replicas": _get(obj, status_path) or 0}
    if rt.scale is None:  # built in: the server formats spec.selector
        selector = selector_string((obj.get("spec") or {}).get("selector"))
    else:
        selector = _get(obj, selector_path)
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": _get(obj, spec_path) or 0},
        "status": status,
    }


def apply(rt: ResourceType, obj: dict[str, Any], scale: Any) -> dict[str, Any]:
    """The object with spec replicas taken from a Scale (and its resourceVersion precondition)."""
    if not isinstance(scale, dict):
        raise bad_request("a Scale object is required")
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        raise bad_request("spec.replicas must be a non-negative integer")
    new = copy.deepcopy(obj)
    spec_path, _, _ = _paths(rt)
    parts = spec_path.strip(".").split(".")
    cur = new
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = replicas
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    new["metadata"]["resourceVersion"] = rv or obj["metadata"]["resourceVersion"]
    return new
