"""Grouping a worker group's pods into replicas, each with the state its pods show.

docs/design.md §4, rule 8: a replica is the set of pods sharing a replica name (multi-host) or a
single pod (single-host). It is complete only with exactly one live pod per host index
0..N-1; anything else is broken and, because a slice is useless in part, deleted whole. The
state itself is read in ``slice_state``.
Rule 9: pods without a replica identity are set apart so that they are replaced, not ignored
(KubeRay ignores them forever).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from raycluster_operator.planning.pods import PodView
from raycluster_operator.planning.reasons import DeleteReason
from raycluster_operator.planning.slice_state import SERVING, SliceState, derive_state


@dataclass(frozen=True, slots=True)
class Replica:
    #: The replica name (multi-host) or the pod name (single-host): unique within the group.
    key: str
    #: ``ray.io/worker-group-replica-name``; None for single-host replicas.
    name: str | None
    #: ``ray.io/worker-group-replica-index`` shared by its pods; None when they disagree.
    index: int | None
    pods: tuple[PodView, ...]
    state: SliceState
    #: Why the replica cannot serve (states BROKEN and DELETING); None when it can.
    cause: DeleteReason | None = None
    detail: str = ""
    #: A pod that a feature's mark names as the one at fault (a host on a lost node), for the
    #: Event when no pod of the slice failed or is terminating.
    trigger: str | None = None

    @property
    def complete(self) -> bool:
        """Every host has a live pod (state pending or ready): the replica counts towards the
        desired ones."""
        return self.state in SERVING

    @property
    def age_key(self) -> tuple[str, str]:
        """Sorts older replicas first (then by key, so ties are deterministic)."""
        return (min(p.created for p in self.pods), self.key)


@dataclass(frozen=True, slots=True)
class GroupPods:
    replicas: tuple[Replica, ...]
    #: Pods that carry no usable replica identity (docs/design.md §4, rule 9).
    unidentified: tuple[PodView, ...]


def sort_into_replicas(pods: Iterable[PodView], num_of_hosts: int) -> GroupPods:
    """Group one worker group's pods (gate RayMultiHostIndexing on) and read each replica's
    state."""
    by_name: dict[str, list[PodView]] = {}
    singles: list[Replica] = []
    unidentified: list[PodView] = []
    for pod in pods:
        name = pod.replica_name
        if name is not None:
            by_name.setdefault(name, []).append(pod)
        elif num_of_hosts == 1 and pod.replica_index is not None:
            singles.append(_single(pod))
        else:
            unidentified.append(pod)
    replicas = [_multi(name, members, num_of_hosts) for name, members in by_name.items()]
    return GroupPods(replicas=(*replicas, *singles), unidentified=tuple(unidentified))


def _single(pod: PodView) -> Replica:
    reading = derive_state((pod,), 1, name=None, index=pod.replica_index)
    return Replica(pod.name, None, pod.replica_index, (pod,), *reading)


def _multi(name: str, pods: list[PodView], num_of_hosts: int) -> Replica:
    first = pods[0].replica_index
    index = first if all(p.replica_index == first for p in pods) else None
    reading = derive_state(pods, num_of_hosts, name=name, index=index)
    return Replica(name, name, index, tuple(pods), *reading)
