"""Rule 13b: a ComputeDomain per slice of a GB200/GB300 NVLink group (docs/design.md §3.9).

A lifecycle feature (planning/feature.py). For each group that wants domains
(``accelerators.wants_compute_domains``), when the cluster serves ComputeDomains (the
controller hands the cached ones in ``ClusterState.objects["ComputeDomain"]``; the key is
absent when the CRD is not installed):

- ``finish``: every new slice gets its domain (``<cluster>-<replica name>``, owned by the
  RayCluster), created before its pods, and each of its pods claims the domain's channel
  (``builders.compute_domain.wire_channel``); a domain of this cluster whose slice has no pod
  left and none created is deleted, so a domain lives exactly as long as its slice's pods,
  and a replaced slice (a new replica name) gets a fresh one;
- ``mark``: a slice whose pods are all ready reads ``pending`` until its domain's
  ``status.status`` is ``Ready``: it does not count as ready before its hosts can share GPU
  memory. A slice whose pods claim their channel from a domain that is gone (deleted under
  the slice, or its creation failed; neither cached nor just created) is broken
  (``ComputeDomainLost``) and replaced whole, with a fresh domain: a new domain under running
  pods would never be joined by them.

When ComputeDomains are not served the slices are created as before, without channels, and
each slice creation of such a group says so in a ``ComputeDomainsUnavailable`` Warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from raycluster_operator.accelerators import CHANNEL_CLAIM, wants_compute_domains
from raycluster_operator.api import labels, names
from raycluster_operator.api.models import WorkerGroupSpec
from raycluster_operator.builders.compute_domain import KIND, compute_domain, wire_channel
from raycluster_operator.planning.actions import PlannedEvent
from raycluster_operator.planning.context import Cached
from raycluster_operator.planning.feature import Feature, Route, Watch
from raycluster_operator.planning.reasons import DeleteReason, EventReason
from raycluster_operator.planning.replicas import Replica
from raycluster_operator.planning.slice_state import SERVING, SliceState
from raycluster_operator.planning.turn import ClusterTurn, GroupTurn


def _meta(obj: Cached) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def domain_ready(domain: Cached) -> bool:
    status = domain.get("status") or {}
    return status.get("status") == "Ready" and not _meta(domain).get("deletionTimestamp")


class ComputeDomains(Feature):
    rule = "13b"
    #: Where the kind is served (NVIDIA's DRA driver, §3.9): one per slice, made and removed.
    watches = (
        Watch(
            "resource.nvidia.com",
            "v1beta1",
            "ComputeDomain",
            "computedomains",
            ("create", "delete"),
            route=Route.LABEL_WHERE_SERVED,
        ),
    )

    def __init__(self, turn: ClusterTurn) -> None:
        cluster = turn.cluster
        self.name = cluster.metadata.name
        self.groups: dict[str, WorkerGroupSpec] = {
            g.group_name: g for g in cluster.spec.worker_group_specs if wants_compute_domains(g)
        }
        state = turn.context.state
        cached = state.objects.get(KIND)
        self.served = cached is not None
        self.domains: dict[str, Cached] = {
            str(_meta(d).get("name")): d
            for d in cached or ()
            if (_meta(d).get("labels") or {}).get(labels.CLUSTER) == self.name
        }
        #: Also answers for domains written just before that the cache does not show yet.
        self.present = state.present
        #: Pod name -> the claim template (= domain) its channel claim names.
        self.claims = {
            str(_meta(pod).get("name")): template
            for pod in state.pods
            if (template := _channel_template(pod)) is not None
        }

    def domain_name(self, replica_name: str) -> str:
        return names.compute_domain_name(self.name, replica_name)

    def mark(self, turn: GroupTurn) -> None:
        if not self.served or turn.job.spec.group_name not in self.groups:
            return
        replicas = []
        for replica in turn.found.replicas:
            if replica.state in SERVING and replica.name is not None:
                name = self.domain_name(replica.name)
                domain = self.domains.get(name)
                if self._lost(replica, name, domain):
                    replica = replace(
                        replica,
                        state=SliceState.BROKEN,
                        cause=DeleteReason.COMPUTE_DOMAIN_LOST,
                        detail=f"replica {replica.name}: its ComputeDomain {name} is gone",
                    )
                elif replica.state is SliceState.READY and (
                    domain is None or not domain_ready(domain)
                ):
                    replica = replace(replica, state=SliceState.PENDING)
            replicas.append(replica)
        turn.found = replace(turn.found, replicas=tuple(replicas))

    def _lost(self, replica: Replica, name: str, domain: Cached | None) -> bool:
        """The slice's pods claim from ``name`` and it is deleted or deleting (a slice made
        without a domain, when none was served, is left as it is)."""
        if not any(self.claims.get(p.name) == name for p in replica.pods):
            return False
        if domain is None:
            return (KIND, name) not in self.present
        return bool(_meta(domain).get("deletionTimestamp"))

    def finish(self, turn: ClusterTurn) -> None:
        if not turn.acting:
            return
        new: dict[str, WorkerGroupSpec] = {}
        creates = []
        for create in turn.creates:
            group = self.groups.get(create.group)
            replica = create.replica_name
            if group is not None and replica is not None:
                if self.served:
                    domain = self.domain_name(replica)
                    create = replace(create, manifest=wire_channel(create.manifest, domain))
                new.setdefault(replica, group)
            creates.append(create)
        turn.creates = creates
        if not self.served:
            turn.events += _unavailable(new)
            return
        turn.objects += [
            compute_domain(turn.cluster, group, replica)
            for replica, group in new.items()
            if self.domain_name(replica) not in self.domains
        ]
        turn.object_deletes += [
            (KIND, name) for name in _unused(self.domains, turn.context.state.pods, new)
        ]


def _channel_template(pod: Cached) -> str | None:
    spec = pod.get("spec") or {}
    for entry in spec.get("resourceClaims") or ():
        if isinstance(entry, Mapping) and entry.get("name") == CHANNEL_CLAIM:
            template = entry.get("resourceClaimTemplateName")
            return str(template) if template else None
    return None


def _unused(
    domains: Mapping[str, Cached], pods: Sequence[Cached], new: Mapping[str, Any]
) -> list[str]:
    """Domains whose slice has no pod (live or terminating) and none created this pass."""
    in_use = set(new)
    for pod in pods:
        replica = (_meta(pod).get("labels") or {}).get(labels.REPLICA_NAME)
        if replica:
            in_use.add(str(replica))
    return sorted(
        name
        for name, domain in domains.items()
        if not _meta(domain).get("deletionTimestamp")
        and (_meta(domain).get("labels") or {}).get(labels.REPLICA_NAME) not in in_use
    )


def _unavailable(new: Mapping[str, WorkerGroupSpec]) -> list[PlannedEvent]:
    return [
        PlannedEvent(
            "Warning",
            EventReason.COMPUTE_DOMAINS_UNAVAILABLE,
            f"group {group.group_name}: slice {replica} is created without a ComputeDomain: "
            "the cluster does not serve resource.nvidia.com/v1beta1 ComputeDomains (install "
            'NVIDIA\'s DRA driver, or set raycluster-operator.io/compute-domain: "false")',
        )
        for replica, group in new.items()
    ]
