"""Which pods of a RayService's cluster are behind the serve service (docs/design.md §12,
RS4), and how many endpoints that gives.

``ray.io/serve`` is the serve service's selector. KubeRay keeps it on the head by its Serve
proxy's health (asked each pass; ``false`` when ``excludeHeadPodFromServeSvc``) and leaves it
``true`` on workers, whose readiness probe checks their proxy. Ours adds slices: a host of a
multi-host slice is ``true`` only while every host of its slice is running and ready and its
own proxy answers (asked each pass, as the head's: its readiness is the raylet's, since Serve
runs a proxy only on the nodes that hold a replica and a host of a slice reserved by one
replica may hold none). A Serve replica that reserves a whole slice (one bundle per host) dies
with any of its hosts, so the slice's proxies would route to a replica that is gone; taking
the slice's pods out keeps the other slices serving while the RayCluster controller replaces
it at its index, and its replacement joins once whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raycluster_operator.api import labels
from raycluster_operator.planning.pods import read_pod
from raycluster_operator.planning.rayservice.model import ServeAnswer
from raycluster_operator.planning.replicas import sort_into_replicas
from raycluster_operator.planning.slice_state import SliceState


@dataclass(frozen=True)
class Relabel:
    pod: str
    value: str
    #: The slice (``<group>-<index>``) of the host; "" for the head.
    slice: str = ""
    state: str = ""
    #: The slice is whole (``ready``): a host leaving then goes for its own proxy alone.
    whole: bool = False


def _hosts(cluster: Mapping[str, Any]) -> dict[str, int]:
    groups = (cluster.get("spec") or {}).get("workerGroupSpecs") or []
    return {str(g.get("groupName")): max(1, int(g.get("numOfHosts") or 1)) for g in groups}


def slice_host(cluster: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """A worker of a group with ``numOfHosts`` > 1: its proxy is the controller's to ask."""
    view = read_pod(pod)
    if view.node_type != labels.NODE_TYPE_WORKER:
        return False
    return _hosts(cluster).get(str(view.labels.get(labels.GROUP)), 1) > 1


def relabels(
    cluster: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    answer: ServeAnswer | None,
    *,
    exclude_head: bool,
) -> list[Relabel]:
    """The pods whose ``ray.io/serve`` must change, with the value it must take."""
    views = [read_pod(p) for p in pods]
    out: list[Relabel] = []
    for view in views:
        if view.node_type != labels.NODE_TYPE_HEAD or view.terminating:
            continue
        healthy = answer is not None and answer.proxy_healthy and not exclude_head
        value = labels.SERVE_TRUE if healthy else labels.SERVE_FALSE
        if view.labels.get(labels.SERVE) != value:
            out.append(Relabel(view.name, value))
    proxies = answer.proxies if answer is not None else {}
    for group, hosts in sorted(_hosts(cluster).items()):
        if hosts == 1:
            continue
        members = [v for v in views if v.group == group and v.node_type == labels.NODE_TYPE_WORKER]
        for replica in sort_into_replicas(members, hosts).replicas:
            whole = replica.state is SliceState.READY
            name = f"{group}-{replica.index if replica.index is not None else '?'}"
            for pod in replica.pods:
                serving = whole and proxies.get(pod.name, False)
                value = labels.SERVE_TRUE if serving else labels.SERVE_FALSE
                if not pod.terminating and pod.labels.get(labels.SERVE) != value:
                    out.append(Relabel(pod.name, value, name, replica.state.value, whole))
    return out


def endpoints(pods: Sequence[Mapping[str, Any]], changed: Sequence[Relabel]) -> int:
    """Ready pods the serve service selects once ``changed`` is written (KubeRay counts the
    ready endpoints of its EndpointSlices: the same pods)."""
    now = {r.pod: r.value for r in changed}
    count = 0
    for view in (read_pod(p) for p in pods):
        value = now.get(view.name, view.labels.get(labels.SERVE))
        if value == labels.SERVE_TRUE and view.running_and_ready and not view.terminating:
            count += 1
    return count
