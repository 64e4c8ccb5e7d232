"""ResourceQuota validation as kube-apiserver's (``ValidateResourceQuota`` and its update):
`spec.hard` names and values, `scopes` and `scopeSelector` (docs/design.md §8, "ResourceQuota").

A quantity that does not parse never gets here (the decoder refuses it, ``schema.builtin``);
what is left is the value's sign, whole numbers for object counts and extended resources,
which names a quota may hold, and which scopes fit which names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubefacts import quota as q
from kubefacts.objects import Obj

Cause = tuple[str, str]

_STANDARD = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "persistentvolumeclaims",
        "configmaps",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_INTEGER = frozenset(
    {
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_POD_COMPUTE = frozenset(
    {"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"}
)
_PVC = frozenset({"persistentvolumeclaims", "requests.storage"})
_POD_SCOPES = ("Terminating", "NotTerminating", "NotBestEffort", "PriorityClass")
_SCOPES = frozenset(
    {*_POD_SCOPES, "BestEffort", "VolumeAttributesClass", "CrossNamespacePodAffinity"}
)
_EXISTS_ONLY = ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating")
_CONFLICTS = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_EXISTS_MESSAGE = (
    "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, "
    "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
    "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"
)


def _standard(name: str) -> bool:
    return name in _STANDARD or name.startswith(("hugepages-", "requests.hugepages-"))


def _integer(name: str) -> bool:
    """An object count, or an extended resource (``helper.IsIntegerResourceName``)."""
    if name in _INTEGER:
        return True
    native = "/" not in name or "kubernetes.io/" in name
    if native or name.startswith("requests."):
        return False
    prefix, _, rest = f"requests.{name}".rpartition("/")
    return bool(_QUALIFIED.match(rest)) and len(rest) <= 63 and bool(prefix)


def _scope_fits(scope: str, name: str) -> bool:
    if scope in (*_POD_SCOPES, "CrossNamespacePodAffinity"):
        return name == "pods" or name in _POD_COMPUTE
    if scope == "BestEffort":
        return name == "pods"
    if scope == "VolumeAttributesClass":
        return name in _PVC
    return True


def _go_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def hard_causes(hard: Mapping[str, Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    for name, value in hard.items():
        here = f"{path}[{name}]"
        if "/" not in name and not _standard(name):
            causes.append((here, f'Invalid value: "{name}": must be a standard resource for quota'))
        try:
            amount = q.amount(value)
        except ValueError:
            continue  # a form the decoder accepts and kubefacts does not: left to the decoder
        shown = q.format_amount(amount)
        if amount[0] < 0:
            causes.append((here, f'Invalid value: "{shown}": must be greater than or equal to 0'))
        if _integer(name) and (amount[0] * 1000) % 1000 != 0:
            causes.append((here, f'Invalid value: "{shown}": must be an integer'))
    return causes


def _scope_causes(scopes: list[Any], hard: Iterable[str]) -> list[Cause]:
    causes: list[Cause] = []
    shown = f"Invalid value: {_go_json(scopes)}"
    for scope in scopes:
        if scope not in _SCOPES:
            causes.append(("spec.scopes", f"{shown}: unsupported scope"))
        for name in sorted(hard):
            if _standard(name) and not _scope_fits(str(scope), name):
                causes.append(("spec.scopes", f"{shown}: unsupported scope applied to resource"))
    for pair in _CONFLICTS:
        if all(scope in scopes for scope in pair):
            causes.append(("spec.scopes", f"{shown}: conflicting scopes"))
    return causes


def _selector_causes(spec: Mapping[str, Any], hard: Iterable[str]) -> list[Cause]:
    selector = spec.get("scopeSelector")
    if not isinstance(selector, Mapping):
        return []
    path = "spec.scopeSelector.matchExpressions"
    causes: list[Cause] = []
    seen: set[str] = set()
    for req in selector.get("matchExpressions") or []:
        scope, op = str(req.get("scopeName") or ""), str(req.get("operator") or "")
        values = req.get("values") or []
        if scope not in _SCOPES:
            causes.append((f"{path}.scopeName", f'Invalid value: "{scope}": unsupported scope'))
        for name in sorted(hard):
            if _standard(name) and not _scope_fits(scope, name):
                shown = _go_json(_go_selector(selector))
                causes.append(
                    (path, f"Invalid value: {shown}: unsupported scope applied to resource")
                )
        if scope in (*_EXISTS_ONLY, "CrossNamespacePodAffinity") and op != "Exists":
            causes.append((f"{path}.operator", f'Invalid value: "{op}": {_EXISTS_MESSAGE}'))
        causes += _operator_causes(op, values, path)
        seen.add(scope)
    for pair in _CONFLICTS:
        if all(scope in seen for scope in pair):
            shown = _go_json(spec.get("scopes") or None)
            causes.append((path, f"Invalid value: {shown}: conflicting scopes"))
    return causes


def _operator_causes(op: str, values: list[Any], path: str) -> list[Cause]:
    if op in ("In", "NotIn"):
        if not values:
            return [
                (
                    f"{path}.values",
                    "Required value: must be at least one value when `operator` is 'In' or "
                    "'NotIn' for scope selector",
                )
            ]
    elif op in ("Exists", "DoesNotExist"):
        if values:
            return [
                (
                    f"{path}.values",
                    f"Invalid value: {_go_json(values)}: must be no value when `operator` is "
                    "'Exist' or 'DoesNotExist' for scope selector",
                )
            ]
    else:
        return [(f"{path}.operator", f'Invalid value: "{op}": not a valid selector operator')]
    return []


def _go_selector(selector: Mapping[str, Any]) -> dict[str, Any]:
    """The internal ScopeSelector as Go's JSON shows it (its fields have no json tags)."""
    return {
        "MatchExpressions": [
            {
                "ScopeName": req.get("scopeName", ""),
                "Operator": req.get("operator", ""),
                "Values": req.get("values") or None,
            }
            for req in selector.get("matchExpressions") or []
        ]
    }


def quota_causes(obj: Obj) -> list[Cause]:
    spec = obj.get("spec") or {}
    hard = spec.get("hard") or {}
    causes = hard_causes(hard, "spec.hard")
    causes += _scope_causes(list(spec.get("scopes") or []), hard)
    causes += _selector_causes(spec, hard)
    status = obj.get("status") or {}
    for part in ("hard", "used"):
        causes += hard_causes(status.get(part) or {}, f"status.{part}")
    return causes


def quota_update_causes(old: Obj, new: Obj) -> list[Cause]:
    """Scopes are fixed once created."""
    before = set((old.get("spec") or {}).get("scopes") or [])
    after = list((new.get("spec") or {}).get("scopes") or [])
    if before != set(after):
        return [("spec.scopes", f"Invalid value: {_go_json(after or None)}: field is immutable")]
    return []
