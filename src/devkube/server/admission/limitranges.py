"""LimitRange, as kube-apiserver's LimitRanger admission plugin applies it to new pods:

- a LimitRange is defaulted when written, as the API server's defaulting does: a Container
  item's `default` falls back to `max`, its `defaultRequest` to `default`, then to `min`;
- mutating, at pod create: every container (init containers too) without a request or limit
  for a resource the namespace's Container items default gets it, and the pod is annotated
  `kubernetes.io/limit-ranger: LimitRanger plugin set: cpu, memory request for container c;
  cpu limit for container c` (the rules live in `kubefacts.limitrange`, which the operator's
  quota pre-check shares);
- validating: each Container item's `min`, `max` and `maxLimitRequestRatio` must hold for
  every container (a Pod item's for the pod's totals, init containers counted as their
  largest, not summed, as kube's podRequests/podLimits read them), else 403 with kube's
  sentences (`maximum cpu usage per Container is 2, but limit is 4`), all failures in one message
  (`[a, b]` when more than one), items and resources in name order.

PersistentVolumeClaim items are stored and not enforced.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

from devkube.server.admission.access import Admission
from devkube.server.auth.rbac import forbidden_error
from devkube.server.registry.resources import ResourceType
from devkube.server.registry.store import Store
from kubefacts import limitrange as lr
from kubefacts import quota as q
from kubefacts.objects import Obj

KEY = "limitranges"


def _is_pods(rt: ResourceType) -> bool:
    return rt.builtin and rt.group == "" and rt.plural == "pods"


def _ranges(store: Store, ns: str) -> Iterator[Mapping[str, Any]]:
    for stored in sorted(store.iter(KEY, ns), key=lambda s: str(s.obj["metadata"]["name"])):
        yield from (stored.obj.get("spec") or {}).get("limits") or []


def default_limit_range(rt: ResourceType, old: Obj | None, new: Obj) -> None:
    """SetDefaults_LimitRangeItem for Container items."""
    if not (rt.builtin and rt.group == "" and rt.plural == KEY):
        return
    for item in (new.get("spec") or {}).get("limits") or []:
        if item.get("type") != "Container":
            continue
        default = item.setdefault("default", {})
        for name, value in (item.get("max") or {}).items():
            default.setdefault(name, value)
        request = item.setdefault("defaultRequest", {})
        for name, value in default.items():
            request.setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            request.setdefault(name, value)
        if not default:
            item.pop("default")
        if not request:
            item.pop("defaultRequest")


def limit_ranger_defaults(store: Store) -> Admission:
    def mutate(rt: ResourceType, old: Obj | None, new: Obj) -> None:
        if old is not None or not _is_pods(rt):
            return
        ns = str((new.get("metadata") or {}).get("namespace") or "")
        lr.apply_defaults(new, [stored.obj for stored in store.iter(KEY, ns)])

    return mutate


def _text(value: object) -> str:
    return q.format_amount(q.amount(value))


def _min(kind: str, name: str, bound: object, req: Any, lim: Any) -> str | None:
    b = q.amount(bound)[0]
    if req is None:
        return f"minimum {name} usage per {kind} is {_text(bound)}.  No request is specified"
    if q.amount(req)[0] < b:
        return f"minimum {name} usage per {kind} is {_text(bound)}, but request is {_text(req)}"
    if lim is not None and q.amount(lim)[0] < b:
        return f"minimum {name} usage per {kind} is {_text(bound)}, but limit is {_text(lim)}"
    return None


def _max(kind: str, name: str, bound: object, req: Any, lim: Any) -> str | None:
    b = q.amount(bound)[0]
    if lim is None:
        return f"maximum {name} usage per {kind} is {_text(bound)}.  No limit is specified"
    if q.amount(lim)[0] > b:
        return f"maximum {name} usage per {kind} is {_text(bound)}, but limit is {_text(lim)}"
    if req is not None and q.amount(req)[0] > b:
        return f"maximum {name} usage per {kind} is {_text(bound)}, but request is {_text(req)}"
    return None


def _ratio(kind: str, name: str, bound: object, req: Any, lim: Any) -> str | None:
    head = f"{name} max limit to request ratio per {kind} is {_text(bound)}"
    if req is None or q.amount(req)[0] == 0:
        return f"{head}, but no request is specified or request is 0"
    if lim is None or q.amount(lim)[0] == 0:
        return f"{head}, but no limit is specified or limit is 0"
    ratio: Fraction = q.amount(lim)[0] / q.amount(req)[0]
    if ratio > q.amount(bound)[0]:
        return f"{head}, but provided ratio is {float(ratio):f}"
    return None


def _check_item(
    item: Mapping[str, Any], kind: str, requests: Mapping[str, Any], limits: Mapping[str, Any]
) -> list[str]:
    errors = []
    for field, test in (("min", _min), ("max", _max), ("maxLimitRequestRatio", _ratio)):
        for name, bound in sorted((item.get(field) or {}).items()):
            found = test(kind, name, bound, requests.get(name), limits.get(name))
            if found:
                errors.append(found)
    return errors


def limit_ranger_validate(store: Store) -> Admission:
    def check(rt: ResourceType, old: Obj | None, new: Obj) -> None:
        if old is not None or not _is_pods(rt):
            return
        meta = new.get("metadata") or {}
        spec = new.get("spec") or {}
        errors: list[str] = []
        containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
        for item in _ranges(store, str(meta.get("namespace") or "")):
            if item.get("type") == "Container":
                for c in containers:
                    res = c.get("resources") or {}
                    errors += _check_item(
                        item, "Container", res.get("requests") or {}, res.get("limits") or {}
                    )
            elif item.get("type") == "Pod":
                errors += _check_item(item, "Pod", *_pod_sums(spec))
        if errors:
            text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
            raise forbidden_error(rt.plural, rt.group, str(meta.get("name") or ""), text)

    return check


def _pod_sums(spec: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The pod's requests and limits as LimitRanger's Pod item reads them: containers and
    sidecars summed, the largest init container if larger, no overhead."""
    requests, limits = (q.pod_totals(spec, which, overhead=False) for which in (0, 1))
    return (
        {k: q.format_amount(v) for k, v in requests.items()},
        {k: q.format_amount(v) for k, v in limits.items()},
    )
