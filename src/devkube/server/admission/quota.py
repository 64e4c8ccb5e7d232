"""ResourceQuota admission, as kube-apiserver's ResourceQuota plugin (always the last
validating admission) does it on create:

- a quota takes part once the quota controller has written `status.hard` (until then it
  restricts nothing, as in kube); of the names it holds, those the new object is charged
  under are checked;
- a pod must state cpu/memory requests or limits a quota names (`failed quota: q: must
  specify limits.memory for: c`); a quota whose `status.used` lacks a checked name refuses
  (`status unknown for quota`);
- the new usage (`status.used` + the object's charge) must stay within `status.hard` for
  every quota, else 403 `exceeded quota: q, requested: ..., used: ..., limited: ...` naming
  only the exceeded names;
- once every quota admits, each is charged at once in `status.used` (so two creates cannot
  both take the last unit); the quota controller later recomputes the truth and frees what
  pods that ended or went no longer use.

Object counts: `count/<resource>[.<group>]` for every namespaced kind, and the legacy names
(`pods`, `services`, `configmaps`, `secrets`, ...). Pods are charged by `kubefacts.quota`.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from devkube.server.admission.access import Admission
from devkube.server.auth.rbac import forbidden_error
from devkube.server.registry import admitting
from devkube.server.registry.resources import ResourceType
from devkube.server.registry.store import Store
from kubefacts import quota as q
from kubefacts.objects import Obj

KEY = "resourcequotas"


def object_usage(rt: ResourceType, obj: Obj) -> q.Usage:
    """What creating `obj` charges: a pod its compute usage, anything else its count."""
    if rt.builtin and rt.group == "" and rt.plural == "pods":
        return q.pod_usage(obj)
    name = f"count/{rt.plural}" + (f".{rt.group}" if rt.group else "")
    out: q.Usage = {name: (Fraction(1), q.DECIMAL)}
    if rt.group == "" and rt.plural in q.LEGACY_COUNTS:
        out[q.LEGACY_COUNTS[rt.plural]] = (Fraction(1), q.DECIMAL)
    return out


def _amounts(section: Any) -> q.Usage:
    return {str(k): q.amount(v) for k, v in (section or {}).items()}


def _covers(quota: Obj, rt: ResourceType, obj: Obj) -> bool:
    if rt.builtin and rt.group == "" and rt.plural == "pods":
        return q.quota_covers_pod(quota, obj)
    return not q.quota_scopes(quota)  # scopes select pods only


def resource_quota(store: Store) -> Admission:
    def check(rt: ResourceType, old: Obj | None, new: Obj) -> None:
        if old is not None or not rt.namespaced:
            return
        meta = new.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        quotas = sorted(store.iter(KEY, ns), key=lambda s: str(s.obj["metadata"]["name"]))
        if not quotas:
            return
        usage = object_usage(rt, new)
        charges: list[tuple[Obj, q.Usage]] = []
        for stored in quotas:
            quota = stored.obj
            qname = str(quota["metadata"]["name"])
            status = quota.get("status") or {}
            hard, used = _amounts(status.get("hard")), _amounts(status.get("used"))
            if not _covers(quota, rt, new):
                continue
            pods = rt.group == "" and rt.plural == "pods"
            restricted = [k for k in hard if (q.pod_resource(k) if pods else k in usage)]
            if not restricted:
                continue
            if pods:
                missing = q.missing_required(new, restricted)
                if missing:
                    text = "; ".join(f"{r} for: {','.join(cs)}" for r, cs in missing.items())
                    raise forbidden_error(
                        rt.plural, rt.group, name, f"failed quota: {qname}: must specify {text}"
                    )
            unknown = sorted(k for k in restricted if k not in used)
            if unknown:
                raise forbidden_error(
                    rt.plural,
                    rt.group,
                    name,
                    f"status unknown for quota: {qname}, resources: {','.join(unknown)}",
                )
            charges.append((quota, _exceeded(rt, name, qname, usage, hard, used)))
        if admitting.dry_run():
            return
        for quota, requested in charges:
            if requested:
                _charge(store, quota, requested)

    return check


def _exceeded(
    rt: ResourceType, name: str, qname: str, usage: q.Usage, hard: q.Usage, used: q.Usage
) -> q.Usage:
    """The part of `usage` this quota charges; refuses when it would pass `hard`."""
    requested = {k: v for k, v in usage.items() if k in hard and v[0] != 0}
    new_used = q.add({k: used[k] for k in requested if k in used}, requested)
    exceeded = sorted(k for k in requested if new_used[k][0] > hard[k][0])
    if exceeded:
        raise forbidden_error(
            rt.plural,
            rt.group,
            name,
            f"exceeded quota: {qname}, requested: {q.pretty({k: requested[k] for k in exceeded})}"
            f", used: {q.pretty({k: used[k] for k in exceeded})}"
            f", limited: {q.pretty({k: hard[k] for k in exceeded})}",
        )
    return requested


def _charge(store: Store, quota: Mapping[str, Any], requested: q.Usage) -> None:
    """Add the admitted charge to `status.used`, a write of its own as kube's plugin makes."""
    status = dict(quota.get("status") or {})
    used = q.add(_amounts(status.get("used")), requested)
    status["used"] = {k: q.format_amount(v) for k, v in used.items()}
    obj = {**quota, "status": status, "metadata": dict(quota["metadata"])}
    obj["metadata"]["resourceVersion"] = str(store.next_rv())
    store.put(KEY, obj)
