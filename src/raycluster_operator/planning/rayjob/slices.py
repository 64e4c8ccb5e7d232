"""A worker slice that broke while the Ray job ran (docs/design.md §11, slice failure policy).

Read from the RayCluster's worker pods alone, as JobSet reads a child Job's pods: a slice
broke when one of its pods failed or is being deleted, or when all of its pods were created
after the Ray job started (it was replaced; the pod that broke is gone). A break already
recorded in ``status.sliceFailures`` (same slice and pod) is not reported again, so each
break acts once; a resubmitted job starts later than every pod of the healed cluster, so the
slices it runs on are not breaks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubefacts.timestamps import parse_time
from raycluster_operator.api import labels


@dataclass(frozen=True)
class SliceBreak:
    group: str
    slice: str
    host: str
    pod: str
    node: str
    #: Failed, Deleted (terminating) or Replaced.
    reason: str

    def record(self) -> dict[str, str]:
        return {
            "group": self.group,
            "slice": self.slice,
            "host": self.host,
            "pod": self.pod,
            "node": self.node,
            "reason": self.reason,
        }

    def describe(self) -> str:
        where = f"host {self.host} (pod {self.pod or '?'} on node {self.node or '?'})"
        return f"slice {self.slice} of group {self.group} broke: {where} {self.reason.lower()}"


def _labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    value: Mapping[str, str] = (pod.get("metadata") or {}).get("labels") or {}
    return value


def slice_of(pod: Mapping[str, Any]) -> str:
    """The slice's name as TPU_NAME spells it (``replicaIndex``), else group-index."""
    found = _labels(pod)
    if found.get(labels.V1_REPLICA_INDEX):
        return found[labels.V1_REPLICA_INDEX]
    return f"{found.get(labels.GROUP, '')}-{found.get(labels.REPLICA_INDEX, '?')}"


def _created(pod: Mapping[str, Any]) -> datetime | None:
    stamp = (pod.get("metadata") or {}).get("creationTimestamp")
    try:
        return parse_time(str(stamp)) if stamp else None
    except ValueError:
        return None


def _broken_pod(pod: Mapping[str, Any]) -> str:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Deleted"
    if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
        return "Failed"
    return ""


def find_breaks(
    pods: Sequence[Mapping[str, Any]],
    started: str | None,
    recorded: Sequence[Mapping[str, Any]],
) -> list[SliceBreak]:
    """New breaks among the worker pods, once the Ray job has a start time."""
    if not started:
        return []
    start = parse_time(started)
    seen = {(r.get("slice"), r.get("pod")) for r in recorded}
    seen_slices = {r.get("slice") for r in recorded}
    by_slice: dict[str, list[Mapping[str, Any]]] = {}
    out: list[SliceBreak] = []
    for pod in pods:
        if _labels(pod).get(labels.NODE_TYPE) != labels.NODE_TYPE_WORKER:
            continue
        name = slice_of(pod)
        by_slice.setdefault(name, []).append(pod)
        reason = _broken_pod(pod)
        pod_name = str((pod.get("metadata") or {}).get("name"))
        if reason and (name, pod_name) not in seen:
            seen.add((name, pod_name))
            out.append(_break(pod, name, reason))
    for name, members in sorted(by_slice.items()):
        created = [_created(p) for p in members]
        replaced = all(c is not None and c > start for c in created)
        if replaced and name not in seen_slices and not any(b.slice == name for b in out):
            out.append(_break(members[0], name, "Replaced", keep_pod=False))
    return out


def _break(
    member: Mapping[str, Any], name: str, reason: str, *, keep_pod: bool = True
) -> SliceBreak:
    found = _labels(member)
    return SliceBreak(
        group=found.get(labels.GROUP, ""),
        slice=name,
        host=found.get(labels.HOST_INDEX, "0"),
        pod=str((member.get("metadata") or {}).get("name")) if keep_pod else "",
        node=str((member.get("spec") or {}).get("nodeName") or ""),
        reason=reason,
    )
