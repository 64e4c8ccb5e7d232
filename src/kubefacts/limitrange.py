"""What kube-apiserver's LimitRanger admission adds to a new pod, and the defaulting that
runs before it, so the dev cluster admits pods and the operator predicts their quota charge
(docs/design.md §4 rule 13c) from one set of rules:

- `requests_from_limits` is the API's own defaulting of a pod (SetDefaults_Pod, run when the
  request is decoded, before any admission): a container (init containers too) that limits
  a resource and does not request it requests the limit, extended resources included;
- `apply_defaults` is LimitRanger's mutation: for each LimitRange of the namespace in turn
  (by name), its Container items' `default` and `defaultRequest` fill what a container does
  not state yet (a later item of one LimitRange overrides an earlier one, an earlier
  LimitRange wins over a later one), and the pod is annotated `kubernetes.io/limit-ranger:
  LimitRanger plugin set: cpu, memory request for container c; cpu limit for container c`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ANNOTATION = "kubernetes.io/limit-ranger"
_GROUPS = (("containers", "container"), ("initContainers", "init container"))


def requests_from_limits(spec: Mapping[str, Any]) -> None:
    """Copy each container's limits into its requests where it requests nothing (in place)."""
    for key, _ in _GROUPS:
        for container in spec.get(key) or []:
            res = container.get("resources") or {}
            limits = res.get("limits") or {}
            if not limits:
                continue
            requests = res.setdefault("requests", {})
            for name, value in limits.items():
                requests.setdefault(name, value)
            container["resources"] = res


def container_defaults(limit_range: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The requests and limits one LimitRange's Container items default."""
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if item.get("type") == "Container":
            requests.update(item.get("defaultRequest") or {})
            limits.update(item.get("default") or {})
    return requests, limits


def apply_defaults(pod: dict[str, Any], limit_ranges: Iterable[Mapping[str, Any]]) -> None:
    """LimitRanger's mutation of a new pod (in place), the LimitRanges in name order."""
    spec = pod.get("spec") or {}
    ordered = sorted(limit_ranges, key=lambda r: str((r.get("metadata") or {}).get("name")))
    for limit_range in ordered:
        requests, limits = container_defaults(limit_range)
        if not requests and not limits:
            continue
        notes: list[str] = []
        for key, label in _GROUPS:
            for container in spec.get(key) or []:
                notes += _fill(container, label, requests, limits)
        if notes:
            pod.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION] = (
                "LimitRanger plugin set: " + "; ".join(notes)
            )


def _fill(
    container: dict[str, Any], label: str, requests: Mapping[str, Any], limits: Mapping[str, Any]
) -> list[str]:
    res = container.setdefault("resources", {})
    have_l, have_r = res.setdefault("limits", {}), res.setdefault("requests", {})
    set_l = sorted(k for k in limits if k not in have_l)
    set_r = sorted(k for k in requests if k not in have_r)
    for k in set_l:
        have_l[k] = limits[k]
    for k in set_r:
        have_r[k] = requests[k]
    notes = []
    if set_r:
        notes.append(f"{', '.join(set_r)} request for {label} {container.get('name')}")
    if set_l:
        notes.append(f"{', '.join(set_l)} limit for {label} {container.get('name')}")
    if not have_l:
        res.pop("limits")
    if not have_r:
        res.pop("requests")
    return notes
