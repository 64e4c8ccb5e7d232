"""What a pod costs against a ResourceQuota, read the way Kubernetes' quota evaluator reads it.

Both the dev cluster (its quota admission and controller) and the operator (which checks a
whole slice against the namespace's quotas before creating any of its pods) must charge a pod
the same amounts, so the rules live once, here:

- every pod counts `count/pods`; a pod that is not terminal also counts `pods` and its compute
  resources: `cpu`/`requests.cpu`, `limits.cpu`, `memory`/`requests.memory`, `limits.memory`,
  `ephemeral-storage`/`requests.ephemeral-storage`, `limits.ephemeral-storage`, and
  `requests.<name>` for an extended resource (`google.com/tpu`, `nvidia.com/gpu`);
- a pod's requests are the sum of its containers' and its sidecars' (init containers with
  `restartPolicy: Always`), or the largest plain init container's if larger, plus overhead;
- a pod stuck terminating past its grace (deletionTimestamp + deletionGracePeriodSeconds, as
  the pod evaluator's QuotaV1Pod reads them) is no longer charged for compute: a lost node
  must not hold a team's quota;
- `as_admitted` is the pod admission charges, not the manifest a client sends: requests
  defaulted from limits, then the namespace's LimitRange defaults (`kubefacts.limitrange`),
  so a TPU set only in `limits` is charged (docs/design.md §4 rule 13c);
- quantities keep Kubernetes' formats (`1Gi` stays binary, `1000` prints `1k`) so a message
  reads as kube-apiserver's would.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from .limitrange import apply_defaults, requests_from_limits
from .qos import BEST_EFFORT, pod_qos
from .quantities import parse_quantity
from .timestamps import parse_time

View = Mapping[str, Any]  # read only: what the checks read of an object
#: An exact amount and the format it prints in (DecimalSI or BinarySI), as a Quantity keeps.
Amount = tuple[Fraction, str]
Usage = dict[str, Amount]

DECIMAL, BINARY = "DecimalSI", "BinarySI"
_DECIMAL_SCALES = [
    ("E", 18),
    ("P", 15),
    ("T", 12),
    ("G", 9),
    ("M", 6),
    ("k", 3),
    ("", 0),
    ("m", -3),
    ("u", -6),
    ("n", -9),
]
_BINARY_SCALES = [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)]
#: The resources the pod evaluator requires every container to state when a quota names them
#: (kube's backward-compatibility rule for cpu and memory; no other resource is required).
MUST_SPECIFY = frozenset(
    {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
)
_STANDARD = ("cpu", "memory", "ephemeral-storage")
#: Legacy object-count names and the resource they count.
LEGACY_COUNTS = {
    "pods": "pods",
    "services": "services",
    "configmaps": "configmaps",
    "secrets": "secrets",
    "resourcequotas": "resourcequotas",
    "replicationcontrollers": "replicationcontrollers",
    "persistentvolumeclaims": "persistentvolumeclaims",
}


def amount(value: object) -> Amount:
    """A quantity and its format: binary suffixes (Ki, Mi, ...) print binary, all else decimal."""
    text = str(value).strip()
    fmt = BINARY if text.endswith("i") else DECIMAL
    return parse_quantity(value), fmt


def format_amount(value: Amount) -> str:
    """The canonical string Kubernetes prints for a quantity (Quantity.String)."""
    number, fmt = value
    if number == 0:
        return "0"
    if fmt == BINARY and number.denominator == 1 and abs(number) >= 1024:
        for suffix, power in _BINARY_SCALES:
            scaled = number / (2**power)
            if scaled.denominator == 1:
                return f"{scaled.numerator}{suffix}"
        return str(number.numerator)
    for suffix, exponent in _DECIMAL_SCALES:
        scaled = number / Fraction(10) ** exponent
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    nanos = -(-number * 10**9 // 1)  # kube rounds up below a nano
    return f"{nanos}n"


def add(a: Usage, b: Mapping[str, Amount]) -> Usage:
    """Sum by name; a zero takes the other's format, as Quantity.Add does."""
    out = dict(a)
    for name, (value, fmt) in b.items():
        if name in out:
            mine, my_fmt = out[name]
            out[name] = (mine + value, fmt if mine == 0 else my_fmt)
        else:
            out[name] = (value, fmt)
    return out


def is_extended(name: str) -> bool:
    """An extended resource: a domain-qualified name outside kubernetes.io, not a request."""
    if "/" not in name or name.startswith("requests.") or name.startswith("limits."):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def _resources(container: View) -> tuple[Usage, Usage]:
    res = container.get("resources") or {}
    requests = {k: amount(v) for k, v in (res.get("requests") or {}).items()}
    limits = {k: amount(v) for k, v in (res.get("limits") or {}).items()}
    return requests, limits


def _max(a: Usage, b: Usage) -> Usage:
    out = dict(a)
    for name, value in b.items():
        if name not in out or value[0] > out[name][0]:
            out[name] = value
    return out


