"""Reading one pod as the API returns it: who it belongs to, and whether it still counts.

The planner sees raw JSON from the cache; every question it asks about a pod ("is it live?",
"which replica?") is answered here once, so the rules elsewhere read as rules, not as dict
digging.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from raycluster_operator.api import labels
from raycluster_operator.api.objects import Pod

_DONE_PHASES = frozenset({"Failed", "Succeeded"})


class PodView(NamedTuple):
    """One pod, read once: labels are parsed here so that no rule re-parses them.

    A NamedTuple rather than a frozen dataclass: a plan reads every pod of the cluster on each
    pass, and building 16k frozen dataclasses costs more than the whole rest of the plan.
    """

    name: str
    uid: str | None
    namespace: str | None
    labels: Mapping[str, str]
    #: ``metadata.deletionTimestamp`` is set: the pod is going away and is never deleted again.
    terminating: bool
    #: ``metadata.deletionTimestamp`` as written by the API server (RFC 3339, sorts as text):
    #: when the grace period ends. Long past it, the pod is stuck (its node is gone).
    deletion_deadline: str | None
    #: Will not run Ray again: phase Failed/Succeeded, or the Ray container terminated under
    #: restartPolicy Never (KubeRay's rule, which the autoscaler v2 relies on).
    failed: bool
    running: bool
    ready: bool
    #: ``metadata.creationTimestamp`` (RFC 3339, sorts as text); "" when unknown.
    created: str
    pod_ip: str | None
    group: str | None
    node_type: str | None
    replica_name: str | None
    #: The index labels as numbers, None when absent or not a non-negative decimal.
    replica_index: int | None
    host_index: int | None
    #: Counts towards a replica: neither going away nor finished.
    live: bool
    running_and_ready: bool
    #: ``ray.io/pod-template-hash`` (docs/design.md §3.8); None on pods made before it existed.
    template_hash: str | None = None
    #: Still carries Kueue's topology gate: Kueue's ungater has not placed it yet (rule 13d).
    topology_gated: bool = False


def parse_index(value: str | None) -> int | None:
    """A label value holding a non-negative decimal index, else None (the label is unusable)."""
    if value is None or not value.isascii() or not value.isdigit():
        return None
    return int(value)


def read_pod(obj: Mapping[str, Any]) -> PodView:
    pod = Pod(obj)
    pod_labels = pod.labels
    phase = pod.phase
    running = phase == "Running"
    deadline = pod.deletion_timestamp
    terminating = deadline is not None
    failed = phase in _DONE_PHASES or (running and _ray_container_ended(pod))
    live = not terminating and not failed
    ready = pod.ready
    # Positional, in field order: keyword arguments cost a third of this function.
    return PodView(
        pod.name,
        pod.uid,
        pod.namespace,
        pod_labels,
        terminating,
        deadline,
        failed,
        running,
        ready,
        pod.created,
        pod.pod_ip,
        pod_labels.get(labels.GROUP),
        pod_labels.get(labels.NODE_TYPE),
        pod_labels.get(labels.REPLICA_NAME) or None,
        parse_index(pod_labels.get(labels.REPLICA_INDEX)),
        parse_index(pod_labels.get(labels.HOST_INDEX)),
        live,
        live and running and ready,
        pod.annotations.get(labels.POD_TEMPLATE_HASH_ANNOTATION),
        labels.KUEUE_TOPOLOGY_GATE in pod.scheduling_gates,
    )


def _ray_container_ended(pod: Pod) -> bool:
    """The Ray container (the first one) terminated and the kubelet will not restart it."""
    if pod.restart_policy != "Never":
        return False
    statuses = pod.container_statuses
    if not statuses:
        return False
    containers = pod.containers
    ray_name = containers[0].get("name") if containers else None
    chosen = next((s for s in statuses if s.get("name") == ray_name), statuses[0])
    return bool(chosen.get("state", {}).get("terminated"))
