"""PodDisruptionBudget validation as kube-apiserver's ``ValidatePodDisruptionBudgetSpec``
(docs/design.md §8, "Disruption budgets"): one bound at most, each a non-negative count or a
percentage no greater than 100%, and a known ``unhealthyPodEvictionPolicy``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kubefacts.objects import Obj

Cause = tuple[str, str]

POLICIES = ("AlwaysAllow", "IfHealthyBudget")
_PERCENT = re.compile(r"^[0-9]+%$")
_PERCENT_MESSAGE = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  "
    "or '93%', regex used for validation is '[0-9]+%')"
)


def _go_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _bound_causes(value: Any, path: str) -> list[Cause]:
    shown = _go_json(value)
    if isinstance(value, str):
        if not _PERCENT.match(value):
            return [(path, f"Invalid value: {shown}: {_PERCENT_MESSAGE}")]
        if int(value[:-1]) > 100:
            return [(path, f"Invalid value: {shown}: must not be greater than 100%")]
        return []
    if isinstance(value, int) and value < 0:
        return [(path, f"Invalid value: {value}: must be greater than or equal to 0")]
    return []


def budget_causes(obj: Obj) -> list[Cause]:
    spec = obj.get("spec") or {}
    low, high = spec.get("minAvailable"), spec.get("maxUnavailable")
    policy = spec.get("unhealthyPodEvictionPolicy")
    causes: list[Cause] = []
    if low is not None and high is not None:
        internal = {  # the internal Go struct, whose fields have no json tags
            "MinAvailable": low,
            "Selector": spec.get("selector"),
            "MaxUnavailable": high,
            "UnhealthyPodEvictionPolicy": policy,
        }
        causes.append(
            (
                "spec",
                f"Invalid value: {_go_json(internal)}: minAvailable and maxUnavailable cannot "
                "be both set",
            )
        )
    if low is not None:
        causes += _bound_causes(low, "spec.minAvailable")
    if high is not None:
        causes += _bound_causes(high, "spec.maxUnavailable")
    if policy is not None and policy not in POLICIES:
        supported = ", ".join(f'"{p}"' for p in POLICIES)
        causes.append(
            (
                "spec.unhealthyPodEvictionPolicy",
                f"Unsupported value: {_go_json(policy)}: supported values: {supported}",
            )
        )
    return causes
