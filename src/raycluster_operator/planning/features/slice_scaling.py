"""Which TPU groups Ray's slice reservations cannot scale, and why (docs/design.md, rule 7b).

``ray.util.tpu.slice_placement_group`` / ``reserve_tpu_slice`` (and Ray Train's JaxTrainer)
reserve a slice by its head: ``{TPU-<pod type>-head: 1}`` selecting
``ray.io/tpu-worker-id=0, ray.io/tpu-pod-type=<pod type>``. With the sidecar's correction
(rule 7b) a TPU group as KubeRay users write it scales by them; these are the specs that
still cannot, each with the reason a user can act on. The planner reports them as one Warning
Event per applied generation, and ``raycluster-operator plan`` prints them.
"""

from __future__ import annotations

from raycluster_operator.accelerators.profile import AcceleratorKind, profile_for
from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster, WorkerGroupSpec
from raycluster_operator.builders.cluster_facts import autoscaler_v2, autoscaling_enabled
from raycluster_operator.planning.actions import PlannedEvent
from raycluster_operator.planning.feature import Feature
from raycluster_operator.planning.reasons import EventReason
from raycluster_operator.planning.turn import ClusterTurn
from raycluster_operator.sidecar.slice_autoscaler import CORRECTED_VERSIONS


def _group_gaps(cluster: RayCluster, group: WorkerGroupSpec) -> list[str]:
    profile = profile_for(group)
    if profile.kind is not AcceleratorKind.TPU or profile.tpu is None:
        return []
    why: list[str] = []
    pod_type = profile.tpu.pod_type
    if pod_type is None:
        why.append(
            f"its template lacks the nodeSelectors {labels.GKE_TPU_ACCELERATOR} and "
            f"{labels.GKE_TPU_TOPOLOGY} (or one is unknown), from which Ray's autoscaler "
            "derives the slice-head resource a reservation asks for"
        )
    if group.num_of_hosts > 1 and not autoscaler_v2(cluster):
        why.append(
            "autoscaler v1 counts pods as slices (it asks for numOfHosts times too many); "
            "set spec.autoscalerOptions.version: v2"
        )
    if group.max_replicas is not None and group.max_replicas < 1:
        why.append("maxReplicas is 0, so no slice can be added")
    own = group.labels or {}
    if pod_type is not None and own.get(labels.RAY_TPU_POD_TYPE, pod_type) != pod_type:
        why.append(
            f"its labels say {labels.RAY_TPU_POD_TYPE}={own[labels.RAY_TPU_POD_TYPE]}, "
            f"but its slices are {pod_type}: Ray's autoscaler would never match a reservation"
        )
    if own.get(labels.RAY_TPU_WORKER_ID, "0") != "0":
        why.append(
            f"its labels say {labels.RAY_TPU_WORKER_ID}={own[labels.RAY_TPU_WORKER_ID]}; "
            "a reservation selects the slice head, worker 0"
        )
    return why


def slice_scaling_gaps(cluster: RayCluster) -> list[str]:
    """One sentence per TPU group slice reservations cannot scale; empty when all can (or
    when in-tree autoscaling is off: then nothing scales by demand, by the user's choice)."""
    if not autoscaling_enabled(cluster):
        return []
    out: list[str] = []
    version = cluster.spec.ray_version
    for group in cluster.spec.worker_group_specs:
        why = _group_gaps(cluster, group)
        if (
            not why
            and group.num_of_hosts > 1
            and profile_for(group).kind is AcceleratorKind.TPU
            and version
            and not version.startswith(CORRECTED_VERSIONS)
        ):
            why.append(
                f"spec.rayVersion is {version}; the autoscaler sidecar's slice-scaling "
                f"correction is written for Ray {', '.join(v + 'x' for v in CORRECTED_VERSIONS)}"
                " and is not applied to other versions"
            )
        if why:
            out.append(
                f"group {group.group_name}: slice reservations "
                "(ray.util.tpu.slice_placement_group, JaxTrainer) cannot scale it: "
                + "; ".join(why)
            )
    return out


class SliceScaling(Feature):
    """Rule 7b's say in a pass: a Warning Event, once per applied generation of the spec,
    for each TPU group slice reservations cannot scale. Once: the status written by this pass
    records the generation as observed, so later passes of the same spec stay quiet."""

    rule = "7b"

    def __init__(self, turn: ClusterTurn) -> None:
        cluster = turn.cluster
        status = cluster.status
        observed = status.observed_generation if status is not None else None
        fresh = observed is None or observed != cluster.metadata.generation
        self.gaps = slice_scaling_gaps(cluster) if fresh and turn.acting else []

    def finish(self, turn: ClusterTurn) -> None:
        turn.events += [
            PlannedEvent("Warning", EventReason.SLICE_RESERVATIONS_CANNOT_SCALE, gap)
            for gap in self.gaps
        ]
