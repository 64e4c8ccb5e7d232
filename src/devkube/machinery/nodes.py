"""Facts of the Node API that the kubelet, the scheduler and the controllers all read the same
way: the Ready condition, node leases, taints and tolerations (docs/design.md §8)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devkube.machinery.client import resource_path

LEASE_NAMESPACE = "kube-node-lease"
LEASE_API = "coordination.k8s.io/v1"


def lease_path(node: str | None = None) -> str:
    return resource_path(LEASE_API, "leases", LEASE_NAMESPACE, node)


def ready_condition_of(node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            found: Mapping[str, Any] = condition
            return found
    return None


def toleration_matches(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """As kube's Toleration.ToleratesTaint: an empty effect or key matches any, operator
    Exists ignores the value, Equal (the default) compares it."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return str(toleration.get("value") or "") == str(taint.get("value") or "")
