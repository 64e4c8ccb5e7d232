"""A worker slice that broke while the Ray job ran (docs/design.md §11, slice failure policy).

Read from the RayCluster's worker pods alone, as JobSet reads a child Job's pods: a slice
broke when one of its pods failed or is being deleted, or when all of its pods were created
after the Ray job started (it was replaced; the pod that broke is gone). A break already
recorded in ``status.sliceFailures`` (same slice and pod) is not reported again, so each
break acts once; a resubmitted job starts later than every pod of the healed cluster, so the
slices it runs on are not breaks.

Whether every slice is ready is read from the same pods (``slices_ready``): the RayCluster's
status says so only after its controller's next pass, so right after a break it still reads
ready, and a resubmission would land on the broken slice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubefacts.timestamps import parse_time
from raycluster_operator.api import labels
from raycluster_operator.planning.pods import read_pod
from raycluster_operator.planning.replicas import sort_into_replicas
from raycluster_operator.planning.slice_state import SliceState


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


def _incidents(recorded: Sequence[Mapping[str, Any]]) -> dict[str, datetime]:
    """Per slice, when its latest recorded break was seen."""
    out: dict[str, datetime] = {}
    for record in recorded:
        try:
            when = parse_time(str(record.get("time") or ""))
        except ValueError:
            continue
        name = str(record.get("slice"))
        out[name] = max(when, out.get(name, when))
    return out


def _order(pod: Mapping[str, Any]) -> tuple[int, str, str]:
    """The pod that broke its slice first: a failed one, else the first to be deleted."""
    meta = pod.get("metadata") or {}
    return (
        0 if _broken_pod(pod) == "Failed" else 1,
        str(meta.get("deletionTimestamp") or ""),
        _labels(pod).get(labels.HOST_INDEX, ""),
    )


def find_breaks(
    pods: Sequence[Mapping[str, Any]],
    started: str | None,
    recorded: Sequence[Mapping[str, Any]],
) -> list[SliceBreak]:
    """New breaks among the worker pods, at most one per slice, once the Ray job has a start
    time. A break is one incident: the slice's other pods going (the operator deletes a
    broken slice whole) and its replacement are part of it; a pod created after the incident
    was recorded that breaks later is a new one."""
    if not started:
        return []
    start = parse_time(started)
    incidents = _incidents(recorded)
    by_slice: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        if _labels(pod).get(labels.NODE_TYPE) == labels.NODE_TYPE_WORKER:
            by_slice.setdefault(slice_of(pod), []).append(pod)
    out: list[SliceBreak] = []
    for name, members in sorted(by_slice.items()):
        since = incidents.get(name)
        fresh = [p for p in members if since is None or _after(p, since)]
        broken = sorted((p for p in fresh if _broken_pod(p)), key=_order)
        if broken:
            out.append(_break(broken[0], name, _broken_pod(broken[0])))
        elif since is None and all(_after(p, start) for p in members):
            out.append(_break(members[0], name, "Replaced", keep_pod=False))
    return out


def _after(pod: Mapping[str, Any], moment: datetime) -> bool:
    created = _created(pod)
    return created is not None and created > moment


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


def slices_ready(cluster_status: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the worker pods themselves show as many ready slices as the cluster wants
    (§11, 11c): per group of ``status.workerGroups`` (its ``numOfHosts`` and
    ``desiredSlices``), the replicas whose every host is running and ready, as the RayCluster
    planner reads them; pods without a replica identity (KubeRay's unindexed mode) count by
    whole hosts. Under KubeRay's CRD, which prunes ``workerGroups``: ready worker pods against
    ``desiredWorkerReplicas``."""
    views = [read_pod(p) for p in pods]
    groups = cluster_status.get("workerGroups")
    if groups is None:
        wanted = int(cluster_status.get("desiredWorkerReplicas") or 0)
        return sum(1 for v in views if v.running_and_ready) >= wanted
    for group in groups:
        hosts = max(1, int(group.get("numOfHosts") or 1))
        members = [v for v in views if v.group == group.get("groupName")]
        found = sort_into_replicas(members, hosts)
        ready = sum(1 for r in found.replicas if r.state is SliceState.READY)
        ready += sum(1 for v in found.unidentified if v.running_and_ready) // hosts
        if ready < int(group.get("desiredSlices") or 0):
            return False
    return True