def pod_totals(spec: View, which: int, *, overhead: bool = True) -> Usage:
    """The pod's requests (which=0) or limits (which=1) as the resource helper sums them:
    init containers run one at a time, so the largest counts, not their sum (a LimitRange's
    Pod item reads the same sums without overhead)."""
    total: Usage = {}
    for c in spec.get("containers") or []:
        total = add(total, _resources(c)[which])
    largest_init: Usage = {}
    sidecars: Usage = {}
    for c in spec.get("initContainers") or []:
        own = _resources(c)[which]
        if c.get("restartPolicy") == "Always":
            sidecars = add(sidecars, own)
            total = add(total, own)
        else:
            largest_init = _max(largest_init, add(sidecars, own))
    total = _max(total, largest_init)
    if not overhead:
        return total
    return add(total, {k: amount(v) for k, v in (spec.get("overhead") or {}).items()})


def compute_usage(requests: Usage, limits: Usage) -> Usage:
    """The quota names a set of requests and limits is charged under (podComputeUsageHelper)."""
    out: Usage = {"pods": (Fraction(1), DECIMAL)}
    for name in _STANDARD:
        if name in requests:
            out[name] = requests[name]
            out[f"requests.{name}"] = requests[name]
        if name in limits:
            out[f"limits.{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            out[name] = value
            out[f"requests.{name}"] = value
        if is_extended(name):
            out[f"requests.{name}"] = value
    return out


def terminal(pod: View, now: datetime | None = None) -> bool:
    """Failed, Succeeded, or (given `now`) past its deletion grace: no longer charged for
    compute."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Failed", "Succeeded"):
        return True
    meta = pod.get("metadata") or {}
    stamp, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if now is None or not stamp or grace is None:
        return False
    return now > parse_time(str(stamp)) + timedelta(seconds=int(grace))


def pod_usage(pod: View, now: datetime | None = None) -> Usage:
    """Everything a pod is charged (PodUsageFunc); `now` judges a terminating pod's grace."""
    out: Usage = {"count/pods": (Fraction(1), DECIMAL)}
    if terminal(pod, now):
        return out
    spec = pod.get("spec") or {}
    return add(out, compute_usage(pod_totals(spec, 0), pod_totals(spec, 1)))


def as_admitted(pod: View, limit_ranges: Iterable[View] = ()) -> dict[str, Any]:
    """The pod as quota admission sees it: defaulted requests, then LimitRange defaults."""
    out: dict[str, Any] = copy.deepcopy(dict(pod))
    requests_from_limits(out.get("spec") or {})
    apply_defaults(out, limit_ranges)
    return out


def best_effort(pod: View) -> bool:
    """QoS BestEffort (the BestEffort quota scope reads the pod's QoS class)."""
    qos = (pod.get("status") or {}).get("qosClass")
    return (qos or pod_qos(pod.get("spec") or {})) == BEST_EFFORT


def pod_matches_scope(pod: View, scope: str) -> bool:
    spec = pod.get("spec") or {}
    if scope == "Terminating":
        return spec.get("activeDeadlineSeconds") is not None
    if scope == "NotTerminating":
        return spec.get("activeDeadlineSeconds") is None
    if scope == "BestEffort":
        return best_effort(pod)
    if scope == "NotBestEffort":
        return not best_effort(pod)
    return False  # PriorityClass, CrossNamespacePodAffinity, ...: not evaluated here


def quota_scopes(quota: View) -> list[tuple[str, str, list[str]]]:
    """(scope, operator, values) from `spec.scopes` and `spec.scopeSelector`."""
    spec = quota.get("spec") or {}
    out: list[tuple[str, str, list[str]]] = [
        (str(s), "Exists", []) for s in spec.get("scopes") or []
    ]
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        out.append(
            (
                str(expr.get("scopeName")),
                str(expr.get("operator") or "Exists"),
                [str(v) for v in expr.get("values") or []],
            )
        )
    return out


def quota_covers_pod(quota: View, pod: View) -> bool:
    """A pod is charged to a quota when it matches every scope of it."""
    for scope, op, values in quota_scopes(quota):
        if scope == "PriorityClass":
            pc = str((pod.get("spec") or {}).get("priorityClassName") or "")
            ok = {
                "In": pc in values,
                "NotIn": pc not in values,
                "Exists": bool(pc),
                "DoesNotExist": not pc,
            }.get(op, False)
            if not ok:
                return False
        elif not pod_matches_scope(pod, scope):
            return False
    return True


def pod_resource(name: str) -> bool:
    """Quota names the pod evaluator charges (MatchingResources)."""
    return (
        name in ("pods", "count/pods")
        or name in _STANDARD
        or name.startswith("requests.")
        or name.startswith("limits.")
        or name.startswith("hugepages-")
    )


def missing_required(pod: View, hard: Iterable[str]) -> dict[str, list[str]]:
    """Resource -> containers that do not state it, for the cpu/memory names a quota holds."""
    required = MUST_SPECIFY.intersection(hard)
    missing: dict[str, set[str]] = {}
    spec = pod.get("spec") or {}
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        have = compute_usage(*_resources(c))
        for name in required - set(have):
            missing.setdefault(name, set()).add(str(c.get("name") or ""))
    return {name: sorted(names) for name, names in sorted(missing.items())}


def pretty(usage: Mapping[str, Amount]) -> str:
    """`name=quantity,...` sorted by name, as kube's quota messages print a resource list."""
    return ",".join(f"{k}={format_amount(usage[k])}" for k in sorted(usage))
