"""LimitRange validation as kube-apiserver's ``ValidateLimitRange`` (docs/design.md §8,
"LimitRange"): item types, resource names, and the order min <= defaultRequest <= default
<= max with a ratio of at least 1, checked after the items' defaults were filled in (the
LimitRanger's defaulting admission, ``admission/limitranges.py``), as the real server
validates the defaulted object.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kubefacts import quota as q
from kubefacts.objects import Obj

Cause = tuple[str, str]

_TYPES = ("Pod", "Container", "PersistentVolumeClaim")
_CONTAINER = frozenset({"cpu", "memory", "ephemeral-storage"})
_STANDARD = frozenset(
    {
        *_CONTAINER,
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_BOUNDS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")


def _qualified(name: str) -> bool:
    prefix, slash, rest = name.rpartition("/")
    if slash and not (prefix and len(prefix) <= 253 and _PREFIX.match(prefix)):
        return False
    return bool(rest) and len(rest) <= 63 and bool(_NAME.match(rest))


def _type_causes(kind: str, path: str) -> list[Cause]:
    if not _qualified(kind):
        return [(path, f'Invalid value: "{kind}": must be a qualified name')]
    if "/" not in kind and kind not in _TYPES:
        return [
            (path, f'Invalid value: "{kind}": must be a standard limit type or fully qualified')
        ]
    return []


def _name_causes(kind: str, name: str, path: str) -> list[Cause]:
    if not _qualified(name):
        return [(path, f'Invalid value: "{name}": must be a qualified name')]
    bare = "/" not in name
    hugepages = name.startswith(("hugepages-", "requests.hugepages-"))
    if bare and name not in _STANDARD and not hugepages:
        return [
            (path, f'Invalid value: "{name}": must be a standard resource type or fully qualified')
        ]
    if kind in ("Pod", "Container") and bare and name not in _CONTAINER and not hugepages:
        return [(path, f'Invalid value: "{name}": must be a standard resource for containers')]
    return []


def _amounts(item: Mapping[str, Any], key: str) -> dict[str, q.Amount]:
    out: dict[str, q.Amount] = {}
    for name, value in (item.get(key) or {}).items():
        try:
            out[str(name)] = q.amount(value)
        except ValueError:
            continue  # the decoder refused what does not parse
    return out


def _bound_causes(bounds: dict[str, dict[str, q.Amount]], name: str, path: str) -> list[Cause]:
    """One resource's bounds compared, in kube's order of checks."""
    got = {key: bounds[key][name] for key in _BOUNDS if name in bounds[key]}
    text = {key: q.format_amount(amount) for key, amount in got.items()}
    lo, hi, dflt, req = (
        got.get(k, (None, ""))[0] for k in ("min", "max", "default", "defaultRequest")
    )
    req_text = text.get("defaultRequest", "")
    causes: list[Cause] = []

    def add(field: str, shown: str, why: str) -> None:
        causes.append((f"{path}.{field}[{name}]", f'Invalid value: "{text[shown]}": {why}'))

    if lo is not None and hi is not None and lo > hi:
        add("min", "min", f"min value {text['min']} is greater than max value {text['max']}")
    if req is not None and lo is not None and lo > req:
        why = f"min value {text['min']} is greater than default request value {req_text}"
        add("defaultRequest", "defaultRequest", why)
    if req is not None and hi is not None and req > hi:
        why = f"default request value {req_text} is greater than max value {text['max']}"
        add("defaultRequest", "defaultRequest", why)
    if req is not None and dflt is not None and req > dflt:
        why = (
            f"default request value {text['defaultRequest']} is greater than default limit "
            f"value {text['default']}"
        )
        add("defaultRequest", "defaultRequest", why)
    if dflt is not None and lo is not None and lo > dflt:
        add(
            "default",
            "min",
            f"min value {text['min']} is greater than default value {text['default']}",
        )
    if dflt is not None and hi is not None and dflt > hi:
        add(
            "default",
            "max",
            f"default value {text['default']} is greater than max value {text['max']}",
        )
    causes += _ratio_causes(got, text, name, path)
    native = "/" not in name or "kubernetes.io/" in name
    overcommit = native and not name.startswith("hugepages-")
    if not overcommit and dflt is not None and req is not None and dflt != req:
        why = f"default value {text['default']} must equal to defaultRequest value {req_text}"
        add("defaultRequest", "defaultRequest", f"{why} in {name}")
    return causes


def _ratio_causes(
    got: dict[str, q.Amount], text: dict[str, str], name: str, path: str
) -> list[Cause]:
    if "maxLimitRequestRatio" not in got:
        return []
    ratio = got["maxLimitRequestRatio"][0]
    here = f"{path}.maxLimitRequestRatio[{name}]"
    shown = text["maxLimitRequestRatio"]
    causes: list[Cause] = []
    if ratio < 1:
        causes.append((here, f'Invalid value: "{shown}": ratio {shown} is less than 1'))
    if "min" in got and "max" in got and got["min"][0] > 0:
        limit: Fraction = got["max"][0] / got["min"][0]
        if ratio > limit:
            why = f"ratio {shown} is greater than max/min = {float(limit):f}"
            causes.append((here, f'Invalid value: "{shown}": {why}'))
    return causes


def limit_range_causes(obj: Obj) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, item in enumerate((obj.get("spec") or {}).get("limits") or []):
        path = f"spec.limits[{i}]"
        kind = str(item.get("type") or "")
        causes += _type_causes(kind, f"{path}.type")
        if kind in seen:
            causes.append((f"{path}.type", f'Duplicate value: "{kind}"'))
        seen.add(kind)
        keys = ["max", "min"]
        if kind == "Pod":
            for key in ("default", "defaultRequest"):
                if item.get(key):
                    why = "Forbidden: may not be specified when `type` is 'Pod'"
                    causes.append((f"{path}.{key}", why))
        else:
            keys += ["default", "defaultRequest"]
        if kind == "PersistentVolumeClaim" and not (
            "storage" in (item.get("min") or {}) or "storage" in (item.get("max") or {})
        ):
            why = (
                "Required value: either minimum or maximum storage value is required, but "
                "neither was provided"
            )
            causes.append((f"{path}.limits", why))
        keys.append("maxLimitRequestRatio")
        for key in keys:
            for name in sorted(item.get(key) or {}):
                causes += _name_causes(kind, str(name), f"{path}.{key}[{name}]")
        bounds = {key: _amounts(item, key) if key in keys else {} for key in _BOUNDS}
        for name in sorted({n for found in bounds.values() for n in found}):
            causes += _bound_causes(bounds, name, path)
    return causes
