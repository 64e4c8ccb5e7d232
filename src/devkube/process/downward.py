"""The downward API: pod fields and container resources as strings, as a kubelet renders them."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubefacts.quantities import parse_quantity

_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")


@dataclass(frozen=True)
class DownwardContext:
    """What the kubelet knows and the pod object may not carry yet."""

    pod_ip: str = ""
    host_ip: str = ""
    # Node allocatable (e.g. {"cpu": "8", "memory": "32Gi"}): a limit that is unset reads as this.
    allocatable: Mapping[str, str] = field(default_factory=dict)


def field_ref_value(pod: Mapping[str, Any], path: str, ctx: DownwardContext) -> str:
    """Render a `fieldRef.fieldPath`. Raises ValueError for a path Kubernetes does not allow."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    subscript = _SUBSCRIPT.match(path)
    if subscript:
        section, key = subscript.groups()
        return str((meta.get(section) or {}).get(key, ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = sorted((meta.get(path.split(".")[1]) or {}).items())
        return "\n".join(f'{k}="{v}"' for k, v in items)
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.podIP": ctx.pod_ip or status.get("podIP"),
        "status.podIPs": ctx.pod_ip or status.get("podIP"),
        "status.hostIP": ctx.host_ip or status.get("hostIP"),
        "status.hostIPs": ctx.host_ip or status.get("hostIP"),
    }
    if path not in simple:
        raise ValueError(f"unsupported fieldRef fieldPath {path!r}")
    return str(simple[path] or "")


def resource_field_value(
    container: Mapping[str, Any],
    resource: str,
    divisor: object,
    allocatable: Mapping[str, str],
) -> str:
    """Render a `resourceFieldRef`: the value divided by `divisor`, rounded up.

    An unset limit reads as the node's allocatable, an unset request as 0 — the kubelet's rules.
    """
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or not name:
        raise ValueError(f"unsupported resourceFieldRef resource {resource!r}")
    resources = container.get("resources") or {}
    raw = (resources.get(kind) or {}).get(name)
    if raw is None and kind == "requests":
        raw = (resources.get("limits") or {}).get(name)
    if raw is None:
        raw = allocatable.get(name, "0") if kind == "limits" else "0"
    amount = parse_quantity(raw)
    div = parse_quantity(divisor if divisor not in (None, "") else "1")
    if div <= 0:
        raise ValueError(f"divisor must be positive, got {divisor!r}")
    return str(math.ceil(amount / div))
