"""Slices placed by Kueue's Topology Aware Scheduling one at a time (docs/design.md §4 rule
13d, §8.4).

When Kueue admits a RayCluster under TAS it writes the scheduling gate
`kueue.x-k8s.io/topology` into the worker group's template; each pod made from it waits until
Kueue's ungater removes the gate and pins the pod to a domain of the admission's topology
assignment. Kueue v0.17.0 reads no rank from a RayCluster's pods (its RayCluster integration
sets no pod-index label), so the ungater hands the assignment's places, grouped sub-block
by sub-block, to the gated pods in the order its cache lists them: two slices
gated together can be mixed across sub-blocks, and each is then split. With at most one
slice of a group gated at a time, each slice takes the next free places, which lie in one
domain of the slice's required level, since Kueue fills each domain with whole
slices. The cost: one ungater round (about a second) per slice.
"""

from __future__ import annotations

from raycluster_operator.api import labels
from raycluster_operator.planning.feature import Feature
from raycluster_operator.planning.turn import NO_HOLD, ClusterTurn, GroupHold, GroupTurn


def topology_gated(template: dict[str, object]) -> bool:
    """The template carries Kueue's topology gate: its pods are placed by Kueue's TAS."""
    spec = template.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, dict) else None
    return isinstance(gates, list) and any(
        isinstance(g, dict) and g.get("name") == labels.KUEUE_TOPOLOGY_GATE for g in gates
    )


class KueueTopology(Feature):
    """Rule 13d: under Kueue TAS, a group creates a slice only when none of its live pods
    still waits for the ungater, and then one slice. The ungater's removal of a gate is a pod
    update, which starts the next pass."""

    rule = "13d"

    def __init__(self, turn: ClusterTurn) -> None:
        """Nothing is read from the whole cluster: the rule looks at one group at a time."""

    def gate(self, turn: GroupTurn) -> GroupHold:
        if not topology_gated(turn.job.spec.template):
            return NO_HOLD
        waiting = any(p.live and p.topology_gated for p in turn.job.pods)
        return GroupHold(most=0 if waiting else 1)
